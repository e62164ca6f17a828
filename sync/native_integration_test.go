package sync

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

var nativeMajors = []int{17, 18, 19}

var syncOn = integration.Options{StandbyConf: []string{"sync_replication_slots = on"}}

// untilSynced runs passes until the slot's copy is READY and exactly at the consumer.
func (f *fixture) untilSynced(slot string) SlotReport {
	f.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		f.logRunningXacts()
		f.consume(f.pair.Primary, slot) // the primary slot's restart_lsn moves on confirmations
		f.must(f.pair.WaitCaughtUp(f.ctx))
		r := f.pass()[slot]
		if r.Verdict.Ready && r.Verdict.SyncLagBytes == 0 {
			return r
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("slot %s never synced exactly: %+v", slot, r.Verdict)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestNativeFailoverSlotLosesNothing: a failover=true slot is synced by the server, judged
// READY by slotsync only once synced, persistent and caught up, and after a promotion the
// consumer resumes with exactly the changes after its confirmed position.
func TestNativeFailoverSlotLosesNothing(t *testing.T) {
	pgtest.ForEachMajor(t, nativeMajors, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, syncOn)
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding', false, false, true)"))
		rep := f.passReport()
		if rep.Method != topology.MethodNative || rep.Slots[0].Action != KindNone || rep.Slots[0].Verdict.Ready {
			t.Fatalf("first pass: method %s, %+v", rep.Method, rep.Slots)
		}
		got := f.consume(p, "cdc")
		f.insert(5)
		f.untilReady("cdc", func() { got = append(got, f.consume(p, "cdc")...) })
		f.insert(5)
		got = append(got, f.consume(p, "cdc")...)
		r := f.untilSynced("cdc")
		if cp, _ := f.slotOn(f.pair.Standby, "cdc"); !cp.Synced || cp.Temporary {
			t.Fatalf("ready copy is not a persistent synced slot: %+v (%+v)", cp, r)
		}
		rest := f.insert(3)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.must(f.pair.Promote(f.ctx))
		if after := f.consume(f.pair.Standby, "cdc"); !equalInts(after, rest) {
			t.Fatalf("after failover the consumer got %v, want exactly %v (before: %v)", after, rest, got)
		}
	})
}

// TestNativeSetFailoverAndWarnings: with --set-failover an idle slot gets failover=true and is
// then synced; an active one is reported, not forced; synchronized_standby_slots problems are
// warned about.
func TestNativeSetFailoverAndWarnings(t *testing.T) {
	pgtest.ForEachMajor(t, nativeMajors, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodNative, syncOn)
		f.eng.Close()
		f.cfg.Native.SetFailover = true
		f.startEngine()
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('idle', 'test_decoding')"))
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('busy', 'test_decoding')"))
		// Hold "busy" with a streaming client.
		conn, err := pgconn.Connect(f.ctx, p.ReplicationDSN("app", true))
		f.must(err)
		defer conn.Close(context.Background())
		f.must(pglogrepl.StartReplication(f.ctx, conn, "busy", 0, pglogrepl.StartReplicationOptions{}))
		time.Sleep(300 * time.Millisecond)

		got := f.pass()
		if got["idle"].Action != KindSetFailover || got["busy"].Action != KindSkip || !strings.Contains(got["busy"].Reason, "in use") {
			t.Fatalf("set-failover pass: idle %+v, busy %+v", got["idle"], got["busy"])
		}
		if ps, _ := f.slotOn(p, "idle"); !ps.Failover {
			t.Fatal("failover not set on the idle slot")
		}
		if ps, _ := f.slotOn(p, "busy"); ps.Failover {
			t.Fatal("failover forced on an active slot")
		}
		f.untilReady("idle", func() { f.consume(p, "idle") })

		// synchronized_standby_slots naming a slot that does not exist, and not this standby.
		f.must(p.Exec(f.ctx, "ALTER SYSTEM SET synchronized_standby_slots = 'ghost'"))
		f.must(p.Exec(f.ctx, "SELECT pg_reload_conf()"))
		time.Sleep(300 * time.Millisecond)
		rep := f.passReport()
		var text []string
		for _, w := range rep.Warnings {
			text = append(text, w.Issue)
		}
		all := strings.Join(text, "\n")
		if !strings.Contains(all, `lists "ghost", which is missing`) || !strings.Contains(all, "does not list this standby's slot") {
			t.Fatalf("warnings: %s", all)
		}
		f.must(p.Exec(f.ctx, "ALTER SYSTEM RESET synchronized_standby_slots"))
		f.must(p.Exec(f.ctx, "SELECT pg_reload_conf()"))
	})
}

