package sync

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// exactFixture is a pair synced by the sql method with --exact-copy-after, and a slot "cdc"
// whose consumer confirmed a few changes (its restart_lsn moved to a running-xacts record, so
// the primary has a decoding snapshot there) and then went away, leaving away unconsumed.
func exactFixture(t *testing.T, major int, after time.Duration) (f *fixture, away []int) {
	return exactFixtureWith(t, major, after, 0, integration.Options{})
}

// exactFixtureWith is exactFixture on a pair made with opts, the standby restarted at most every
// minRestart (0: the fixture's, at once).
func exactFixtureWith(t *testing.T, major int, after, minRestart time.Duration, opts integration.Options) (f *fixture, away []int) {
	f = newFixtureWith(t, major, topology.MethodSQL, opts)
	f.eng.Close()
	f.cfg.ExactCopyAfter = after
	if minRestart > 0 {
		f.cfg.Statefile.MinRestartInterval = minRestart
	}
	f.startEngine()
	p := f.pair.Primary
	f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
	for range 3 {
		f.insert(1)
		f.logRunningXacts()
		f.consume(p, "cdc")
	}
	return f, f.insert(5)
}

// untilReadyExact runs passes until the copy of cdc is READY, its consumer saying nothing: before
// each pass, before (nil: the primary logs a running-xacts record and the standby catches up);
// after, each with the pass's report (nil: nothing). It reports whether a pass replaced the
// copy by an exact one.
func (f *fixture) untilReadyExact(before func(), each func(map[string]SlotReport)) (replaced bool) {
	f.t.Helper()
	if before == nil {
		before = func() {
			f.logRunningXacts()
			f.must(f.pair.WaitCaughtUp(f.ctx))
		}
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		before()
		rep := f.pass()
		if each != nil {
			each(rep)
		}
		replaced = replaced || rep["cdc"].Code == CodeExactForAway
		if rep["cdc"].Verdict.Ready {
			return replaced
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("never READY: %s %s", rep["cdc"].Code, rep["cdc"].Verdict.Detail)
		}
	}
}

