package sync

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/sync/method/sqlslot"
	"github.com/slotsync/slotsync/sync/method/statefile"
	"github.com/slotsync/slotsync/topology"
)

var faultMajors = []int{16, 17, 18, 19}

// watchCopies samples the standby's copies of names until stop is closed and fails the test if
// any copy disappears or moves backwards (rules 1 and 3 under faults).
func (f *fixture) watchCopies(names []string, stop <-chan struct{}) *stdsync.WaitGroup {
	var wg stdsync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := map[string]lsncheck.Position{}
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for _, n := range names {
				s, ok, err := f.readSlot(f.pair.Standby, n)
				if err != nil {
					continue // the standby may be restarting: nothing to judge
				}
				prev, seen := last[n]
				if !ok {
					if seen {
						f.t.Errorf("copy %s disappeared", n)
					}
					continue
				}
				if seen && (s.ConfirmedFlush < prev.ConfirmedFlush || s.RestartLSN < prev.RestartLSN) {
					f.t.Errorf("copy %s moved backwards: %s -> %s", n, prev, s.Position)
				}
				last[n] = s.Position
			}
		}
	}()
	return &wg
}

// TestFaultNetworkToPrimary: the network between slotsync and the primary is cut (blackhole)
// and reset, while the standby streams from the primary directly; passes fail, change nothing
// and say so, and the gate answers CANNOT TELL (the primary is alive); when it comes back
// syncing resumes.
func TestFaultNetworkToPrimary(t *testing.T) {
	pgtest.ForEachMajor(t, faultMajors, func(t *testing.T, major int) {
		f := newFixture(t, major)
		proxy := f.primaryThroughProxy()
		f.eng.Close()
		f.cfg.ObserveTimeout, f.cfg.SlotTimeout = 2*time.Second, 3*time.Second
		f.startEngine()
		f.readyCopy()
		stop := make(chan struct{})
		wg := f.watchCopies([]string{"cdc"}, stop)

		// A blackhole: every pass fails as retryable, names the primary, and changes nothing.
		before, _ := f.slotOn(f.pair.Standby, "cdc")
		proxy.Blackhole()
		f.insert(3)
		f.consume(f.pair.Primary, "cdc")
		for i := 0; i < 2; i++ {
			rep, err := f.eng.RunOnce(f.ctx)
			var ne *NodeError
			if err == nil || Classify(err) != Retry || !errors.As(err, &ne) || ne.Node != "primary" {
				t.Fatalf("a pass with the primary cut off: %v (class %v)", err, Classify(err))
			}
			// Rule 8: the primary is alive (the standby still streams from it; only slotsync
			// cannot reach it): the gate cannot tell, whatever the record says, and never READY.
			if !errors.Is(err, ErrCannotTell) || rep.WithoutPrimary != nil || len(rep.Slots) != 0 {
				t.Fatalf("the gate with the primary alive but cut off from slotsync: %v, %+v, slots %+v", err, rep.WithoutPrimary, rep.Slots)
			}
			if insp, err := f.eng.Inspect(f.ctx); !errors.Is(err, ErrCannotTell) || insp.Ready() && len(insp.Slots) > 0 {
				t.Fatalf("check with the primary alive but cut off from slotsync: %v, %+v", err, insp.Slots)
			}
		}
		if after, ok := f.slotOn(f.pair.Standby, "cdc"); !ok || after.Position != before.Position {
			t.Fatalf("the copy changed while the primary was unreachable: %v -> %v", before.Position, after.Position)
		}
		proxy.Restore()
		f.untilSynced("cdc")

		// A reset of every connection: the next pass reconnects (or fails as retryable), and
		// syncing goes on.
		proxy.Reset()
		f.insert(3)
		f.consume(f.pair.Primary, "cdc")
		if _, err := f.eng.RunOnce(f.ctx); err != nil && Classify(err) != Retry {
			t.Fatalf("the pass after a reset: %v", err)
		}
		f.untilSynced("cdc")
		close(stop)
		wg.Wait()
	})
}

// TestFaultStandbyReconnecting (rule 8; found by the chaos drill, seed 20261226 on 13):
// slotsync's route to the primary is cut while the standby is between two attempts to reconnect
// (its walsender was terminated on the primary, as by a primary restart or a cut connection).
// The primary is alive and takes writes its consumer gets and this standby may not. The gate
// must not take it for gone: it watches the standby, which streams again, and answers CANNOT
// TELL, the primary alive; never READY. Before --primary-gone-after it answered READY from the
// record at once, and the drill's promotion then lost the consumer's changes.
func TestFaultStandbyReconnecting(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15, 17}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{})
		proxy := f.primaryThroughProxy()
		f.eng.Close()
		f.cfg.ObserveTimeout, f.cfg.SlotTimeout = 2*time.Second, 3*time.Second
		f.startEngine()
		f.readyCopy()
		// The primary crashes and restarts (as the drill's fault did) while slotsync's route to
		// it is cut: the standby loses it and tries again only after wal_retrieve_retry_interval.
		proxy.Blackhole()
		f.must(f.pair.Primary.Kill(f.ctx))
		f.must(f.pair.Primary.Start(f.ctx))
		waitNotStreaming(t, f)
		f.insert(3)
		f.consume(f.pair.Primary, "cdc")
		if rep, err := f.eng.RunOnce(f.ctx); !errors.Is(err, ErrCannotTell) || rep.WithoutPrimary != nil {
			t.Fatalf("a pass just after the standby stopped streaming: %v, %+v", err, rep.WithoutPrimary)
		}
		start := time.Now()
		rep, err := f.eng.Inspect(f.ctx)
		t.Logf("check answered after %s: %v", time.Since(start).Round(100*time.Millisecond), err)
		if err == nil && rep.Ready() {
			t.Fatalf("READY without a primary that is alive (the standby was reconnecting): %+v, slots %+v", rep.WithoutPrimary, rep.Slots)
		}
		if !errors.Is(err, ErrPrimaryAlive) {
			t.Fatalf("the standby streams again from its primary: want the primary alive (CANNOT TELL), got %v", err)
		}
	})
}

