#!/bin/sh
# Patroni pre_promote hook: Patroni runs it on the node it is about to promote, after taking the
# leader lock, and promotes only when it exits 0. It asks slotsync's gate whether every logical
# slot's copy on this node can be used without loss. In an unplanned failover the old primary is
# gone by then: the gate judges from this node and the journal that the slotsync daemon beside it
# keeps in SLOTSYNC_STATE_DIR, and says so.
#
# patroni.yml:   postgresql: { pre_promote: /usr/local/bin/slotsync-pre-promote }
# Patroni's service needs the environment below (systemd: EnvironmentFile=/etc/slotsync/slotsync.env),
# and slotsync on its PATH (or SLOTSYNC_BIN).
#
#   SLOTSYNC_STANDBY       this node, e.g. "host=/var/run/postgresql dbname=postgres user=slotsync" (required)
#   SLOTSYNC_STATE_DIR     the daemon's --state-dir (required)
#   SLOTSYNC_WAIT          how long to wait for copies that are not ready yet (default 10s)
#   SLOTSYNC_ON_NOT_READY  what to do when a copy is still not ready, or the gate cannot tell:
#                          proceed (default): promote anyway, naming on stderr and in
#                            $SLOTSYNC_STATE_DIR/promoted-without.txt the slots whose consumers
#                            must resnapshot; a cluster without a leader is worse for most;
#                          block: exit 1 so Patroni does not promote this node; with no other
#                            candidate the cluster stays WITHOUT A LEADER until a human acts.
set -u
: "${SLOTSYNC_STANDBY:?set SLOTSYNC_STANDBY (this node's DSN) in Patroni's environment}"
: "${SLOTSYNC_STATE_DIR:?set SLOTSYNC_STATE_DIR (the slotsync daemon's --state-dir) in Patroni's environment}"
export SLOTSYNC_STANDBY SLOTSYNC_STATE_DIR
policy=${SLOTSYNC_ON_NOT_READY:-proceed}
case "$policy" in
  proceed|block) ;;
  *) echo "slotsync pre_promote: SLOTSYNC_ON_NOT_READY=$policy: use proceed or block" >&2; exit 1 ;;
esac

out=$("${SLOTSYNC_BIN:-slotsync}" check --wait "${SLOTSYNC_WAIT:-10s}" 2>&1)
rc=$?
printf '%s\n' "$out" >&2
[ "$rc" -eq 0 ] && exit 0

case "$rc" in
  1) why="some logical slot copies are NOT READY" ;;
  2) why="the gate cannot tell (this node, or the daemon's journal, cannot be read)" ;;
  *) why="slotsync is misconfigured (exit $rc)" ;;
esac
lost=$(printf '%s\n' "$out" | sed -n 's/^NOT READY: .* for: //p')
if [ "$policy" = block ]; then
  echo "slotsync pre_promote: BLOCKING the promotion of this node: $why${lost:+ ($lost)}" >&2
  exit 1
fi
echo "slotsync pre_promote: PROMOTING ANYWAY (SLOTSYNC_ON_NOT_READY=proceed): $why; consumers of these slots must resnapshot: ${lost:-unknown}" >&2
printf '%s %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$why" "${lost:-unknown}" >>"$SLOTSYNC_STATE_DIR/promoted-without.txt" 2>/dev/null
exit 0