// TestExactCopyAfterAnAwayConsumer (issue: every consumer protected, item 1): on 16+ the sql
// method's copy of a slot whose consumer went away before it was made stands ahead of that
// consumer, NOT READY until it returns (rule 4). With --exact-copy-after, once the copy has
// stood so for that long, it is replaced by an exact copy from the primary's state files at one
// standby restart, READY with no word from the consumer; the gate beside the daemon judges it by
// the state-file rules its journal entry names; promoted, the consumer gets every change it had
// not confirmed, exactly once. Without the flag the copy is never READY (the test's first part).
// Another slot whose consumer reads is advanced in the pass that makes the exact copy.
func TestExactCopyAfterAnAwayConsumer(t *testing.T) {
	// The bound leaves the 2 s of passes before it room on a loaded machine, where one write and
	// one pass can take over a second.
	const bound = 8 * time.Second
	pgtest.ForEachMajor(t, []int{16, 17, 18, 19}, func(t *testing.T, major int) {
		f, away := exactFixture(t, major, bound)
		// A second slot whose consumer keeps reading: the exact copy of the first never holds back
		// its advance (per-slot independence).
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('live', 'test_decoding')"))
		write := func() { // a change, read by live's consumer alone
			away = append(away, f.insert(1)...)
			f.consume(f.pair.Primary, "live")
			f.logRunningXacts()
			f.must(f.pair.WaitCaughtUp(f.ctx))
		}
		r := f.pass()["cdc"]
		if r.Action != KindCreate || f.restarts != 0 {
			t.Fatalf("first pass: %s %s, %d restarts; want the standby's own copy, no restart", r.Action, r.Code, f.restarts)
		}
		made := time.Now()
		for time.Since(made) < 2*time.Second {
			write()
			r = f.pass()["cdc"]
			if r.Verdict.Ready || f.restarts != 0 {
				t.Fatalf("before the bound: READY %v, %d restarts (%s %s)", r.Verdict.Ready, f.restarts, r.Code, r.Reason)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if r.Code != CodeCopyAhead || !strings.Contains(r.Reason, "an exact copy replaces it in") {
			t.Fatalf("the copy waiting for the bound: %s %s", r.Code, r.Reason)
		}
		replaced := f.untilReadyExact(write, func(rep map[string]SlotReport) { // no word from cdc's consumer
			if rep["cdc"].Code != CodeExactForAway {
				return
			}
			if rep["live"].Action != KindAdvance {
				t.Fatalf("the pass that made the exact copy held back the other slot: %s %s", rep["live"].Code, rep["live"].Reason)
			}
			// Loaded, its WAL not read yet: the gate beside the daemon judges it by the state-file
			// rules its journal entry names, not by the sql method's.
			for _, c := range f.inspectAsCheck().Slots {
				if c.Name == "cdc" && (c.Verdict.Ready || !c.Verdict.Has(lsncheck.ReasonCopyWALUnverified)) {
					t.Fatalf("check right after the exact copy was loaded: %+v, want copy_wal_unverified", c.Verdict)
				}
			}
		})
		if !replaced || f.restarts != 1 {
			t.Fatalf("READY after %d standby restarts, replaced %v: want one exact copy, one restart", f.restarts, replaced)
		}
		if ent := f.eng.journal.Slots["cdc"]; ent == nil || ent.Method != string(topology.MethodStatefile) || ent.ScratchAt != 0 {
			t.Fatalf("the journal's entry: %+v, want a state-file copy with the primary's decoding snapshot", ent)
		}
		if ps, _ := f.slotOn(f.pair.Primary, "cdc"); ps.Active {
			t.Fatal("the consumer was to stay away")
		}
		// check beside the daemon, with neither the flag nor a method: by the entry's rules.
		f.cfg.Method, f.cfg.ExactCopyAfter = topology.MethodAuto, 0
		for _, r := range f.inspectAsCheck().Slots {
			if r.Name == "cdc" && (!r.Verdict.Ready || !r.ExactCopy) {
				t.Fatalf("check beside the daemon: exact copy %v, %+v", r.ExactCopy, r.Verdict)
			}
		}
		f.cfg.Method, f.cfg.ExactCopyAfter = topology.MethodSQL, bound
		more := f.insert(2)
		f.consume(f.pair.Primary, "live")
		f.must(f.pair.WaitCaughtUp(f.ctx))
		if rep := f.pass(); !rep["cdc"].Verdict.Ready || rep["cdc"].Action == KindRecreate || !rep["live"].Verdict.Ready {
			t.Fatalf("after more writes: cdc %s %+v, live %+v", rep["cdc"].Action, rep["cdc"].Verdict, rep["live"].Verdict)
		}
		f.promoteExpect("cdc", append(away, more...))
	})
}

// TestExactCopyNeverWhileConnected: a consumer connected to its slot but not confirming (a slow
// or stuck one) keeps the standby's own copy, however long it stands ahead: the copy is not
// replaced, and the standby not restarted, while the consumer is connected. Once it
// disconnects, the copy is replaced at the next pass.
func TestExactCopyNeverWhileConnected(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 17, 18, 19}, func(t *testing.T, major int) {
		f, _ := exactFixture(t, major, time.Second)
		conn, err := pgconn.Connect(f.ctx, f.pair.Primary.ReplicationDSN("app", true))
		f.must(err)
		defer conn.Close(context.Background())
		f.must(pglogrepl.StartReplication(f.ctx, conn, "cdc", 0, pglogrepl.StartReplicationOptions{}))
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if ps, _ := f.slotOn(f.pair.Primary, "cdc"); ps.Active {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the consumer never became active")
			}
		}
		if r := f.pass()["cdc"]; r.Action != KindCreate {
			t.Fatalf("first pass: %s %s", r.Action, r.Code)
		}
		var r SlotReport
		for start := time.Now(); time.Since(start) < 3*time.Second; time.Sleep(200 * time.Millisecond) {
			f.logRunningXacts()
			r = f.pass()["cdc"]
			if r.Action == KindRecreate || f.restarts != 0 {
				t.Fatalf("a copy was replaced while its consumer is connected: %s %s, %d restarts", r.Code, r.Reason, f.restarts)
			}
		}
		if r.Code != CodeCopyAhead || r.Verdict.Ready || !strings.Contains(r.Reason, "its consumer is connected") {
			t.Fatalf("the copy ahead of a connected consumer: %s %s %+v", r.Code, r.Reason, r.Verdict)
		}
		conn.Close(context.Background())
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if ps, _ := f.slotOn(f.pair.Primary, "cdc"); !ps.Active {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the consumer never let go of its slot")
			}
		}
		if r := f.pass()["cdc"]; r.Code != CodeExactForAway || f.restarts != 1 {
			t.Fatalf("the consumer gone: %s %s, %d restarts; want the exact copy", r.Code, r.Reason, f.restarts)
		}
	})
}

