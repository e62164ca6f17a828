package examples

import (
	"context"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
)

// sidecar is the series one slotsync beside a standby serves, scraped by annotation-based
// discovery (job kubernetes-pods), in promqltest's load notation; ready is slotsync_slot_ready's
// samples, reason the not-ready reason series (if any), up the sidecar's scrapes.
func sidecar(ready, reason, up string) string {
	const slot = `job="kubernetes-pods",instance="pg-1:7461",slot="cdc",database="app",plugin="pgoutput"`
	s := "load 1m\n" +
		"  slotsync_slot_ready{" + slot + "} " + ready + "\n" +
		`  slotsync_node_is_primary{job="kubernetes-pods",instance="pg-1:7461"} 0x200` + "\n" +
		// The sidecar's own series stop when its scrapes fail.
		`  slotsync_build_info{job="kubernetes-pods",instance="pg-1:7461",version="v1"} ` + strings.ReplaceAll(up, "0x", "_x") + "\n" +
		`  up{job="kubernetes-pods",instance="pg-1:7461"} ` + up + "\n"
	if reason != "" {
		s += "  slotsync_slot_not_ready_reason{" + slot + "," + reason + "\n"
	}
	return s
}

// TestAlertsFireWhenTheyShould evaluates the shipped rules with Prometheus's own rule engine,
// minute by minute over synthetic series: normal onboarding (a new copy NOT READY until its
// consumer confirms, for hours) pages nobody; a copy that was READY and is no longer pages; a
// reason only a human fixes pages; SlotsyncDown fires under annotation-based scraping, and not
// for a target that never was slotsync.
func TestAlertsFireWhenTheyShould(t *testing.T) {
	cases := []struct {
		name   string
		load   string
		at     time.Duration
		firing []string // exactly these alerts fire at the end
	}{
		{"onboarding: a new copy waits 90 minutes for its consumer",
			sidecar("0x200", `reason="copy_confirmed_flush_ahead"} 1x200`, "1x200"), 90 * time.Minute, nil},
		{"onboarding that never ends is a warning after 2 hours",
			sidecar("0x200", `reason="copy_confirmed_flush_ahead"} 1x200`, "1x200"), 150 * time.Minute, []string{"SlotsyncCopyNotReady"}},
		{"a copy READY for half an hour, then NOT READY for 10 minutes",
			sidecar("1x30 0x170", `reason="copy_catalog_unprotected"} _x30 1x170`, "1x200"), 40 * time.Minute, []string{"SlotsyncCopyNoLongerReady"}},
		{"a consumer makes its slot again (a re-snapshot): its new copy waits for it, as in onboarding",
			sidecar("1x30 0x170", `reason="copy_confirmed_flush_ahead"} _x30 1x170`, "1x200"), 60 * time.Minute, nil},
		{"a standby slot made there on purpose (decoding on a standby, 16+) pages nobody by default",
			sidecar("1x200", "", "1x200") + `  slotsync_left_alone_slots{job="kubernetes-pods",instance="pg-1:7461",made_by="other"} 1x200` + "\n", 180 * time.Minute, nil},
		{"a copy slotsync made and no longer syncs",
			sidecar("1x200", "", "1x200") + `  slotsync_left_alone_slots{job="kubernetes-pods",instance="pg-1:7461",made_by="slotsync"} 1x200` + "\n", 90 * time.Minute, []string{"SlotsyncLeftAloneSlots"}},
		{"the gate closed with no copy NOT READY to say why (CANNOT TELL, an error, nothing judged)",
			sidecar("1x200", "", "1x200") + `  slotsync_promotion_ready{job="kubernetes-pods",instance="pg-1:7461"} 1x20 0x180` + "\n", 40 * time.Minute, []string{"SlotsyncGateClosed"}},
		{"the gate closed by an onboarding copy: the per-slot rules speak",
			sidecar("0x200", `reason="copy_confirmed_flush_ahead"} 1x200`, "1x200") + `  slotsync_promotion_ready{job="kubernetes-pods",instance="pg-1:7461"} 0x200` + "\n", 90 * time.Minute, nil},
		{"a copy that cannot decode",
			sidecar("0x200", `reason="copy_cannot_decode"} 1x200`, "1x200"), 20 * time.Minute, []string{"SlotsyncCopyNeedsAHuman"}},
		{"the sidecar stops answering its scrapes",
			sidecar("1x20 _x180", "", "1x20 0x180"), 30 * time.Minute, []string{"SlotsyncDown"}},
		{"a standby's copy holds ever more WAL",
			sidecar("1x200", "", "1x200") + `  slotsync_slot_retained_wal_bytes{job="kubernetes-pods",instance="pg-1:7461",slot="cdc",database="app",plugin="pgoutput",node="local"} 9663676416+10485760x200` + "\n",
			60 * time.Minute, []string{"SlotsyncRetainedWALGrowing"}},
		{"the primary's slot holds ever more WAL: postgres_exporter's business, not this rule's",
			sidecar("1x200", "", "1x200") + `  slotsync_slot_retained_wal_bytes{job="kubernetes-pods",instance="pg-1:7461",slot="cdc",database="app",plugin="pgoutput",node="upstream"} 9663676416+10485760x200` + "\n",
			60 * time.Minute, nil},
		{"another pod of the shared job is down: not slotsync",
			sidecar("1x200", "", "1x200") + `  up{job="kubernetes-pods",instance="web-1:8080"} 0x200` + "\n", 30 * time.Minute, nil},
	}
	alerts := loadAlerts(t, "prometheus/slotsync-alerts.yml")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			storage := promqltest.LoadedStorage(t, c.load)
			engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
			var firing []string
			for _, a := range alerts {
				if a.firesAt(t, engine, storage, c.at) {
					firing = append(firing, a.name)
				}
			}
			want := append([]string(nil), c.firing...)
			slices.Sort(want)
			slices.Sort(firing)
			if !slices.Equal(firing, want) {
				t.Errorf("at %s firing %v, want %v", c.at, firing, want)
			}
		})
	}
}