// TestNativeSwitchoverAndBack: after a switchover the old primary rejoins as a standby with its
// old same-name slot (synced=false), which stops the server's slot sync. slotsync reports it,
// clears it when allowed (--drop-stale), the server syncs again, and a switch back loses nothing.
func TestNativeSwitchoverAndBack(t *testing.T) {
	pgtest.ForEachMajor(t, nativeMajors, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodNative, syncOn)
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding', false, false, true)"))
		f.consume(p, "cdc")
		f.insert(3)
		f.untilReady("cdc", func() { f.consume(p, "cdc") })
		f.insert(2)
		f.consume(p, "cdc")
		f.untilSynced("cdc")

		// Switchover: promote; the old primary rejoins keeping its slots (as after pg_rewind).
		f.must(f.pair.Primary.Stop(f.ctx))
		f.must(f.pair.Promote(f.ctx))
		f.must(f.pair.Rejoin(f.ctx, true))
		p = f.pair.Primary
		stale, ok := f.slotOn(f.pair.Standby, "cdc")
		if !ok || stale.Synced {
			t.Fatalf("setup: the rejoined standby should hold a stale unsynced cdc: %+v %v", stale, ok)
		}
		f.eng.Close()
		f.cfg.PrimaryDSN, f.cfg.StandbyDSN, f.cfg.StateDir = p.DSN("postgres"), f.pair.Standby.DSN("postgres"), t.TempDir()
		f.startEngine()
		r := f.pass()["cdc"]
		if r.Action != KindSkip || !strings.Contains(r.Reason, "blocks the server's slot sync") || r.Verdict.Ready || !r.Verdict.Has(lsncheck.ReasonNotSynced) {
			t.Fatalf("stale slot: %+v", r)
		}
		if _, ok := f.slotOn(f.pair.Standby, "cdc"); !ok {
			t.Fatal("the stale slot was dropped without --drop-stale")
		}
		f.eng.Close()
		f.cfg.Native.DropStale = true
		f.startEngine()
		if r := f.pass()["cdc"]; r.Action != KindDrop {
			t.Fatalf("with --drop-stale: %+v", r)
		}
		f.insert(2)
		f.untilReady("cdc", func() { f.consume(p, "cdc") })
		f.untilSynced("cdc")

		// And back: the consumer resumes on the rejoined node with exactly the rest.
		rest := f.insert(3)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.promoteExpect("cdc", rest)
	})
}

