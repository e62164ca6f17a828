package sync

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method/sqlslot"
	"github.com/slotsync/slotsync/topology"
)

var insertedID = regexp.MustCompile(`INSERT: id\[integer\]:(\d+)`)

var sqlMajors = []int{16, 17, 18, 19}

// TestSQLMethodFailoverLosesNothing: sync, consume, sync, promote; the consumer resumes on the
// new primary with exactly the changes after its confirmed position.
func TestSQLMethodFailoverLosesNothing(t *testing.T) {
	pgtest.ForEachMajor(t, sqlMajors, func(t *testing.T, major int) {
		f := newFixture(t, major)
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc_pgoutput', 'pgoutput')"))
		var got []int
		got = append(got, f.consume(f.pair.Primary, "cdc")...)

		// First pass: the copy is made. It starts ahead of the consumer and must not be READY.
		r := f.pass()["cdc"]
		if r.Action != KindCreate || r.Incarnation == "" {
			t.Fatalf("first pass: %+v", r)
		}
		if r.Verdict.Ready || !r.Verdict.Has(lsncheck.ReasonCopyConfirmedAhead) || r.Verdict.CopyAheadBytes <= 0 {
			t.Fatalf("a fresh copy ahead of the consumer was judged %+v", r.Verdict)
		}
		cp, ok := f.slotOn(f.pair.Standby, "cdc")
		if !ok || cp.Plugin != "test_decoding" || cp.Database != "app" {
			t.Fatalf("standby copy: %+v (exists %v)", cp, ok)
		}

		// The consumer reads and confirms past the copy; passes advance the copy until READY.
		f.insert(5)
		f.untilReady("cdc", func() { got = append(got, f.consume(f.pair.Primary, "cdc")...) })

		// More consumed, more synced, then the consumer stops and rows keep coming.
		f.insert(5)
		got = append(got, f.consume(f.pair.Primary, "cdc")...)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		r = f.pass()["cdc"]
		ps, _ := f.slotOn(f.pair.Primary, "cdc")
		cp, _ = f.slotOn(f.pair.Standby, "cdc")
		if cp.ConfirmedFlush != ps.ConfirmedFlush {
			t.Fatalf("after sync the copy confirms %s, the consumer %s", cp.ConfirmedFlush, ps.ConfirmedFlush)
		}
		if !r.Verdict.Ready {
			t.Fatalf("synced copy not ready: %s", r.Verdict.Detail)
		}
		rest := f.insert(4)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.must(f.pair.Promote(f.ctx))
		// Rule 9: a pass on the promoted node syncs nothing, says the node is the primary, and
		// records the promoted copy as slotsync's to manage.
		if rep, err := f.eng.RunOnce(f.ctx); err != nil || rep.Role != RolePrimary || rep.Ready() || len(rep.Slots) != 0 {
			t.Fatalf("a pass after promotion: role %q, ready %v, %d slots, %v; want the primary role and nothing done", rep.Role, rep.Ready(), len(rep.Slots), err)
		}

		// The consumer resumes on the new primary: exactly the rows after its confirmed position.
		after := f.consume(f.pair.Standby, "cdc")
		if !equalInts(after, rest) {
			t.Fatalf("after failover the consumer got %v, want exactly %v (before failover it had %v)", after, rest, got)
		}
		if want := rest[0] - 1; len(got) != want || got[len(got)-1] != want {
			t.Fatalf("before failover the consumer got %v, want 1..%d", got, want)
		}
		var n int
		f.must(f.pair.Standby.QueryRowDB(f.ctx, "app", `SELECT count(*) FROM pg_logical_slot_get_binary_changes('cdc_pgoutput', NULL, NULL,
			'proto_version', '1', 'publication_names', 'pub')`, nil, &n))
	})
}

// TestSQLMethodDropRecreateAndPausedReplay covers rule 3 (a slot dropped while slotsync was
// stopped), rule 2 (recreated slots get a new copy and incarnation) and rule 1 (never past the
// replay position), with rule 5 reported while replay is paused.
func TestSQLMethodDropRecreateAndPausedReplay(t *testing.T) {
	pgtest.ForEachMajor(t, sqlMajors, func(t *testing.T, major int) {
		f := newFixture(t, major)
		p := f.pair.Primary
		for _, s := range []string{"gone", "replugged", "copied", "paused", "src"} {
			f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot($1, 'test_decoding')", s))
		}
		f.insert(3)
		f.consume(p, "copied")
		first := f.pass()
		for _, s := range []string{"gone", "replugged", "copied", "paused"} {
			if first[s].Action != KindCreate {
				t.Fatalf("%s: %+v", s, first[s])
			}
		}

		// Rule 3: dropped on the primary while slotsync is stopped: removed on the next pass,
		// with one log line and no retry loop.
		f.eng.Close()
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_drop_replication_slot('gone')"))
		// Rule 2: recreated with another plugin; and refilled by pg_copy_logical_replication_slot
		// from an older slot ("src" was never consumed: older confirmed_flush).
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_drop_replication_slot('replugged')"))
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('replugged', 'pgoutput')"))
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_drop_replication_slot('copied')"))
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_copy_logical_replication_slot('src', 'copied')"))
		f.startEngine()
		got := f.pass()
		if got["gone"].Action != KindDrop {
			t.Fatalf("gone: %+v", got["gone"])
		}
		if _, ok := f.slotOn(f.pair.Standby, "gone"); ok {
			t.Fatal("copy of the dropped slot still on the standby")
		}
		for _, s := range []string{"replugged", "copied"} {
			if got[s].Action != KindRecreate || got[s].Incarnation == first[s].Incarnation || got[s].Incarnation == "" {
				t.Fatalf("%s: want recreate with a new incarnation (was %s): %+v", s, first[s].Incarnation, got[s])
			}
		}
		if cp, _ := f.slotOn(f.pair.Standby, "replugged"); cp.Plugin != "pgoutput" {
			t.Fatalf("replugged copy has plugin %q", cp.Plugin)
		}
		for i := 0; i < 3; i++ {
			again := f.pass()
			if _, ok := again["gone"]; ok {
				t.Fatalf("pass %d still acts on the dropped slot: %+v", i, again["gone"])
			}
		}
		if n := strings.Count(f.logs.String(), "slot drop:"); n != 1 {
			t.Fatalf("the drop was logged %d times, want once:\n%s", n, f.logs.String())
		}

		f.standbyLocalSlotLeftAlone()

		// Rule 1 with replay paused: the consumer moves on, the copy stops at the replay LSN.
		// The standby still receives WAL, so the consumer is not ahead of what it holds.
		f.untilReady("paused", func() { f.consume(p, "paused") })
		f.must(f.pair.PauseReplay(f.ctx))
		replay, err := f.pair.ReplayLSN(f.ctx)
		f.must(err)
		f.insert(5)
		f.consume(p, "paused")
		ps, _ := f.slotOn(p, "paused")
		if ps.ConfirmedFlush <= replay {
			t.Fatalf("setup: the consumer (%s) should be past the paused replay (%s)", ps.ConfirmedFlush, replay)
		}
		r := f.pass()["paused"]
		cp, _ := f.slotOn(f.pair.Standby, "paused")
		if cp.ConfirmedFlush > replay {
			t.Fatalf("copy advanced to %s, past the replay LSN %s", cp.ConfirmedFlush, replay)
		}
		if r.Verdict.Has(lsncheck.ReasonConsumerAheadOfStandby) {
			t.Fatalf("the standby holds the WAL (only replay is paused), yet: %+v", r.Verdict)
		}
		f.must(f.pair.ResumeReplay(f.ctx))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.pass()
		cp, _ = f.slotOn(f.pair.Standby, "paused")
		if cp.ConfirmedFlush != ps.ConfirmedFlush {
			t.Fatalf("after resume the copy is at %s, want %s", cp.ConfirmedFlush, ps.ConfirmedFlush)
		}

		f.consumerAheadOfCutOffStandby("paused")
	})
}

