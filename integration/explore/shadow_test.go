package explore

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
)

// TestShadowsJudgedAsTheGate: a shadow answer is judged in the iteration's History as the gate's
// would be: a READY without the primary from a record made while the standby did not stream,
// then the consumer ahead, kills the mutant that gave it, while the gate's NOT READY there, and a
// shadow that answered as the gate did, are not caught; an answer that disagrees with itself is
// a problem; a hook's first question, not the one it promoted on, is not judged by the outcome.
// Rejudge judges the shadows again from a report line.
func TestShadowsJudgedAsTheGate(t *testing.T) {
	observed := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	h, fv := historyOf(observed, true)
	lie := h.Without
	gate := lie
	gate.Exit, gate.Ready, gate.Slots = 1, false, map[string]Answer{"s": AnswerNotReady}
	h.Without = gate
	disagrees := lie
	disagrees.Slots = map[string]Answer{"s": AnswerNotReady}
	firstQuestion := lie
	firstQuestion.WithoutPrimary, firstQuestion.Asked = false, observed.Add(-time.Minute)
	h.Shadows = []ShadowAnswer{
		{Mutant: "lies", With: h.With, Without: lie, Readier: true},
		{Mutant: "as-the-gate", With: h.With, Without: gate},
		{Mutant: "disagrees", With: h.With, Without: disagrees, Readier: true},
		{Mutant: "hook-first", With: firstQuestion, WithBinding: false, Without: gate},
	}
	for _, j := range judge(h, fv, nil) {
		if j.Lie {
			t.Fatalf("the gate as built judged a lie: %s", j.Why)
		}
	}
	want := map[string]bool{"lies": true, "as-the-gate": false, "disagrees": true, "hook-first": false}
	check := func(vs []ShadowVerdict, when string) {
		t.Helper()
		if len(vs) != len(want) {
			t.Fatalf("%s: %d verdicts, want %d", when, len(vs), len(want))
		}
		for _, v := range vs {
			if v.Killed() != want[v.Mutant] {
				t.Errorf("%s: %s killed %v (%+v), want %v", when, v.Mutant, v.Killed(), v, want[v.Mutant])
			}
		}
	}
	vs := judgeShadows(h, fv, nil)
	check(vs, "judged")
	if vs[0].Lies == 0 || !strings.Contains(vs[0].Why, "asked without the primary") || vs[2].Problem == "" || vs[2].Lies != 0 {
		t.Errorf("lies %+v, disagrees %+v: want a lie without the primary, and a problem alone", vs[0], vs[2])
	}
	line, err := json.Marshal(ChaosIteration{Number: 1, Failover: fv, History: h})
	if err != nil {
		t.Fatal(err)
	}
	read, err := ReadIterations(bytes.NewReader(line))
	if err != nil || len(read) != 1 {
		t.Fatalf("read back: %v", err)
	}
	Rejudge(read)
	check(read[0].Shadows, "rejudged from a report line")
	tally := TallyOf(append(read, read[0]))
	if len(tally.Shadows) != 4 || tally.Shadows[0].Mutant != "lies" || tally.Shadows[0].Killed != 2 || tally.Shadows[0].ByOutcome != 2 ||
		tally.Shadows[1].Killed != 0 || tally.Shadows[2].ByProblem != 2 {
		t.Errorf("tally: %+v", tally.Shadows)
	}
	if r := tally.Shadows; r[0].Readier != 2 || len(r[0].ReadierMissed) != 0 || r[1].Readier != 0 || r[2].Readier != 2 {
		t.Errorf("tally of READY where the gate was not: %+v", tally.Shadows)
	}
	tally = TallyOf([]ChaosIteration{{Seed: 7, Major: 17, Shadows: []ShadowVerdict{{Mutant: "m", Readier: true}}}})
	if r := tally.Shadows[0]; r.Readier != 1 || !slices.Equal(r.ReadierMissed, []int64{7}) || r.Killed != 0 {
		t.Errorf("a mutant READY where the gate was not, not caught: %+v", r)
	}
}

