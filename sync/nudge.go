package sync

import (
	"context"
	"slices"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// nudgeState is what the engine keeps of the records it asked for: where the last one is, and
// whether the primary refused.
type nudgeState struct {
	after   lsncheck.LSN
	refused bool
}

// serverSyncWaits names the selected failover slots the server's slot sync has no persistent
// copy of (none on the standby, or a temporary one) whose consumer has confirmed past the
// running-xacts record slotsync last asked the primary for (after; 0 when none was asked). The
// server persists a new copy only once its primary slot's catalog_xmin has passed what the
// standby can keep, which takes a running-xacts record the consumer then confirms past: up to
// 15 s on a busy primary, and none at all on one with no writes, unless asked. A consumer that
// has not confirmed past the last record asked for is not asked for again, so a consumer away
// costs one record, not one a pass. It is pure.
func serverSyncWaits(primary, standby map[string]topology.Slot, sel Selection, after lsncheck.LSN) []string {
	var out []string
	for name, ps := range primary {
		if !ps.Failover || ps.Invalidated || ps.Temporary || !sel.Matches(name, ps.Database, ps.Plugin) {
			continue
		}
		if cp, ok := standby[name]; ok && !cp.Temporary {
			continue // persistent (a same-name slot the server does not sync is another rule's)
		}
		if after == 0 || ps.ConfirmedFlush >= after {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// nudgeServerSync asks the primary for a running-xacts record while the server's slot sync,
// driven by slotsync (--native-drive), waits for one to persist a copy (serverSyncWaits). A
// refusal (no EXECUTE on pg_log_standby_snapshot()) is logged once; the copies then wait for the
// primary's own record.
func (e *Engine) nudgeServerSync(ctx context.Context, obs Observation) {
	if e.nudge.refused {
		return
	}
	waits := serverSyncWaits(obs.Primary.Slots, obs.Standby.Slots, e.cfg.Select, e.nudge.after)
	if len(waits) == 0 {
		return
	}
	at, err := e.ctl.LogRunningXacts(ctx)
	switch {
	case err == nil:
		e.nudge.after = at
		e.log.Debug("asked the primary for a running-xacts record: the server's slot sync waits for one", "slots", waits, "record", at)
	case topology.PermissionDenied(err):
		e.nudge.refused = true
		e.log.Warn("cannot ask the primary for a running-xacts record; a new failover slot's copy waits for the primary's own "+
			"(up to 15 s, none while it has no writes)",
			"slots", waits, "error", err, "fix", "GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO <slotsync role>")
	default:
		e.log.Warn("asking the primary for a running-xacts record failed", "slots", waits, "error", err)
	}
}