func waitNoReceiver(t *testing.T, f *fixture) {
	t.Helper()
	if !f.waitReceivers("", false, 30*time.Second) {
		t.Fatal("the WAL receiver did not stop")
	}
}

// TestSQLMethodLeastPrivilege runs the engine, check and doctor inputs as the role documented
// in docs/PRIVILEGES.md: LOGIN REPLICATION, pg_monitor, EXECUTE on pg_log_standby_snapshot().
// The role sees the standby's decoding snapshots (pg_ls_logicalsnapdir, in pg_monitor): an
// advanced copy is READY on its own decoding's snapshot (rule 4).
func TestSQLMethodLeastPrivilege(t *testing.T) {
	pgtest.ForEachMajor(t, sqlMajors, func(t *testing.T, major int) {
		f := newFixture(t, major)
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.asRole("slotsync", "GRANT pg_monitor TO slotsync", "GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO slotsync")
		f.startEngine()
		if r := f.pass()["cdc"]; r.Action != KindCreate {
			t.Fatalf("as slotsync: %+v", r)
		}
		r := f.untilReady("cdc", func() { f.consume(p, "cdc") })
		if r.Action == KindSkip {
			t.Fatalf("as slotsync: %+v", r)
		}
		f.advancedOntoSnapshot(f.eng.journal.Slots["cdc"].ScratchAt)
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_drop_replication_slot('cdc')"))
		if r := f.pass()["cdc"]; r.Action != KindDrop {
			t.Fatalf("drop as slotsync: %+v", r)
		}
		if strings.Contains(f.logs.String(), "cannot ask the primary") {
			t.Fatalf("pg_log_standby_snapshot was refused:\n%s", f.logs.String())
		}
	})
}

