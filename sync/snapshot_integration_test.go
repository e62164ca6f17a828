package sync

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method/statefile"
)

// TestSnapshotOfAnAdvancedCopy (rule 4): a copy of the standby's own decoding restarts, once
// advanced, from the decoding snapshot that decoding serialized at its restart_lsn. Without that
// file a promoted standby rebuilds one from running-xacts records and skips what commits before
// it is consistent again (the fault explorer's plan hook-copy-snapshot-removed: 465 to 495
// changes lost on 16-18). With the standby's pg_logical/snapshots emptied, the gate says NOT
// READY, with the primary and without it. A new copy, whose restart_lsn is still where it was
// made, needs none: decoding from there reaches its consistent point again; check without the
// daemon's journal cannot know that, and asks every copy for its snapshot.
func TestSnapshotOfAnAdvancedCopy(t *testing.T) {
	pgtest.ForEachMajor(t, sqlMajors, func(t *testing.T, major int) {
		f := newFixture(t, major)
		f.eng.Close()
		f.cfg.PrimaryGoneAfter = time.Second
		f.startEngine()
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.insert(1)
		f.consume(p, "cdc")
		f.must(f.pair.WaitCaughtUp(f.ctx))
		if r := f.pass()["cdc"]; r.Action != KindCreate {
			t.Fatalf("first pass: %+v", r)
		}
		made, _ := f.slotOn(f.pair.Standby, "cdc")
		ent := f.eng.journal.Slots["cdc"]
		if ent == nil || ent.ScratchAt != made.RestartLSN {
			t.Fatalf("the journal does not say where the copy was made (restart_lsn %s): %+v", made.RestartLSN, ent)
		}
		// The consumer confirms exactly the copy's consistent point: the copy is READY where it
		// was made, with no snapshot on the standby at all.
		conn, err := p.Connect(f.ctx, "app")
		f.must(err)
		_, err = conn.Exec(f.ctx, "SELECT count(*) FROM pg_logical_slot_get_changes('cdc', $1::pg_lsn, NULL)", made.ConfirmedFlush.String())
		conn.Close(f.ctx)
		f.must(err)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.removeStandbySnapshots(false)
		if r := f.pass()["cdc"]; !r.Verdict.Ready || r.Copy == nil || r.Copy.RestartLSN != made.RestartLSN {
			t.Fatalf("a new copy, no snapshot on the standby: %+v %v %s, want READY at restart_lsn %s", r.Copy, r.Verdict.Reasons, r.Verdict.Detail, made.RestartLSN)
		}
		// check without the daemon's journal cannot know where the copy was made.
		if r := reportOf(f.inspectWithoutJournal(), "cdc"); r.Verdict.Ready || !slices.Contains(r.Verdict.Reasons, lsncheck.ReasonCopySnapshotMissing) {
			t.Fatalf("a new copy, judged without the journal: %v %s, want NOT READY %s", r.Verdict.Reasons, r.Verdict.Detail, lsncheck.ReasonCopySnapshotMissing)
		}

		f.advancedOntoSnapshot(made.RestartLSN)
		if r := reportOf(f.inspectWithoutJournal(), "cdc"); !r.Verdict.Ready {
			t.Fatalf("an advanced copy on its snapshot, judged without the journal: %v %s, want READY", r.Verdict.Reasons, r.Verdict.Detail)
		}
		f.removeStandbySnapshots(true)
		r := f.pass()["cdc"]
		if r.Verdict.Ready || !slices.Contains(r.Verdict.Reasons, lsncheck.ReasonCopySnapshotMissing) {
			t.Fatalf("the snapshots removed, with the primary: %v %s, want NOT READY %s", r.Verdict.Reasons, r.Verdict.Detail, lsncheck.ReasonCopySnapshotMissing)
		}

		cp := f.advancedOntoSnapshot(made.RestartLSN) // the copy's decoding serializes new ones
		f.removeStandbySnapshots(true)
		f.must(p.Kill(f.ctx))
		if now, _ := f.slotOn(f.pair.Standby, "cdc"); now.RestartLSN != cp.Copy.RestartLSN {
			t.Fatalf("the copy moved from %s to %s", cp.Copy.RestartLSN, now.RestartLSN)
		}
		f.notReadyWithoutPrimary("the snapshots removed", lsncheck.ReasonCopySnapshotMissing)
	})
}

// advancedOntoSnapshot writes, has the primary log running-xacts records and the consumer
// confirm, with passes between, until the copy of "cdc" is READY at a restart_lsn other than
// from (where it was made) at which the standby has serialized a decoding snapshot. It returns
// the copy.
func (f *fixture) advancedOntoSnapshot(from lsncheck.LSN) (cp SlotReport) {
	f.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		f.insert(1)
		f.logRunningXacts()
		f.consume(f.pair.Primary, "cdc")
		f.must(f.pair.WaitCaughtUp(f.ctx))
		r := f.pass()["cdc"]
		if r.Verdict.Ready && r.Copy != nil && r.Copy.RestartLSN != from && f.snapshotOnStandby(r.Copy.RestartLSN) {
			return r
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the copy never became READY on a snapshot of its own decoding: %+v %s", r.Copy, r.Verdict.Detail)
		}
	}
}

// snapshotOnStandby says whether the standby's pg_logical/snapshots has the file decoding
// restores at lsn.
func (f *fixture) snapshotOnStandby(lsn lsncheck.LSN) bool {
	_, err := os.Stat(filepath.Join(f.pair.Standby.DataDir, "pg_logical", "snapshots", statefile.SnapshotName(uint64(lsn))))
	return err == nil
}

// removeStandbySnapshots removes every serialized decoding snapshot of the standby, as a cleanup
// that takes them for disposable would (some: at least one must be there).
func (f *fixture) removeStandbySnapshots(some bool) {
	f.t.Helper()
	files, err := filepath.Glob(filepath.Join(f.pair.Standby.DataDir, "pg_logical", "snapshots", "*.snap"))
	f.must(err)
	if some && len(files) == 0 {
		f.t.Fatal("the standby has no decoding snapshot to remove")
	}
	for _, file := range files {
		f.must(os.Remove(file))
	}
}