// TestFaultPrimaryDemoted (rule 8; found with Patroni's switchover): the primary is stopped
// cleanly and started again in recovery, as an HA manager demotes it before the new leader's
// pre_promote hook asks the gate; the standby may stream from it again, a cascade that carries
// nothing new. A server in recovery takes no writes: the gate judges without it at once (no
// wait for --primary-gone-after: it is seen not to be a primary), also while the standby streams
// from it; the READY copy stays READY, and the promotion loses nothing. Before, the answer was a
// prerequisite error ("primary is in recovery", exit 3), which a hook took for a
// misconfiguration and promoted anyway.
func TestFaultPrimaryDemoted(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15, 17}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{})
		f.readyCopy()
		want := f.insert(3)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.pass()
		f.must(f.pair.DemotePrimary(f.ctx))
		if rep, err := f.eng.RunOnce(f.ctx); !errors.Is(err, ErrPrimaryInRecovery) || rep.WithoutPrimary == nil || !rep.Ready() {
			t.Fatalf("a pass just after the demotion: want READY judged without the primary, got %v (without the primary: %+v)", err, rep.WithoutPrimary)
		}
		if !f.waitReceivers("streaming", true, 20*time.Second) {
			t.Fatal("the standby did not stream from the demoted primary: the test would not cover a standby streaming from a server in recovery")
		}
		rep, err := f.eng.Inspect(f.ctx)
		if err != nil || rep.WithoutPrimary == nil || !rep.Ready() {
			t.Fatalf("the gate with the primary demoted: want READY judged without it, got %v (without the primary: %+v, slots %+v)", err, rep.WithoutPrimary, rep.Slots)
		}
		if !strings.Contains(rep.WithoutPrimary.Why, "in recovery") {
			t.Errorf("the answer does not say why the primary was not asked: %q", rep.WithoutPrimary.Why)
		}
		f.promoteExpect("cdc", want)
	})
}

// TestFaultPrimaryDemotedAheadOfStandby (rule 8b): a READY record, then the standby cut off
// (its primary_conninfo emptied) while the primary lives on: its consumer gets and confirms
// changes the standby never receives, and the primary is demoted (stopped cleanly, started in
// recovery, following no one), so the standby cannot fetch that WAL from it either. The record
// is fresh and the copy unchanged, but the demoted primary's WAL end is past the standby's:
// judged without the primary, NOT READY consumer_ahead_of_standby, after check watched the
// standby for --primary-gone-after to catch up. Promoted anyway, the consumer holds changes the
// new primary never had. A failpoint build with SLOTSYNC_MUTANT=without:consumer_ahead_of_standby
// fails it (READY).
func TestFaultPrimaryDemotedAheadOfStandby(t *testing.T) {
	pgtest.ForEachMajor(t, []int{15, 17, 19}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{}) // --primary-gone-after at its default, 5 s
		f.readyCopy()
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.pass() // the last pass: the standby streams, the copy READY
		f.cutOffStandby()
		if !f.waitReceivers("", false, 20*time.Second) {
			t.Fatal("the standby's WAL receiver did not stop")
		}
		held := f.insert(3)
		if got := f.consume(f.pair.Primary, "cdc"); !equalInts(got, held) {
			t.Fatalf("the consumer got %v, want %v", got, held)
		}
		f.must(f.pair.DemotePrimary(f.ctx))
		rep, err := f.eng.Inspect(f.ctx)
		if err != nil || rep.WithoutPrimary == nil || !strings.Contains(rep.WithoutPrimary.Why, "in recovery") {
			t.Fatalf("want a judgement without the demoted primary, got %v (%+v)", err, rep.WithoutPrimary)
		}
		if r := reportOf(rep, "cdc"); r.Verdict.Ready || !slices.Contains(r.Verdict.Reasons, lsncheck.ReasonConsumerAheadOfStandby) || rep.Ready() {
			t.Fatalf("the demoted primary's WAL past the standby's: %v %s (READY in all: %v), want NOT READY %s",
				r.Verdict.Reasons, r.Verdict.Detail, rep.Ready(), lsncheck.ReasonConsumerAheadOfStandby)
		}
		// The answer is needed: promoted anyway, the new primary lacks what the consumer holds.
		f.must(f.pair.Promote(f.ctx))
		var had int
		f.must(f.pair.Standby.QueryRowDB(f.ctx, "app", "SELECT count(*)::int FROM t WHERE id = ANY($1)", []any{held}, &had))
		if had != 0 {
			t.Fatalf("the promoted standby has %d of the %d changes the consumer got: the test shows no need for the answer", had, len(held))
		}
	})
}

// TestFaultPrimaryDemotedSlotRemade (rule 8; found by the fault explorer, draw 5, seed 20261709
// on 14 and 17: 759 and 765 changes lost): a READY record, then, before slotsync observes the
// primary again, the slot is made again there from an older copy of it (its consumer will start
// over behind the standby's copy), and the primary is demoted. The record is fresh and the copy
// unchanged, but the demoted primary still shows its slots: judged without the primary, the copy
// is NOT READY (identity_mismatch). Before, it was READY, and a promotion skipped the consumer
// past everything between the older slot and the copy.
func TestFaultPrimaryDemotedSlotRemade(t *testing.T) {
	pgtest.ForEachMajor(t, []int{15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{})
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('older', 'test_decoding')"))
		f.readyCopy()
		f.insert(3)
		f.consume(f.pair.Primary, "cdc")
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.untilReady("cdc", func() {})
		// Unobserved by slotsync: cdc made again from the older slot, then the demotion.
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_drop_replication_slot('cdc')"))
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_copy_logical_replication_slot('older', 'cdc')"))
		f.must(f.pair.DemotePrimary(f.ctx))
		rep, err := f.eng.Inspect(f.ctx)
		if err != nil || rep.WithoutPrimary == nil || !strings.Contains(rep.WithoutPrimary.Why, "in recovery") {
			t.Fatalf("want a judgement without the demoted primary, got %v (%+v)", err, rep.WithoutPrimary)
		}
		for _, s := range rep.Slots {
			if s.Name == "cdc" && (s.Verdict.Ready || !slices.Contains(s.Verdict.Reasons, lsncheck.ReasonIdentityMismatch)) {
				t.Fatalf("a slot made again on the primary after the record: %+v", s.Verdict)
			}
		}
	})
}