// TestSQLMethodNeverDropsAnActiveCopy: rule 3 on a real pair. A copy someone streams from on
// the standby is not dropped when its slot goes away on the primary; once idle, it is.
func TestSQLMethodNeverDropsAnActiveCopy(t *testing.T) {
	pgtest.ForEachMajor(t, sqlMajors, func(t *testing.T, major int) {
		f := newFixture(t, major)
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.insert(2)
		f.untilReady("cdc", func() { f.consume(f.pair.Primary, "cdc") })

		// A reader on the standby holds the copy (logical decoding on a standby, 16+).
		conn, err := pgconn.Connect(f.ctx, f.pair.Standby.ReplicationDSN("app", true))
		f.must(err)
		f.must(pglogrepl.StartReplication(f.ctx, conn, "cdc", 0, pglogrepl.StartReplicationOptions{}))
		deadline := time.Now().Add(30 * time.Second)
		for cp, _ := f.slotOn(f.pair.Standby, "cdc"); !cp.Active; cp, _ = f.slotOn(f.pair.Standby, "cdc") {
			if time.Now().After(deadline) {
				t.Fatal("the reader never became active on the standby")
			}
			time.Sleep(50 * time.Millisecond)
		}

		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_drop_replication_slot('cdc')"))
		for i := 0; i < 2; i++ {
			if r := f.pass()["cdc"]; r.Action != KindSkip || !strings.Contains(r.Reason, "in use on the standby") {
				t.Fatalf("pass %d with the copy in use: %+v", i, r)
			}
		}
		if _, ok := f.slotOn(f.pair.Standby, "cdc"); !ok {
			t.Fatal("an active copy was dropped")
		}
		conn.Close(context.Background())
		deadline = time.Now().Add(30 * time.Second)
		for {
			if r := f.pass()["cdc"]; r.Action == KindDrop {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the idle copy of a dropped slot was never dropped")
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, ok := f.slotOn(f.pair.Standby, "cdc"); ok {
			t.Fatal("copy still there")
		}
	})
}

// TestConsumerSentAheadOfStandby (rule 5): a consumer that was streamed changes the standby does
// not have holds them whether or not it confirmed them: with the standby cut off, a walsender
// that sent new changes to a consumer that confirms nothing makes the copy NOT READY.
func TestConsumerSentAheadOfStandby(t *testing.T) {
	pgtest.ForEachMajor(t, sqlMajors, func(t *testing.T, major int) {
		f := newFixture(t, major)
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.insert(2)
		f.untilReady("cdc", func() { f.consume(p, "cdc") })

		f.cutOffStandby()
		waitNoReceiver(t, f)
		ps, _ := f.slotOn(p, "cdc")
		f.insert(3)

		conn, err := pgconn.Connect(f.ctx, p.ReplicationDSN("app", true))
		f.must(err)
		defer conn.Close(context.Background())
		f.must(pglogrepl.StartReplication(f.ctx, conn, "cdc", ps.ConfirmedFlush, pglogrepl.StartReplicationOptions{}))
		for got := 0; got < 3; { // receive the three inserts; confirm nothing
			msg, err := conn.ReceiveMessage(f.ctx)
			f.must(err)
			if cd, ok := msg.(*pgproto3.CopyData); ok && cd.Data[0] == pglogrepl.XLogDataByteID {
				xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
				f.must(err)
				if insertedID.Match(xld.WALData) {
					got++
				}
			}
		}
		var r SlotReport
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if r = f.pass()["cdc"]; r.Verdict.Has(lsncheck.ReasonConsumerAheadOfStandby) || time.Now().After(deadline) {
				break
			}
		}
		if now, _ := f.slotOn(p, "cdc"); now.ConfirmedFlush != ps.ConfirmedFlush {
			t.Fatalf("setup: the consumer confirmed %s (was %s)", now.ConfirmedFlush, ps.ConfirmedFlush)
		}
		if r.Verdict.Ready || r.Verdict.ConsumerAheadBytes <= 0 {
			t.Fatalf("a consumer streamed changes the standby lacks was judged %+v", r.Verdict)
		}
	})
}

// TestLeftAloneCopies: a copy slotsync made of a slot it no longer selects is reported as left
// alone with the WAL it holds, kept by default, and dropped with DropLeftAlone; a standby slot
// slotsync did not make is never dropped.
func TestLeftAloneCopies(t *testing.T) {
	t.Parallel() // its own pair and ports; mostly waiting: runs beside another long test
	pgtest.ForEachMajor(t, []int{16, 18}, func(t *testing.T, major int) {
		f := newFixture(t, major)
		f.readyCopy()
		f.must(f.pair.Standby.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('theirs', 'test_decoding')"))

		f.eng.Close()
		f.cfg.Select = Selection{Patterns: []string{"debezium_*"}}
		f.startEngine()
		r, ok := f.pass()["cdc"]
		if !ok || !r.LeftAlone || r.Code != CodeUnselected || r.Gate || r.Copy == nil {
			t.Fatalf("an unselected copy of slotsync's: %+v (reported %v)", r, ok)
		}
		if _, ok := f.slotOn(f.pair.Standby, "cdc"); !ok {
			t.Fatal("a left-alone copy was dropped without --drop-left-alone")
		}
		f.eng.Close()
		f.cfg.DropLeftAlone = true
		f.startEngine()
		if r := f.pass()["cdc"]; r.Action != KindDrop || r.Code != CodeLeftAloneDropped {
			t.Fatalf("with DropLeftAlone: %+v", r)
		}
		if _, ok := f.slotOn(f.pair.Standby, "cdc"); ok {
			t.Fatal("the left-alone copy is still there")
		}
		if _, ok := f.slotOn(f.pair.Standby, "theirs"); !ok {
			t.Fatal("a standby slot slotsync did not make was dropped")
		}
		if _, ok := f.eng.journal.Slots["cdc"]; ok {
			t.Fatal("the dropped copy is still in the journal")
		}
	})
}

// TestCatchUpInBoundedSteps: a copy far behind its consumer (a standby that paused) catches up
// in advances of at most AdvanceStep, logs its progress, stays READY (it trails, nothing is
// lost), and another slot keeps moving meanwhile.
func TestCatchUpInBoundedSteps(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 18}, func(t *testing.T, major int) {
		f := newFixture(t, major)
		f.eng.Close()
		f.cfg.AdvanceStep = 4 << 20
		f.startEngine()
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('far', 'test_decoding')"))
		f.untilReady("far", func() { f.consume(p, "far") })

		// About 80 MiB of WAL, all of it confirmed by the consumer of "far"; then a slot "near"
		// whose consumer keeps confirming a little every pass.
		for i := 0; i < 5; i++ {
			f.insert(1)
			f.must(p.Exec(f.ctx, "SELECT pg_switch_wal()"))
		}
		f.insert(1)
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_replication_slot_advance('far', pg_current_wal_lsn())"))
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('near', 'test_decoding')"))
		f.untilReady("near", func() { f.consume(p, "near") })
		f.must(f.pair.WaitCaughtUp(f.ctx))
		steps := 0
		for deadline := time.Now().Add(time.Minute); ; {
			before, _ := f.slotOn(f.pair.Standby, "far")
			f.insert(1)
			f.consume(p, "near")
			f.must(f.pair.WaitCaughtUp(f.ctx))
			rep := f.pass()
			after, _ := f.slotOn(f.pair.Standby, "far")
			if moved := lsncheck.Bytes(after.ConfirmedFlush, before.ConfirmedFlush); moved > f.cfg.AdvanceStep {
				t.Fatalf("one advance moved the copy %d bytes, step %d", moved, f.cfg.AdvanceStep)
			}
			if !rep["far"].Verdict.Ready || !rep["near"].Verdict.Ready {
				t.Fatalf("while catching up: far %+v, near %+v", rep["far"].Verdict, rep["near"].Verdict)
			}
			if near, _ := f.slotOn(f.pair.Standby, "near"); rep["near"].Verdict.SyncLagBytes != 0 || near.ConfirmedFlush == 0 {
				t.Fatalf("the other slot did not keep up: %+v", rep["near"])
			}
			if rep["far"].Code != CodeCatchingUp {
				break
			}
			steps++
			if time.Now().After(deadline) {
				t.Fatalf("still catching up after %d steps", steps)
			}
		}
		if steps < 4 {
			t.Fatalf("caught up in %d steps of 4 MiB over about 80 MiB", steps)
		}
		logs := f.logs.String()
		if !strings.Contains(logs, "slot copy catching up") || !strings.Contains(logs, "slot copy caught up") {
			t.Fatalf("no progress logged:\n%s", logs)
		}
	})
}