// TestReadierThan: a mutant is readier than the gate beside it where it says READY for a slot
// (an older slot too) the gate does not, judges READY more than a second sooner, or exits 0 where
// the gate does not; not where both say the same at about the same moment, or where the mutant
// says less.
func TestReadierThan(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	answer := func(exit int, pg, td, older Answer) GateAnswer {
		return GateAnswer{Asked: at, Judged: at, Exit: exit, Slots: map[string]Answer{"drill_pgoutput": pg, "drill_test_decoding": td,
			"drill_pgoutput_behind": older}}
	}
	ready, notReady := answer(0, AnswerReady, AnswerReady, AnswerReady), answer(1, AnswerNotReady, AnswerNotReady, AnswerNotReady)
	oneReady := answer(1, AnswerReady, AnswerNotReady, AnswerNotReady)
	olderReady, olderNotReady := answer(1, AnswerNotReady, AnswerNotReady, AnswerReady), answer(1, AnswerNotReady, AnswerNotReady, AnswerNotReady)
	cannotTell := GateAnswer{Asked: at, Exit: 2, CannotTell: true}
	later := func(a GateAnswer, d time.Duration) GateAnswer {
		a.Judged = a.Judged.Add(d)
		return a
	}
	for _, c := range []struct {
		name         string
		mutant, gate GateAnswer
		want         bool
	}{
		{"READY beside NOT READY", ready, notReady, true},
		{"one slot READY beside NOT READY", oneReady, notReady, true},
		{"an older slot READY beside NOT READY", olderReady, olderNotReady, true},
		{"READY beside CANNOT TELL", ready, cannotTell, true},
		{"exit 0 beside exit 1, the slots alike", GateAnswer{Asked: at, Exit: 0, Slots: oneReady.Slots}, oneReady, true},
		{"READY judged 10 s before the gate's READY", ready, later(ready, 10*time.Second), true},
		{"READY judged 500 ms before the gate's READY", ready, later(ready, 500*time.Millisecond), false},
		{"READY judged after the gate's READY", later(ready, 10*time.Second), ready, false},
		{"the same READY", ready, ready, false},
		{"the same NOT READY", notReady, notReady, false},
		{"NOT READY beside READY", notReady, ready, false},
		{"CANNOT TELL beside NOT READY", cannotTell, notReady, false},
		{"one slot READY beside the same", oneReady, oneReady, false},
	} {
		if got := readierThan(c.mutant, c.gate); got != c.want {
			t.Errorf("%s: readier %v, want %v", c.name, got, c.want)
		}
	}
}

// TestParseShadows: the default list, none, and a list of names; a mutant no shadow gate carries
// (one the sidecar acts on) is refused with the names that are.
func TestParseShadows(t *testing.T) {
	for _, s := range []string{"", "none"} {
		if got, err := ParseShadows(s); err != nil || got != nil {
			t.Errorf("%q: %v, %v", s, got, err)
		}
	}
	if got, err := ParseShadows("default"); err != nil || len(got) != len(ShadowMutants) {
		t.Errorf("default: %v, %v", got, err)
	}
	if got, err := ParseShadows("seen-unchecked, without:missing"); err != nil || len(got) != 2 || got[1] != "without:missing" {
		t.Errorf("a list: %v, %v", got, err)
	}
	if _, err := ParseShadows("catalog-hold-off"); err == nil || !strings.Contains(err.Error(), "seen-unchecked") {
		t.Errorf("a sidecar's mutant: %v", err)
	}
	// Each mutant a shadow carries is one of the matrix's, with its rule; the default ones too.
	for name, rule := range questionMutants {
		if !slices.ContainsFunc(Mutants(), func(m Mutant) bool { return m.Name == name }) || rule == "" {
			t.Errorf("%s (rule %q) is not a mutant of the matrix", name, rule)
		}
	}
	for _, name := range ShadowMutants {
		if questionMutants[name] == "" {
			t.Errorf("default shadow %s is not one a shadow gate carries", name)
		}
	}
}

// TestShadowGateCaught: on a real pair, the plan that kills seen-unchecked in CI's mutant sample
// (slotsync's route cut, a slot copied again behind its copy, its consumer away, the primary
// stopped a little later) passes with the gate as built and catches the same check switched off
// in a shadow gate asked beside it, in one of two runs at least, by the outcome: its READY
// without the primary, then the changes lost; record-margin-doubled, whose window the plan stays
// within, is not caught.
func TestShadowGateCaught(t *testing.T) {
	pgtest.Slow(t)
	pgtest.ForEachMajor(t, []int{17}, func(t *testing.T, major int) {
		bin := failpointSlotsync(t)
		plan := matrixPlans(t, "route-cut-slot-behind-then-stop")[0]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		// Two runs of the plan, as CI's sample runs it: its window is timing's, and on a loaded
		// machine one run may not open it.
		rep, err := Chaos(ctx, ChaosOptions{Plans: []Plan{plan, plan}, Slotsync: bin, Arm: crashAt, StateDir: t.TempDir(),
			Shadows: []string{"seen-unchecked", "record-margin-doubled"},
			NewPair: func(ctx context.Context) (*integration.Pair, error) {
				return integration.NewPair(ctx, integration.Options{Major: major, Backend: os.Getenv(integration.EnvBackend), Conf: ChaosConf})
			}})
		if err != nil || len(rep.Iterations) != 2 {
			t.Fatalf("chaos: %v", err)
		}
		caught := false
		for _, it := range rep.Iterations {
			t.Logf("%s\n  ok %v, answers %s, problems %q, shadows %+v", it.Plan, it.OK, answers(it), it.Problems, it.Shadows)
			if !it.OK {
				t.Fatalf("the gate as built fails the plan: %s", killReason(it))
			}
			if len(it.Shadows) != 2 || it.Shadows[0].Instant || it.Shadows[1].Killed() {
				t.Fatalf("shadows %+v: want seen-unchecked caught by the outcome if at all, record-margin-doubled (the record's window holds there) not", it.Shadows)
			}
			caught = caught || it.Shadows[0].Killed()
		}
		if !caught {
			t.Fatal("seen-unchecked beside the gate was caught in neither run of the plan")
		}
	})
}
