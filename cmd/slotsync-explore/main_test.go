package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slotsync/slotsync/integration/explore"
	"github.com/slotsync/slotsync/integration/pgtest"
)

func explorer(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), append([]string{"slotsync-explore"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

func TestUsageErrorsChangeNothing(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--major", "10"}, "--major 10"},
		{[]string{"run", "--iterations", "0"}, "--iterations"},
		{[]string{"run", "--plan", "/nonexistent/plans.jsonl"}, "--plan"},
		{[]string{"run", "--slotsync", "/nonexistent/slotsync"}, "--slotsync"},
		{[]string{"run", "extra"}, "no arguments"},
		{[]string{"tally"}, "at least one report"},
		{[]string{"tally", "--by", "week", "x"}, "--by"},
		{[]string{"run", "--log-level", "loud", "--slotsync", "/bin/true"}, "--log-level"},
	} {
		_, stderr, code := explorer(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want %d naming %q: %s", c.args, code, exitUsage, c.want, stderr)
		}
	}
}

// TestPlanWithAFailpointNeedsAFailpointBuild: a written plan that stops slotsync at a failpoint
// is refused for a binary built without them, naming the build that has them, and nothing runs.
func TestPlanWithAFailpointNeedsAFailpointBuild(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "plans.jsonl")
	if err := os.WriteFile(plan, []byte(`{"name":"crash-then-kill","live":3000000000,"failpoint":"engine.actions-done@1","kill":true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable() // a Go binary built without the tag failpoints
	if err != nil {
		t.Fatal(err)
	}
	_, stderr, code := explorer(t, "run", "--plan", plan, "--slotsync", self)
	if code != exitUsage || !strings.Contains(stderr, "-tags failpoints") {
		t.Fatalf("exit %d, want %d naming the failpoints build: %s", code, exitUsage, stderr)
	}
	// Gate mutants asked beside the gate need that build too.
	_, stderr, code = explorer(t, "run", "--shadows", "seen-unchecked", "--slotsync", self)
	if code != exitUsage || !strings.Contains(stderr, "--shadows") || !strings.Contains(stderr, "-tags failpoints") {
		t.Fatalf("--shadows: exit %d, want %d naming the failpoints build: %s", code, exitUsage, stderr)
	}
	if explore.HasFailpoints(self) {
		t.Fatal("the test binary taken for a failpoints build")
	}
}

func TestTallySumsReports(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.jsonl")
	its := []explore.ChaosIteration{
		{Number: 1, Major: 17, Method: "sql", Faults: []explore.Fault{explore.FaultSidecarKill},
			Judged: []explore.Judged{{Slot: "a", Answer: explore.AnswerReady, Binding: true}}},
		{Number: 2, Major: 16, Method: "sql", Judged: []explore.Judged{{Slot: "a", Answer: explore.AnswerReady, Binding: true, Lie: true, Lost: 3}}},
	}
	b := writeReport(t, path, its)
	out, stderr, code := explorer(t, "tally", "--by", "major", path)
	if code != 0 || !strings.Contains(out, "\n2 failovers\n") || !strings.Contains(out, "| 16 ") || !strings.Contains(out, "| 17 ") {
		t.Fatalf("tally: exit %d\n%s%s", code, out, stderr)
	}
	if err := os.WriteFile(path, append(b, "{damaged\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = explorer(t, "tally", path)
	if code != exitFailed || !strings.Contains(stderr, "2 iterations read before it") || !strings.Contains(out, "\n2 failovers\n") {
		t.Fatalf("tally of a damaged report: exit %d\n%s%s", code, out, stderr)
	}
}

// writeReport writes its to path as a report (JSON lines) and returns the bytes.
func writeReport(t *testing.T, path string, its []explore.ChaosIteration) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, it := range its {
		line, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestTallyRejudges: --rejudge judges each answer again by this build's oracle, from the
// figures the report keeps, and names each verdict that changed.
func TestTallyRejudges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.jsonl")
	// Judged by an older oracle: a READY whose consumer was ahead of the standby though the
	// answer ruled that out, not called a lie; and a lie that is one still.
	its := []explore.ChaosIteration{
		{Number: 1, Seed: 7, Major: 17, Method: "sql", Judged: []explore.Judged{{Slot: "a", Asked: "asked without the primary", Answer: explore.AnswerReady,
			Binding: true, Ahead: 4, AheadPromised: true}}},
		{Number: 2, Seed: 8, Major: 17, Method: "sql", Judged: []explore.Judged{{Slot: "a", Answer: explore.AnswerReady, Binding: true, Lie: true, Lost: 3}}},
	}
	writeReport(t, path, its)
	out, stderr, code := explorer(t, "tally", "--rejudge", "--by", "major", path)
	if code != 0 || !strings.Contains(out, "1 verdicts changed") || !strings.Contains(out, "iteration 1 (seed 7), a asked without the primary: not a lie, now a lie") ||
		!strings.Contains(out, "| 17 | sql | all | 2 | 2 | 2 |") {
		t.Fatalf("tally --rejudge: exit %d\n%s%s", code, out, stderr)
	}
	out, _, _ = explorer(t, "tally", "--by", "major", path)
	if strings.Contains(out, "judged again") || !strings.Contains(out, "| 17 | sql | all | 2 | 2 | 1 |") {
		t.Fatalf("tally without --rejudge judged again:\n%s", out)
	}
}

// TestRunJudgesTheGate runs the explorer as a user would, with a slotsync binary built from this
// tree, and reads what it says per failover.
func TestRunJudgesTheGate(t *testing.T) {
	pgtest.ForEachMajor(t, []int{17}, func(t *testing.T, major int) {
		dir := t.TempDir()
		bin := filepath.Join(dir, "slotsync")
		if out, err := exec.Command("go", "build", "-o", bin, "../slotsync").CombinedOutput(); err != nil {
			t.Fatalf("build slotsync: %v\n%s", err, out)
		}
		report := filepath.Join(dir, "report.jsonl")
		args := []string{"run", "--major", fmt.Sprint(major), "--seed", "11", "--iterations", "1", "--slotsync", bin, "--log-level", "warn"}
		stdout, stderr, code := explorer(t, append(args, "--json", "--report", report)...)
		var rep struct {
			OK         bool  `json:"ok"`
			Seed       int64 `json:"seed"`
			Iterations []struct {
				Seed   int64 `json:"seed"`
				Major  int   `json:"major"`
				Judged []struct {
					Answer string `json:"answer"`
				} `json:"judged"`
			} `json:"iterations"`
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("run --json: %v\n%s\n%s", err, stdout, stderr)
		}
		if code != 0 || !rep.OK || rep.Seed != 11 || len(rep.Iterations) != 1 || rep.Iterations[0].Major != major ||
			len(rep.Iterations[0].Judged) != 4 {
			t.Fatalf("run: exit %d %+v\n%s", code, rep, stderr)
		}
		// The report replays: the same plan again, written, prints the text report.
		stdout, stderr, code = explorer(t, "run", "--major", fmt.Sprint(major), "--plan", report, "--slotsync", bin, "--log-level", "warn")
		if code != 0 || !strings.Contains(stdout, "the gate was right") || !strings.Contains(stdout, fmt.Sprintf("draw %d (replay", explore.DrawVersion)) {
			t.Fatalf("run --plan: exit %d\n%s%s", code, stdout, stderr)
		}
	})
}
