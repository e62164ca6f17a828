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
	// Rule 1 with the primary: a slot dropped (slotsync drops its copy) and made again while
	// slotsync is paused; a hook promotes at the first READY (killed by this plan in the matrix).
	{name: "readiness:missing", major: 17, plan: "hook-slot-made-again"},
	// Rule 8: slotsync's route to the primary cut, a slot copied again behind
	// its copy two seconds later, the primary stopped cleanly a second and a half after, within
	// the record's renewal: only the note of slotsync's last pass shows the primary outlived it
	// (docs/RELIABILITY.md). It takes the place of record-outlived on hook-slot-behind, which
	// that note now holds (killed with both off).
	{name: "seen-unchecked", major: 17, plan: "route-cut-slot-behind-then-stop"},
	// Rule 4's WAL: one WAL file removed from the middle of the standby's pg_wal
	// behind the server's back, after the copies' restart_lsn, the consumers away (nothing reads
	// their copies' WAL again): only the files around it tell the gate it is gone. It takes the
	// place of wal-files-unchecked (the oldest file read at all; the same listing),
	// which TestStandbyWALCleanedUnderACopy keeps in CI and the whole matrix still runs.
	{name: "wal-holes-unchecked", major: 17, plan: "hook-standby-wal-hole-consumers-away"},
	// Rule 2: check asked between slotsync's passes over the copy of a slot just
	// made again (its consumer away), then a switchover 5 s later; slotsync's pass meanwhile
	// makes the copy again ahead of the consumer (the window of the long run's finding, held
	// open by pausing slotsync until the answer).
	{name: "readiness:copy_being_made", major: 17, plan: "slot-made-again-then-switchover"},
	// Issue 34's redelivery window: a window that begins at the consumer's position, nothing
	// said to come again, while the copies stand behind it (slotsync paused at the question).
	{name: "redelivery-window-late", major: 17, plan: "hook-copies-frozen"},
	// Rule 4, the explorer's finding 12: the standby's feedback off a while (a reload) with
	// slotsync paused, the catalogs vacuumed past a copy behind its consumer, the feedback on
	// again: a mark that outlives the gap makes that copy READY on rows nothing kept.
	{name: "horizon-gap", major: 15, plan: "hook-copies-invalidated"},
	// The same gap with no reload: the standby's physical slot dropped while slotsync runs and
	// made again with slotsync paused; the passes that failed on the missing slot must void the
	// marks, since the slot's new horizon covers the copies again.
	{name: "feedback-stopped", major: 15, plan: "hook-physical-slot-gap"},
	// The same gap, then the primary killed within the record's renewal: without the primary, a
	// copy whose READY rested on the feedback, the standby reloaded after the record.
	{name: "without:copy_catalog_unprotected", major: 15, plan: "copies-vacuumed-then-kill"},
	// Rule 4's catalog hold, switched off: a copy made again while the primary slot's
	// catalog_xmin moves on before the standby's feedback covers it is never proven protected;
	// made again once, then given up, it is NOT READY in the quiet window after (liveness).
	{name: "catalog-hold-off", major: 15, plan: "catalog-moves-before-feedback"},
	// Rule 8, found by a long run of the explorer: a slot copied again
	// behind its copy, the primary demoted; the demoted primary's slots say so. Since each pass
	// leaves a note, that run's answer is CANNOT TELL (slotsync's route was cut for seconds):
	// the written plan demotes within the note of slotsync's last pass.
	{name: "without:identity_mismatch", major: 17, plan: "slot-behind-then-demote"},
	// Rule 4's WAL: the standby's max_slot_wal_keep_size no longer covers the
	// copies (slotsync paused, WAL segments switched), no restartpoint yet, so the standby's
	// wal_status still says "reserved"; the promotion's checkpoint invalidates them.
	{name: "readiness:copy_wal_missing", major: 16, plan: "hook-copy-wal-beyond-limit"},
	// Rule 4f: slotsync killed -9 between an exact copy's decision and the copy; the journal
	// read back must name the own copy, or the copy is never replaced (NOT READY in the quiet
	// window: liveness). Killed in 10 of 10 runs on a quiet machine and 5 of 5 beside two
	// busy loops, the gate as built passing each (results/53).
	{name: "exact-intent-early", major: 16, plan: "exact-copy-decided-then-crash"},
	// The same without the primary: a kill right after the segments were switched, the record
	// made before them with no commit since.
	{name: "without:copy_wal_missing", major: 18, plan: "copy-wal-beyond-limit-then-kill"},
	// The gate asked with --exact, slotsync paused while the consumers confirm: every
	// copy behind its consumer; READY lets the consumer resuming from its slot receive again
	// what it had confirmed when the gate observed.
	{name: "readiness:copy_behind_consumer", major: 17, plan: "hook-exact-copies-behind"},
	// Rule 4's two_phase on 17, whose sync does not carry two_phase_at (the plan runs the native
	// method): a consumer turned two_phase on after confirming past a PREPARE it was not sent;
	// promoted before the COMMIT PREPARED, the copy never sends the transaction.
	{name: "readiness:two_phase_at_not_synced", major: 17, plan: "hook-two-phase-on-while-prepared"},
	// Rule 4's snapshot: the standby's decoding snapshots removed under copies of
	// its own decoding (sql) advanced onto them, a transaction open across their restart_lsn, a
	// consumer away; decoding from them rebuilds a snapshot and skips what commits meanwhile.
	{name: "readiness:copy_snapshot_missing", major: 17, plan: "hook-copy-snapshot-removed"},
	// Rule 8c: the hook's question (--for-promotion) asked while the old primary is alive and
	// read-write; a READY is a lie at the instant. Rule 8: the primary demoted to follow a
	// second standby promoted meanwhile, its upstream not streaming yet at the question; a READY
	// judged without the primary at once, while the second one is read-write, is a lie at the
	// instant. Each killed in 10 of 10 runs on a quiet machine and 5 of 5 beside two busy
	// loops, the gate as built passing each (results/54).
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

