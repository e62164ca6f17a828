package sync

import (
	"slices"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/lsncheck"
)

// TestCopyOfASlotMadeAgain (rule 2): a slot dropped and made again on the primary, ahead of its
// copy, while another slot holds the catalog rows back (the new slot's catalog_xmin is that
// slot's: it went backwards, a new incarnation). Until slotsync makes the copy again, the copy
// standing is the earlier slot's; the gate asked then (check beside the daemon) says NOT READY
// copy_being_made: the copy the next pass makes lands where the standby's decoding is, which
// may be ahead of the new slot's consumer (the fault explorer's seed 20506117 on 18: READY
// with the primary, the pass made the copy again before the promotion, 36 changes lost).
func TestCopyOfASlotMadeAgain(t *testing.T) {
	pgtest.ForEachMajor(t, sqlMajors, func(t *testing.T, major int) {
		f := newFixture(t, major)
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('holder', 'test_decoding')"))
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.insert(1)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		if r := f.pass()["cdc"]; r.Action != KindCreate {
			t.Fatalf("first pass: %+v", r)
		}
		// The consumer confirms on until its slot's catalog_xmin is past the holder's.
		holder, _ := f.slotOn(p, "holder")
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			f.insert(1)
			f.logRunningXacts()
			f.consume(p, "cdc")
			f.must(f.pair.WaitCaughtUp(f.ctx))
			f.pass()
			if ent := f.eng.journal.Slots["cdc"]; ent != nil && lsncheck.XIDPrecedes(holder.CatalogXmin, ent.Primary.CatalogXmin) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the consumer's catalog_xmin never passed the holder's %d", holder.CatalogXmin)
			}
		}
		before := f.eng.journal.Slots["cdc"].Incarnation
		f.insert(3)
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_drop_replication_slot('cdc')"))
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.insert(1)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		// Asked as check beside the daemon asks, between its passes.
		if r := reportOf(f.inspectAsCheck(), "cdc"); r.Code != CodeRecreatedOnPrimary || r.Verdict.Ready || !slices.Contains(r.Verdict.Reasons, lsncheck.ReasonCopyBeingMade) {
			t.Fatalf("the copy of the earlier slot, asked before the pass: %s %s %v %s, want NOT READY %s", r.Action, r.Code, r.Verdict.Reasons, r.Verdict.Detail,
				lsncheck.ReasonCopyBeingMade)
		}
		if r := f.pass()["cdc"]; r.Code != CodeRecreatedOnPrimary || slices.Contains(r.Verdict.Reasons, lsncheck.ReasonCopyBeingMade) ||
			f.eng.journal.Slots["cdc"].Incarnation == before {
			t.Fatalf("the pass that makes the copy again: %s %s %v %s, incarnation %s (was %s)", r.Action, r.Code, r.Verdict.Reasons, r.Verdict.Detail,
				f.eng.journal.Slots["cdc"].Incarnation, before)
		}
	})
}