// TestCreateSaysWhatItWaitsFor: a new copy waits for the transactions running on the primary
// when it began; a long one makes the create time out, and the error names that transaction
// (pid, since when) instead of a bare deadline. Once it ends, the copy is made.
func TestCreateSaysWhatItWaitsFor(t *testing.T) {
	pgtest.ForEachMajor(t, []int{17}, func(t *testing.T, major int) {
		f := newFixture(t, major)
		f.eng.Close()
		f.cfg.SlotTimeout = 3 * time.Second
		f.startEngine()
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		conn, err := p.Connect(f.ctx, "app")
		f.must(err)
		defer conn.Close(context.Background())
		tx, err := conn.Begin(f.ctx)
		f.must(err)
		_, err = tx.Exec(f.ctx, "INSERT INTO t VALUES (999)")
		f.must(err)
		var pid int
		f.must(conn.QueryRow(f.ctx, "SELECT pg_backend_pid()").Scan(&pid))
		f.must(f.pair.WaitCaughtUp(f.ctx))

		rep, err := f.eng.RunOnce(f.ctx)
		f.must(err)
		var got SlotReport
		for _, s := range rep.Slots {
			if s.Name == "cdc" {
				got = s
			}
		}
		if !strings.Contains(got.Error, fmt.Sprintf("the oldest is pid %d", pid)) || !strings.Contains(got.Error, "open since") {
			t.Fatalf("a create blocked by a long transaction: %+v", got)
		}
		f.must(tx.Commit(f.ctx))
		f.eng.Close()
		f.startEngine() // no backoff left from the failure
		f.untilReady("cdc", func() { f.consume(p, "cdc") })
	})
}

// TestTwoPhaseChangedOn18: PostgreSQL 18 can turn two_phase on for an existing slot
// (ALTER_REPLICATION_SLOT). The copy without it is another slot for a consumer that now gets
// prepared transactions: NOT READY (identity), replaced by a copy with two_phase, READY once the
// consumer confirms past it; after promotion the consumer resumes exactly.
func TestTwoPhaseChangedOn18(t *testing.T) {
	pgtest.ForEachMajor(t, []int{18}, func(t *testing.T, major int) {
		f := newFixture(t, major)
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.insert(2)
		f.untilReady("cdc", func() { f.consume(p, "cdc") })

		rc, err := pgconn.Connect(f.ctx, p.ReplicationDSN("app", true))
		f.must(err)
		_, err = rc.Exec(f.ctx, "ALTER_REPLICATION_SLOT cdc (TWO_PHASE true)").ReadAll()
		rc.Close(context.Background())
		f.must(err)
		if ps, _ := f.slotOn(p, "cdc"); !ps.TwoPhase {
			t.Fatal("setup: two_phase did not change on the primary")
		}
		f.must(f.pair.WaitCaughtUp(f.ctx))
		r := f.pass()["cdc"]
		if r.Verdict.Ready || r.Action != KindRecreate {
			t.Fatalf("after two_phase changed on the primary: %+v", r)
		}
		r = f.untilReady("cdc", func() { f.insert(1); f.consume(p, "cdc") })
		if cp, _ := f.slotOn(f.pair.Standby, "cdc"); !cp.TwoPhase {
			t.Fatalf("READY with a copy without two_phase: %+v", cp)
		}
		rest := f.insert(3)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.promoteExpect("cdc", rest)
	})
}

// TestOneNudgerForManyCreates: many copies created in one pass ask the primary for
// running-xacts records over one shared connection, not one per create.
func TestOneNudgerForManyCreates(t *testing.T) {
	pgtest.ForEachMajor(t, []int{17}, func(t *testing.T, major int) {
		f := newFixture(t, major)
		f.eng.Close()
		f.cfg.Workers = 8
		f.startEngine()
		p := f.pair.Primary
		for i := 0; i < 24; i++ {
			f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot($1, 'test_decoding')", fmt.Sprintf("bulk%02d", i)))
		}
		f.must(f.pair.WaitCaughtUp(f.ctx))
		stop := make(chan struct{})
		seen := make(chan map[int]bool, 1)
		go func() {
			// Every session that asked the primary for a running-xacts record during the pass
			// (pg_stat_activity keeps an idle session's last query).
			pids := map[int]bool{}
			for {
				select {
				case <-stop:
					seen <- pids
					return
				case <-time.After(2 * time.Millisecond):
				}
				var now []int32
				if err := p.QueryRow(f.ctx, "SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity WHERE query LIKE '%pg_log_standby_snapshot()%' AND pid <> pg_backend_pid()", nil, &now); err != nil {
					continue
				}
				for _, pid := range now {
					pids[int(pid)] = true
				}
			}
		}()
		rep := f.passReport()
		close(stop)
		created := 0
		for _, s := range rep.Slots {
			if s.Action == KindCreate && s.Error == "" {
				created++
			}
		}
		// One nudger session per burst of waiting creates (a burst ends when every create in
		// flight is done at once, so there may be a second), and the pass's own observer
		// session, which asks once more at its end for copies waiting on the primary's horizon;
		// a session per create would be 24.
		pids := <-seen
		t.Logf("%d copies created; sessions that asked for running-xacts records: %d", created, len(pids))
		if created != 24 || len(pids) < 1 || len(pids) > 4 {
			t.Fatalf("%d copies created; %d sessions asked the primary for running-xacts records, want one nudger's (and the observer's)", created, len(pids))
		}
	})
}

