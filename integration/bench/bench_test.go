package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/lsncheck"
	slotsync "github.com/slotsync/slotsync/sync"
	"github.com/slotsync/slotsync/sync/method/statefile"
	"github.com/slotsync/slotsync/topology"
)

// major is the PostgreSQL major the benchmarks run on (SLOTSYNC_BENCH_MAJOR, default 17).
func major(b *testing.B) int {
	m := 17
	if s := os.Getenv("SLOTSYNC_BENCH_MAJOR"); s != "" {
		m, _ = strconv.Atoi(s)
	}
	if _, err := integration.FindBinaries(m); err != nil {
		b.Skipf("%v", err)
	}
	return m
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

func startPair(b *testing.B, m int, standbyConf ...string) (*integration.Pair, context.Context) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	b.Cleanup(cancel)
	conf := []string{"max_replication_slots = 2100", "max_connections = 200"}
	if os.Getenv("SLOTSYNC_BENCH_FSYNC") == "off" {
		// A disk whose flushes cost nothing: both servers on this machine share one disk, and
		// every slot save (a consumer's confirmation, a copy's advance) waits for an fsync.
		conf = append(conf, "fsync = off")
	}
	p := pgtest.StartPair(b, integration.Options{Major: m, Conf: conf, StandbyConf: standbyConf})
	must(b, p.Primary.Exec(ctx, "CREATE TABLE t (id serial PRIMARY KEY, v text)"))
	must(b, p.WaitCaughtUp(ctx))
	return p, ctx
}

func engine(b *testing.B, p *integration.Pair, readOnly bool, state string) *slotsync.Engine {
	return engineEvery(b, p, readOnly, state, 100*time.Millisecond)
}

func engineEvery(b *testing.B, p *integration.Pair, readOnly bool, state string, interval time.Duration) *slotsync.Engine {
	cfg := benchConfig(p, state, interval)
	cfg.ReadOnly = readOnly
	e, err := slotsync.New(cfg)
	must(b, err)
	b.Cleanup(e.Close)
	return e
}

// benchConfig is the engine configuration the benchmarks share: passes every interval, quiet,
// the state-file method able to restart the standby at most once a second.
func benchConfig(p *integration.Pair, state string, interval time.Duration) slotsync.Config {
	return slotsync.Config{PrimaryDSN: p.Primary.DSN("postgres"), StandbyDSN: p.Standby.DSN("postgres"), StateDir: state,
		Interval: interval, SlotTimeout: time.Minute, ObserveTimeout: time.Minute, Logger: hclog.NewNullLogger(),
		Statefile: statefile.Config{DataDir: p.Standby.DataDir, Restarter: p.Standby, MinRestartInterval: time.Second}}
}

func createSlots(b *testing.B, ctx context.Context, p *integration.Pair, n int, failover bool) {
	conn, err := p.Primary.Connect(ctx, "postgres")
	must(b, err)
	defer conn.Close(context.Background())
	for i := 0; i < n; i++ {
		q := "SELECT pg_create_logical_replication_slot($1, 'test_decoding')"
		if failover {
			q = "SELECT pg_create_logical_replication_slot($1, 'test_decoding', false, false, true)"
		}
		_, err := conn.Exec(ctx, q, fmt.Sprintf("s%04d", i))
		must(b, err)
	}
}

// BenchmarkPass: one pass over 1, 100 and 1000 slots of which at most 5 changed.
func BenchmarkPass(b *testing.B) {
	m := major(b)
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("slots=%d", n), func(b *testing.B) {
			p, ctx := startPair(b, m)
			createSlots(b, ctx, p, n, false)
			e := engine(b, p, false, b.TempDir())
			for i := 0; i < 3; i++ { // make every copy
				_, err := e.RunOnce(ctx)
				must(b, err)
			}
			changed := min(n, 5)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				must(b, p.Primary.Exec(ctx, "INSERT INTO t (v) VALUES ('x')"))
				for j := 0; j < changed; j++ {
					must(b, p.Primary.Exec(ctx, "SELECT count(*) FROM pg_logical_slot_get_changes($1, NULL, NULL)", fmt.Sprintf("s%04d", j)))
				}
				must(b, p.WaitCaughtUp(ctx))
				b.StartTimer()
				_, err := e.RunOnce(ctx)
				must(b, err)
			}
		})
	}
}

