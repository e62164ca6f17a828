package sync

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method/statefile"
	"github.com/slotsync/slotsync/topology"
)

// fixture is a real pair with an "app" database, a table, and an engine syncing it.
type fixture struct {
	t    *testing.T
	ctx  context.Context
	pair *integration.Pair
	logs *pgtest.LockedBuffer
	cfg  Config
	eng  *Engine
	next int // next row id to insert
	// restarts counts the standby restarts the fixture's passes made.
	restarts int
	// readyWithin: how long untilReady waits for READY (0: a minute).
	readyWithin time.Duration
}

func newFixture(t *testing.T, major int) *fixture {
	return newFixtureWith(t, major, topology.MethodSQL, integration.Options{})
}

// nodeRestarter restarts a test standby for the state-file method.
type nodeRestarter struct{ n *integration.Node }

func (r nodeRestarter) Stop(ctx context.Context) error { return r.n.Stop(ctx) }

func (r nodeRestarter) Start(ctx context.Context) error { return r.n.Start(ctx) }

func newFixtureWith(t *testing.T, major int, method topology.Method, opts integration.Options) *fixture {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	opts.Major = major
	f := &fixture{t: t, ctx: ctx, pair: pgtest.StartPair(t, opts), logs: &pgtest.LockedBuffer{}, next: 1}
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
		Statefile: statefile.Config{DataDir: f.pair.Standby.DataDir, Restarter: nodeRestarter{f.pair.Standby},
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

// cutOffStandby empties the standby's primary_conninfo: its WAL receiver stops and does not come
// back (the caller waits for that as it needs), while the primary lives on.
func (f *fixture) cutOffStandby() {
	f.t.Helper()
	f.must(f.pair.Standby.Exec(f.ctx, "ALTER SYSTEM SET primary_conninfo = ''"))
	f.must(f.pair.Standby.Exec(f.ctx, "SELECT pg_reload_conf()"))
}

// asRole creates role name (LOGIN REPLICATION) with grants on the primary, waits for the
// standby to have it, and closes the engine with both DSNs naming the role: the caller adjusts
// what else it needs and starts the engine again.
func (f *fixture) asRole(name string, grants ...string) {
	f.t.Helper()
	for _, sql := range append([]string{"CREATE ROLE " + name + " LOGIN REPLICATION"}, grants...) {
		f.must(f.pair.Primary.Exec(f.ctx, sql))
	}
	f.must(f.pair.WaitCaughtUp(f.ctx))
	f.eng.Close()
	f.cfg.PrimaryDSN = strings.Replace(f.cfg.PrimaryDSN, "user=postgres", "user="+name, 1)
	f.cfg.StandbyDSN = strings.Replace(f.cfg.StandbyDSN, "user=postgres", "user="+name, 1)
}

// passesFor runs a pass every 200 ms for d and returns the standby restarts they made and the
// last report of slot. A pass that fails fails the test, unless failing is allowed (a pass
// right after a refused restart may find the standby starting).
func (f *fixture) passesFor(d time.Duration, slot string, failing bool) (restarts int, last SlotReport) {
	f.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		rep, err := f.eng.RunOnce(f.ctx)
		if err != nil && failing {
			continue
		}
		f.must(err)
		restarts += rep.StandbyRestarts
		for _, s := range rep.Slots {
			if s.Name == slot {
				last = s
			}
		}
	}
	return restarts, last
}

// pass runs one sync pass and returns the report entry of each slot by name.
func (f *fixture) pass() map[string]SlotReport {
	f.t.Helper()
	out := map[string]SlotReport{}
	for _, s := range f.passReport().Slots {
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

// consume reads and confirms every change of a test_decoding slot on node n.
func (f *fixture) consume(n *integration.Node, slotName string) []int {
	f.t.Helper()
	return f.changes(n, slotName, "pg_logical_slot_get_changes")
}

// peek reads every change of a test_decoding slot on node n without confirming any.
func (f *fixture) peek(n *integration.Node, slotName string) []int {
	f.t.Helper()
	return f.changes(n, slotName, "pg_logical_slot_peek_changes")
}

// changes returns the ids inserted in the changes fn (get or peek) reads from a slot on node n.
func (f *fixture) changes(n *integration.Node, slotName, fn string) []int {
	f.t.Helper()
	conn, err := n.Connect(f.ctx, "app")
	f.must(err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(f.ctx, "SELECT data FROM "+fn+"($1, NULL, NULL)", slotName)
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
	deadline := time.Now().Add(cmp.Or(f.readyWithin, 60*time.Second))
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

// untilCopyAtConsumer runs passes until the standby's copy of slotName stands at the primary
// slot's confirmed_flush.
func (f *fixture) untilCopyAtConsumer(slotName string) {
	f.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		f.logRunningXacts()
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.pass()
		ps, _ := f.slotOn(f.pair.Primary, slotName)
		cp, ok := f.slotOn(f.pair.Standby, slotName)
		if ok && cp.ConfirmedFlush == ps.ConfirmedFlush {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the copy of %s stayed at %s, the consumer at %s", slotName, cp.ConfirmedFlush, ps.ConfirmedFlush)
		}
	}
}

// readyCopy makes a ready copy of slot "cdc".
func (f *fixture) readyCopy() {
	f.t.Helper()
	f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
	f.pass()
	f.insert(2)
	f.untilReady("cdc", func() { f.consume(f.pair.Primary, "cdc") })
}

// primaryThroughProxy routes slotsync's connections to the primary through a loopback proxy
// that a fault test can cut (the standby keeps streaming directly); the engine picks it up when
// it is started again.
func (f *fixture) primaryThroughProxy() *integration.Proxy {
	f.t.Helper()
	proxy := f.proxyToPrimary()
	f.cfg.PrimaryDSN = fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable connect_timeout=2", proxy.Port())
	return proxy
}

// proxyToPrimary is a loopback proxy to the primary, closed with the test.
func (f *fixture) proxyToPrimary() *integration.Proxy {
	f.t.Helper()
	addr, err := f.pair.Primary.Addr(f.ctx)
	f.must(err)
	proxy, err := integration.NewProxy(addr)
	f.must(err)
	f.t.Cleanup(func() { _ = proxy.Close() })
	return proxy
}

// standbyThroughProxy re-points the standby's WAL receiver at its primary through a loopback
// proxy that a fault test can cut, and waits until it streams through it.
func (f *fixture) standbyThroughProxy() *integration.Proxy {
	f.t.Helper()
	proxy := f.proxyToPrimary()
	var conninfo string
	f.must(f.pair.Standby.QueryRow(f.ctx, "SHOW primary_conninfo", nil, &conninfo))
	conninfo = regexp.MustCompile(`\b(host|hostaddr|port)=\S+`).ReplaceAllString(conninfo, "")
	conninfo += fmt.Sprintf(" host=127.0.0.1 port=%d", proxy.Port())
	f.must(f.pair.Standby.Exec(f.ctx, fmt.Sprintf("ALTER SYSTEM SET primary_conninfo = '%s'", strings.ReplaceAll(conninfo, "'", "''"))))
	f.must(f.pair.Standby.Exec(f.ctx, "SELECT pg_reload_conf()"))
	deadline := time.Now().Add(30 * time.Second)
	for {
		var port int
		err := f.pair.Standby.QueryRow(f.ctx, "SELECT coalesce(sender_port, 0) FROM pg_stat_wal_receiver WHERE status = 'streaming'", nil, &port)
		if err == nil && port == proxy.Port() {
			return proxy
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the standby does not stream through the proxy (port %d, err %v)", port, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pgCtl is the shell words that run the pair's pg_ctl as the user its servers run as.
func (f *fixture) pgCtl() string {
	f.t.Helper()
	pgCtl, err := integration.PgCtl(f.pair.Major)
	f.must(err)
	return pgCtl
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

// promoteExpect promotes the standby and checks that the consumer of slot gets exactly want
// there: nothing lost, nothing past its confirmed position delivered again.
func (f *fixture) promoteExpect(slot string, want []int) {
	f.t.Helper()
	f.must(f.pair.Promote(f.ctx))
	if got := f.consume(f.pair.Standby, slot); !equalInts(got, want) {
		f.t.Fatalf("after promotion the consumer of %s got %v, want exactly %v", slot, got, want)
	}
}

// leaveWALBehind writes and switches WAL segments on the primary, then makes the standby run a
// restartpoint: the segments no slot of the standby's needs are gone there.
func (f *fixture) leaveWALBehind(segments int) []int {
	f.t.Helper()
	rows := f.switchSegments(segments)
	f.must(f.pair.Restartpoint(f.ctx)) // it recycles the old segments
	return rows
}

// switchSegments writes a row and switches the primary's WAL segment, segments times, and waits
// for the standby to have them (no restartpoint); it returns the rows written.
func (f *fixture) switchSegments(segments int) []int {
	f.t.Helper()
	var rows []int
	for i := 0; i < segments; i++ {
		rows = append(rows, f.insert(1)...)
		f.must(f.pair.Primary.Exec(f.ctx, "SELECT pg_switch_wal()"))
	}
	f.must(f.pair.WaitCaughtUp(f.ctx))
	return rows
}

// segmentOf is the name of the primary's WAL segment holding lsn, on its current timeline.
func (f *fixture) segmentOf(lsn lsncheck.LSN) string {
	f.t.Helper()
	var tli int
	f.must(f.pair.Primary.QueryRow(f.ctx, "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int", nil, &tli))
	conn, err := f.pair.Primary.Connect(f.ctx, "postgres")
	f.must(err)
	defer conn.Close(context.Background())
	seg, err := topology.WALSegmentSize(f.ctx, conn)
	f.must(err)
	return lsncheck.SegmentName(uint32(tli), lsn, seg)
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

// passReport runs a pass and returns the whole report (for the restart count).
func (f *fixture) passReport() Report {
	f.t.Helper()
	rep, err := f.eng.RunOnce(f.ctx)
	f.must(err)
	f.restarts += rep.StandbyRestarts
	for _, s := range rep.Slots {
		if s.Error != "" {
			f.t.Fatalf("slot %s: %s", s.Name, s.Error)
		}
	}
	return rep
}

// notReadyWithoutPrimary fails the test unless the daemon's gate, asked now, judges "cdc" without
// the primary and NOT READY with the reason want.
func (f *fixture) notReadyWithoutPrimary(what string, want lsncheck.Reason) {
	f.t.Helper()
	rep, err := f.eng.Inspect(f.ctx)
	f.must(err)
	if r := reportOf(rep, "cdc"); rep.WithoutPrimary == nil || r.Verdict.Ready || !slices.Contains(r.Verdict.Reasons, want) {
		f.t.Fatalf("the gate without the primary, %s: %v %s (judged without the primary: %v), want NOT READY %s",
			what, r.Verdict.Reasons, r.Verdict.Detail, rep.WithoutPrimary != nil, want)
	}
}

// inspectAsCheck judges the pair as check does beside the daemon: a read-only engine on the
// same state directory.
func (f *fixture) inspectAsCheck() Report {
	f.t.Helper()
	return f.inspectReadOnly(f.cfg.StateDir)
}

// inspectWithoutJournal judges the pair as check does without --state-dir.
func (f *fixture) inspectWithoutJournal() Report {
	f.t.Helper()
	return f.inspectReadOnly("")
}

// inspectReadOnly judges the pair as check does: a read-only engine of the fixture's config on
// stateDir ("": none).
func (f *fixture) inspectReadOnly(stateDir string) Report {
	f.t.Helper()
	cfg := f.cfg
	cfg.ReadOnly, cfg.StateDir = true, stateDir
	gate, err := New(cfg)
	f.must(err)
	defer gate.Close()
	rep, err := gate.Inspect(f.ctx)
	f.must(err)
	return rep
}
