package sync

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/lsncheck"
)

// TestCopyChangedUnderSlotsync (issue 34 item 3): a copy slotsync made, moved on the standby by
// someone else (pg_replication_slot_advance, as another tool copying the slot would): the first
// time is logged and synced over; the second time slotsync stops writing the copy, the gate
// says NOT READY other_synchronizer (so does a read-only engine, as check, from the journal),
// and the copy stays where the other writer put it; the daemon started again writes it again.
func TestCopyChangedUnderSlotsync(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixture(t, major)
		f.readyCopy()
		moveCopy := func() lsncheck.LSN {
			f.insert(3)
			f.must(f.pair.WaitCaughtUp(f.ctx))
			f.must(f.pair.Standby.ExecDB(f.ctx, "app", "SELECT pg_replication_slot_advance('cdc', pg_last_wal_replay_lsn())"))
			cp, _ := f.slotOn(f.pair.Standby, "cdc")
			return cp.ConfirmedFlush
		}
		moveCopy()
		if r := f.pass()["cdc"]; r.Code == CodeOtherSynchronizer || !strings.Contains(f.logs.String(), "changed by someone other than slotsync") {
			t.Fatalf("after one change by someone else: %s %s", r.Code, r.Reason)
		}
		f.untilReady("cdc", func() { f.consume(f.pair.Primary, "cdc") })
		at := moveCopy()
		r := f.pass()["cdc"]
		if r.Code != CodeOtherSynchronizer || r.Verdict.Ready || len(r.Verdict.Reasons) == 0 || r.Verdict.Reasons[0] != lsncheck.ReasonOtherSynchronizer {
			t.Fatalf("after a second change by someone else: %s %s %+v", r.Code, r.Reason, r.Verdict)
		}
		if rep := f.inspectAsCheck(); rep.Ready() || rep.Slots[0].Verdict.Reasons[0] != lsncheck.ReasonOtherSynchronizer {
			t.Fatalf("check beside the daemon: %+v", rep.Slots[0].Verdict)
		}
		// The consumer confirms past the copy; slotsync leaves it where the other writer put it.
		f.insert(3)
		f.consume(f.pair.Primary, "cdc")
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.pass()
		if cp, _ := f.slotOn(f.pair.Standby, "cdc"); cp.ConfirmedFlush != at {
			t.Fatalf("slotsync moved a copy it left to another writer: from %s to %s", at, cp.ConfirmedFlush)
		}
		// The daemon started again gives the copy a fresh start.
		f.eng.Close()
		f.startEngine()
		ctx, cancel := context.WithTimeout(f.ctx, 3*time.Second)
		defer cancel()
		f.must(f.eng.Run(ctx, nil))
		if cp, _ := f.slotOn(f.pair.Standby, "cdc"); cp.ConfirmedFlush == at {
			t.Fatalf("the daemon started again did not write the copy: still at %s", at)
		}
	})
}
