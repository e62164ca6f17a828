package sync

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// lockedBuffer collects log output from several goroutines.
type lockedBuffer struct {
	mu  stdsync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fixture is a real pair with an "app" database, a table, and an engine syncing it.
type fixture struct {
	t    *testing.T
	ctx  context.Context
	pair *integration.Pair
	logs *lockedBuffer
	cfg  Config
	eng  *Engine
	next int // next row id to insert
}

func newFixture(t *testing.T, major int) *fixture {
	return newFixtureWith(t, major, topology.MethodSQL, integration.Options{})
}

// nodeRestarter restarts a test standby for the state-file method.
type nodeRestarter struct{ n *integration.Node }

func (r nodeRestarter) Stop(ctx context.Context) error  { return r.n.Stop(ctx) }
func (r nodeRestarter) Start(ctx context.Context) error { return r.n.Start(ctx) }

func newFixtureWith(t *testing.T, major int, method topology.Method, opts integration.Options) *fixture {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	opts.Major = major
	f := &fixture{t: t, ctx: ctx, pair: integration.StartPair(t, opts), logs: &lockedBuffer{}, next: 1}
	var haveApp bool
	f.must(f.pair.Primary.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = 'app')", nil, &haveApp))
	if !haveApp {
		f.must(f.pair.Primary.Exec(ctx, "CREATE DATABASE app"))
	}
	f.must(f.pair.Primary.ExecDB(ctx, "app", "CREATE TABLE t (id int PRIMARY KEY)"))
	f.must(f.pair.Primary.ExecDB(ctx, "app", "CREATE PUBLICATION pub FOR TABLE t"))
	f.must(f.pair.WaitCaughtUp(ctx))
	f.cfg = Config{
		PrimaryDSN: f.pair.Primary.DSN("postgres"), StandbyDSN: f.pair.Standby.DSN("postgres"),
		StateDir: t.TempDir(), Method: method, Interval: 100 * time.Millisecond, SlotTimeout: 20 * time.Second,
		Logger: hclog.New(&hclog.LoggerOptions{Output: f.logs, Level: hclog.Debug}),
		Statefile: StatefileConfig{DataDir: f.pair.Standby.DataDir, Restarter: nodeRestarter{f.pair.Standby},
			MinRestartInterval: time.Millisecond},
	}
	f.startEngine()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("slotsync log:\n%s", f.logs.String())
		}
	})
	return f
}

func (f *fixture) startEngine() {
	eng, err := New(f.cfg)
	f.must(err)
	f.eng = eng
	f.t.Cleanup(eng.Close)
}

func (f *fixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// pass runs one sync pass and returns the report entry of each slot by name.
func (f *fixture) pass() map[string]SlotReport {
	f.t.Helper()
	rep, err := f.eng.RunOnce(f.ctx)
	f.must(err)
	out := map[string]SlotReport{}
	for _, s := range rep.Slots {
		if s.Error != "" {
			f.t.Fatalf("slot %s: %s", s.Name, s.Error)
		}
		out[s.Name] = s
	}
	return out
}

// insert writes n rows on the primary and returns their ids.
func (f *fixture) insert(n int) []int {
	var ids []int
	for i := 0; i < n; i++ {
		ids = append(ids, f.next)
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "INSERT INTO t VALUES ($1)", f.next))
		f.next++
	}
	return ids
}

var insertedID = regexp.MustCompile(`INSERT: id\[integer\]:(\d+)`)

