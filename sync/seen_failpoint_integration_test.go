//go:build failpoints

package sync

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/internal/failpoint"
	"github.com/slotsync/slotsync/topology"
)

// TestFaultPassStalledAfterItsObservation (rule 8a; 13, 15-19): slotsync's pass observes the primary, then
// stalls before its record and note (engine.pass-observed; a process paused, a host frozen). A
// slot is made on the primary meanwhile, its consumer reads it, and the primary lives on
// committing for 6 s, then is killed -9; the pass then goes on and writes its record and note.
// That pass took 10 s: counted as it took, the window the note grants the next pass (two
// passes of an interval and the pass) covers the primary's 6 s, and the gate without the
// primary answered READY from a record that does not know the new slot, whose consumer then
// finds no slot on the promoted standby (found by the fault explorer: hook-slot-made-again on
// 17, slotsync paused in the middle of a pass). A pass is counted no longer than the one before
// it: CANNOT TELL, the primary outlived slotsync's last observation. A failpoint build's test:
// go test -tags failpoints -run TestFaultPassStalledAfterItsObservation ./sync (.ci/run runs it).
func TestFaultPassStalledAfterItsObservation(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{})
		f.eng.Close()
		// Passes at slotsync's default interval (1 s): the windows are those users run with.
		f.cfg.PrimaryGoneAfter, f.cfg.Interval = time.Second, time.Second
		f.startEngine()
		f.readyCopy()
		for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			f.insert(1)
			f.consume(f.pair.Primary, "cdc")
			f.pass()
		}
		if err := failpoint.Set("engine.pass-observed@1=delay:10s"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = failpoint.Set("") })
		stalled := make(chan error, 1)
		go func() {
			_, err := f.eng.RunOnce(f.ctx)
			stalled <- err
		}()
		for deadline := time.Now().Add(30 * time.Second); failpoint.Hits("engine.pass-observed") == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the pass never reached its record")
			}
		}
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('late', 'test_decoding')"))
		for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
			f.insert(1)
			f.consume(f.pair.Primary, "cdc")
		}
		owed := f.peek(f.pair.Primary, "late")
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.must(f.pair.Primary.Kill(f.ctx))
		if err := <-stalled; err != nil {
			t.Fatalf("the stalled pass: %v", err)
		}
		time.Sleep(f.cfg.PrimaryGoneAfter + 500*time.Millisecond)

		rep, err := f.checkOn(f.cfg.PrimaryDSN).Inspect(f.ctx)
		if !errors.Is(err, ErrCannotTell) || errors.Is(err, ErrPrimaryAlive) {
			t.Fatalf("check without the primary, which lived 6 s past the stalled pass's observation and made slot late then: "+
				"want CANNOT TELL, got %v (ready %v, slots %+v)", err, rep.Ready(), rep.Slots)
		}
		t.Logf("check: %v", err)
		f.must(f.pair.Promote(f.ctx))
		if _, ok := f.slotOn(f.pair.Standby, "late"); ok || len(owed) == 0 {
			t.Fatalf("slot late on the promoted standby: %v, %d changes owed to its consumer: the test shows no need for the answer", ok, len(owed))
		}
		t.Logf("promoted anyway: slot late is missing, its consumer owed %d changes (%v)", len(owed), slices.Max(owed))
	})
}