// TestRunningXactsRecordFlushed: the running-xacts record slotsync asks the primary for is
// flushed at once, so walsenders send it at once (a standby create waits for one: about 200 ms
// a create before, 20 ms after); the transaction that flushes it decodes to nothing, not even
// an empty BEGIN/COMMIT.
func TestRunningXactsRecordFlushed(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixture(t, major)
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('probe', 'test_decoding')"))
		conn, err := p.Connect(f.ctx, "app")
		f.must(err)
		defer conn.Close(context.Background())
		requireFlushed := func(session string) {
			t.Helper()
			var before string
			f.must(conn.QueryRow(f.ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&before))
			f.must(sqlslot.LogRunningXacts(f.ctx, conn))
			var flushed bool
			f.must(conn.QueryRow(f.ctx, "SELECT pg_current_wal_flush_lsn() > $1::pg_lsn", before).Scan(&flushed))
			if !flushed {
				t.Fatalf("%s: the running-xacts record logged after %s is not flushed", session, before)
			}
		}
		for i := 0; i < 5; i++ {
			if i == 3 {
				// A session (or role) with asynchronous commits: the request's own setting holds.
				_, err := conn.Exec(f.ctx, "SET synchronous_commit = off")
				f.must(err)
			}
			requireFlushed(fmt.Sprintf("request %d", i+1))
		}
		// The setting is the request's own (SET LOCAL): a session shared through a pooler
		// keeps its own.
		var sc string
		f.must(conn.QueryRow(f.ctx, "SHOW synchronous_commit").Scan(&sc))
		if sc != "off" {
			t.Fatalf("synchronous_commit is %q after the request, want the session's own (off)", sc)
		}
		// A role made read-only (default_transaction_read_only) flushes it too: taking an xid
		// is not a write.
		_, err = conn.Exec(f.ctx, "SET default_transaction_read_only = on")
		f.must(err)
		requireFlushed("a read-only session")
		var rows []string
		f.must(p.QueryRowDB(f.ctx, "app", "SELECT coalesce(array_agg(data), '{}') FROM pg_logical_slot_get_changes('probe', NULL, NULL, 'skip-empty-xacts', '0')", nil, &rows))
		if len(rows) != 0 {
			t.Fatalf("asking for running-xacts records decoded to %q", rows)
		}
	})
}

// TestCopyAheadAfterFirstReady (rule 4): a copy's own advances may move its restart_lsn past the
// primary slot's, which is normal for a copy of the standby's own decoding. Here the consumer confirms past two
// running-xacts records in one step (its restart_lsn moves to the first), while the copy is moved
// in two (standby replay paused between them: it moves to the second). The copy is then ahead,
// and still READY; a promotion loses nothing.
func TestCopyAheadAfterFirstReady(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixture(t, major)
		p := f.pair.Primary
		f.readyCopy()
		f.insert(1)
		f.logRunningXacts()
		f.insert(1)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.must(f.pair.PauseReplay(f.ctx))
		f.insert(1)
		f.logRunningXacts()
		f.insert(1)
		f.consume(p, "cdc")
		f.pass() // the copy moves to the paused replay position, past the first record only
		f.must(f.pair.ResumeReplay(f.ctx))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		r := f.pass()["cdc"]
		ps, _ := f.slotOn(p, "cdc") // the primary slot's restart_lsn may be on either side of the copy's
		cp, _ := f.slotOn(f.pair.Standby, "cdc")
		if cp.RestartLSN <= ps.RestartLSN {
			t.Fatalf("setup: the copy's restart_lsn %s is not ahead of the primary's %s", cp.RestartLSN, ps.RestartLSN)
		}
		t.Logf("copy restart_lsn %s, primary's %s: %+v", cp.RestartLSN, ps.RestartLSN, r.Verdict)
		if !r.Verdict.Ready {
			t.Fatalf("a copy ahead of its primary after its first READY: %+v", r.Verdict)
		}
		want := f.insert(2)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.pass()
		f.promoteExpect("cdc", want)
	})
}

// TestHostileOperatorChangesNothing: a database owner's operator =(text,text) in public, put
// before pg_catalog in the database's search_path, in the database slotsync connects to and in
// the slots' database, changes nothing in what slotsync's statements mean: every session
// resolves names in pg_catalog alone (before, every pass failed with "more than one row
// returned by a subquery").
func TestHostileOperatorChangesNothing(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 17}, func(t *testing.T, major int) {
		f := newFixture(t, major)
		for _, db := range []string{"postgres", "app"} {
			f.must(f.pair.Primary.ExecDB(f.ctx, db, `CREATE FUNCTION public.always(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT true'`))
			f.must(f.pair.Primary.ExecDB(f.ctx, db, `CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.always)`))
			f.must(f.pair.Primary.Exec(f.ctx, "ALTER DATABASE "+db+" SET search_path = public, pg_catalog"))
		}
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('other', 'pgoutput')"))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		if r := f.pass()["cdc"]; r.Action != KindCreate {
			t.Fatalf("first pass: %+v", r)
		}
		f.untilReady("cdc", func() { f.consume(f.pair.Primary, "cdc") })
		rep, err := f.eng.Inspect(f.ctx)
		f.must(err)
		if len(rep.Slots) != 2 {
			t.Fatalf("want both slots judged: %+v", rep.Slots)
		}
	})
}