// TestFaultPrimaryDemotedSlotRemadeSamePositions (rules 4 and 8; correctness review 5, finding
// A): a transaction left open pins every slot's restart_lsn and catalog_xmin, so a slot made again
// from an older copy of itself has the same two and only its confirmed_flush goes back, which the
// record's identity check takes for the same slot. A clean demotion saves each slot's
// confirmed_flush (17+): the copy, advanced to the consumer's position before the slot was made
// again, stands ahead of the demoted slot's, and its consumer, resuming there, would skip what
// it had not confirmed. Judged against the demoted slot, NOT READY copy_confirmed_flush_ahead;
// before, READY, and the promoted standby's copy lost the changes the demoted slot still has.
func TestFaultPrimaryDemotedSlotRemadeSamePositions(t *testing.T) {
	pgtest.ForEachMajor(t, []int{17, 18, 19}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{})
		f.readyCopy()
		open, err := f.pair.Primary.Connect(f.ctx, "app")
		f.must(err)
		defer open.Close(context.Background())
		_, err = open.Exec(f.ctx, "BEGIN; INSERT INTO t VALUES (100000)")
		f.must(err)
		// cdc's restart_lsn moves up to the open transaction's start, where it stays.
		for prev, i := lsncheck.LSN(0), 0; ; i++ {
			f.logRunningXacts()
			f.insert(1)
			f.consume(f.pair.Primary, "cdc")
			ps, _ := f.slotOn(f.pair.Primary, "cdc")
			if ps.RestartLSN == prev {
				break
			}
			if i == 20 {
				t.Fatalf("cdc's restart_lsn keeps moving (%s) with a transaction open", ps.RestartLSN)
			}
			prev = ps.RestartLSN
		}
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_copy_logical_replication_slot('cdc', 'cdc_old')"))
		want := f.insert(3)
		if got := f.consume(f.pair.Primary, "cdc"); !equalInts(got, want) {
			t.Fatalf("the consumer got %v, want %v", got, want)
		}
		_, err = open.Exec(f.ctx, "ROLLBACK")
		f.must(err)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.untilCopyAtConsumer("cdc")
		// Unobserved by slotsync: cdc made again from its older copy (same restart_lsn and
		// catalog_xmin, an older confirmed_flush), then a clean demotion.
		for _, sql := range []string{"SELECT pg_drop_replication_slot('cdc')", "SELECT pg_copy_logical_replication_slot('cdc_old', 'cdc')",
			"SELECT pg_drop_replication_slot('cdc_old')"} {
			f.must(f.pair.Primary.ExecDB(f.ctx, "app", sql))
		}
		f.must(f.pair.DemotePrimary(f.ctx))
		rep, err := f.eng.Inspect(f.ctx)
		if err != nil || rep.WithoutPrimary == nil {
			t.Fatalf("want a judgement without the demoted primary, got %v", err)
		}
		if r := reportOf(rep, "cdc"); r.Verdict.Ready || !slices.Contains(r.Verdict.Reasons, lsncheck.ReasonCopyConfirmedAhead) {
			t.Fatalf("a copy ahead of the demoted primary's slot: %v %s, want NOT READY %s", r.Verdict.Reasons, r.Verdict.Detail, lsncheck.ReasonCopyConfirmedAhead)
		}
		// The answer is needed: the demoted slot still has the changes the copy would skip.
		if got := f.peek(f.pair.Primary, "cdc"); !equalInts(got, want) {
			t.Fatalf("the demoted primary's slot has %v, want %v (the changes a promotion now would skip)", got, want)
		}
	})
}

// TestFaultPrimaryDemotedNewSlot (rule 8; correctness review 5, finding A): a slot made on the
// primary after slotsync's last pass, then a clean demotion. The demoted primary shows it, the
// record does not know it: NOT READY slot_not_observed. Before, only the record's slots were
// judged, READY, and after a promotion its consumer found no slot.
func TestFaultPrimaryDemotedNewSlot(t *testing.T) {
	pgtest.ForEachMajor(t, []int{15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{})
		f.readyCopy()
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('fresh', 'test_decoding')"))
		f.must(f.pair.DemotePrimary(f.ctx))
		rep, err := f.eng.Inspect(f.ctx)
		if err != nil || rep.WithoutPrimary == nil {
			t.Fatalf("want a judgement without the demoted primary, got %v", err)
		}
		if r := reportOf(rep, "fresh"); r.Verdict.Ready || !slices.Contains(r.Verdict.Reasons, lsncheck.ReasonNotObserved) || rep.Ready() {
			t.Fatalf("a slot the record does not know on the demoted primary: %q %v %s (READY in all: %v), want NOT READY %s",
				r.Name, r.Verdict.Reasons, r.Verdict.Detail, rep.Ready(), lsncheck.ReasonNotObserved)
		}
		if r := reportOf(rep, "cdc"); !r.Verdict.Ready {
			t.Fatalf("cdc, unchanged: %v %s, want READY", r.Verdict.Reasons, r.Verdict.Detail)
		}
	})
}

// TestFaultRecordStandbyCutOff (rule 8; seen while reading the chaos drill's seed 20261214):
// the standby stops streaming from a primary that still answers slotsync; a pass records READY
// (the consumer is not ahead yet); the consumer then receives changes the standby never gets,
// and the primary dies before another pass. Judged without the primary, the copy must not be
// READY: the record was made while the standby was cut off. Before, it was READY, and a promotion
// would hand the consumer a history without what it had.
func TestFaultRecordStandbyCutOff(t *testing.T) {
	pgtest.ForEachMajor(t, []int{15, 17}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{})
		f.readyCopy()
		f.cutOffStandby()
		waitNotStreaming(t, f)
		if slots := f.pass(); !slots["cdc"].Verdict.Ready {
			t.Fatalf("the pass that records the gate: %+v", slots["cdc"])
		}
		f.insert(3)
		f.consume(f.pair.Primary, "cdc")
		f.must(f.pair.Primary.Kill(f.ctx))
		f.notReadyWithoutPrimary("a record made while the standby was cut off", lsncheck.ReasonRecordStandbyCutOff)
	})
}

// TestFaultRecordOfAnotherTimeline: the standby streams through the leader's address (a VIP);
// the primary stops, a sibling standby is promoted and the address moves to it, so the standby
// follows it onto a new timeline with no change of its own configuration; then the sibling is
// killed. Its WAL receiver gone, the standby's last restartpoint is still of the first
// timeline; the WAL files it received of the second say where it is: the gate without a
// primary must not judge from the record of the first (rule 8, record_of_another_timeline).
func TestFaultRecordOfAnotherTimeline(t *testing.T) {
	t.Parallel() // its own pair and ports; mostly waiting: runs beside another long test
	pgtest.ForEachMajor(t, []int{13, 14, 15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{})
		sibling, err := f.pair.AddStandby(f.ctx, "sibling")
		f.must(err)
		vip := f.standbyThroughProxy()
		f.readyCopy()
		if slots := f.pass(); !slots["cdc"].Verdict.Ready {
			t.Fatalf("the pass that records the gate: %+v", slots["cdc"])
		}
		f.must(f.pair.Primary.Stop(f.ctx))
		f.must(sibling.Exec(f.ctx, "SELECT pg_promote(true, 60)"))
		f.must(sibling.Exec(f.ctx, "SELECT pg_create_physical_replication_slot($1, true)", integration.PhysicalSlot))
		addr, err := sibling.Addr(f.ctx)
		f.must(err)
		vip.Redirect(addr)
		f.must(integration.Poll(f.ctx, time.Minute, "the standby to stream on timeline 2", func(ctx context.Context) (bool, error) {
			var n int
			err := f.pair.Standby.QueryRow(ctx, "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming' AND received_tli = 2", nil, &n)
			return n == 1, err
		}))
		f.must(sibling.Kill(f.ctx))
		if !f.waitReceivers("", false, 30*time.Second) {
			t.Fatal("the standby's WAL receiver outlived the killed sibling")
		}
		f.notReadyWithoutPrimary("a record of timeline 1 on a standby of timeline 2", lsncheck.ReasonRecordOtherTimeline)
	})
}

