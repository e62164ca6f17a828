#!/bin/sh
# Patroni pre_promote hook: Patroni runs it on the node it is about to promote, after taking the
# leader lock, and promotes only when it exits 0. It asks slotsync's gate (check --json) whether
# every logical slot's copy on this node can be used without loss. In an unplanned failover the
# old primary is gone by then: the gate judges from this node and the journal that the slotsync
# daemon beside it keeps in SLOTSYNC_STATE_DIR, and says so.
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
#                            candidate the cluster stays WITHOUT A LEADER until a human acts;
#                          block-for=<duration> (e.g. 60s, 5m): block until a deadline kept in
#                            $SLOTSYNC_STATE_DIR/pre-promote-deadline, then proceed. Patroni
#                            leaves this node out of the leader race for one TTL after a failed
#                            hook, so another replica whose copies are READY can win meanwhile.
# Whatever the policy, the hook blocks while the gate says the old primary is alive: it answers
# read-write (Patroni demotes the old leader before it runs this hook, so its fencing failed:
# Patroni hung, no watchdog), or this standby still streams from it and only slotsync cannot reach
# it. Promoting then would split the cluster.
set -u
: "${SLOTSYNC_STANDBY:?set SLOTSYNC_STANDBY (this node's DSN) in Patroni's environment}"
: "${SLOTSYNC_STATE_DIR:?set SLOTSYNC_STATE_DIR (the slotsync daemon's --state-dir) in Patroni's environment}"
export SLOTSYNC_STANDBY SLOTSYNC_STATE_DIR
policy=${SLOTSYNC_ON_NOT_READY:-proceed}
block_for=
case "$policy" in
  proceed|block) ;;
  block-for=*)
    block_for=${policy#block-for=}
    case "$block_for" in
      s|m) block_for= ;;
      *[!0-9]*s) block_for= ;;
      *s) block_for=${block_for%s} ;;
      *[!0-9]*m) block_for= ;;
      *m) block_for=$(( ${block_for%m} * 60 )) ;;
      *[!0-9]*|'') block_for= ;;
    esac
    if [ -z "$block_for" ]; then
      echo "slotsync pre_promote: SLOTSYNC_ON_NOT_READY=$policy: give block-for=<seconds>s or <minutes>m" >&2; exit 1
    fi
    policy=block-for ;;
  *) echo "slotsync pre_promote: SLOTSYNC_ON_NOT_READY=$policy: use proceed, block or block-for=<duration>" >&2; exit 1 ;;
esac
deadline_file=$SLOTSYNC_STATE_DIR/pre-promote-deadline

json=$("${SLOTSYNC_BIN:-slotsync}" check --for-promotion --json --summary --wait "${SLOTSYNC_WAIT:-10s}")
rc=$?
printf '%s\n' "$json" >&2
flat=$(printf '%s' "$json" | tr -d '\n')
if printf '%s' "$flat" | grep -q '"primary_alive": *true'; then
  alive=$(printf '%s' "$flat" | sed -n 's/.*"error": *"\([^"]*\)".*/\1/p')
  echo "slotsync pre_promote: BLOCKING the promotion of this node: the old primary is alive${alive:+ ($alive)}; promoting now would split the cluster" >&2
  exit 1
fi
judged=
if printf '%s' "$flat" | grep -q '"without_primary": *{'; then
  judged=", JUDGED WITHOUT THE PRIMARY (from this node and the daemon's last observation of it)"
fi
# Per READY copy behind its consumer, what a consumer that resumes from its slot's position (not
# its own) may receive again after this promotion: "cdc 8192 B" (docs/CLI.md, redelivery).
again=$(printf '%s' "$flat" | sed -n 's/.*"redelivery": *\[\([^]]*\)\].*/\1/p' |
  sed 's/{ *"slot": *"\([^"]*\)"[^}]*"bytes": *\([0-9]*\), *"at_least": *true *}/\1 at least \2 B/g' |
  sed 's/{ *"slot": *"\([^"]*\)"[^}]*"bytes": *\([0-9]*\)[^}]*}/\1 \2 B/g; s/ *, */, /g; s/^ *//; s/ *$//')
if [ "$rc" -eq 0 ]; then
  echo "slotsync pre_promote: every logical slot's copy is READY$judged${again:+; consumers resuming from their slot's position may receive again: $again}" >&2
  rm -f "$deadline_file"
  exit 0
fi
lost=$(printf '%s' "$flat" | sed -n 's/.*"not_ready": *\[\([^]]*\)\].*/\1/p' | tr -d ' "')
# What is at risk for each slot (its reason codes, docs/CLI.md): a copy behind its consumer only
# means changes received again; a missing or ahead copy, or a consumer ahead, means a resnapshot.
risk=$(printf '%s' "$flat" | sed -n 's/.*"at_risk": *\[\([^]]*\)\].*/\1/p' | sed 's/", *"/; /g' | tr -d '"' | sed 's/^ *//; s/ *$//')
case "$rc" in
  1) why="some logical slot copies are NOT READY$judged" ;;
  2) why="the gate cannot tell (this node or the daemon's journal cannot be read, or the daemon did not observe the old primary's last moments: check's error says which)" ;;
  *) why="slotsync is misconfigured (exit $rc)" ;;
esac
if [ "$policy" = block-for ]; then
  now=$(date +%s)
  deadline=$(cat "$deadline_file" 2>/dev/null || echo 0)
  case "$deadline" in *[!0-9]*|'') deadline=0 ;; esac
  if [ "$now" -gt $((deadline + 300)) ]; then
    # No deadline, or one of an earlier failover: this one starts now. Patroni asks again a TTL
    # or so after a refusal, so a deadline that passed more than five minutes ago is not this
    # failover's, whatever block-for says (a window of block-for would start a short one again
    # at every call that comes later than that, and never promote).
    deadline=$((now + block_for))
    echo "$deadline" >"$deadline_file"
  fi
  if [ "$now" -lt "$deadline" ]; then
    echo "slotsync pre_promote: BLOCKING the promotion of this node for $((deadline - now))s more (SLOTSYNC_ON_NOT_READY=block-for): $why${lost:+ ($lost)}" >&2
    exit 1
  fi
  policy=proceed
fi
if [ "$policy" = block ]; then
  echo "slotsync pre_promote: BLOCKING the promotion of this node: $why${lost:+ ($lost)}" >&2
  exit 1
fi
echo "slotsync pre_promote: PROMOTING ANYWAY (SLOTSYNC_ON_NOT_READY=${SLOTSYNC_ON_NOT_READY:-proceed}): $why; consumers of these slots may have to resnapshot: ${lost:-unknown}${risk:+ (at risk: $risk)}" >&2
printf '%s %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$why" "${lost:-unknown}" >>"$SLOTSYNC_STATE_DIR/promoted-without.txt" 2>/dev/null
rm -f "$deadline_file"
exit 0