// TestSQLMethodRefusesEarly16 (gate issue, item 3): PostgreSQL 16.0-16.3 can create a logical
// slot "consistent" in the middle of a transaction (fixed in 16.4): on 16.2 the sql method
// refuses to make copies, naming the minor and the fix, and doctor says the same; on the newest
// 16 it makes them.
func TestSQLMethodRefusesEarly16(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16}, func(t *testing.T, major int) {
		for _, minor := range []string{"16.2", ""} {
			if minor != "" {
				if _, err := integration.FindMinorBinaries(major, minor); err != nil {
					if _, explicit, _ := integration.RequestedMajors(); explicit {
						t.Fatal(err)
					}
					t.Skip(err)
				}
			}
			f := newFixtureWith(t, major, topology.MethodSQL, integration.Options{Minor: minor})
			f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
			f.must(f.pair.WaitCaughtUp(f.ctx))
			_, err := f.eng.RunOnce(f.ctx)
			obs, oerr := Observe(f.ctx, f.cfg)
			f.must(oerr)
			var doctor topology.Check
			for _, c := range topology.Doctor(topology.DoctorInput{Primary: obs.Primary.Info, Standby: obs.Standby.Info, Physical: obs.Physical, Method: topology.MethodSQL, PrimarySlots: 1}) {
				if c.Name == "minor_version" {
					doctor = c
				}
			}
			_, made := f.slotOn(f.pair.Standby, "cdc")
			if minor == "" {
				if err != nil || !made || !doctor.OK {
					t.Fatalf("newest 16 (%s): pass %v, copy made %v, doctor %+v", topology.Version(obs.Standby.Info.VersionNum), err, made, doctor)
				}
				continue
			}
			if err == nil || Classify(err) != Stop || !strings.Contains(err.Error(), "16.4") || made {
				t.Fatalf("16.2: pass %v (class %v), copy made %v", err, Classify(err), made)
			}
			if doctor.OK || !strings.Contains(doctor.Problem, "PostgreSQL 16.2") {
				t.Fatalf("16.2: doctor %+v", doctor)
			}
		}
	})
}

// TestFirstReadyFromOwnDecoding (rule 4, first READY): a new copy is READY at the first pass
// after its consumer has confirmed exactly its consistent point, with no running-xacts record
// asked for after the creation. Transactions running while the copy is made hold its creation
// back (before, mid); one that begins once it is made and commits after that first READY
// (during) reaches the consumer whole after a promotion, between the rows committed around it.
func TestFirstReadyFromOwnDecoding(t *testing.T) {
	pgtest.ForEachMajor(t, sqlMajors, func(t *testing.T, major int) {
		f := newFixture(t, major)
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.consume(p, "cdc")
		f.must(f.pair.WaitCaughtUp(f.ctx))
		open := func(id int) *pgx.Conn {
			c, err := p.Connect(f.ctx, "app")
			f.must(err)
			t.Cleanup(func() { c.Close(context.Background()) })
			_, err = c.Exec(f.ctx, fmt.Sprintf("BEGIN; INSERT INTO t VALUES (%d)", id))
			f.must(err)
			return c
		}
		commit := func(c *pgx.Conn) {
			_, err := c.Exec(f.ctx, "COMMIT")
			f.must(err)
		}
		step := func() { // a running-xacts record the copy's decoder has read
			f.logRunningXacts()
			f.must(f.pair.WaitCaughtUp(f.ctx))
			time.Sleep(200 * time.Millisecond)
		}
		before := open(1000) // running when the creation begins: BUILDING until it ends
		created := make(chan map[string]SlotReport, 1)
		go func() {
			rep, err := f.eng.RunOnce(f.ctx)
			if err != nil {
				t.Error(err)
			}
			out := map[string]SlotReport{}
			for _, s := range rep.Slots {
				out[s.Name] = s
			}
			created <- out
		}()
		// The creation has begun (its slot is listed on the standby, as RS_EPHEMERAL) and read a
		// running-xacts record: BUILDING, waiting for before.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var n int
			f.must(f.pair.Standby.QueryRow(f.ctx, "SELECT count(*)::int FROM pg_replication_slots WHERE slot_name = 'cdc'", nil, &n))
			if n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the copy's creation never began")
			}
		}
		step()
		mid := open(1500) // begins while BUILDING: FULL waits for before, CONSISTENT for mid
		step()
		commit(before)
		step()
		commit(mid)
		step()
		if r := (<-created)["cdc"]; r.Action != KindCreate || r.Error != "" {
			t.Fatalf("create: %+v", r)
		}
		// The consumer confirms exactly the copy's consistent point: its decoder has not yet
		// moved the primary slot's restart_lsn past the copy's.
		made, _ := f.slotOn(f.pair.Standby, "cdc")
		conn, err := p.Connect(f.ctx, "app")
		f.must(err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(f.ctx, "SELECT count(*) FROM pg_logical_slot_get_changes('cdc', $1::pg_lsn, NULL)", made.ConfirmedFlush.String())
		f.must(err)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		r := f.pass()["cdc"]
		ps, _ := f.slotOn(p, "cdc") // the primary slot's restart_lsn may be on either side of the copy's
		cp, _ := f.slotOn(f.pair.Standby, "cdc")
		t.Logf("first READY: copy restart_lsn %s confirmed %s, primary's %s %s: %+v", cp.RestartLSN, cp.ConfirmedFlush, ps.RestartLSN, ps.ConfirmedFlush, r.Verdict)
		if cp.ConfirmedFlush != ps.ConfirmedFlush {
			t.Fatalf("setup: the copy (%s) is not at its consumer (%s)", cp.ConfirmedFlush, ps.ConfirmedFlush)
		}
		if !r.Verdict.Ready {
			t.Fatalf("the copy is not READY at its consumer's position: %+v", r.Verdict)
		}
		during := open(2000) // open across the first READY
		want := f.insert(1)
		commit(during)
		want = append(append(want, 2000), f.insert(1)...)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.pass()
		f.promoteExpect("cdc", want)
	})
}