// TestFaultNodesCrashMidPass: the primary is killed -9 and the standby restarted while the
// daemon loop runs; no copy is lost or moved backwards, and syncing resumes.
func TestFaultNodesCrashMidPass(t *testing.T) {
	pgtest.ForEachMajor(t, faultMajors, func(t *testing.T, major int) {
		f := newFixture(t, major)
		f.eng.Close()
		f.cfg.Interval, f.cfg.MaxBackoff, f.cfg.ObserveTimeout = 20*time.Millisecond, 200*time.Millisecond, 2*time.Second
		f.startEngine()
		f.readyCopy()
		stop := make(chan struct{})
		wg := f.watchCopies([]string{"cdc"}, stop)
		runCtx, cancel := context.WithCancel(f.ctx)
		done := make(chan error, 1)
		go func() { done <- f.eng.Run(runCtx, nil) }()

		for i := 0; i < 2; i++ {
			f.insert(3)
			f.consume(f.pair.Primary, "cdc")
			f.must(f.pair.Primary.Kill(f.ctx))
			time.Sleep(300 * time.Millisecond)
			f.must(f.pair.Primary.Start(f.ctx))
			f.must(f.pair.WaitStreaming(f.ctx))
			f.insert(3)
			f.consume(f.pair.Primary, "cdc")
			f.must(f.pair.Standby.Restart(f.ctx))
			f.must(f.pair.WaitStreaming(f.ctx))
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run stopped: %v", err)
		}
		close(stop)
		wg.Wait()
		f.untilSynced("cdc")
		if !strings.Contains(f.logs.String(), "sync passes succeed again") {
			t.Fatalf("no failed pass was seen, the faults did not bite:\n%s", f.logs.String())
		}
	})
}

// TestFaultRefusals: the wrong cluster is refused, a role without privileges gets the fix, and a
// journal that cannot be written stops the pass before anything changes.
func TestFaultRefusals(t *testing.T) {
	pgtest.ForEachMajor(t, faultMajors, func(t *testing.T, major int) {
		f := newFixture(t, major)
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.must(f.pair.WaitCaughtUp(f.ctx))

		// Another cluster's standby (another system identifier): refused, nothing created.
		other := pgtest.StartPair(t, integration.Options{Major: major})
		cfg := f.cfg
		cfg.StandbyDSN, cfg.StateDir = other.Standby.DSN("postgres"), t.TempDir()
		eng, err := New(cfg)
		f.must(err)
		_, err = eng.RunOnce(f.ctx)
		eng.Close()
		var pe *topology.PrereqError
		if !errors.As(err, &pe) || Classify(err) != Stop || !strings.Contains(err.Error(), "system identifiers differ") {
			t.Fatalf("wrong cluster: %v", err)
		}
		if _, ok := f.slotOn(other.Standby, "cdc"); ok {
			t.Fatal("a copy was made on another cluster's standby")
		}

		// A role that may not manage slots: a clear error that names the fix.
		f.must(f.pair.Primary.Exec(f.ctx, "CREATE ROLE weak LOGIN"))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		cfg = f.cfg
		cfg.PrimaryDSN = strings.Replace(cfg.PrimaryDSN, "user=postgres", "user=weak", 1)
		cfg.StandbyDSN = strings.Replace(cfg.StandbyDSN, "user=postgres", "user=weak", 1)
		cfg.StateDir = t.TempDir()
		eng, err = New(cfg)
		f.must(err)
		_, err = eng.RunOnce(f.ctx)
		eng.Close()
		if Classify(err) != Stop || !strings.Contains(err.Error(), "REPLICATION") {
			t.Fatalf("unprivileged role: %v", err)
		}

		// The state directory cannot be written (as when its disk is full): the new copy is not
		// made, and the error says nothing was changed.
		f.must(os.RemoveAll(f.cfg.StateDir))
		f.must(os.WriteFile(f.cfg.StateDir, nil, 0o600)) // a file where the directory was
		_, err = f.eng.RunOnce(f.ctx)
		if err == nil || !strings.Contains(err.Error(), "nothing was changed") {
			t.Fatalf("journal write failure: %v", err)
		}
		if _, ok := f.slotOn(f.pair.Standby, "cdc"); ok {
			t.Fatal("a copy was made without a journal entry")
		}
	})
}

func TestHostileSlotNames(t *testing.T) {
	in := statefile.Installer{DataDir: t.TempDir()}
	for _, name := range []string{"", "../etc", "a/b", "UPPER", "x;drop", "sp ace", strings.Repeat("a", 64), "dot.dot", "é"} {
		if statefile.ValidateSlotName(name) == nil {
			t.Errorf("%q accepted", name)
		}
		if err := in.Remove(name); err == nil {
			t.Errorf("Remove(%q) accepted", name)
		}
	}
	if err := statefile.ValidateSlotName("debezium_orders_2"); err != nil {
		t.Fatal(err)
	}
}