// TestNativeSlotOlderThanStandbyWaitsForConsumer: a failover slot whose restart_lsn predates the
// standby's oldest WAL cannot be synced usefully: it stays NOT READY until the consumer moves on.
func TestNativeSlotOlderThanStandbyWaitsForConsumer(t *testing.T) {
	pgtest.ForEachMajor(t, nativeMajors, func(t *testing.T, major int) {
		before := func(ctx context.Context, prim *integration.Node) error {
			if err := prim.Exec(ctx, "CREATE DATABASE app"); err != nil {
				return err
			}
			return prim.ExecDB(ctx, "app", "SELECT pg_create_logical_replication_slot('early', 'test_decoding', false, false, true)")
		}
		f := newFixtureWith(t, major, topology.MethodNative, integration.Options{BeforeStandby: before})
		p := f.pair.Primary
		// The standby recycles the WAL the slot still needs (as if made by pg_basebackup later).
		for i := 0; i < 3; i++ {
			f.insert(2)
			f.must(p.Exec(f.ctx, "SELECT pg_switch_wal()"))
		}
		f.must(p.Exec(f.ctx, "CHECKPOINT"))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.must(f.pair.Standby.Exec(f.ctx, "CHECKPOINT"))
		f.must(f.pair.Standby.Exec(f.ctx, "ALTER SYSTEM SET sync_replication_slots = on"))
		f.must(f.pair.Standby.Exec(f.ctx, "SELECT pg_reload_conf()"))
		// 19+: the server says why it skips the slot (slotsync_skip_reason), and check says it too.
		skipped := major < 19
		for end := time.Now().Add(4 * time.Second); time.Now().Before(end) || !skipped && time.Now().Before(end.Add(30*time.Second)); time.Sleep(300 * time.Millisecond) {
			f.logRunningXacts()
			r := f.pass()["early"]
			if r.Verdict.Ready {
				t.Fatalf("READY before the consumer moved past the standby's oldest WAL: %+v", r)
			}
			if r.ServerSyncSkip != "" {
				if r.ServerSyncSkip != "wal_or_rows_removed" || r.ServerSyncSkips < 1 || !strings.Contains(r.Verdict.Detail, "server's slot sync skipped it: wal_or_rows_removed") {
					t.Fatalf("the server's skip: %q %d times, detail %q; want wal_or_rows_removed, said in the detail", r.ServerSyncSkip, r.ServerSyncSkips, r.Verdict.Detail)
				}
				if !skipped {
					t.Logf("pg%d: %s", major, r.Verdict.Detail)
				}
				skipped = true
			}
		}
		if !skipped {
			t.Fatal("the server's slot sync never said why it skipped the slot")
		}
		f.untilReady("early", func() { f.consume(p, "early") })
	})
}

// TestNativeDrive: with sync_replication_slots off, --native-drive has slotsync call
// pg_sync_replication_slots() itself; without it the missing setting is a clear refusal.
func TestNativeDrive(t *testing.T) {
	pgtest.ForEachMajor(t, nativeMajors, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodNative, integration.Options{})
		_, err := f.eng.RunOnce(f.ctx)
		if Classify(err) != Stop || !strings.Contains(err.Error(), "sync_replication_slots = on") {
			t.Fatalf("native without the setting or --native-drive: %v", err)
		}
		f.eng.Close()
		f.cfg.Native.Drive = true
		f.startEngine()
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding', false, false, true)"))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		// The engine's first pass, all that run --once makes, asks the server to sync: its log
		// says so for slotsync's session (the first sync of a new slot may not persist it yet).
		f.pass()
		if !regexp.MustCompile(`slotsync LOG: .*replication slot "cdc"`).MatchString(f.pair.LogTails()) {
			t.Fatalf("the first pass did not drive the server's slot sync:\n%s", f.pair.LogTails())
		}
		f.untilReady("cdc", func() { f.consume(p, "cdc") })
		if cp, _ := f.slotOn(f.pair.Standby, "cdc"); !cp.Synced {
			t.Fatalf("the copy is not the server's synced slot: %+v", cp)
		}
	})
}

// newDrivingFixture is a native fixture whose engine drives the server's slot sync
// (--native-drive), the standby's sync_replication_slots off.
func newDrivingFixture(t *testing.T, major int) *fixture {
	f := newFixtureWith(t, major, topology.MethodNative, integration.Options{})
	f.eng.Close()
	f.cfg.Native.Drive = true
	f.startEngine()
	return f
}