// TestIdlePrimaryStaysIdle (rule 4): once every copy is READY, the sidecar's loop (passes and
// the watch between them) writes nothing on an idle primary for a minute: no running-xacts
// record asked for, no xid taken; the primary's WAL position does not move.
func TestIdlePrimaryStaysIdle(t *testing.T) {
	pgtest.Slow(t)
	t.Parallel() // its own pair and ports; mostly waiting: runs beside another long test
	pgtest.ForEachMajor(t, []int{17}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodSQL, integration.Options{Conf: []string{"autovacuum = off"}})
		f.readyCopy()
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.pass()
		// PostgreSQL itself logs one more running-xacts record within 15 s of the last important
		// WAL: wait until its WAL position has stood still for longer than that, with room for a
		// background writer that a loaded machine runs late (16 s was once not enough).
		var before, after string
		lsn := func() string {
			var l string
			f.must(f.pair.Primary.QueryRow(f.ctx, "SELECT pg_current_wal_lsn()::text", nil, &l))
			return l
		}
		for settled := lsn(); ; {
			time.Sleep(25 * time.Second)
			if now := lsn(); now != settled {
				settled = now
				continue
			}
			before = settled
			break
		}
		ctx, cancel := context.WithTimeout(f.ctx, 60*time.Second)
		defer cancel()
		passes, failed := 0, 0
		f.must(f.eng.Run(ctx, func(r Report, err error) {
			passes++
			switch {
			case err != nil && ctx.Err() != nil:
				passes-- // the pass the minute's end cut short
			case err != nil && Classify(err) == Retry:
				failed++ // a pass cut short on a loaded machine is retried; it writes nothing either
			case err != nil || !r.Ready():
				t.Errorf("pass %d: %v, ready %v", passes, err, r.Ready())
			}
		}))
		if failed > passes/10 {
			t.Errorf("%d of %d passes failed", failed, passes)
		}
		after = lsn()
		t.Logf("%d passes in 60 s (%d failed and retried); the primary's WAL at %s, then %s", passes, failed, before, after)
		if after != before || passes < 30 {
			t.Fatalf("the idle primary's WAL moved from %s to %s over %d passes", before, after, passes)
		}
	})
}

// TestTwoPhaseCopyWaitsForPrepared (rule 4, two_phase): a copy of a two_phase slot made by the
// standby's own decoding has its own two_phase_at; a transaction prepared before it and pending
// would be sent again as PREPARE after a promotion. So the copy is NOT READY while a
// transaction prepared on the primary when it was made is pending, even with its consumer past
// it; once that is resolved and confirmed past, READY, and a promotion gives the consumer
// exactly the changes after its position.
func TestTwoPhaseCopyWaitsForPrepared(t *testing.T) {
	pgtest.ForEachMajor(t, sqlMajors, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodSQL, integration.Options{Conf: []string{"max_prepared_transactions = 10"}})
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding', false, true)"))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		if r := f.pass()["cdc"]; r.Action != KindCreate {
			t.Fatalf("create: %+v", r)
		}
		f.must(p.ExecDB(f.ctx, "app", "BEGIN; INSERT INTO t VALUES (3000); PREPARE TRANSACTION 'p1'"))
		var r SlotReport
		for i := 0; i < 20; i++ {
			f.insert(1)
			f.logRunningXacts()
			f.consume(p, "cdc")
			f.must(f.pair.WaitCaughtUp(f.ctx))
			r = f.pass()["cdc"]
			if r.Verdict.Ready || r.Verdict.Has(lsncheck.ReasonTwoPhasePreparing) && !r.Verdict.Has(lsncheck.ReasonCopyConfirmedAhead) {
				break
			}
		}
		if r.Verdict.Ready || !r.Verdict.Has(lsncheck.ReasonTwoPhasePreparing) {
			t.Fatalf("with p1 prepared and pending, the consumer past the copy: %+v", r.Verdict)
		}
		f.must(p.ExecDB(f.ctx, "app", "COMMIT PREPARED 'p1'"))
		f.untilReady("cdc", func() { f.consume(p, "cdc") })
		want := f.insert(2)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.pass()
		f.promoteExpect("cdc", want)
	})
}

// twoPhaseTurnedOnWhilePrepared makes a READY copy of slot cdc (sql method, 18), prepares a
// transaction inserting 4000 as 'p', then turns the slot's two_phase on, as ALTER SUBSCRIPTION
// … SET (two_phase = true) does.
func twoPhaseTurnedOnWhilePrepared(t *testing.T, major int) (*fixture, *integration.Node) {
	f := newFixtureWith(t, major, topology.MethodSQL, integration.Options{Conf: []string{"max_prepared_transactions = 10"}})
	p := f.pair.Primary
	f.readyCopy()
	f.must(p.ExecDB(f.ctx, "app", "BEGIN; INSERT INTO t VALUES (4000); PREPARE TRANSACTION 'p'"))
	rc, err := pgconn.Connect(f.ctx, p.ReplicationDSN("app", true))
	f.must(err)
	_, err = rc.Exec(f.ctx, "ALTER_REPLICATION_SLOT cdc ( TWO_PHASE true )").ReadAll()
	rc.Close(context.Background())
	f.must(err)
	return f, p
}

// TestTwoPhaseTurnedOnWhilePrepared (gate issue, item 2b; 18, where a slot's two_phase can be
// turned on, as ALTER SUBSCRIPTION … SET (two_phase = true) does): a transaction is prepared,
// then the slot gets two_phase. A new copy would wait for the prepared transaction, and there
// would be no copy meanwhile: the copy is kept (NOT READY, another two_phase) instead of dropped.
// A promotion in that window keeps the slot, and the prepared transaction committed on the new
// primary reaches the consumer exactly once, with nothing left prepared.
func TestTwoPhaseTurnedOnWhilePrepared(t *testing.T) {
	pgtest.ForEachMajor(t, []int{18}, func(t *testing.T, major int) {
		f, _ := twoPhaseTurnedOnWhilePrepared(t, major)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		r := f.pass()["cdc"]
		if r.Code != CodeTwoPhaseWaits || r.Verdict.Ready {
			t.Fatalf("two_phase turned on with a transaction prepared: %+v", r)
		}
		if _, there := f.slotOn(f.pair.Standby, "cdc"); !there {
			t.Fatal("the copy was dropped")
		}
		f.must(f.pair.Promote(f.ctx))
		f.must(f.pair.Standby.ExecDB(f.ctx, "app", "COMMIT PREPARED 'p'"))
		if got := f.consume(f.pair.Standby, "cdc"); !equalInts(got, []int{4000}) {
			t.Fatalf("after promotion the consumer got %v, want exactly [4000]", got)
		}
		var left int
		f.must(f.pair.Standby.QueryRow(f.ctx, "SELECT count(*)::int FROM pg_prepared_xacts", nil, &left))
		if left != 0 {
			t.Fatalf("%d prepared transactions left", left)
		}
	})
}