// TestCopyInvalidatedOnStandby: the standby's max_slot_wal_keep_size gives up the WAL of a READY
// copy whose consumer is idle. On a standby no "unreserved" comes first (on 17 wal_status stayed
// "reserved", segments past the limit, until the restartpoint invalidated the copy): the gate
// says NOT READY as soon as the copy is invalidated, the copy is made again, and once the
// consumer has confirmed past it, READY again and a promotion loses nothing.
func TestCopyInvalidatedOnStandby(t *testing.T) {
	pgtest.ForEachMajor(t, faultMajors, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodSQL, integration.Options{StandbyConf: []string{"max_slot_wal_keep_size = 1MB"}})
		p := f.pair.Primary
		f.readyCopy()
		f.insert(2)
		f.leaveWALBehind(3)
		var status string
		f.must(f.pair.Standby.QueryRow(f.ctx, "SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = 'cdc'", nil, &status))
		if status != "lost" {
			t.Fatalf("setup: the copy's wal_status is %q, want lost", status)
		}
		for _, s := range f.inspectAsCheck().Slots {
			if s.Name == "cdc" && (s.Verdict.Ready || !slices.Contains(s.Verdict.Reasons, lsncheck.ReasonCopyInvalidated)) {
				t.Fatalf("an invalidated copy: %+v", s.Verdict)
			}
		}
		f.untilReady("cdc", func() {
			f.insert(1)
			f.consume(p, "cdc")
		})
		if c, _ := f.slotOn(f.pair.Standby, "cdc"); c.Invalidated || c.RestartLSN == 0 {
			t.Fatalf("the copy was not made again: %+v", c)
		}
		want := f.insert(2)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.pass()
		f.promoteExpect("cdc", want)
	})
}

// TestCopyBeyondWALLimit (rule 4, the copy's WAL kept): the standby's max_slot_wal_keep_size no
// longer covers the WAL from a READY copy's restart_lsn, its consumer idle, and no restartpoint
// has come yet. The standby's wal_status still says "reserved"; promoted, the copy is
// "unreserved", and the promotion's checkpoint invalidates it: a consumer not back by then cannot
// resume. Before, the gate said READY there, with the primary and without it. Now NOT READY
// copy_wal_missing from both, READY again once the consumer confirmed on and the copy followed;
// and a promotion on the NOT READY, its checkpoint done, leaves the consumer no slot to resume.
func TestCopyBeyondWALLimit(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{StandbyConf: []string{"max_slot_wal_keep_size = 1MB"}})
		f.eng.Close()
		f.cfg.PrimaryGoneAfter, f.cfg.Interval = time.Second, handPassInterval
		f.startEngine()
		f.readyCopy()
		f.insert(2)
		f.switchSegments(3) // no restartpoint: the copy is beyond a 1 MB limit, still "reserved"
		if r := reportOf(f.inspectAsCheck(), "cdc"); r.Verdict.Ready || !slices.Contains(r.Verdict.Reasons, lsncheck.ReasonCopyWALMissing) {
			t.Fatalf("the gate with the primary, the copy's WAL beyond the standby's limit: %v %s, want NOT READY %s",
				r.Verdict.Reasons, r.Verdict.Detail, lsncheck.ReasonCopyWALMissing)
		}
		f.untilReady("cdc", func() { f.consume(f.pair.Primary, "cdc") })
		f.insert(2)
		f.switchSegments(3) // no pass since the READY one: the record says READY
		f.must(f.pair.Primary.Kill(f.ctx))
		f.notReadyWithoutPrimary("the copy's WAL beyond the standby's limit", lsncheck.ReasonCopyWALMissing)
		f.must(f.pair.Promote(f.ctx))
		f.must(f.pair.Standby.Exec(f.ctx, "CHECKPOINT")) // the promotion's own, done before the consumer is back
		conn, err := f.pair.Standby.Connect(f.ctx, "app")
		f.must(err)
		defer conn.Close(context.Background())
		var n int
		err = conn.QueryRow(f.ctx, "SELECT count(*) FROM pg_logical_slot_get_changes('cdc', NULL, NULL)").Scan(&n)
		if err == nil {
			t.Fatalf("promoted on the NOT READY: the consumer resumed and got %d rows; the answer was stricter than the loss it names", n)
		}
		t.Logf("promoted on the NOT READY, the consumer cannot resume: %v", err)
	})
}

// newCopyBehindSegments is a fixture whose engine takes the primary for gone after a second,
// with cdc's copy READY, its consumer idle, two rows inserted and three WAL segments switched
// after it: the copy's WAL from its restart_lsn spans files the standby keeps for it alone (the
// WAL-gone tests).
func newCopyBehindSegments(t *testing.T, major int) *fixture {
	t.Helper()
	f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{})
	f.eng.Close()
	f.cfg.PrimaryGoneAfter, f.cfg.Interval = time.Second, handPassInterval
	f.startEngine()
	f.readyCopy()
	f.insert(2)
	f.switchSegments(3)
	return f
}

// handPassInterval is the --interval of a test that runs its passes by hand and then writes
// and switches segments before the primary's end: the record and the note of the last pass
// promise a pass within two intervals, and with the fixture's 100 ms the writes of a busy
// machine outlive that promise (CANNOT TELL, rightly), which is not what such a test asks.
const handPassInterval = 5 * time.Second

// TestStandbyWALCleanedUnderACopy (rule 4, its WAL): the standby's WAL before its last
// restartpoint removed from pg_wal behind the server's back (pg_archivecleanup aimed at pg_wal by a
// misconfigured archive_cleanup_command) under the copy of a slot whose consumer is idle: the
// copy's wal_status still says reserved and nothing reads its WAL again, so only the files tell.
// The gate, with and without the primary, must say NOT READY (copy_wal_missing); the consumer
// cannot resume on the promoted standby. (The fault explorer's
// hook-standby-wal-cleaned-consumers-away: READY, then every change lost, before the gate read
// the oldest WAL file.)
func TestStandbyWALCleanedUnderACopy(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newCopyBehindSegments(t, major)
		removed, redo, err := f.pair.CleanStandbyWAL(f.ctx)
		f.must(err)
		if removed == 0 {
			t.Fatalf("setup: no WAL file before the standby's restartpoint at %s", redo)
		}
		if r := reportOf(f.inspectAsCheck(), "cdc"); r.Verdict.Ready || !slices.Contains(r.Verdict.Reasons, lsncheck.ReasonCopyWALMissing) {
			t.Fatalf("the gate with the primary, %d WAL files before %s gone from the standby's pg_wal: %v %s, want NOT READY %s",
				removed, redo, r.Verdict.Reasons, r.Verdict.Detail, lsncheck.ReasonCopyWALMissing)
		}
		f.walGoneThenPromoted("the copy's WAL gone from the standby's pg_wal", lsncheck.ReasonCopyWALMissing)
	})
}

