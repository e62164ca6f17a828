package sync

import (
	"fmt"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// Other writers of a copy (issue 34): slotsync knows where it last left each copy it made. A
// copy found elsewhere at the next pass, on the same run of the standby (a restart may take
// copies back to the last restartpoint), was moved, dropped or made again by someone else: a
// tool copying the same slot (Patroni's permanent slots, a script), or a consumer reading the
// copy on the standby. Once is logged; the second time slotsync stops writing that copy and the
// gate stops vouching for it (NOT READY other_synchronizer) until slotsync is restarted.

// changedTwice is how many changes by someone else make slotsync leave a copy alone.
const changedTwice = 2

// copyLeft is the copies slotsync made as it left them: their confirmed_flush, on the standby
// run started at on (pg_postmaster_start_time).
type copyLeft struct {
	at map[string]lsncheck.LSN
	on string
}

// leftAt records, after an applying pass, where each copy slotsync made stands (after: the
// standby's slots once the pass's actions are done); a copy whose action failed is of unknown
// position and is not recorded.
func (m *memory) leftAt(j *Journal, standbyStarted string, after map[string]topology.Slot, failed map[string]bool) {
	m.left = copyLeft{at: map[string]lsncheck.LSN{}, on: standbyStarted}
	for name := range j.Slots {
		if cp, ok := after[name]; ok && !cp.Synced && !failed[name] {
			m.left.at[name] = cp.ConfirmedFlush
		}
	}
}

// watchMoved: the watch advanced slot's copy to at (0: it failed, the position is unknown).
func (m *memory) watchMoved(slot string, at lsncheck.LSN) {
	if m.left.at == nil {
		return
	}
	if at == 0 {
		delete(m.left.at, slot)
		return
	}
	m.left.at[slot] = at
}

// changedUnder compares the copies of an observation with where slotsync left them and counts
// each one found elsewhere; it returns what changed this time, one line a copy.
func (m *memory) changedUnder(standby NodeState) map[string]string {
	if m.left.at == nil || m.left.on != standby.Info.StartedAt {
		m.left = copyLeft{} // a restarted standby (or none seen yet): nothing to compare with
		return nil
	}
	out := map[string]string{}
	for name, at := range m.left.at {
		cp, ok := standby.Slots[name]
		switch {
		case !ok:
			out[name] = "the copy slotsync made was dropped by someone else"
		case cp.ConfirmedFlush != at:
			out[name] = fmt.Sprintf("the copy's confirmed_flush moved from %s, where slotsync left it, to %s by someone else", at, cp.ConfirmedFlush)
		default:
			continue
		}
		m.changedBy[name]++
	}
	m.left = copyLeft{}
	return out
}

// noteChangesUnder logs each copy found changed by someone else and, the second time, records
// in the journal that slotsync leaves it alone (so that check and status judge it so too).
func (e *Engine) noteChangesUnder(standby NodeState) {
	var next *Journal
	changed := e.mem.changedUnder(standby)
	for _, name := range sortedKeys(changed) {
		n, ent := e.mem.changedBy[name], e.journal.Slots[name]
		switch {
		case ent == nil || ent.OtherWriter != "":
			continue // no longer slotsync's, or left alone already
		case n < changedTwice:
			e.log.Warn("slot copy changed by someone other than slotsync; a second change makes slotsync leave it alone", "slot", name, "change", changed[name])
			continue
		}
		if next == nil {
			next = e.journal.clone()
		}
		next.Slots[name].OtherWriter = fmt.Sprintf("the copy was changed under slotsync by someone else %d times (another tool copying this slot, or a "+
			"consumer reading the copy on the standby)", n)
		e.log.Warn("slot copy written by someone else again: slotsync leaves it alone and its gate says NOT READY other_synchronizer until the daemon "+
			"is restarted; use one tool per slot (docs/CLI.md, \"One synchronizer per slot\")", "slot", name, "change", changed[name], "times", n)
	}
	if next != nil {
		_ = e.commit(next, nil, "a copy left to another writer") // a failed write is logged; the next change tries again
	}
}

// freshStart clears, when the daemon starts, the copies left to another writer: each gets a
// fresh start (writers.go).
func (e *Engine) freshStart() {
	var next *Journal
	for name, ent := range e.journal.Slots {
		if ent.OtherWriter != "" {
			if next == nil {
				next = e.journal.clone()
			}
			next.Slots[name].OtherWriter = ""
			e.log.Info("slotsync writes this copy again (it was left to another writer before the daemon started)", "slot", name)
		}
	}
	if next != nil {
		_ = e.commit(next, nil, "copies no longer left to another writer")
	}
}

// otherWriter says who else writes a slot's copy, for the gate ("" when no one is known to).
func (e *Engine) otherWriter(standby topology.NodeInfo, a Action) string {
	if other := standby.OtherSynchronizer(); other != "" {
		return other + " is loaded on the standby and syncs logical slots too"
	}
	if ent := e.journal.Slots[a.Slot]; ent != nil {
		return ent.OtherWriter
	}
	return ""
}
