#!/bin/sh
# Patroni pre_promote callback: Patroni runs it before promoting this node and aborts the
# promotion when it exits non-zero. slotsync's gate exits 0 only when every logical slot's
# copy on this standby can be used without loss; it waits up to SLOTSYNC_WAIT for that.
#
# patroni.yml:
#   postgresql:
#     pre_promote: /usr/local/bin/slotsync-pre-promote.sh
#
# Environment (e.g. from the service unit): SLOTSYNC_STANDBY (this node), optionally
# SLOTSYNC_PRIMARY (default: this node's primary_conninfo) and SLOTSYNC_STANDBY_PASSWORD_FILE.
set -u
: "${SLOTSYNC_STANDBY:=host=/var/run/postgresql dbname=postgres}"
export SLOTSYNC_STANDBY
exec slotsync check --wait "${SLOTSYNC_WAIT:-30s}"