// BenchmarkCheck: the promotion gate (Inspect, as slotsync check) over 1000 slots.
func BenchmarkCheck(b *testing.B) {
	m := major(b)
	p, ctx := startPair(b, m)
	createSlots(b, ctx, p, 1000, false)
	state := b.TempDir()
	e := engine(b, p, false, state)
	for i := 0; i < 3; i++ {
		_, err := e.RunOnce(ctx)
		must(b, err)
	}
	gate := engine(b, p, true, state)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := gate.Inspect(ctx)
		must(b, err)
		if len(rep.Slots) != 1000 {
			b.Fatalf("%d slots judged", len(rep.Slots))
		}
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// BenchmarkSyncLag: under steady writes and consumption, the time from the primary slot's
// confirmed_flush moving until the standby copy reaches it, for a slot synced by slotsync (sql
// method, 1 s and 100 ms intervals) and a failover slot synced by PostgreSQL 17's own worker, in
// one run on one pair.
func BenchmarkSyncLag(b *testing.B) {
	m := major(b)
	native := m >= 17 // 16 has no slot sync of its own: slotsync alone
	// Rhythms: the consumer confirms every 100 ms (busy), every 2 s (sparse), or five times in
	// quick succession every 2 s (burst). At the defaults (1 s passes, the 50 ms watch) and at
	// 100 ms passes.
	type run struct {
		interval time.Duration
		rhythm   string
	}
	runs := []run{{time.Second, "busy"}, {time.Second, "sparse"}, {time.Second, "burst"}, {100 * time.Millisecond, "busy"}}
	if r := os.Getenv("SLOTSYNC_BENCH_RHYTHM"); r != "" {
		runs = []run{{time.Second, r}}
	}
	gap := func(rhythm string, i int) time.Duration {
		switch {
		case rhythm == "sparse", rhythm == "burst" && i%5 == 4:
			return 2 * time.Second
		case rhythm == "burst":
			return 10 * time.Millisecond
		}
		return 100 * time.Millisecond
	}
	for _, r := range runs {
		interval, rhythm := r.interval, r.rhythm
		b.Run("interval="+interval.String()+"/"+rhythm, func(b *testing.B) {
			var conf []string
			if native {
				conf = []string{"sync_replication_slots = on"}
			}
			p, ctx := startPair(b, m, conf...)
			createSlots(b, ctx, p, 1, false) // s0000: slotsync
			if native {
				must(b, p.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('native', 'test_decoding', false, false, true)"))
			}
			e := engineEvery(b, p, false, b.TempDir(), interval)
			runCtx, stop := context.WithCancel(ctx)
			runDone := make(chan struct{})
			go func() { _ = e.Run(runCtx, nil); close(runDone) }()
			defer func() { stop(); <-runDone }() // the engine is closed only once Run returned
			lags := map[string]*[]time.Duration{"slotsync": {}, "postgres": {}}
			slots := map[string]string{"slotsync": "s0000", "postgres": "native"}
			want := 2
			if !native {
				delete(slots, "postgres")
				want = 1
			}
			warmUp(b, ctx, p, slots, want)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Write, consume, then time until each copy holds the consumer's position.
				must(b, p.Primary.Exec(ctx, "INSERT INTO t (v) SELECT 'x' FROM generate_series(1, 10)"))
				var wg stdsync.WaitGroup
				for who, slot := range slots {
					var target string
					must(b, p.Primary.QueryRow(ctx, "SELECT lsn::text FROM pg_logical_slot_get_changes($1, NULL, NULL) ORDER BY lsn DESC LIMIT 1", []any{slot}, &target))
					must(b, p.Primary.QueryRow(ctx, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", []any{slot}, &target))
					want, _ := lsncheck.ParseLSN(target)
					start := time.Now()
					wg.Add(1)
					go func(who, slot string) {
						defer wg.Done()
						for time.Since(start) < time.Minute {
							var s string
							if err := p.Standby.QueryRow(ctx, "SELECT coalesce(confirmed_flush_lsn, '0/0')::text FROM pg_replication_slots WHERE slot_name = $1", []any{slot}, &s); err == nil {
								if got, _ := lsncheck.ParseLSN(s); got >= want {
									*lags[who] = append(*lags[who], time.Since(start))
									return
								}
							}
							time.Sleep(5 * time.Millisecond)
						}
					}(who, slot)
				}
				wg.Wait()
				b.StopTimer()
				time.Sleep(gap(rhythm, i))
				b.StartTimer()
			}
			reportLags(b, interval, rhythm, slots, lags)
		})
	}
}

// warmUp waits until the standby holds both copies (slots, want of them: creation is
// BenchmarkTimeToReady's business), then gives them a few seconds of traffic: a new copy starts
// ahead of its consumer and is moved only by full passes until the consumer passes it.
func warmUp(b *testing.B, ctx context.Context, p *integration.Pair, slots map[string]string, want int) {
	b.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var n int
		must(b, p.Standby.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name IN ('s0000', 'native')", nil, &n))
		if n == want {
			break
		}
	}
	for warm := time.Now().Add(3 * time.Second); time.Now().Before(warm); time.Sleep(200 * time.Millisecond) {
		must(b, p.Primary.Exec(ctx, "INSERT INTO t (v) VALUES ('warm-up')"))
		for _, slot := range slots {
			must(b, p.Primary.Exec(ctx, "SELECT count(*) FROM pg_logical_slot_get_changes($1, NULL, NULL)", slot))
		}
	}
}

// reportLags logs every lag sample of each copy (for the plot in docs/BENCHMARKS.md,
// integration/bench/plotlag) and reports their median and 99th percentile.
func reportLags(b *testing.B, interval time.Duration, rhythm string, slots map[string]string, lags map[string]*[]time.Duration) {
	b.Helper()
	for _, who := range []string{"slotsync", "postgres"} {
		if _, ok := slots[who]; !ok {
			continue
		}
		d := *lags[who]
		ms := make([]string, len(d))
		for i, x := range d {
			ms[i] = strconv.FormatInt(x.Milliseconds(), 10)
		}
		// Every sample, for the plot in docs/BENCHMARKS.md (integration/bench/plotlag).
		b.Logf("lag-samples-ms %s %s %s: %s", interval, rhythm, who, strings.Join(ms, " "))
		b.ReportMetric(float64(percentile(d, 0.5).Milliseconds()), who+"-p50-ms")
		b.ReportMetric(float64(percentile(d, 0.99).Milliseconds()), who+"-p99-ms")
	}
}

// BenchmarkTimeToReady: from a new slot's creation on the primary, with an active consumer,
// until its standby copy is READY: slotsync (which asks the primary for running-xacts records)
// beside PostgreSQL 17's own sync.
func BenchmarkTimeToReady(b *testing.B) {
	m := major(b)
	withNative := m >= 17
	var conf []string
	if withNative {
		conf = []string{"sync_replication_slots = on"}
	}
	p, ctx := startPair(b, m, conf...)
	state := b.TempDir()
	e := engine(b, p, false, state)
	gate := engine(b, p, true, state)
	var ours, theirs []time.Duration
	for i := 0; i < b.N; i++ {
		for _, native := range []bool{false, true} {
			if native && !withNative {
				continue
			}
			name := fmt.Sprintf("ttr_%d_%v", i, native)
			start := time.Now()
			q := "SELECT pg_create_logical_replication_slot($1, 'test_decoding')"
			if native {
				q = "SELECT pg_create_logical_replication_slot($1, 'test_decoding', false, false, true)"
			}
			must(b, p.Primary.Exec(ctx, q, name))
			for {
				// The active consumer: writes and reads as it goes.
				must(b, p.Primary.Exec(ctx, "INSERT INTO t (v) VALUES ('x')"))
				must(b, p.Primary.Exec(ctx, "SELECT count(*) FROM pg_logical_slot_get_changes($1, NULL, NULL)", name))
				_, err := e.RunOnce(ctx)
				must(b, err)
				rep, err := gate.Inspect(ctx)
				must(b, err)
				ready := false
				for _, s := range rep.Slots {
					if s.Name == name && s.Verdict.Ready {
						ready = true
					}
				}
				if ready {
					break
				}
				if time.Since(start) > 2*time.Minute {
					b.Fatalf("%s never ready", name)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if native {
				theirs = append(theirs, time.Since(start))
			} else {
				ours = append(ours, time.Since(start))
			}
		}
	}
	b.ReportMetric(float64(percentile(ours, 0.5).Milliseconds()), "slotsync-p50-ms")
	b.ReportMetric(float64(percentile(ours, 0.99).Milliseconds()), "slotsync-max-ms")
	if withNative {
		b.ReportMetric(float64(percentile(theirs, 0.5).Milliseconds()), "postgres-p50-ms")
		b.ReportMetric(float64(percentile(theirs, 0.99).Milliseconds()), "postgres-max-ms")
	}
}

// BenchmarkSidecar: the real daemon at its defaults for 20 s over 10 and 1000 slots, idle or
// with busy consumers (one client confirming every slot as fast as it can, a write between
// rounds): resident memory and CPU time read from /proc, and the load its queries put on the
// primary (transactions per second in pg_stat_database, the consumers' own subtracted).
func BenchmarkSidecar(b *testing.B) {
	m := major(b)
	bin := filepath.Join(b.TempDir(), "slotsync")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/slotsync").CombinedOutput(); err != nil {
		b.Fatalf("%v %s", err, out)
	}
	for _, n := range []int{10, 1000} {
		for _, busy := range []bool{false, true} {
			b.Run(fmt.Sprintf("slots=%d/busy=%v", n, busy), func(b *testing.B) {
				p, ctx := startPair(b, m)
				createSlots(b, ctx, p, n, false)
				for i := 0; i < b.N; i++ {
					sidecarRun(b, ctx, p, bin, busy)
				}
			})
		}
	}
}

func sidecarRun(b *testing.B, ctx context.Context, p *integration.Pair, bin string, busy bool) {
	const secs = 20
	cmd := exec.Command(bin, "run", "--primary", p.Primary.DSN("postgres"), "--standby", p.Standby.DSN("postgres"),
		"--state-dir", b.TempDir(), "--listen", "", "--log-level", "warn", "--method", string(topology.MethodSQL))
	must(b, cmd.Start())
	time.Sleep(5 * time.Second) // the copies are made
	xacts := func() float64 {
		var x float64
		must(b, p.Primary.QueryRow(ctx, "SELECT sum(xact_commit + xact_rollback)::float8 FROM pg_stat_database", nil, &x))
		return x
	}
	stopConsumers := make(chan struct{})
	consumerXacts := make(chan float64, 1)
	go func() {
		own := 0.0
		defer func() { consumerXacts <- own }()
		if !busy {
			return
		}
		conn, err := p.Primary.Connect(ctx, "postgres")
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for {
			select {
			case <-stopConsumers:
				return
			default:
			}
			_, _ = conn.Exec(ctx, "INSERT INTO t (v) VALUES ('x')")
			_, _ = conn.Exec(ctx, "SELECT count(pg_replication_slot_advance(slot_name, pg_current_wal_lsn())) FROM pg_replication_slots WHERE slot_type = 'logical' AND NOT temporary")
			own += 2
			time.Sleep(100 * time.Millisecond)
		}
	}()
	cpuTicks := func() float64 { // user + system, in clock ticks (100 a second)
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		fields := strings.Fields(string(stat))
		utime, _ := strconv.ParseFloat(fields[13], 64)
		stime, _ := strconv.ParseFloat(fields[14], 64)
		return utime + stime
	}
	cpu0 := cpuTicks()
	x0 := xacts()
	time.Sleep(secs * time.Second)
	x1 := xacts()
	cpu1 := cpuTicks()
	close(stopConsumers)
	own := <-consumerXacts
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	var rssKB float64
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			rssKB, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	b.ReportMetric(rssKB/1024, "peak-rss-MiB")
	b.ReportMetric((cpu1-cpu0)/100/secs*100, "cpu-%")
	// Two reads of pg_stat_database are ours, not the sidecar's.
	b.ReportMetric((x1-x0-own-2)/secs, "primary-xacts/s")
}

// BenchmarkBulkCreate: 500 slots created on the primary at once, their consumers confirming as
// they go; the time from the last creation until every copy is READY, for the daemon at its
// defaults, beside PostgreSQL 17's own sync of 500 failover slots in the same run (17+). It
// also reports when every copy existed on the standby, and the floor rule 4 sets: when, for
// every slot, the primary's restart_lsn, confirmed_flush and catalog_xmin had reached the copy's
// (which only the consumers' confirmations move); what READY takes beyond that floor is the
// sidecar's own delay.
func BenchmarkBulkCreate(b *testing.B) {
	m := major(b)
	if m < 16 {
		b.Skip("the sql method needs PostgreSQL 16+")
	}
	const n = 500
	for i := 0; i < b.N; i++ {
		for _, native := range []bool{false, true} {
			if native && m < 17 {
				continue
			}
			who := map[bool]string{false: "slotsync", true: "postgres"}[native]
			b.Run(who, func(b *testing.B) {
				var conf []string
				if native {
					conf = []string{"sync_replication_slots = on"}
				}
				p, ctx := startPair(b, m, conf...)
				cfg := slotsync.Config{PrimaryDSN: p.Primary.DSN("postgres"), StandbyDSN: p.Standby.DSN("postgres"), StateDir: b.TempDir(),
					Logger: hclog.NewNullLogger()}
				e, err := slotsync.New(cfg)
				must(b, err)
				gcfg := cfg
				gcfg.ReadOnly = true
				gate, err := slotsync.New(gcfg)
				must(b, err)
				defer gate.Close()
				runCtx, stop := context.WithCancel(ctx)
				runDone := make(chan struct{})
				go func() { _ = e.Run(runCtx, nil); close(runDone) }()
				defer func() { stop(); <-runDone; e.Close() }()
				createSlots(b, ctx, p, n, native)
				start := time.Now()
				watchCtx, stopWatch := context.WithCancel(ctx)
				defer stopWatch()
				times := make(chan bulkTimes, 1)
				go func() { times <- watchBulk(watchCtx, p, gate, n, start) }()
				conn, err := p.Primary.Connect(ctx, "postgres")
				must(b, err)
				defer conn.Close(context.Background())
				rounds, roundTime := 0, time.Duration(0)
				var got bulkTimes
			consume:
				for {
					select {
					case got = <-times:
						break consume
					default:
					}
					if time.Since(start) > 3*time.Minute {
						b.Fatal("not every copy READY after 3 minutes")
					}
					// The consumers: a write, then every slot confirms all of it.
					r0 := time.Now()
					_, err := conn.Exec(ctx, "INSERT INTO t (v) VALUES ('x')")
					must(b, err)
					_, err = conn.Exec(ctx, "SELECT count(pg_replication_slot_advance(slot_name, pg_current_wal_lsn())) FROM pg_replication_slots WHERE slot_type = 'logical' AND NOT temporary")
					must(b, err)
					rounds++
					roundTime += time.Since(r0)
					time.Sleep(100 * time.Millisecond)
				}
				if got.err != nil {
					b.Fatal(got.err)
				}
				b.ReportMetric(got.ready.Seconds(), who+"-all-ready-s")
				b.ReportMetric(got.copies.Seconds(), who+"-all-copies-s")
				b.ReportMetric(got.floor.Seconds(), who+"-rule4-floor-s")
				b.ReportMetric(got.oldFloor.Seconds(), who+"-old-rule4-floor-s")
				b.ReportMetric((got.ready - got.floor).Seconds(), who+"-beyond-floor-s")
				b.ReportMetric(float64(rounds), who+"-consumer-rounds")
				b.ReportMetric(roundTime.Seconds()/float64(max(rounds, 1)), who+"-s/consumer-round")
			})
		}
	}
}

// bulkTimes are BenchmarkBulkCreate's moments, from the last slot's creation on the primary:
// every copy made; every consumer confirmed past its copy (floor: rule 4 cannot say READY
// before); every primary slot's restart_lsn, confirmed_flush and catalog_xmin past its copy's
// (oldFloor: what rule 4 waited for before it was rewritten, and what PostgreSQL 17's own sync
// waits for before a synced slot stops being temporary); every copy READY.
type bulkTimes struct {
	copies, floor, oldFloor, ready time.Duration
	err                            error
}

// watchBulk looks at both nodes and the gate every 100 ms until all n copies are READY: when
// each copy first existed, when the primary's positions first reached each copy's, when all
// were READY.
func watchBulk(ctx context.Context, p *integration.Pair, gate *slotsync.Engine, n int, start time.Time) bulkTimes {
	pconn, err := p.Primary.Connect(ctx, "postgres")
	if err != nil {
		return bulkTimes{err: err}
	}
	defer pconn.Close(context.Background())
	sconn, err := p.Standby.Connect(ctx, "postgres")
	if err != nil {
		return bulkTimes{err: err}
	}
	defer sconn.Close(context.Background())
	type pos struct {
		restart, confirmed lsncheck.LSN
		xmin               int64
	}
	list := func(c *pgx.Conn) (map[string]pos, error) {
		rows, err := c.Query(ctx, `SELECT slot_name::text, coalesce(restart_lsn, '0/0')::text, coalesce(confirmed_flush_lsn, '0/0')::text,
			coalesce(catalog_xmin::text, '0')::bigint FROM pg_replication_slots WHERE slot_type = 'logical' AND NOT temporary`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := map[string]pos{}
		for rows.Next() {
			var name, r, c string
			var x int64
			if err := rows.Scan(&name, &r, &c, &x); err != nil {
				return nil, err
			}
			rl, _ := lsncheck.ParseLSN(r)
			cl, _ := lsncheck.ParseLSN(c)
			out[name] = pos{rl, cl, x}
		}
		return out, rows.Err()
	}
	var t bulkTimes
	exists, reached, passed := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return bulkTimes{err: ctx.Err()}
		case <-time.After(100 * time.Millisecond):
		}
		copies, err := list(sconn)
		if err != nil {
			return bulkTimes{err: err}
		}
		prim, err := list(pconn)
		if err != nil {
			return bulkTimes{err: err}
		}
		now := time.Since(start)
		for name, c := range copies {
			if c.restart == 0 {
				continue
			}
			if !exists[name] {
				exists[name] = true
				if len(exists) == n {
					t.copies = now
				}
			}
			pr, ok := prim[name]
			if !passed[name] && ok && pr.confirmed >= c.confirmed {
				passed[name] = true
				if len(passed) == n {
					t.floor = now
				}
			}
			if !reached[name] && ok && pr.restart >= c.restart && pr.confirmed >= c.confirmed && pr.xmin >= c.xmin {
				reached[name] = true
				if len(reached) == n {
					t.oldFloor = now
				}
			}
		}
		rep, err := gate.Inspect(ctx)
		if err != nil {
			return bulkTimes{err: err}
		}
		ready := 0
		for _, s := range rep.Slots {
			if s.Gate && s.Verdict.Ready {
				ready++
			}
		}
		if ready == n {
			t.ready = time.Since(start)
			if t.floor == 0 || t.floor > t.ready {
				// READY before the benchmark saw the floor (both within one look): no delay beyond it.
				t.floor = t.ready
			}
			return t
		}
	}
}