// TestExactCopyThroughTheManagersRestart: under an HA manager that owns the standby (--restart
// command with a restart command), the exact copy is staged into the running standby, whose own
// copy is dropped first (the running server would otherwise write that copy's state over the
// staged file at its shutdown), and loaded by the manager's restart: READY without the consumer,
// and the promoted consumer gets every change exactly once.
func TestExactCopyThroughTheManagersRestart(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 17, 18, 19}, func(t *testing.T, major int) {
		f, away := exactFixture(t, major, time.Second)
		f.stageRestarts()
		if r := f.pass()["cdc"]; r.Action != KindCreate {
			t.Fatalf("first pass: %s %s", r.Action, r.Code)
		}
		time.Sleep(time.Second)
		if replaced := f.untilReadyExact(nil, nil); !replaced || f.restarts != 1 {
			t.Fatalf("READY after %d restarts, replaced %v: want one exact copy through one restart", f.restarts, replaced)
		}
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.promoteExpect("cdc", away)
	})
}

// TestExactCopyBesideTheServersSync (17+): with the server's own sync on and slotsync's native
// method, --exact-copy-after replaces slotsync's own copy of a failover=false slot whose
// consumer is away by an exact one, and leaves the failover=true slot to the server, across the
// restart that loads the exact copy; promoted, the consumer gets every change exactly once.
func TestExactCopyBesideTheServersSync(t *testing.T) {
	pgtest.ForEachMajor(t, []int{17, 18, 19}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodNative, syncOn)
		f.eng.Close()
		f.cfg.ExactCopyAfter = time.Second
		f.startEngine()
		away := f.awayBesideAFailoverSlot()
		if r := f.pass()["cdc"]; r.Action != KindCreate {
			t.Fatalf("first pass: %s %s", r.Action, r.Code)
		}
		time.Sleep(time.Second)
		replaced := f.untilReadyExact(nil, func(rep map[string]SlotReport) {
			if fo := rep["fo"]; fo.Code != CodeFailoverKept && fo.Code != CodeFailoverWaiting {
				t.Fatalf("the failover slot: %s %s, want it left to the server's sync", fo.Code, fo.Reason)
			}
		})
		if !replaced || f.restarts != 1 {
			t.Fatalf("READY after %d restarts, replaced %v: want one exact copy", f.restarts, replaced)
		}
		if cp, ok := f.slotOn(f.pair.Standby, "cdc"); !ok || cp.Synced || cp.Failover {
			t.Fatalf("slotsync's exact copy: %+v %v, want an unsynced failover=false slot", cp, ok)
		}
		if fo, ok := f.slotOn(f.pair.Standby, "fo"); ok && !fo.Synced {
			t.Fatalf("the failover slot's copy on the standby is not the server's: %+v", fo)
		}
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.promoteExpect("cdc", away)
	})
}