// TestStandbyWALHoleUnderACopy (rule 4, its WAL): a WAL file lost from the middle of the
// standby's pg_wal, after a copy's restart_lsn and before the standby's replay position, the
// oldest file left in place, the copy's WAL read once already and its consumer away. The
// server's wal_status still says reserved, and the oldest WAL file is at or before the copy's
// restart_lsn; promoted, the consumer cannot resume. The gate, with the primary and without it,
// says NOT READY copy_wal_missing; it said READY before it read the whole of pg_wal.
func TestStandbyWALHoleUnderACopy(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newCopyBehindSegments(t, major)
		removed, cp := f.walFileAfterCopy(f.pair.HoleStandbyWAL)
		if r := reportOf(f.inspectAsCheck(), "cdc"); r.Verdict.Ready || !slices.Contains(r.Verdict.Reasons, lsncheck.ReasonCopyWALMissing) {
			t.Fatalf("the gate with the primary, %s gone from the standby's pg_wal (the copy's restart_lsn %s): %v %s, want NOT READY %s",
				removed, cp.RestartLSN, r.Verdict.Reasons, r.Verdict.Detail, lsncheck.ReasonCopyWALMissing)
		}
		f.walGoneThenPromoted("a WAL file after the copy's restart_lsn gone from the standby's pg_wal", lsncheck.ReasonCopyWALMissing)
	})
}

// TestStandbyWALDamagedUnderACopy (rule 4, its WAL): a WAL file after a copy's restart_lsn
// overwritten with zeros on the standby (a file damaged on disk, which the standby replayed and
// reads no more), the consumer reading on: the copy's next advance decodes from restart_lsn and
// fails at the damaged file, so the gate, with and without the primary, says NOT READY
// copy_cannot_decode; promoted anyway, the consumer cannot resume. (The fault explorer's
// hook-exact-copy-wal-damaged; mutant readiness:copy_cannot_decode.)
func TestStandbyWALDamagedUnderACopy(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newCopyBehindSegments(t, major)
		damaged, cp := f.walFileAfterCopy(f.pair.DamageStandbyWAL)
		f.consume(f.pair.Primary, "cdc")
		rep, err := f.eng.RunOnce(f.ctx)
		f.must(err)
		if r := reportOf(rep, "cdc"); r.Error == "" {
			t.Fatalf("setup: the copy's advance over %s did not fail: %+v", damaged, r)
		}
		if r := reportOf(f.inspectAsCheck(), "cdc"); r.Verdict.Ready || !slices.Contains(r.Verdict.Reasons, lsncheck.ReasonCopyCannotDecode) {
			t.Fatalf("the gate with the primary, %s damaged on the standby (the copy's restart_lsn %s): %v %s, want NOT READY %s",
				damaged, cp.RestartLSN, r.Verdict.Reasons, r.Verdict.Detail, lsncheck.ReasonCopyCannotDecode)
		}
		f.walGoneThenPromoted("a WAL file after the copy's restart_lsn damaged on the standby", lsncheck.ReasonCopyCannotDecode)
	})
}

// walFileAfterCopy runs a pass, then act (integration.Pair.HoleStandbyWAL or DamageStandbyWAL)
// on the first WAL file of the standby after cdc's copy's restart_lsn: the file acted on, and the
// copy as it stood.
func (f *fixture) walFileAfterCopy(act func(context.Context, lsncheck.LSN) (string, error)) (string, topology.Slot) {
	f.t.Helper()
	f.pass()
	cp, ok := f.slotOn(f.pair.Standby, "cdc")
	if !ok {
		f.t.Fatal("setup: no copy of cdc on the standby")
	}
	file, err := act(f.ctx, cp.RestartLSN)
	f.must(err)
	if file == "" {
		f.t.Fatalf("setup: no WAL file between the copy's restart_lsn %s and the standby's replay position", cp.RestartLSN)
	}
	return file, cp
}

// walGoneThenPromoted kills the primary, wants the gate without it NOT READY for cdc with
// reason (what says why), then promotes the standby anyway: cdc's consumer must not be able to
// resume there, or the answer was stricter than the loss it names.
func (f *fixture) walGoneThenPromoted(what string, reason lsncheck.Reason) {
	f.t.Helper()
	f.must(f.pair.Primary.Kill(f.ctx))
	f.notReadyWithoutPrimary(what, reason)
	f.must(f.pair.Promote(f.ctx))
	conn, err := f.pair.Standby.Connect(f.ctx, "app")
	f.must(err)
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(f.ctx, "SELECT count(*) FROM pg_logical_slot_get_changes('cdc', NULL, NULL)").Scan(&n); err == nil {
		f.t.Fatalf("promoted on the NOT READY: the consumer resumed and got %d rows; the answer was stricter than the loss it names", n)
	} else {
		f.t.Logf("promoted on the NOT READY, the consumer cannot resume: %v", err)
	}
}

// TestPrimaryCrashTakesConfirmedBack (rule 2): a consumer's confirmations since the primary's
// last checkpoint are in memory only, so a crash and restart of the primary (no failover) takes
// its slot's confirmed_flush back behind the copy. That is the same slot: the copy is kept (not
// made again), the gate says NOT READY while the copy is ahead of its consumer, and once the
// consumer has confirmed again (receiving again what it had confirmed: redelivered, not lost),
// READY, and a promotion loses nothing.
func TestPrimaryCrashTakesConfirmedBack(t *testing.T) {
	pgtest.ForEachMajor(t, faultMajors, func(t *testing.T, major int) {
		f := newFixture(t, major)
		p := f.pair.Primary
		f.readyCopy()
		// A slot is saved when its restart_lsn moves (a running-xacts record decoded, then
		// confirmed past) and at checkpoints. Settle: decode past the last such record.
		f.insert(1)
		f.consume(p, "cdc")
		f.consume(p, "cdc")
		again := f.insert(3)
		f.consume(p, "cdc") // confirmed in memory only: no running-xacts record since
		f.must(f.pair.WaitCaughtUp(f.ctx))
		if r := f.pass()["cdc"]; !r.Verdict.Ready {
			t.Fatalf("before the crash: %+v", r.Verdict)
		}
		before, _ := f.slotOn(f.pair.Standby, "cdc")
		f.must(p.Kill(f.ctx))
		f.must(p.Start(f.ctx))
		f.must(f.pair.WaitStreaming(f.ctx))
		after, _ := f.slotOn(p, "cdc")
		if after.ConfirmedFlush >= before.ConfirmedFlush {
			t.Fatalf("setup: the primary's confirmed_flush %s did not go back behind the copy's %s", after.ConfirmedFlush, before.ConfirmedFlush)
		}
		r := f.pass()["cdc"]
		if r.Action == KindRecreate || r.Action == KindCreate || r.Verdict.Ready ||
			!slices.Contains(r.Verdict.Reasons, lsncheck.ReasonCopyConfirmedAhead) {
			t.Fatalf("after the crash: %s %s, verdict %+v", r.Action, r.Code, r.Verdict)
		}
		if c, _ := f.slotOn(f.pair.Standby, "cdc"); c.RestartLSN < before.RestartLSN || c.ConfirmedFlush != before.ConfirmedFlush {
			t.Fatalf("the copy was changed: %+v, was %+v", c.Position, before.Position)
		}
		// From the slot's last save: at least what it confirmed since, and nothing new.
		if got := f.consume(p, "cdc"); len(got) < len(again) || !equalInts(got[len(got)-len(again):], again) {
			t.Fatalf("the consumer got again %v, want it to end with %v", got, again)
		}
		f.untilReady("cdc", func() {})
		want := f.insert(2)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.pass()
		f.promoteExpect("cdc", want)
	})
}