// consume reads and confirms every change of a test_decoding slot on node n.
func (f *fixture) consume(n *integration.Node, slotName string) []int {
	f.t.Helper()
	conn, err := n.Connect(f.ctx, "app")
	f.must(err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(f.ctx, "SELECT data FROM pg_logical_slot_get_changes($1, NULL, NULL)", slotName)
	f.must(err)
	defer rows.Close()
	var ids []int
	for rows.Next() {
		var data string
		f.must(rows.Scan(&data))
		if m := insertedID.FindStringSubmatch(data); m != nil {
			id, _ := strconv.Atoi(m[1])
			ids = append(ids, id)
		}
	}
	f.must(rows.Err())
	return ids
}

func (f *fixture) slotOn(n *integration.Node, name string) (topology.Slot, bool) {
	f.t.Helper()
	s, ok, err := f.readSlot(n, name)
	f.must(err)
	return s, ok
}

func (f *fixture) readSlot(n *integration.Node, name string) (topology.Slot, bool, error) {
	conn, err := n.Connect(f.ctx, "postgres")
	if err != nil {
		return topology.Slot{}, false, err
	}
	defer conn.Close(context.Background())
	var vnum int
	if err := conn.QueryRow(f.ctx, "SELECT current_setting('server_version_num')::int").Scan(&vnum); err != nil {
		return topology.Slot{}, false, err
	}
	slots, err := topology.LogicalSlots(f.ctx, conn, vnum)
	if err != nil {
		return topology.Slot{}, false, err
	}
	s, ok := slots[name]
	return s, ok, nil
}

// untilReady runs passes, nudging the primary to log running-xacts records and the consumer
// to confirm, until the slot's copy is READY.
func (f *fixture) untilReady(slotName string, consumeFn func()) SlotReport {
	f.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		f.logRunningXacts()
		consumeFn()
		f.must(f.pair.WaitCaughtUp(f.ctx))
		r := f.pass()[slotName]
		if r.Verdict.Ready {
			return r
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("slot %s never became ready: %s", slotName, r.Verdict.Detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logRunningXacts makes the primary log a running-xacts record: pg_log_standby_snapshot() on
// 16+, a CHECKPOINT before.
func (f *fixture) logRunningXacts() {
	f.t.Helper()
	if f.pair.Major >= 16 {
		f.must(f.pair.Primary.Exec(f.ctx, "SELECT pg_log_standby_snapshot()"))
	} else {
		f.must(f.pair.Primary.Exec(f.ctx, "CHECKPOINT"))
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var sqlMajors = []int{16, 17, 18}

// TestSQLMethodFailoverLosesNothing: sync, consume, sync, promote; the consumer resumes on the
// new primary with exactly the changes after its confirmed position.
func TestSQLMethodFailoverLosesNothing(t *testing.T) {
	integration.ForEachMajor(t, sqlMajors, func(t *testing.T, major int) {
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
		if _, err := f.eng.RunOnce(f.ctx); Classify(err) != Stop || !strings.Contains(err.Error(), "promoted") {
			t.Fatalf("a pass after promotion must stop: %v", err)
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
	integration.ForEachMajor(t, sqlMajors, func(t *testing.T, major int) {
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

		// A same-name slot made on the standby by someone else is never touched.
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
			t.Fatal("a standby-local slot slotsync did not make was dropped")
		}

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

		// Rule 5: with the standby cut off from the primary, a consumer that confirms more is
		// ahead of everything the standby holds: NOT READY, with the distance in bytes.
		f.must(f.pair.Standby.Exec(f.ctx, "ALTER SYSTEM SET primary_conninfo = ''"))
		f.must(f.pair.Standby.Exec(f.ctx, "SELECT pg_reload_conf()"))
		waitNoReceiver(t, f)
		f.insert(3)
		f.consume(p, "paused")
		r = f.pass()["paused"]
		if r.Verdict.Ready || !r.Verdict.Has(lsncheck.ReasonConsumerAheadOfStandby) || r.Verdict.ConsumerAheadBytes <= 0 {
			t.Fatalf("consumer ahead of a cut-off standby was judged %+v", r.Verdict)
		}
		f.must(f.pair.Standby.Exec(f.ctx, "ALTER SYSTEM RESET primary_conninfo"))
		f.must(f.pair.Standby.Exec(f.ctx, "SELECT pg_reload_conf()"))
		f.must(f.pair.WaitStreaming(f.ctx))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		if r = f.pass()["paused"]; !r.Verdict.Ready {
			t.Fatalf("after the standby caught up: %+v", r.Verdict)
		}
	})
}

func waitNoReceiver(t *testing.T, f *fixture) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var n int
		f.must(f.pair.Standby.QueryRow(f.ctx, "SELECT count(*) FROM pg_stat_wal_receiver", nil, &n))
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the WAL receiver did not stop")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSQLMethodLeastPrivilege runs the engine, check and doctor inputs as the role documented
// in docs/PRIVILEGES.md: LOGIN REPLICATION, pg_monitor, EXECUTE on pg_log_standby_snapshot().
func TestSQLMethodLeastPrivilege(t *testing.T) {
	integration.ForEachMajor(t, sqlMajors, func(t *testing.T, major int) {
		f := newFixture(t, major)
		p := f.pair.Primary
		f.must(p.Exec(f.ctx, "CREATE ROLE slotsync LOGIN REPLICATION"))
		f.must(p.Exec(f.ctx, "GRANT pg_monitor TO slotsync"))
		f.must(p.Exec(f.ctx, "GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO slotsync"))
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.eng.Close()
		f.cfg.PrimaryDSN = strings.Replace(f.cfg.PrimaryDSN, "user=postgres", "user=slotsync", 1)
		f.cfg.StandbyDSN = strings.Replace(f.cfg.StandbyDSN, "user=postgres", "user=slotsync", 1)
		f.startEngine()
		if r := f.pass()["cdc"]; r.Action != KindCreate {
			t.Fatalf("as slotsync: %+v", r)
		}
		r := f.untilReady("cdc", func() { f.consume(p, "cdc") })
		if r.Action == KindSkip {
			t.Fatalf("as slotsync: %+v", r)
		}
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
	integration.ForEachMajor(t, sqlMajors, func(t *testing.T, major int) {
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
