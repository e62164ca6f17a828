package explore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/lsncheck"
)

// mutantSample is the part of the mutation matrix CI runs: a mutant, the major it runs on, and
// the plan that caught it in the whole matrix (docs/RELIABILITY.md): a MatrixPlans name, or a
// seed drawn under DrawVersion. An entry stays only while its plan kills the mutant whatever the
// timing: one whose kill depends on it fails CI for changes that have nothing to do with it, and
// leaves for the long runs (docs/RELIABILITY.md, "CI's sample").
var mutantSample = []struct {
	name  string
	major int
	plan  string
	seed  int64
}{
	// Each entry was killed in 10 of 10 runs on a quiet machine and in 5 of 5 beside a second
	// load, the gate as built passing its plan each time (scripts/sample-measure.sh; results 53,
	// 54, 55 and 58). The entries that were not measured so, or missed, left for the long runs
	// (docs/RELIABILITY.md, "CI's sample").
	//
	// Rule 1 with the primary: a slot dropped (slotsync drops its copy) and made again while
	// slotsync is paused; a hook promotes at the first READY.
	{name: "readiness:missing", major: 17, plan: "hook-slot-made-again"},
	// Rule 8: slotsync's route to the primary cut, a slot copied again behind its copy two
	// seconds later, the primary stopped cleanly a second and a half after, within the record's
	// renewal: only the note of slotsync's last pass shows the primary outlived it.
	{name: "seen-unchecked", major: 17, plan: "route-cut-slot-behind-then-stop"},
	// Rule 4f: slotsync killed -9 between an exact copy's decision and the copy; the journal
	// read back must name the own copy, or the copy is never replaced (NOT READY in the quiet
	// window: liveness).
	{name: "exact-intent-early", major: 16, plan: "exact-copy-decided-then-crash"},
	// Rule 8's WAL: the standby's max_slot_wal_keep_size no longer covers the copies, a kill
	// right after the segments were switched, the writes stopped just after slotsync's pause so
	// that the primary commits nothing past the note of its last pass.
	{name: "without:copy_wal_missing", major: 18, plan: "copy-wal-beyond-limit-then-kill"},
	// Rule 8c: the hook's question (--for-promotion) asked while the old primary is alive and
	// read-write; a READY is a lie at the instant. Rule 8: the primary demoted to follow a
	// second standby promoted meanwhile, its upstream not streaming yet at the question; a READY
	// judged without the primary at once, while the second one is read-write, is a lie at the
	// instant.
	{name: "for-promotion-unchecked", major: 17, plan: "hook-for-promotion-primary-writable"},
	{name: "upstream-pending-unchecked", major: 17, plan: "demoted-to-sibling-promoted"},
}

// samplePlan is the plan a sample entry names.
func samplePlan(t *testing.T, name string, seed int64) Plan {
	if name == "" {
		return DrawPlan(seed, true)
	}
	for _, p := range MatrixPlans() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no matrix plan %q", name)
	return Plan{}
}

// mutantRun is a mutant TestMutationMatrix runs, and on what.
type mutantRun struct {
	name  string
	plans []string // the written plans for it (Mutant.Plans)
	seed  int64
	// only: the sample's plan (nil: the matrix plans, then drawn seeds from seed)
	only *Plan
}

// mutantRuns are the mutants TestMutationMatrix runs on major: those SLOTSYNC_MUTANTS names
// (want; "all": every one), their drawn plans from seed first, or with want empty CI's sample.
func mutantRuns(t *testing.T, want string, first int64, major int) []mutantRun {
	var out []mutantRun
	for _, m := range Mutants() {
		if (want == "all" || slices.Contains(strings.Split(want, ","), m.Name)) && (m.Majors == nil || slices.Contains(m.Majors, major)) {
			out = append(out, mutantRun{name: m.Name, plans: m.Plans, seed: first})
		}
	}
	for _, s := range mutantSample {
		if want == "" && s.major == major {
			p := samplePlan(t, s.plan, s.seed)
			out = append(out, mutantRun{name: s.name, seed: s.seed, only: &p})
		}
	}
	return out
}

