package sync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// TestLostJournalCopiesNotOursThenAdopted (operators review round 4, finding 4): a READY copy,
// then the journal is lost (a new state directory, as a re-created volume). The copy is NOT
// READY, copy_not_ours, and never touched; with --adopt-copies slotsync makes it again as its
// own, and it is READY again once its consumer moves past it. Before, check went on saying
// READY for a copy nothing advanced, and turned NOT READY a minute later for another reason.
func TestLostJournalCopiesNotOursThenAdopted(t *testing.T) {
	pgtest.ForEachMajor(t, []int{15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{})
		f.readyCopy()
		f.eng.Close()
		f.must(os.Remove(filepath.Join(f.cfg.StateDir, JournalFile)))
		f.startEngine()
		got := f.pass()["cdc"]
		if got.Verdict.Ready || !got.Verdict.Has(lsncheck.ReasonCopyNotOurs) || got.Code != CodeNotOurs {
			t.Fatalf("a copy with no journal entry: %+v", got)
		}
		f.eng.Close()
		f.cfg.AdoptCopies = true
		f.startEngine()
		if got := f.pass()["cdc"]; got.Code != CodeAdopted {
			t.Fatalf("--adopt-copies: want the copy made again, got %+v", got)
		}
		f.insert(2)
		f.untilReady("cdc", func() { f.consume(f.pair.Primary, "cdc") })
	})
}