// TestRotatedPasswordFileIsReadAgain (operators review round 4, Day 2): the primary's password
// file is read again at every connection attempt, as libpq re-reads its passfile: a secret
// rotated in place (a Kubernetes Secret) is taken at the next pass, without a restart. Before,
// the file was read once at start and the sidecar stayed stopped on the old password.
func TestRotatedPasswordFileIsReadAgain(t *testing.T) {
	pgtest.ForEachMajor(t, []int{17}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{})
		f.must(f.pair.Primary.Exec(f.ctx, "CREATE ROLE rot SUPERUSER LOGIN PASSWORD 's3cret'"))
		hba := filepath.Join(f.pair.Primary.DataDir, "pg_hba.conf")
		old, err := os.ReadFile(hba)
		f.must(err)
		f.must(os.WriteFile(hba, append([]byte("host all rot 127.0.0.1/32 scram-sha-256\n"), old...), 0o600))
		f.must(f.pair.Primary.Exec(f.ctx, "SELECT pg_reload_conf()"))
		pwFile := filepath.Join(t.TempDir(), "password")
		f.must(os.WriteFile(pwFile, []byte("wrong\n"), 0o600))
		f.eng.Close()
		f.cfg.PrimaryDSN = strings.Replace(f.pair.Primary.DSN("postgres"), "user="+integration.Superuser, "user=rot", 1)
		f.cfg.PrimaryPassword, f.cfg.PrimaryPasswordFile = "wrong", pwFile
		f.startEngine()
		if _, err := f.eng.RunOnce(f.ctx); err == nil || !strings.Contains(err.Error(), "--primary-password-file") || !strings.Contains(err.Error(), "pg_hba.conf") {
			t.Fatalf("with the wrong password: want an error naming the password file and pg_hba.conf, got %v", err)
		}
		f.must(os.WriteFile(pwFile, []byte("s3cret\n"), 0o600))
		if _, err := f.eng.RunOnce(f.ctx); err != nil {
			t.Fatalf("after the password file was rotated: %v", err)
		}
	})
}

// TestFaultRecordOutlivedByThePrimary: slotsync stalls (no pass: a paused process, a starved
// CPU) after recording the gate while the primary lives on and commits for longer than the record
// promised to be renewed within; a slot may have changed unseen in that time (the explorer's
// hook-slot-behind plan: a slot copied again from an older one, its consumer starting over behind
// the copy). Without the primary the gate cannot tell: the standby replayed commits made after
// the record was due. It answered READY from the stale record before.
func TestFaultRecordOutlivedByThePrimary(t *testing.T) {
	t.Parallel() // its own pair and ports; mostly waiting: runs beside another long test
	pgtest.ForEachMajor(t, []int{15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{})
		f.eng.Close()
		f.cfg.PrimaryGoneAfter, f.cfg.GateRecordInterval = time.Second, time.Second
		f.startEngine()
		f.readyCopy()
		// The primary lives on past the record's renewal and its margin; slotsync runs no pass.
		// The renewal is read from the record: it counts the last pass's own duration, which
		// grows on a loaded machine.
		past := f.eng.journal.Gate.RenewBy.Add(RecordLagMargin + time.Second)
		for committed := false; !committed; time.Sleep(500 * time.Millisecond) {
			committed = time.Now().After(past)
			f.insert(1)
			f.consume(f.pair.Primary, "cdc")
		}
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.must(f.pair.Primary.Kill(f.ctx))
		rep, err := f.eng.Inspect(f.ctx)
		if !errors.Is(err, ErrCannotTell) || errors.Is(err, ErrPrimaryAlive) {
			t.Fatalf("the gate without the primary, from a record the primary outlived: want CANNOT TELL, got %v (ready %v, slots %+v)", err, rep.Ready(), rep.Slots)
		}
		if !strings.Contains(err.Error(), "after slotsync's last observation") {
			t.Fatalf("CANNOT TELL without saying why: %v", err)
		}
	})
}

// TestFaultPrimaryOutlivedTheLastPass (rule 8; found by the fault explorer's short run, seed
// 730869993 on 15 and 17): slotsync's passes stop (its route to the primary cut) seconds after
// its last one, well within the record's renewal and margin. Meanwhile a slot is copied again
// from an older one, its consumer starting over there, and the primary goes on committing, then
// stops cleanly. The record still says READY, and the copy stands ahead of what the consumer of
// the slot made again is owed. Without the primary the gate must not vouch: CANNOT TELL, from
// the note each pass leaves (gate-seen.json), for the daemon and for check. Before the note:
// READY; promoted anyway, the consumer misses what the older slot still owed it.
func TestFaultPrimaryOutlivedTheLastPass(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{})
		f.eng.Close()
		f.cfg.PrimaryGoneAfter, f.cfg.Select.Ignore = time.Second, []string{"cdc_old"}
		f.startEngine()
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_copy_logical_replication_slot('cdc', 'cdc_old')"))
		f.pass()
		f.insert(2)
		f.untilReady("cdc", func() { f.consume(f.pair.Primary, "cdc") })
		for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			f.insert(1)
			f.consume(f.pair.Primary, "cdc")
			f.pass()
		}
		// No pass from here on; the primary lives three seconds more, well within the record's
		// renewal (5 s and two passes) and its margin (5 s).
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
			f.insert(1)
			f.consume(f.pair.Primary, "cdc")
		}
		f.must(f.pair.Primary.Exec(f.ctx, "SELECT pg_drop_replication_slot('cdc')"))
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_copy_logical_replication_slot('cdc_old', 'cdc')"))
		f.insert(2)
		owed := f.peek(f.pair.Primary, "cdc")
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.must(f.pair.Primary.Stop(f.ctx))
		time.Sleep(f.cfg.PrimaryGoneAfter + 500*time.Millisecond)

		cfg := f.cfg
		cfg.ReadOnly = true
		check, err := New(cfg)
		f.must(err)
		defer check.Close()
		for who, eng := range map[string]*Engine{"the daemon": f.eng, "check": check} {
			rep, err := eng.Inspect(f.ctx)
			if !errors.Is(err, ErrCannotTell) || errors.Is(err, ErrPrimaryAlive) {
				t.Fatalf("%s without the primary, which outlived slotsync's last pass by three seconds: want CANNOT TELL, got %v (ready %v, slots %+v)",
					who, err, rep.Ready(), rep.Slots)
			}
			if !strings.Contains(err.Error(), "after slotsync's last pass observed it") {
				t.Fatalf("%s: CANNOT TELL without saying why: %v", who, err)
			}
		}
		f.must(f.pair.Promote(f.ctx))
		got := f.consume(f.pair.Standby, "cdc")
		lost := slices.DeleteFunc(slices.Clone(owed), func(id int) bool { return slices.Contains(got, id) })
		if len(lost) == 0 {
			t.Fatalf("promoted anyway, the consumer of the slot made again got %v of %v: nothing lost, so the test shows no need for the answer", got, owed)
		}
		t.Logf("promoted anyway: %d of the %d changes the slot made again owed never reached its consumer", len(lost), len(owed))
	})
}