// TestExactCopyWaitingKeepsTheOwnCopysRules (rule 4; correctness review 5, finding B): an exact
// copy decided for an away consumer but held back by the restart rate limit (a second consumer
// away, due after the first's exact copy took the one restart allowed) leaves the own copy
// standing under its own rules: its journal entry still names the sql method, and its two_phase
// guard holds while a transaction prepared right after it was made is pending, after its consumer
// returns and confirms past it. Before, the entry named the state-file method as soon as the
// exact copy was decided: READY with the transaction still prepared, which a promotion would send
// whole to a consumer that holds it prepared.
func TestExactCopyWaitingKeepsTheOwnCopysRules(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 17, 18, 19}, func(t *testing.T, major int) {
		f, _ := exactFixtureWith(t, major, 2*time.Second, 10*time.Minute, integration.Options{Conf: []string{"max_prepared_transactions = 10"}})
		p := f.pair.Primary
		if replaced := f.untilReadyExact(nil, nil); !replaced || f.restarts != 1 {
			t.Fatalf("the first away consumer's exact copy: replaced %v, %d restarts", replaced, f.restarts)
		}
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('tp', 'test_decoding', false, true)"))
		f.insert(2)
		f.logRunningXacts()
		f.must(f.pair.WaitCaughtUp(f.ctx))
		if r := f.pass()["tp"]; r.Action != KindCreate {
			t.Fatalf("tp's own copy: %s %s", r.Action, r.Code)
		}
		f.must(p.ExecDB(f.ctx, "app", "BEGIN; INSERT INTO t VALUES (3000); PREPARE TRANSACTION 'p1'"))
		var r SlotReport
		for deadline := time.Now().Add(60 * time.Second); r.Code != CodeExactForAway; time.Sleep(200 * time.Millisecond) {
			f.insert(1)
			f.logRunningXacts()
			f.must(f.pair.WaitCaughtUp(f.ctx))
			if r = f.pass()["tp"]; time.Now().After(deadline) {
				t.Fatalf("tp's exact copy never decided: %s %s", r.Code, r.Reason)
			}
		}
		if f.restarts != 1 {
			t.Fatalf("%d standby restarts: the rate limit (10m) was to hold tp's exact copy back", f.restarts)
		}
		if ent := f.eng.journal.Slots["tp"]; ent == nil || ent.Method != string(topology.MethodSQL) || ent.TwoPhaseFrom == 0 {
			t.Errorf("the journal's entry while the exact copy waits: method %q, two_phase from %s; want the own copy's (sql, its two_phase guard)",
				ent.Method, ent.TwoPhaseFrom)
		}
		f.consume(p, "tp") // the consumer returns and confirms past the own copy, p1 still prepared
		f.must(f.pair.WaitCaughtUp(f.ctx))
		for range 3 {
			r = f.pass()["tp"]
		}
		if r.Verdict.Ready || !r.Verdict.Has(lsncheck.ReasonTwoPhasePreparing) {
			t.Fatalf("the own copy, its consumer past it, p1 prepared: %s %+v, want NOT READY %s", r.Code, r.Verdict, lsncheck.ReasonTwoPhasePreparing)
		}
		if r.ExactCopy {
			t.Error("status calls the own copy an exact one")
		}
		f.must(p.ExecDB(f.ctx, "app", "COMMIT PREPARED 'p1'"))
	})
}

// TestExactCopyAtARealBound (issue: exact copies at real bounds, item 1): with
// --exact-copy-after at 30s, 10m and 1h (the last two reached by moving the engine's clock
// forward once the standby's feedback has covered the own copy, never by a shorter flag), the
// standby's physical slot on the primary has moved its catalog_xmin past the away consumer's
// before the exact copy is made (it covered the own copy, made at the standby's position), and
// PostgreSQL never moves it back. The exact copy, whose catalog rows the primary slot itself
// keeps (same catalog_xmin), is READY within a minute of the bound with no word from its
// consumer; promoted, the consumer gets every change it had not confirmed, exactly once.
// Before, it stayed NOT READY copy_catalog_unprotected until its consumer returned.
func TestExactCopyAtARealBound(t *testing.T) {
	pgtest.Slow(t)
	t.Parallel() // its own pair and ports; mostly waiting: runs beside another long test
	pgtest.ForEachMajor(t, []int{16, 17, 18, 19}, func(t *testing.T, major int) {
		// 30s on every major; the longer bounds, which differ only by the clock's move, on one
		// major each.
		bounds := map[int][]time.Duration{16: {30 * time.Second, 10 * time.Minute}, 17: {30 * time.Second, time.Hour}, 18: {30 * time.Second}, 19: {30 * time.Second}}
		for _, bound := range bounds[major] {
			t.Run(bound.String(), func(t *testing.T) { exactAtBound(t, major, bound) })
		}
	})
}

// exactAtBound runs TestExactCopyAtARealBound at one bound: READY, then promoted, every change
// the away consumer had not confirmed exactly once.
func exactAtBound(t *testing.T, major int, bound time.Duration) {
	f, away := readyExactAtBound(t, major, bound, nil)
	if ps, _ := f.slotOn(f.pair.Primary, "cdc"); ps.Active {
		t.Fatal("the consumer was to stay away")
	}
	f.promoteExpect("cdc", away)
}