// TestOptionalAlerts: a standby slot slotsync did not make warns after an hour once the optional
// rules are loaded.
func TestOptionalAlerts(t *testing.T) {
	load := sidecar("1x200", "", "1x200") + `  slotsync_left_alone_slots{job="kubernetes-pods",instance="pg-1:7461",made_by="other"} 0x30 1x170` + "\n"
	storage := promqltest.LoadedStorage(t, load)
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	for _, a := range loadAlerts(t, "prometheus/slotsync-alerts-optional.yml") {
		for at, want := range map[time.Duration]bool{60 * time.Minute: false, 100 * time.Minute: true} {
			if got := a.firesAt(t, engine, storage, at); got != want {
				t.Errorf("%s at %s: firing %v, want %v", a.name, at, got, want)
			}
		}
	}
}

// TestSlotInfoJoinsPostgresExporter evaluates the joins docs/CLI.md gives between slotsync's
// series and postgres_exporter's (which names a slot slot_name), as written there, over two
// standbys' sidecars and one exporter beside the primary: each gives one row per series it
// starts from, with the other's label added.
func TestSlotInfoJoinsPostgresExporter(t *testing.T) {
	doc, err := os.ReadFile("../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	joins := regexp.MustCompile("`([^`]*slotsync_slot_info\\)[^`]*)`").FindAllStringSubmatch(string(doc), -1)
	if len(joins) != 2 {
		t.Fatalf("docs/CLI.md gives %d joins on slotsync_slot_info, want 2 (one each way)", len(joins))
	}
	var load strings.Builder
	load.WriteString("load 1m\n")
	for _, pod := range []string{"pg-1:7461", "pg-2:7461"} {
		slot := `job="kubernetes-pods",instance="` + pod + `",slot="cdc",database="app",plugin="pgoutput"`
		load.WriteString("  slotsync_slot_info{" + slot + `,slot_name="cdc"} 1x10` + "\n")
		load.WriteString("  slotsync_slot_ready{" + slot + "} 1x10\n")
	}
	load.WriteString(`  pg_replication_slot_slot_is_active{job="postgres",instance="pg-0:9187",slot_name="cdc",plugin="pgoutput",slot_type="logical"} 1x10` + "\n")
	storage := promqltest.LoadedStorage(t, load.String())
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	for _, j := range joins {
		expr := j[1]
		from, added, rows := "pg_replication_slot_slot_is_active", "slot", 1
		if strings.HasPrefix(expr, "slotsync_") {
			from, added, rows = "slotsync_slot_ready", "slot_name", 2
		}
		q, err := engine.NewInstantQuery(context.Background(), storage, nil, expr, time.Unix(0, 0).Add(5*time.Minute))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		res := q.Exec(context.Background())
		if res.Err != nil {
			t.Fatalf("%s: %v", expr, res.Err)
		}
		vec, _ := res.Vector()
		if len(vec) != rows {
			t.Errorf("%s: %d rows, want %d (one per %s series)", expr, len(vec), rows, from)
		}
		for _, s := range vec {
			if s.Metric.Get(added) != "cdc" || s.F != 1 {
				t.Errorf("%s: row %s = %v, want %s=\"cdc\" and 1", expr, s.Metric, s.F, added)
			}
		}
		q.Close()
	}
}

// alert is one shipped rule: its expression and how long it must hold before firing.
type alert struct {
	name string
	expr string
	hold time.Duration
}

// firesAt evaluates the rule every minute from the start, as Prometheus's rule manager does:
// it fires at the end when some series of its expression was present at every evaluation of
// the last hold.
func (a alert) firesAt(t *testing.T, engine *promql.Engine, storage storage.Queryable, end time.Duration) bool {
	t.Helper()
	since := map[string]time.Duration{} // series -> first evaluation of its current streak
	for ts := time.Duration(0); ts <= end; ts += time.Minute {
		q, err := engine.NewInstantQuery(context.Background(), storage, nil, a.expr, time.Unix(0, 0).Add(ts))
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		res := q.Exec(context.Background())
		if res.Err != nil {
			t.Fatalf("%s: %v", a.name, res.Err)
		}
		vec, _ := res.Vector()
		present := map[string]bool{}
		for _, s := range vec {
			k := s.Metric.String()
			present[k] = true
			if _, ok := since[k]; !ok {
				since[k] = ts
			}
		}
		for k := range since {
			if !present[k] {
				delete(since, k)
			}
		}
		q.Close()
	}
	for _, start := range since {
		if end-start >= a.hold {
			return true
		}
	}
	return false
}

// loadAlerts parses shipped rules as Prometheus does.
func loadAlerts(t *testing.T, file string) []alert {
	t.Helper()
	groups, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var out []alert
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			out = append(out, alert{name: r.Alert, expr: r.Expr, hold: time.Duration(r.For)})
		}
	}
	return out
}