// TestFaultReceiverSilentlyCut (gate issue, item 6: the review's finding 6): the standby's
// route to its primary goes silent (a blackhole: packets dropped, the connection never closed,
// as when a host loses its power), then the primary dies. With wal_receiver_timeout = 0 the WAL
// receiver never notices and keeps the status "streaming". The gate takes that for a live
// primary (CANNOT TELL: do not promote) only until the receiver has heard nothing for the
// silent-receiver bound (a minute, on 18 and in the slow tier; shortened to 15 s on 15); then
// the primary counts as lost, and after
// --primary-gone-after the gate judges without it: READY. Before, a hook waited for as long as
// the receiver claimed to stream, without end. CI runs the oldest and the newest major it runs
// (the rule reads pg_stat_wal_receiver alike on each; 16 and 17 pass it too).
func TestFaultReceiverSilentlyCut(t *testing.T) {
	t.Parallel() // its own pair and ports; mostly waiting: runs beside another long test
	pgtest.ForEachMajor(t, []int{15, 18}, func(t *testing.T, major int) {
		bound := 15 * time.Second
		if major == 18 {
			pgtest.Slow(t)
			bound = topology.SilentReceiverBound // the default
		}
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{})
		f.eng.Close()
		f.cfg.PrimaryGoneAfter, f.cfg.SilentReceiverBound = time.Second, bound // ObserveTimeout: the default
		f.startEngine()
		proxy := f.standbyThroughProxy()
		f.must(f.pair.Standby.Exec(f.ctx, "ALTER SYSTEM SET wal_receiver_timeout = 0"))
		f.must(f.pair.Standby.Exec(f.ctx, "SELECT pg_reload_conf()"))
		f.readyCopy()
		f.insert(1)
		f.consume(f.pair.Primary, "cdc")
		f.untilReady("cdc", func() {})
		f.insert(1) // the receiver's last message from the primary comes just before the cut
		f.must(f.pair.WaitCaughtUp(f.ctx))
		proxy.Blackhole()
		cut := time.Now()
		f.must(f.pair.Primary.Kill(f.ctx))

		_, err := f.eng.Inspect(f.ctx)
		if !errors.Is(err, ErrPrimaryAlive) {
			t.Fatalf("the receiver silent for less than %s: want CANNOT TELL (primary alive), got %v", f.cfg.SilentReceiverBound, err)
		}
		for {
			rep, err := f.eng.Inspect(f.ctx)
			if err == nil && rep.Ready() && len(rep.Slots) == 1 {
				// The receiver last heard from the primary a moment before the cut (the row
				// written just before it); half the bound leaves room for that moment.
				if took := time.Since(cut); took < f.cfg.SilentReceiverBound/2 {
					t.Fatalf("READY %s after the route went silent, before the bound (%s): a live primary could still be sending", took.Round(time.Second), f.cfg.SilentReceiverBound)
				}
				t.Logf("READY %s after the route went silent", time.Since(cut).Round(time.Second))
				return
			}
			if !errors.Is(err, ErrCannotTell) {
				t.Fatalf("while the receiver is silent: want CANNOT TELL or READY, got %v (slots %+v)", err, rep.Slots)
			}
			if time.Since(cut) > f.cfg.SilentReceiverBound+20*time.Second {
				t.Fatalf("still CANNOT TELL %s after the standby's route went silent: %v", time.Since(cut).Round(time.Second), err)
			}
			time.Sleep(2 * time.Second)
		}
	})
}

// TestStandbyCrashDuringACreate (found by the fault explorer's long run: a standby killed -9 on
// 16 could not start again for minutes): a copy's creation on a standby waits for a
// running-xacts record, reading WAL in a loop that hears neither the client's cancel (it goes
// through the postmaster) nor the postmaster's death. With the postmaster killed -9 the
// backend spun on, holding the standby's shared memory: "pre-existing shared memory block is
// still in use", no start. The method's standby sessions now bound each statement on the
// server too (--slot-timeout and a margin): the backend ends by itself, and the standby starts.
func TestStandbyCrashDuringACreate(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodSQL, integration.Options{})
		f.eng.Close()
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		ps, ok := f.slotOn(f.pair.Primary, "cdc")
		if !ok {
			t.Fatal("no slot on the primary")
		}
		_, standby, err := f.cfg.Endpoints()
		f.must(err)
		// The primary cannot be reached to log a running-xacts record: the creation waits for
		// one, as when the primary is slow or gone.
		gone, err := topology.ParseEndpoint("primary", "host=127.0.0.1 port=1 user=postgres dbname=postgres connect_timeout=1", "")
		f.must(err)
		m := sqlslot.New(method.Deps{Primary: pinnedPrimary(gone), Standby: standby, Log: f.cfg.Logger, StatementTimeout: 3 * time.Second},
			sqlslot.SQLTraits())
		sess := m.Session()
		defer sess.Close()
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
			defer cancel()
			done <- sess.Create(ctx, ps)
		}()
		time.Sleep(time.Second) // the creation is waiting for WAL
		f.must(f.pair.Standby.Kill(f.ctx))
		<-done // the connection broke with its postmaster, or the statement timed out
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := f.pair.Standby.Start(f.ctx)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the standby does not start again 30 s after a kill -9 during a copy's creation: %v", err)
			}
			time.Sleep(time.Second)
		}
	})
}