// TestNativeDriveAsksForRunningXacts (the fault explorer's liveness finding, 17, seed 20317043):
// the server persists a new failover slot's copy only once the primary slot's catalog_xmin has
// passed what the standby can keep, which takes a running-xacts record its consumer confirms
// past; the primary logs one on its own every 15 s at most, and pg_sync_replication_slots()
// drops the temporary copy it could not persist. With --native-drive slotsync asks the primary
// for that record while a copy waits: each new slot, its primary written to after it was made
// and its consumer confirming, has its persistent copy within seconds (the test asks for no
// record itself), then is READY once the standby's feedback covers it (rule 4).
func TestNativeDriveAsksForRunningXacts(t *testing.T) {
	pgtest.ForEachMajor(t, nativeMajors, func(t *testing.T, major int) {
		f := newDrivingFixture(t, major)
		p := f.pair.Primary
		for _, slot := range []string{"cdc", "cdc2"} {
			f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot($1, 'test_decoding', false, false, true)", slot))
			f.insert(3) // xids the standby sees pass the new slot's catalog_xmin
			start := time.Now()
			for {
				f.consume(p, slot)
				f.must(f.pair.WaitCaughtUp(f.ctx))
				r := f.pass()[slot]
				if cp, ok := f.slotOn(f.pair.Standby, slot); ok && !cp.Temporary && cp.Synced {
					t.Logf("%s copied %.1f s after it was made", slot, time.Since(start).Seconds())
					break
				}
				if time.Since(start) > 4*time.Second {
					t.Fatalf("%s has no persistent copy 4 s after it was made (the primary logs a running-xacts record every 15 s on its own): %+v",
						slot, r.Verdict)
				}
				time.Sleep(200 * time.Millisecond)
			}
			f.untilReady(slot, func() { f.consume(p, slot) })
		}
	})
}

// TestNativeDriveWhileConsumerConfirms (rule 4, --native-drive; found reading the fault
// explorer's seed 20298040 on 18): while a consumer confirms, the server's slot sync, run by
// slotsync, copies the primary slot past what the pass had read of it a moment before; judged
// against that reading, the copy looked ahead of its primary slot (copy_confirmed_flush_ahead)
// on most passes. The sync now runs before the pass reads the nodes: with the consumer
// confirming (only WAL the standby has) throughout, most passes are READY.
func TestNativeDriveWhileConsumerConfirms(t *testing.T) {
	pgtest.ForEachMajor(t, nativeMajors, func(t *testing.T, major int) {
		f := newDrivingFixture(t, major)
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding', false, false, true)"))
		f.insert(2)
		f.untilReady("cdc", func() { f.consume(p, "cdc") })

		ctx, stop := context.WithCancel(f.ctx)
		done := make(chan error, 1)
		go func() { done <- confirmWhatStandbyHas(ctx, f.pair, "cdc") }()
		ready, passes := 0, 30
		var last SlotReport
		for i := 0; i < passes; i++ {
			last = f.pass()["cdc"]
			if last.Verdict.Ready {
				ready++
			}
			time.Sleep(50 * time.Millisecond)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		t.Logf("%d of %d passes READY while the consumer confirmed", ready, passes)
		if ready < passes/2 {
			t.Fatalf("only %d of %d passes READY while the consumer confirmed WAL the standby has; the last: %+v", ready, passes, last.Verdict)
		}
	})
}

// TestNativeServerCopyTrailingItsConsumer (rule 4): between two of the server's slot syncs the
// copy's catalog_xmin trails the primary slot's, which its consumer moved on. Once the daemon
// has seen the standby's physical slot hold the copy's catalog rows, the copy is READY all along,
// and a promotion after such passes loses no change.
func TestNativeServerCopyTrailingItsConsumer(t *testing.T) {
	pgtest.ForEachMajor(t, nativeMajors, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, syncOn)
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding', false, false, true)"))
		var got []int
		f.insert(2)
		f.untilReady("cdc", func() { got = append(got, f.consume(p, "cdc")...) })
		trailing, notReady := 0, map[string]int{}
		for i := 0; i < 60 && (trailing < 5 || i < 20); i++ {
			f.insert(1)
			f.logRunningXacts() // the consumer's confirmations move its slot's catalog_xmin
			got = append(got, f.consume(p, "cdc")...)
			f.must(f.pair.WaitCaughtUp(f.ctx))
			r := f.pass()["cdc"]
			if !r.Verdict.Ready {
				notReady[strings.Join(reasonNames(r.Verdict.Reasons), ",")]++
				continue
			}
			if r.Copy != nil && r.Primary != nil && lsncheck.XIDPrecedes(r.Copy.CatalogXmin, r.Primary.CatalogXmin) {
				trailing++
			}
		}
		if len(notReady) > 0 {
			t.Fatalf("NOT READY while the consumer confirmed WAL the standby has (passes by reasons): %v", notReady)
		}
		if trailing == 0 {
			t.Fatal("no pass saw the copy's catalog_xmin trail the primary slot's: the test did not reach its case")
		}
		t.Logf("%d READY passes with the copy's catalog_xmin behind the primary slot's", trailing)
		f.insert(3)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.must(f.pair.Promote(f.ctx))
		after := f.consume(f.pair.Standby, "cdc")
		var all []int32
		f.must(f.pair.Standby.QueryRowDB(f.ctx, "app", "SELECT array_agg(id ORDER BY id) FROM t", nil, &all))
		var want []int
		for _, id := range all {
			want = append(want, int(id))
		}
		if missing := notIn(append(got, after...), want); len(missing) > 0 || len(after) == 0 {
			t.Fatalf("the consumer never got %v (after the promotion: %v)", missing, after)
		}
	})
}