// readyExactAtBound makes cdc's exact copy at bound (a real wait up to 30s, the engine's clock
// moved forward by the rest once the feedback has passed the away consumer) and returns once it
// is READY, with the changes the consumer has not confirmed. before runs on the fixture first.
func readyExactAtBound(t *testing.T, major int, bound time.Duration, before func(f *fixture)) (f *fixture, away []int) {
	f, away = exactFixture(t, major, bound)
	if before != nil {
		before(f)
	}
	var skew atomic.Int64
	f.eng.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	if r := f.pass()["cdc"]; r.Action != KindCreate {
		t.Fatalf("first pass: %s %s; want the standby's own copy", r.Action, r.Code)
	}
	made := f.eng.now()
	ps, _ := f.slotOn(f.pair.Primary, "cdc")
	var r SlotReport
	passed := false // the physical slot's catalog_xmin seen past the away consumer's
	for r.Code != CodeExactForAway {
		away = append(away, f.insert(1)...)
		f.logRunningXacts()
		f.must(f.pair.WaitCaughtUp(f.ctx))
		r = f.pass()["cdc"]
		if r.Verdict.Ready {
			t.Fatalf("READY before the exact copy: %s %s", r.Code, r.Verdict.Detail)
		}
		var xmin int64
		f.must(f.pair.Primary.QueryRow(f.ctx, "SELECT coalesce(max(catalog_xmin::text::bigint), 0) FROM pg_replication_slots WHERE slot_type = 'physical'",
			nil, &xmin))
		passed = passed || lsncheck.XIDPrecedes(ps.CatalogXmin, lsncheck.XID(xmin))
		if passed && f.eng.now().Sub(made) >= 30*time.Second && f.eng.now().Sub(made) < bound {
			skew.Store(int64(bound - 30*time.Second)) // the rest of the bound, at once
		}
		if f.eng.now().Sub(made) > bound+time.Minute {
			t.Fatalf("no exact copy a minute after the bound: %s %s", r.Code, r.Reason)
		}
		time.Sleep(time.Second)
	}
	if !passed {
		t.Fatalf("the standby's physical slot never held catalog rows newer than the away consumer's %d before the bound: not the case under test", ps.CatalogXmin)
	}
	decided := time.Now()
	for !r.Verdict.Ready {
		if time.Since(decided) > time.Minute {
			t.Fatalf("the exact copy never READY within a minute: %s %s", r.Code, r.Verdict.Detail)
		}
		time.Sleep(time.Second)
		f.logRunningXacts()
		f.must(f.pair.WaitCaughtUp(f.ctx))
		r = f.pass()["cdc"]
	}
	t.Logf("pg%d, bound %s: exact copy READY %s after the bound (%s after it was decided)", major, bound,
		f.eng.now().Sub(made.Add(bound)).Round(time.Second), time.Since(decided).Round(time.Second))
	return f, away
}

