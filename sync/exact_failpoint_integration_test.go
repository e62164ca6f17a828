//go:build failpoints

package sync

import (
	"context"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/internal/failpoint"
	"github.com/slotsync/slotsync/topology"
)

// TestExactCopyConsumerBackDuringTheRead (rule 4f; correctness review 5, finding B's "slot
// moved during the read"): an exact copy decided for an away consumer whose consumer comes back
// between the read of its slot's state file and of its decoding snapshot (the read stalled
// there, statefile.state-read), confirms on, and a checkpoint follows. The catalog hold, a copy
// of the slot taken on the primary before the state file is read, keeps the decoding snapshot at
// the restart_lsn read, so the read is not cut (ErrSlotMoved is for a copy without a hold): the
// exact copy is made as read, behind its consumer now, at one standby restart, and its journal
// entry names the state-file method once it exists. The standby's horizon has meanwhile passed
// the catalog_xmin read (PostgreSQL never moves it back), so the copy is READY once its consumer,
// reading on, has moved it past that horizon; promoted then, the consumer gets every change it
// had not confirmed, exactly once. A failpoint build's
// test: go test -tags failpoints -run TestExactCopyConsumerBackDuringTheRead ./sync (.ci/run
// runs it).
func TestExactCopyConsumerBackDuringTheRead(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 19}, func(t *testing.T, major int) {
		f, away := exactFixture(t, major, 2*time.Second)
		if err := failpoint.Set("statefile.state-read@1=delay:8s"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = failpoint.Set("") })
		p := f.pair.Primary
		decided, failed := f.passesUntilExactDecided("cdc")
		for deadline := time.Now().Add(60 * time.Second); failpoint.Hits("statefile.state-read") == 0; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the exact copy's read never reached its decoding snapshot")
			}
		}
		// The read stalls between the two files: the consumer comes back and confirms on, and a
		// checkpoint would remove the snapshot at the restart_lsn the state file named.
		before, _ := f.slotOn(p, "cdc")
		if got := f.consume(p, "cdc"); !equalInts(got, away) {
			t.Fatalf("the consumer back got %v, want %v", got, away)
		}
		for range 2 {
			rows := f.insert(1)
			f.logRunningXacts()
			if got := f.consume(p, "cdc"); !equalInts(got, rows) {
				t.Fatalf("the consumer got %v, want %v", got, rows)
			}
		}
		f.must(p.Exec(f.ctx, "CHECKPOINT"))
		if now, _ := f.slotOn(p, "cdc"); now.RestartLSN == before.RestartLSN {
			t.Fatalf("the slot's restart_lsn did not move on (%s)", now.RestartLSN)
		}
		var rep Report
		select {
		case rep = <-decided:
		case err := <-failed:
			t.Fatalf("the passes: %v", err)
		}
		f.restarts += rep.StandbyRestarts
		if r := slotReport(rep, "cdc"); r.Error != "" || f.restarts != 1 {
			t.Fatalf("the exact copy read across its consumer's return: %q, %d restarts; want it made at one restart", r.Error, f.restarts)
		}
		copied, _ := f.slotOn(f.pair.Standby, "cdc")
		if now, _ := f.slotOn(p, "cdc"); copied.ConfirmedFlush != before.ConfirmedFlush || now.ConfirmedFlush <= copied.ConfirmedFlush {
			t.Fatalf("the exact copy at %s, the slot at %s when read and %s now: want the copy as read, behind its consumer",
				copied.ConfirmedFlush, before.ConfirmedFlush, now.ConfirmedFlush)
		}
		if ent := f.eng.journal.Slots["cdc"]; ent == nil || ent.Method != string(topology.MethodStatefile) {
			t.Fatalf("the journal's entry once the exact copy exists: %+v", ent)
		}
		f.untilReady("cdc", func() {
			f.insert(1)
			f.logRunningXacts()
			f.consume(p, "cdc")
		})
		f.untilCopyAtConsumer("cdc")
		tail := f.insert(3)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.promoteExpect("cdc", tail)
	})
}

// passesUntilExactDecided runs passes in a goroutine of their own until one decides an exact
// copy of slot; it sends that pass's report, its StandbyRestarts those of every pass until then,
// or the error that ended them. The test's end waits for the goroutine, so that the pair is not
// torn down under a pass.
func (f *fixture) passesUntilExactDecided(slot string) (<-chan Report, <-chan error) {
	decided, failed, done := make(chan Report, 1), make(chan error, 1), make(chan struct{})
	f.t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		restarts := 0
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			rep, err := f.eng.RunOnce(f.ctx)
			if err != nil {
				failed <- err
				return
			}
			restarts += rep.StandbyRestarts
			if slotReport(rep, slot).Code == CodeExactForAway {
				rep.StandbyRestarts = restarts
				decided <- rep
				return
			}
		}
		failed <- context.DeadlineExceeded
	}()
	return decided, failed
}