// reasonNames are the verdict's reasons as strings.
func reasonNames(rs []lsncheck.Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

// notIn is the ids of want that got lacks.
func notIn(got, want []int) []int {
	have := map[int]bool{}
	for _, id := range got {
		have[id] = true
	}
	var out []int
	for _, id := range want {
		if !have[id] {
			out = append(out, id)
		}
	}
	return out
}

// confirmWhatStandbyHas writes a row, waits until the standby has it, and has the consumer of
// slot read and confirm it, again and again until ctx ends.
func confirmWhatStandbyHas(ctx context.Context, pair *integration.Pair, slot string) error {
	conn, err := pair.Primary.Connect(ctx, "app")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for id := 1_000_000; ; id++ {
		_, err := conn.Exec(ctx, "INSERT INTO t VALUES ($1)", id)
		if err == nil {
			err = pair.WaitCaughtUp(ctx)
		}
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT count(*) FROM pg_logical_slot_get_changes($1, NULL, NULL)", slot)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return fmt.Errorf("the consumer: %w", err)
		}
	}
}

// TestNativeTwoPhaseFailoverSlot (gate issue, item 2c): PostgreSQL 17's slot sync does not carry
// two_phase_at, so a synced failover slot with two_phase could send prepared transactions again
// after a promotion: on 17 such a slot is NOT READY with that reason; on 18 it is synced and
// judged as any failover slot.
func TestNativeTwoPhaseFailoverSlot(t *testing.T) {
	pgtest.ForEachMajor(t, nativeMajors, func(t *testing.T, major int) {
		opts := syncOn
		opts.Conf = []string{"max_prepared_transactions = 10"}
		f := newFixtureWith(t, major, topology.MethodAuto, opts)
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding', false, true, true)"))
		f.insert(2)
		deadline := time.Now().Add(60 * time.Second)
		var r SlotReport
		for time.Now().Before(deadline) {
			f.logRunningXacts()
			f.consume(p, "cdc")
			f.must(f.pair.WaitCaughtUp(f.ctx))
			r = f.pass()["cdc"]
			if cp, ok := f.slotOn(f.pair.Standby, "cdc"); ok && cp.Synced && !cp.Temporary && cp.ConfirmedFlush > 0 {
				if major == 18 && r.Verdict.Ready || major == 17 && r.Verdict.Has(lsncheck.ReasonTwoPhaseNotSynced) {
					break
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		switch {
		case major == 17 && (r.Verdict.Ready || !r.Verdict.Has(lsncheck.ReasonTwoPhaseNotSynced)):
			t.Fatalf("17, a synced failover slot with two_phase: %+v", r.Verdict)
		case major == 18 && !r.Verdict.Ready:
			t.Fatalf("18, a synced failover slot with two_phase: %+v", r.Verdict)
		}
	})
}
