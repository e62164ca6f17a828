package examples

import (
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// exposedMetrics are the metric names slotsync's /metrics serves (read from its source), with
// the series a histogram adds and Prometheus's own up.
func exposedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile("../cmd/slotsync/metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{"up": true}
	for _, m := range regexp.MustCompile(`Name: "(slotsync_[a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		names[m[1]] = true
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			names[m[1]+suffix] = true
		}
	}
	if len(names) < 10 {
		t.Fatalf("found only %v in metrics.go", names)
	}
	return names
}

// checkExpr parses a PromQL expression and checks that every metric it selects is one slotsync
// serves.
func checkExpr(t *testing.T, where, expr string, known map[string]bool) {
	t.Helper()
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q: %v", where, expr, err)
		return
	}
	selected := 0
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			selected++
			if !known[vs.Name] {
				t.Errorf("%s: %q selects %s, which slotsync does not serve", where, expr, vs.Name)
			}
		}
		return nil
	})
	if selected == 0 {
		t.Errorf("%s: %q selects no metric", where, expr)
	}
}

// TestAlertRules: the alerting rules parse and validate as Prometheus loads them (rulefmt:
// YAML, PromQL, templates), cover what operators page on, and select only metrics slotsync
// serves.
func TestAlertRules(t *testing.T) {
	known := exposedMetrics(t)
	alerts := map[string]bool{}
	for _, file := range []string{"prometheus/slotsync-alerts.yml", "prometheus/slotsync-alerts-optional.yml"} {
		groups, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
		for _, err := range errs {
			t.Error(err)
		}
		if groups == nil {
			t.FailNow()
		}
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				alerts[r.Alert] = true
				checkExpr(t, r.Alert, r.Expr, known)
				if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
					t.Errorf("%s: needs a severity label and a summary", r.Alert)
				}
			}
		}
	}
	for _, want := range []string{"SlotsyncCopyNoLongerReady", "SlotsyncCopyNeedsAHuman", "SlotsyncCopyNotReady", "SlotsyncDown", "SlotsyncSyncLagHigh", "SlotsyncConsumerAheadOfStandby",
		"SlotsyncPassesFailing", "SlotsyncRetainedWALGrowing", "SlotsyncGateClosed", "SlotsyncGateRecordStale", "SlotsyncNothingSelected", "SlotsyncOtherStandbySlots"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
}

// TestDashboard: the Grafana dashboard is valid JSON with a stable uid, every panel queries the
// data source variable, and every query parses and selects only metrics slotsync serves.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile("grafana/slotsync-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID           string `json:"uid"`
		SchemaVersion int    `json:"schemaVersion"`
		Panels        []struct {
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.SchemaVersion == 0 || len(d.Panels) < 8 {
		t.Fatalf("dashboard: uid %q, schemaVersion %d, %d panels", d.UID, d.SchemaVersion, len(d.Panels))
	}
	known := exposedMetrics(t)
	for _, p := range d.Panels {
		if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: data source %q, %d queries", p.Title, p.Datasource.UID, len(p.Targets))
		}
		for _, q := range p.Targets {
			// Grafana's variables are interpolated before Prometheus sees the query.
			checkExpr(t, p.Title, strings.ReplaceAll(q.Expr, "$instance", ".*"), known)
		}
	}
}