// TestTwoPhaseTurnedOnPrepareReceived (gate issue, item 5: the loss the wait prevents; 18): as
// TestTwoPhaseTurnedOnWhilePrepared, but the consumer reads on after two_phase is turned on and
// receives the prepared transaction as PREPARE. The copy without two_phase is NOT READY
// (two_phase_change_waits, identity_mismatch). Promoted anyway, at COMMIT PREPARED it sends the
// transaction again, whole: the consumer gets its rows twice (a subscriber, which holds it
// prepared under the same name, fails to apply it, again and again). A copy made now, whose
// two_phase_at would be its own consistent point, past the PREPARE, would send it again the same
// way; only the primary slot's two_phase_at, which PostgreSQL 18's own sync copies, would not.
func TestTwoPhaseTurnedOnPrepareReceived(t *testing.T) {
	pgtest.ForEachMajor(t, []int{18}, func(t *testing.T, major int) {
		f, p := twoPhaseTurnedOnWhilePrepared(t, major)
		if got := f.consume(p, "cdc"); !equalInts(got, []int{4000}) {
			t.Fatalf("setup: the consumer received %v, want the prepared transaction [4000]", got)
		}
		f.must(f.pair.WaitCaughtUp(f.ctx))
		r := f.pass()["cdc"]
		if r.Code != CodeTwoPhaseWaits || r.Verdict.Ready || !r.Verdict.Has(lsncheck.ReasonIdentityMismatch) {
			t.Fatalf("two_phase turned on, the consumer holding a transaction prepared: %+v", r)
		}
		if !strings.Contains(r.Verdict.Detail, "would reach it again whole") {
			t.Fatalf("the NOT READY does not say what is at risk: %q", r.Verdict.Detail)
		}
		f.must(f.pair.Promote(f.ctx))
		f.must(f.pair.Standby.ExecDB(f.ctx, "app", "COMMIT PREPARED 'p'"))
		if got := f.consume(f.pair.Standby, "cdc"); !equalInts(got, []int{4000}) {
			t.Fatalf("after promotion the copy sent %v; want the prepared transaction again, whole ([4000]): the loss the NOT READY names", got)
		}
	})
}

// TestDoctorWithoutReadAllStats (operators review round 4, finding 6): a role without
// pg_read_all_stats passed doctor, yet every unplanned failover then answered CANNOT TELL and
// rule 5 could not see what walsenders sent. doctor now fails read_all_stats on both nodes, and
// passes once the role has pg_monitor (docs/PRIVILEGES.md).
func TestDoctorWithoutReadAllStats(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 18}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodSQL, integration.Options{})
		f.must(f.pair.Primary.Exec(f.ctx, "CREATE ROLE nomon LOGIN REPLICATION"))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		cfg := f.cfg
		cfg.PrimaryDSN = strings.Replace(f.pair.Primary.DSN("postgres"), "user="+integration.Superuser, "user=nomon", 1)
		cfg.StandbyDSN = strings.Replace(f.pair.Standby.DSN("postgres"), "user="+integration.Superuser, "user=nomon", 1)
		failed := func() []string {
			obs, err := Observe(f.ctx, cfg)
			f.must(err)
			var out []string
			for _, c := range topology.Doctor(topology.DoctorInput{Primary: obs.Primary.Info, Standby: obs.Standby.Info, Physical: obs.Physical, Method: topology.MethodSQL, PrimarySlots: 0}) {
				if c.Name == "read_all_stats" && !c.OK {
					out = append(out, c.Node)
				}
			}
			return out
		}
		if got := failed(); len(got) != 2 {
			t.Fatalf("a role without pg_read_all_stats: read_all_stats failed on %v, want primary and standby", got)
		}
		f.must(f.pair.Primary.Exec(f.ctx, "GRANT pg_monitor TO nomon"))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		if got := failed(); len(got) != 0 {
			t.Fatalf("with pg_monitor: read_all_stats failed on %v", got)
		}
	})
}

// standbyLocalSlotLeftAlone: a same-name slot made on the standby by someone else is never
// touched.
func (f *fixture) standbyLocalSlotLeftAlone() {
	f.t.Helper()
	p := f.pair.Primary
	created := make(chan struct{})
	go func() { // the standby's creation waits for a running-xacts record from the primary
		for {
			select {
			case <-created:
				return
			case <-time.After(100 * time.Millisecond):
				_ = p.Exec(f.ctx, "SELECT pg_log_standby_snapshot()")
			}
		}
	}()
	createErr := f.pair.Standby.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('theirs', 'test_decoding')")
	close(created)
	f.must(createErr)
	f.pass()
	if _, ok := f.slotOn(f.pair.Standby, "theirs"); !ok {
		f.t.Fatal("a standby-local slot slotsync did not make was dropped")
	}
}

// consumerAheadOfCutOffStandby (rule 5): with the standby cut off from the primary, a consumer of
// slot that confirms more is ahead of everything the standby holds: NOT READY, with the distance
// in bytes; READY again once the standby streams and catches up.
func (f *fixture) consumerAheadOfCutOffStandby(slot string) {
	f.t.Helper()
	p := f.pair.Primary
	f.cutOffStandby()
	waitNoReceiver(f.t, f)
	f.insert(3)
	f.consume(p, slot)
	r := f.pass()[slot]
	if r.Verdict.Ready || !r.Verdict.Has(lsncheck.ReasonConsumerAheadOfStandby) || r.Verdict.ConsumerAheadBytes <= 0 {
		f.t.Fatalf("consumer ahead of a cut-off standby was judged %+v", r.Verdict)
	}
	f.must(f.pair.Standby.Exec(f.ctx, "ALTER SYSTEM RESET primary_conninfo"))
	f.must(f.pair.Standby.Exec(f.ctx, "SELECT pg_reload_conf()"))
	f.must(f.pair.WaitStreaming(f.ctx))
	f.must(f.pair.WaitCaughtUp(f.ctx))
	if r = f.pass()[slot]; !r.Verdict.Ready {
		f.t.Fatalf("after the standby caught up: %+v", r.Verdict)
	}
}