// TestExactCopyRowsRemovedAfterItsConsumerReturns (rule 4e): an exact copy READY on the primary
// slot's catalog hold alone (16+; bound 30s), whose consumer then returns and moves its slot on,
// and the catalogs are vacuumed on the primary before slotsync moves the copy: rows the copy
// needs (a column added and dropped while the consumer was away, before the standby's feedback
// first held anything) go once the copy's catalog hold is gone, the standby replays their removal and invalidates the copy
// (rows_removed), and the gate says NOT READY copy_invalidated, never READY on rows that are gone.
func TestExactCopyRowsRemovedAfterItsConsumerReturns(t *testing.T) {
	t.Parallel() // its own pair and ports; mostly waiting: runs beside another long test
	pgtest.ForEachMajor(t, []int{16, 18, 19}, func(t *testing.T, major int) {
		f, _ := readyExactAtBound(t, major, 30*time.Second, func(f *fixture) {
			f.must(f.pair.Primary.ExecDB(f.ctx, "app", "ALTER TABLE t ADD COLUMN gone int"))
			f.must(f.pair.Primary.ExecDB(f.ctx, "app", "ALTER TABLE t DROP COLUMN gone"))
		})
		p := f.pair.Primary
		// The copy's catalog hold (a temporary slot on the primary, until the feedback covers the
		// copy, which it never will) goes first, as after --catalog-hold-timeout or a restart.
		f.must(p.Exec(f.ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE temporary AND active_pid IS NOT NULL"))
		f.must(integration.Poll(f.ctx, 10*time.Second, "the catalog hold to go", func(ctx context.Context) (bool, error) {
			var n int
			err := p.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE temporary", nil, &n)
			return n == 0, err
		}))
		// The consumer back: its slot moves past the catalog change once a running-xacts record
		// it decoded is confirmed, and the standby's feedback (every status interval) lets go of
		// its older xmin; the vacuum is repeated until both have happened.
		var reason, held string
		tries := 0
		for deadline := time.Now().Add(30 * time.Second); reason == "" && time.Now().Before(deadline); {
			tries++
			f.insert(1)
			f.logRunningXacts()
			f.consume(p, "cdc")
			f.must(p.ExecDB(f.ctx, "app", "VACUUM pg_class, pg_attribute, pg_type"))
			f.must(f.pair.WaitCaughtUp(f.ctx))
			f.must(f.pair.Standby.QueryRow(f.ctx, "SELECT coalesce(to_jsonb(s)->>'invalidation_reason', CASE WHEN (to_jsonb(s)->>'conflicting')::bool THEN 'conflicting' END, '') "+
				"FROM pg_replication_slots s WHERE slot_name = 'cdc'", nil, &reason))
			f.must(p.QueryRow(f.ctx, "SELECT string_agg(slot_name || ' xmin ' || coalesce(xmin::text, '-') || ' catalog_xmin ' || coalesce(catalog_xmin::text, '-'), '; ') "+
				"FROM pg_replication_slots", nil, &held))
			time.Sleep(time.Second)
		}
		if reason == "" {
			t.Fatalf("the copy was not invalidated in 30s: the vacuum removed nothing it needed (primary's slots: %s), not the case under test", held)
		}
		for _, r := range f.inspectAsCheck().Slots {
			if r.Name == "cdc" && (r.Verdict.Ready || !r.Verdict.Has(lsncheck.ReasonCopyInvalidated)) {
				t.Fatalf("check on the invalidated copy (%s): %+v, want NOT READY %s", reason, r.Verdict, lsncheck.ReasonCopyInvalidated)
			}
		}
		t.Logf("pg%d: the copy invalidated (%s) after %d vacuums, NOT READY %s", major, reason, tries, lsncheck.ReasonCopyInvalidated)
	})
}

// failingRestarter is a standby restarter whose first fails stops fail (the standby stays up).
type failingRestarter struct {
	nodeRestarter
	fails *atomic.Int32
}

func (r failingRestarter) Stop(ctx context.Context) error {
	if r.fails.Add(-1) >= 0 {
		return errors.New("stop refused (test)")
	}
	return r.nodeRestarter.Stop(ctx)
}

// TestExactCopyRestartFailedKeepsTheOwnCopysRules (issue: exact copies at real bounds, item 2,
// the failed restart): an exact copy decided for an away consumer whose standby restart fails is
// not made: the journal still names the sql method over the own copy that stayed, status does not
// call it exact, the copy stays NOT READY by the own copy's rules; the next pass tries again, and
// once the restart goes through the exact copy is made and READY.
func TestExactCopyRestartFailedKeepsTheOwnCopysRules(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 19}, func(t *testing.T, major int) {
		f, away := exactFixture(t, major, 2*time.Second)
		// One failed restart: a second would spend the copy's two attempts (no restart loops), and
		// the plan would give up until slotsync restarts.
		fails := &atomic.Int32{}
		fails.Store(1)
		f.eng.Close()
		f.cfg.Statefile.Restarter = failingRestarter{nodeRestarter{f.pair.Standby}, fails}
		f.startEngine()
		decided := 0
		for deadline := time.Now().Add(60 * time.Second); fails.Load() > 0; time.Sleep(200 * time.Millisecond) {
			away = append(away, f.insert(1)...)
			f.logRunningXacts()
			f.must(f.pair.WaitCaughtUp(f.ctx))
			rep, err := f.eng.RunOnce(f.ctx) // the pass whose restart fails reports it on the slot
			f.must(err)
			var r SlotReport
			for _, s := range rep.Slots {
				if s.Name == "cdc" {
					r = s
				}
			}
			if r.Error != "" && !strings.Contains(r.Error, "stop refused (test)") {
				t.Fatalf("slot cdc: %s", r.Error)
			}
			if r.Code == CodeExactForAway {
				decided++
			}
			if ent := f.eng.journal.Slots["cdc"]; ent != nil && ent.Method != string(topology.MethodSQL) {
				t.Fatalf("the journal names %s while the exact copy was not made (its restart failed)", ent.Method)
			}
			if r.Verdict.Ready || r.ExactCopy {
				t.Fatalf("the own copy, the exact one not made: READY %v, exact %v (%s %s)", r.Verdict.Ready, r.ExactCopy, r.Code, r.Verdict.Detail)
			}
			if time.Now().After(deadline) {
				t.Fatalf("the exact copy was never tried: %s %s", r.Code, r.Reason)
			}
		}
		if decided != 1 || f.restarts != 0 {
			t.Fatalf("decided %d times, %d restarts: want it tried once, no restart made", decided, f.restarts)
		}
		if replaced := f.untilReadyExact(nil, nil); !replaced || f.restarts != 1 {
			t.Fatalf("after the restarts failed: replaced %v, %d restarts; want the exact copy at the next chance", replaced, f.restarts)
		}
		if ent := f.eng.journal.Slots["cdc"]; ent == nil || ent.Method != string(topology.MethodStatefile) {
			t.Fatalf("the journal's entry once made: %+v", ent)
		}
		f.promoteExpect("cdc", away)
	})
}