// TestMutationMatrix runs the fault explorer against slotsync builds with one safety check of
// the gate switched off (Mutants), each on the plans written for its rule (Mutant.Plans), then
// on SLOTSYNC_MUTANT_SEEDS drawn plans (default 4), until a plan catches it (a READY while loss,
// or a problem). Without SLOTSYNC_MUTANTS it runs mutantSample, and each must be caught;
// SLOTSYNC_MUTANTS=all (or a comma-separated list) runs those on every requested major and
// reports what caught each, or that nothing did; SLOTSYNC_MUTANT_PLANS=all runs every written
// plan for each mutant, a list those, none only the drawn ones.
func TestMutationMatrix(t *testing.T) {
	pgtest.Slow(t)
	seeds := int64(4)
	if s := os.Getenv("SLOTSYNC_MUTANT_SEEDS"); s != "" {
		seeds, _ = strconv.ParseInt(s, 10, 64)
	}
	first := int64(7100)
	if s := os.Getenv("SLOTSYNC_CHAOS_SEED"); s != "" {
		first, _ = strconv.ParseInt(s, 10, 64)
	}
	want := os.Getenv("SLOTSYNC_MUTANTS")
	var majors []int
	if want == "" {
		for _, s := range mutantSample {
			if !slices.Contains(majors, s.major) {
				majors = append(majors, s.major) // each major once: it runs every sample entry of its own
			}
		}
		if len(majors) == 0 {
			t.Skip("no mutant in the sample")
		}
	}
	pgtest.ForEachMajor(t, majors, func(t *testing.T, major int) {
		bin := failpointSlotsync(t)
		for _, r := range mutantRuns(t, want, first, major) {
			t.Run(r.name, func(t *testing.T) {
				t.Setenv("SLOTSYNC_MUTANT", r.name)
				killedBy := ""
				// The plans written for its rule first (SLOTSYNC_MUTANT_PLANS=all: every written
				// plan; a list: those), then drawn seeds.
				var plans []Plan
				switch names := os.Getenv("SLOTSYNC_MUTANT_PLANS"); {
				case names == "all":
					plans = MatrixPlans()
				case names == "none":
					// Drawn plans only: what the explorer catches without a plan written for it.
				case names != "":
					plans = matrixPlans(t, names)
				case len(r.plans) > 0:
					plans = matrixPlans(t, strings.Join(r.plans, ","))
				}
				for seed := r.seed; seed < r.seed+seeds; seed++ {
					plans = append(plans, DrawPlan(seed, true))
				}
				if r.only != nil {
					// Two runs of the sample's plan: its window is timing's, and in a run
					// another rule may hold the mutant (record-outlived on 17 once:
					// consumer_ahead_of_standby without the primary; RELIABILITY.md).
					plans = []Plan{*r.only, *r.only}
				}
				if r.only != nil {
					// The sample: its plan must pass with the gate as built, or a kill means
					// nothing.
					t.Setenv("SLOTSYNC_MUTANT", "")
					if it := runPlan(t, bin, major, *r.only); !it.OK {
						t.Fatalf("the gate as built fails the sample's plan: %s", killReason(it))
					}
					t.Setenv("SLOTSYNC_MUTANT", r.name)
				}
				var skipped []string // the faults the runs could not apply: a miss may be theirs
				for i, plan := range plans {
					if killedBy != "" {
						break
					}
					it := runPlan(t, bin, major, plan)
					if !it.OK {
						killedBy = fmt.Sprintf("plan %d of %d: %s: %s", i+1, len(plans), it.Plan, killReason(it))
					}
					skipped = append(skipped, it.Skipped...)
				}
				t.Logf("MUTANT %s pg%d: killed=%v %s", r.name, major, killedBy != "", killedBy)
				if killedBy == "" && want == "" {
					t.Errorf("mutant %s on %d was not caught by %s; faults skipped in its runs: %q", r.name, major,
						map[bool]string{true: "its sample plan", false: fmt.Sprintf("the written plans nor %d drawn from seed %d", seeds, r.seed)}[r.only != nil], skipped)
				}
			})
		}
	})
}

