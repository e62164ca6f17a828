package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
	slotsync "github.com/slotsync/slotsync/sync"
	"github.com/slotsync/slotsync/topology"
)

// awayBound is how long BenchmarkTimeToReadyAway waits for a copy to become READY, after the
// way's --exact-copy-after bound.
const awayBound = 60 * time.Second

// BenchmarkTimeToReadyAway: time to READY of a slot whose consumer confirmed some changes and
// went away before its copy was made, with more changes written since (16+). Copies of such
// slots on one standby: slotsync's state-file method (an exact copy of the primary's slot,
// loaded by a standby restart), slotsync's sql method (the standby's own decoding), the sql
// method with --exact-copy-after 5s and 30s (its own copy, replaced by an exact one that much
// later: 30 s is the shortest bound CLI.md recommends, past the standby's first feedback) and,
// on 17+, PostgreSQL's own slot sync of a failover slot; each judged by slotsync's gate, each
// given awayBound after its bound. A copy that is not READY by then counts as the bound, and the number of
// such copies is printed.
func BenchmarkTimeToReadyAway(b *testing.B) {
	m := major(b)
	if m < 16 {
		b.Skip("a standby holds logical slots of its own from 16")
	}
	withNative := m >= 17
	var conf []string
	if withNative {
		conf = []string{"sync_replication_slots = on"}
	}
	p, ctx := startPair(b, m, conf...)
	// Each way's engine applies: for the server's sync (native) it makes no copy of a failover
	// slot, but records what the gate needs of the server's copy (its catalog rows seen kept).
	type way struct {
		name   string
		method topology.Method
		exact  time.Duration // --exact-copy-after
	}
	ways := []way{{"statefile", topology.MethodStatefile, 0}, {"sql", topology.MethodSQL, 0}, {"sql_exact_after_5s", topology.MethodSQL, 5 * time.Second},
		{"sql_exact_after_30s", topology.MethodSQL, 30 * time.Second}}
	if withNative {
		ways = append(ways, way{"postgres", topology.MethodNative, 0})
	}
	took := map[string][]time.Duration{}
	never := map[string]int{}
	for i := 0; i < b.N; i++ {
		for _, w := range ways {
			slot := fmt.Sprintf("away_%s_%d", w.name, i)
			q := "SELECT pg_create_logical_replication_slot($1, 'test_decoding')"
			if w.method == topology.MethodNative {
				q = "SELECT pg_create_logical_replication_slot($1, 'test_decoding', false, false, true)"
			}
			must(b, p.Primary.Exec(ctx, q, slot))
			for range 3 { // the consumer confirms some changes, then goes away
				must(b, p.Primary.Exec(ctx, "INSERT INTO t (v) VALUES ('x')"))
				must(b, p.Primary.Exec(ctx, "SELECT pg_log_standby_snapshot()"))
				must(b, p.Primary.Exec(ctx, "SELECT count(*) FROM pg_logical_slot_get_changes($1, NULL, NULL)", slot))
			}
			must(b, p.Primary.Exec(ctx, "INSERT INTO t (v) SELECT 'away' FROM generate_series(1, 100)"))
			d, ok := timeToReadyAway(b, ctx, p, w.method, w.exact, slot)
			if !ok {
				never[w.name]++
			}
			took[w.name] = append(took[w.name], d)
		}
	}
	for _, w := range ways {
		b.ReportMetric(float64(percentile(took[w.name], 0.5).Milliseconds()), w.name+"-p50-ms")
		b.ReportMetric(float64(percentile(took[w.name], 1).Milliseconds()), w.name+"-max-ms")
		b.ReportMetric(float64(never[w.name]), w.name+"-not-ready-60s-after-bound")
	}
}

// timeToReadyAway runs passes of an engine of method m selecting slot alone until the gate
// beside it says READY, or awayBound after the exact bound.
func timeToReadyAway(b *testing.B, ctx context.Context, p *integration.Pair, m topology.Method, exact time.Duration, slot string) (time.Duration, bool) {
	b.Helper()
	cfg := benchConfig(p, b.TempDir(), 100*time.Millisecond)
	cfg.Method, cfg.Select, cfg.ExactCopyAfter = m, slotsync.Selection{Patterns: []string{slot}}, exact
	gateCfg := cfg
	gateCfg.ReadOnly = true
	e, err := slotsync.New(cfg)
	must(b, err)
	defer e.Close()
	gate, err := slotsync.New(gateCfg)
	must(b, err)
	defer gate.Close()
	start := time.Now()
	last := "no verdict"
	for time.Since(start) < exact+awayBound {
		must(b, p.Primary.Exec(ctx, "SELECT pg_log_standby_snapshot()"))
		if _, err := e.RunOnce(ctx); err != nil {
			b.Logf("%s pass: %v", m, err) // a pass beside a standby restart may fail: the next one goes on
		}
		if rep, err := gate.Inspect(ctx); err == nil {
			for _, s := range rep.Slots {
				if s.Name == slot && s.Verdict.Ready {
					return time.Since(start), true
				} else if s.Name == slot {
					last = s.Verdict.Detail
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	var row string
	_ = p.Standby.QueryRow(ctx, "SELECT format('%s %s %s', catalog_xmin, confirmed_flush_lsn, to_jsonb(s) - 'slot_name') FROM pg_replication_slots s WHERE slot_name = $1",
		[]any{slot}, &row)
	b.Logf("%s: %s not READY after %s: %s (the standby's slot: %s)", m, slot, exact+awayBound, last, row)
	return exact + awayBound, false
}