// TestExactCopyReadFailedKeepsTheOwnCopysRules (issue: exact copies at real bounds, item 2, the
// failed read): slotsync's role may do everything but read the primary slot's state file, so the
// exact copy decided for an away consumer fails at its read, the missing grant named in the
// slot's error (a human's to fix; the pass goes on). The own copy stays, the journal still names
// the sql method over it, also once slotsync is started again, status does not call it exact,
// and it stays NOT READY by the own copy's rules. Once the privilege is granted, the exact copy is
// made and READY, and promoted the consumer gets every change it had not confirmed once.
func TestExactCopyReadFailedKeepsTheOwnCopysRules(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 19}, func(t *testing.T, major int) {
		f, away := exactFixture(t, major, 2*time.Second)
		f.asRole("slotsync", "GRANT pg_monitor TO slotsync", "GRANT pg_checkpoint TO slotsync",
			"GRANT EXECUTE ON FUNCTION pg_stat_file(text, boolean) TO slotsync", "GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO slotsync")
		f.startEngine()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			away = append(away, f.insert(1)...)
			f.logRunningXacts()
			f.must(f.pair.WaitCaughtUp(f.ctx))
			rep, err := f.eng.RunOnce(f.ctx)
			f.must(err)
			if ent := f.eng.journal.Slots["cdc"]; ent != nil && ent.Method != string(topology.MethodSQL) {
				t.Fatalf("the journal names %s while the exact copy was not made (its read failed)", ent.Method)
			}
			r := slotReport(rep, "cdc")
			if r.Verdict.Ready || r.ExactCopy {
				t.Fatalf("the own copy, the exact one not made: READY %v, exact %v (%s %s)", r.Verdict.Ready, r.ExactCopy, r.Code, r.Verdict.Detail)
			}
			if r.Error != "" {
				if !strings.Contains(r.Error, "pg_read_binary_file") {
					t.Fatalf("slot cdc: %s", r.Error)
				}
				t.Logf("the exact copy's read failed: %s", r.Error)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the exact copy was never tried: %s %s", r.Code, r.Reason)
			}
		}
		if f.restarts != 0 {
			t.Fatalf("%d standby restarts for a copy whose read failed", f.restarts)
		}
		// slotsync started again before the privilege is there: its journal still says what the
		// copy is.
		f.eng.Close()
		f.startEngine()
		if ent := f.eng.journal.Slots["cdc"]; ent == nil || ent.Method != string(topology.MethodSQL) {
			t.Fatalf("the journal read again: %+v; want the sql method's own copy", ent)
		}
		f.must(f.pair.Primary.Exec(f.ctx, "GRANT EXECUTE ON FUNCTION pg_read_binary_file(text) TO slotsync"))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		if replaced := f.untilReadyExact(nil, nil); !replaced || f.restarts != 1 {
			t.Fatalf("once it may read: replaced %v, %d restarts; want the exact copy", replaced, f.restarts)
		}
		if ent := f.eng.journal.Slots["cdc"]; ent == nil || ent.Method != string(topology.MethodStatefile) {
			t.Fatalf("the journal's entry once made: %+v", ent)
		}
		f.promoteExpect("cdc", away)
	})
}

// slotReport is slot's report in rep (zero when rep has none).
func slotReport(rep Report, slot string) SlotReport {
	for _, s := range rep.Slots {
		if s.Name == slot {
			return s
		}
	}
	return SlotReport{}
}