// runPlan runs one plan of the explorer on a new pair of major and logs what it saw.
func runPlan(t *testing.T, bin string, major int, plan Plan) ChaosIteration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	rep, err := Chaos(ctx, ChaosOptions{Plans: []Plan{plan}, Slotsync: bin, Arm: crashAt, StateDir: t.TempDir(),
		NewPair: func(ctx context.Context) (*integration.Pair, error) {
			return integration.NewPair(ctx, integration.Options{Major: major, Backend: os.Getenv(integration.EnvBackend), Conf: ChaosConf})
		}})
	if err != nil {
		t.Fatal(err)
	}
	it := rep.Iterations[0]
	t.Logf("%s (SLOTSYNC_MUTANT=%q)\n  ok %v, answers %s, problems %q", it.Plan, os.Getenv("SLOTSYNC_MUTANT"), it.OK, answers(it), it.Problems)
	if len(it.Skipped) > 0 {
		t.Logf("  skipped: %q", it.Skipped)
	}
	if len(it.HookAnswers) > 0 {
		t.Logf("  the hook asked %d times: first %q, last %q", len(it.HookAnswers), it.HookAnswers[0], it.HookAnswers[len(it.HookAnswers)-1])
	}
	return it
}

// killReason says what caught a mutant: the lies and problems of the iteration.
func killReason(it ChaosIteration) string {
	var why []string
	for _, j := range it.Judged {
		if j.Lie {
			why = append(why, fmt.Sprintf("%s %s: %s", j.Slot, j.Asked, j.Why))
		}
	}
	return strings.Join(append(why, it.Problems...), "; ")
}

// TestMutantsAreTheCodes: every NOT READY reason is in the matrix, and every named mutant is one
// the code can switch off.
func TestMutantsAreTheCodes(t *testing.T) {
	src := ""
	for _, f := range []string{"../../lsncheck/readiness.go"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src += string(data)
	}
	for _, m := range regexp.MustCompile(`Reason[A-Za-z]+ +Reason = "([a-z_]+)"`).FindAllStringSubmatch(src, -1) {
		r := lsncheck.Reason(m[1])
		if r == lsncheck.ReasonNotInRecord || r == lsncheck.ReasonCopyBeingMade || r == lsncheck.ReasonRecordOtherTimeline || r == lsncheck.ReasonRecordStandbyCutOff ||
			r == lsncheck.ReasonNotObserved {
			continue // reasons of the gate without the primary only
		}
		if !slices.Contains(reasonMutants, r) {
			t.Errorf("reason %s has no mutant in the matrix", r)
		}
	}
}

// TestMutantPlansAreWritten: every plan a mutant names is one of MatrixPlans, and every mutant
// the map names exists.
func TestMutantPlansAreWritten(t *testing.T) {
	names := map[string]bool{}
	for _, p := range MatrixPlans() {
		names[p.Name] = true
	}
	mutants := map[string]bool{}
	for _, m := range Mutants() {
		mutants[m.Name] = true
		for _, p := range m.Plans {
			if !names[p] {
				t.Errorf("mutant %s names plan %s, which MatrixPlans has not", m.Name, p)
			}
		}
	}
	for m := range mutantPlans {
		if !mutants[m] {
			t.Errorf("mutantPlans names %s, which is no mutant", m)
		}
	}
}

// TestMutantTableComplete: docs/RELIABILITY.md's table of where each mutant stands names every
// mutant of the matrix, and no mutant that is not one.
func TestMutantTableComplete(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "RELIABILITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "### Where each mutant stands")
	if !ok {
		t.Fatal(`docs/RELIABILITY.md has no section "Where each mutant stands"`)
	}
	table, _, _ = strings.Cut(table, "\n### ")
	named, quoted := map[string]bool{}, regexp.MustCompile("`([a-z_:0-9-]+)`")
	for _, line := range strings.Split(table, "\n") {
		if first, _, ok := strings.Cut(strings.TrimPrefix(line, "| "), " |"); ok && strings.HasPrefix(line, "| `") {
			for _, m := range quoted.FindAllStringSubmatch(first, -1) {
				named[m[1]] = true
			}
		}
	}
	for _, m := range Mutants() {
		if !named[m.Name] {
			t.Errorf("docs/RELIABILITY.md, \"Where each mutant stands\": no row for %s", m.Name)
		}
		delete(named, m.Name)
	}
	for n := range named {
		t.Errorf("docs/RELIABILITY.md, \"Where each mutant stands\": %s is no mutant", n)
	}
}
