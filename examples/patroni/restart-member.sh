#!/bin/sh
# slotsync's --restart-command on PostgreSQL 15 and older (state-file method): restarts this
# node's own PostgreSQL through Patroni, so the standby loads the slot copies slotsync installed.
# The member and the cluster are read from this node's Patroni configuration (its name and scope),
# so the same slotsync.env serves every node. Usage: restart-member.sh [patroni.yml]
set -eu
config=${1:-/etc/patroni/patroni.yml}
key() { sed -n "s/^$1:[[:space:]]*//p" "$config" | head -n 1 | tr -d "\"'"; }
scope=$(key scope)
member=$(key name)
if [ -z "$scope" ] || [ -z "$member" ]; then
  echo "restart-member.sh: no scope or name in $config" >&2
  exit 3
fi
exec patronictl -c "$config" restart --force "$scope" "$member"