// TestMutationMatrix runs the fault explorer against slotsync builds with one safety check of
// the gate switched off (Mutants), each on the plans written for its rule (Mutant.Plans), then
// on SLOTSYNC_MUTANT_SEEDS drawn plans (default 4), until a plan catches it (a READY while loss,
// or a problem). Without SLOTSYNC_MUTANTS it runs mutantSample, and each must be caught;
// SLOTSYNC_MUTANTS=all (or a comma-separated list) runs those on every requested major and
// reports what caught each, or that nothing did; SLOTSYNC_MUTANT_PLANS=all runs every written
// plan for each mutant, a list those, none only the drawn ones.
func TestMutationMatrix(t *testing.T) {
	seeds := int64(4)
	if s := os.Getenv("SLOTSYNC_MUTANT_SEEDS"); s != "" {
		seeds, _ = strconv.ParseInt(s, 10, 64)
	}
	first := int64(7100)
	if s := os.Getenv("SLOTSYNC_CHAOS_SEED"); s != "" {
		first, _ = strconv.ParseInt(s, 10, 64)
	}
	want := os.Getenv("SLOTSYNC_MUTANTS")
	type run struct {
		name  string
		plans []string // the written plans for it (Mutant.Plans)
		seed  int64
		// only: the sample's plan (nil: the matrix plans, then drawn seeds from seed)
		only *Plan
	}
	runsOn := func(major int) []run {
		var out []run
		for _, m := range Mutants() {
			if (want == "all" || slices.Contains(strings.Split(want, ","), m.Name)) && (m.Majors == nil || slices.Contains(m.Majors, major)) {
				out = append(out, run{name: m.Name, plans: m.Plans, seed: first})
			}
		}
		for _, s := range mutantSample {
			if want == "" && s.major == major {
				p := samplePlan(t, s.plan, s.seed)
				out = append(out, run{name: s.name, seed: s.seed, only: &p})
			}
		}
		return out
	}
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
		for _, r := range runsOn(major) {
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
