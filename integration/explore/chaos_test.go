package explore

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/drill"
	"github.com/slotsync/slotsync/integration/pgtest"
)

// TestDrawPlanReplays: a seed is a plan, and over many seeds every fault is drawn; slotsync's
// crashes at a step only with failpoints.
func TestDrawPlanReplays(t *testing.T) {
	if a, b := DrawPlan(42, true).String(), DrawPlan(42, true).String(); a != b {
		t.Fatalf("seed 42 drew two plans:\n%s\n%s", a, b)
	}
	if DrawPlan(42, true).String() == DrawPlan(43, true).String() {
		t.Fatal("seeds 42 and 43 drew the same plan")
	}
	seen := map[Fault]bool{}
	kills, hooks := 0, 0
	for seed := int64(0); seed < 500; seed++ {
		p := DrawPlan(seed, true)
		for _, f := range p.Faults() {
			seen[f] = true
		}
		switch {
		case p.Hook:
			hooks++
		case p.Kill:
			kills++
		}
		for i, s := range p.Steps {
			if s.At >= p.Live || (i > 0 && s.At < p.Steps[i-1].At) {
				t.Fatalf("seed %d: steps out of the live phase or order: %s", seed, p)
			}
		}
		if DrawPlan(seed, false).Failpoint != "" {
			t.Fatalf("seed %d: a failpoint drawn without failpoints", seed)
		}
	}
	for _, f := range append([]Fault{FaultFailpoint}, faultsOutside...) {
		if !seen[f] {
			t.Errorf("fault %s never drawn in 500 seeds", f)
		}
	}
	if kills < 100 || kills > 240 || hooks < 120 || hooks > 220 {
		t.Errorf("of 500 failovers %d kill -9 and %d are a hook's: the draw is lopsided", kills, hooks)
	}
}

// TestDrawnSettings: draws 6 and 7 draw the sidecar's settings after the faults, so a seed's
// faults are those draw 5 drew (pinned below) and its draw-6 settings those draw 6 drew, and over
// many seeds each setting is drawn at the values the docs recommend as well as left at the
// explorer's short ones or the default.
func TestDrawnSettings(t *testing.T) {
	drawn5 := map[int64]string{
		5100: "seed 5100 (draw 5): live 7.53s; slotsync crashes at statefile.copies-installed@2; at 3.434s catalog_vacuumed; at 5.678s slotsync_paused for 2.673s; writes pause 1.122s before; failover: kill -9",
		5103: "seed 5103 (draw 5): live 7.92s; slotsync crashes at sql.after-advance@2; at 1.616s slotsync_killed; failover: clean stop",
		7101: "seed 7101 (draw 5): live 6.432s; at 228ms slotsync_paused for 2.13s; at 3.693s slot_recreated_behind drill_test_decoding; at 3.724s standby_restart; " +
			"at 5.234s wal_sender_stalled for 2.683s; failover: kill -9 the moment the gate says READY, the writes going on",
	}
	for seed, want := range drawn5 {
		p, _ := drawBeforeLastSeconds(seed, true)
		p.Draw, p.Interval, p.ConfirmEvery, p.ExactCopyAfter, p.ManageStandbySlots, p.MaxRecordAge = 5, 0, 0, 0, false, 0
		if got := p.String(); got != want {
			t.Errorf("seed %d draws other faults than under draw 5:\n got %s\nwant %s", seed, got, want)
		}
	}
	drawn6 := map[int64]string{
		5100: "seed 5100 (draw 6): live 7.53s; slotsync crashes at statefile.copies-installed@2; at 3.434s catalog_vacuumed; at 5.678s slotsync_paused for 2.673s; " +
			"writes pause 1.122s before; exact copies after 30s; consumers confirm every 4.29s; failover: kill -9",
		5103: "seed 5103 (draw 6): live 7.92s; slotsync crashes at sql.after-advance@2; at 1.616s slotsync_killed; passes every 1s; consumers confirm every 2.185s; " +
			"failover: clean stop",
	}
	for seed, want := range drawn6 {
		p, _ := drawBeforeLastSeconds(seed, true)
		p.Draw, p.ManageStandbySlots, p.MaxRecordAge = 6, false, 0
		if got := p.String(); got != want {
			t.Errorf("seed %d draws other faults or settings than under draw 6:\n got %s\nwant %s", seed, got, want)
		}
	}
	intervals, confirms, exacts := map[time.Duration]int{}, map[bool]bool{}, map[time.Duration]int{}
	ages, manage := map[time.Duration]int{}, map[bool]int{}
	for seed := int64(0); seed < 500; seed++ {
		p := DrawPlan(seed, true)
		ages[p.MaxRecordAge]++
		if p.SyncStandbySlots {
			manage[p.ManageStandbySlots]++
		} else if p.ManageStandbySlots {
			t.Fatalf("seed %d: slotsync manages a list the plan does not want", seed)
		}
		intervals[p.Interval]++
		exacts[p.ExactCopyAfter]++
		if c := p.ConfirmEvery; c != 0 && (c < 2*time.Second || c >= 5*time.Second) {
			t.Fatalf("seed %d: consumers confirm every %s, outside 2-5 s", seed, c)
		}
		confirms[p.ConfirmEvery > 0] = true
	}
	if len(intervals) != 2 || intervals[time.Second] < 200 || intervals[0] < 200 {
		t.Errorf("intervals drawn over 500 seeds: %v (want the default 1s and the short one, about half each)", intervals)
	}
	if !confirms[true] || !confirms[false] || len(exacts) != 3 || exacts[30*time.Second] == 0 || exacts[10*time.Minute] == 0 {
		t.Errorf("over 500 seeds: consumers confirming late %v, exact copy bounds %v", confirms, exacts)
	}
	if len(ages) != 3 || ages[time.Minute] == 0 || ages[4*time.Minute] == 0 || manage[true] < 30 || manage[false] < 30 {
		t.Errorf("over 500 seeds: record ages %v, the standby listed by slotsync %v (want both ways, about half each)", ages, manage)
	}
}

// TestDrawnLastSeconds: draw 9 keeps every fault and setting draw 8 drew from a seed and adds, to
// about half the plans, faults that start in the last 2 s of the live phase and last past the
// question (each kind drawn, a stalled walsender only before a kill -9, which a clean stop would
// wait on); draw 10 has the writes stop just before the standby's cut and resume soon after in
// some of those plans, and changes nothing else.
func TestDrawnLastSeconds(t *testing.T) {
	ends, kinds, resumed := 0, map[Fault]int{}, 0
	for seed := int64(0); seed < 1000; seed++ {
		before, _ := drawBeforeLastSeconds(seed, true)
		p, _, _ := drawBeforeTiming(seed, true)
		var added []Step
		for _, s := range p.Steps {
			if i := slices.Index(before.Steps, s); i >= 0 {
				before.Steps = slices.Delete(before.Steps, i, i+1)
				continue
			}
			added = append(added, s)
		}
		if len(before.Steps) != 0 {
			t.Fatalf("seed %d: draw 9 lost draw 8's steps %v", seed, before.Steps)
		}
		before.Steps, before.OlderOutside = p.Steps, p.OlderOutside
		if before.String() != p.String() {
			t.Fatalf("seed %d: draw 9 changed draw 8's plan:\n got %s\nwant %s", seed, p, before)
		}
		if len(added) > 0 {
			ends++
		}
		for _, s := range added {
			kinds[s.Fault]++
			if s.Fault == FaultWritesPaused && s.For != lastFor {
				resumed++
				if !resumesAroundTheCut(p, s) {
					t.Fatalf("seed %d: the writes paused at %s for %s, not from just before the standby's cut", seed, s.At, s.For)
				}
				continue
			}
			if s.At < p.Live-2*time.Second || s.At > p.Live || s.For != 0 && s.For != lastFor {
				t.Fatalf("seed %d: %s at %s for %s, not in the last seconds of a %s live phase", seed, s.Fault, s.At, s.For, p.Live)
			}
			if s.Fault == FaultSenderStalled && !p.Kill {
				t.Fatalf("seed %d: a walsender stalled past a clean stop", seed)
			}
		}
	}
	if ends < 400 || ends > 600 {
		t.Errorf("%d of 1000 plans end in the primary's last seconds (want about half)", ends)
	}
	for _, f := range []Fault{FaultSidecarPause, FaultPrimaryRoute, FaultStandbyCutOff, FaultWALReceiver, FaultSenderStalled, FaultWritesPaused, FaultSlotBehind} {
		if kinds[f] < 30 {
			t.Errorf("%s drawn %d times in the last seconds of 1000 plans", f, kinds[f])
		}
	}
	if resumed < 20 || resumed > kinds[FaultWritesPaused]/2 {
		t.Errorf("the writes resume in %d of the %d last seconds that stop them (want some, at most about half)", resumed, kinds[FaultWritesPaused])
	}
}

// resumesAroundTheCut: the writes pause s starts up to 500 ms before a standby cut of the last
// seconds and lasts 0.5 to 2 s.
func resumesAroundTheCut(p Plan, s Step) bool {
	return slices.ContainsFunc(p.Steps, func(c Step) bool {
		return (c.Fault == FaultStandbyCutOff || c.Fault == FaultWALReceiver) && c.At >= p.Live-2*time.Second &&
			s.At <= c.At && s.At >= c.At-500*time.Millisecond
	}) && s.For >= 500*time.Millisecond && s.For < 2*time.Second
}

// assessFixture is one answer the oracle judges, with whether it is a lie.
type assessFixture struct {
	name string
	j    Judged
	lie  bool
}

// assessFixtures are the oracle's known lies and excused cases (TestAssess; the loosenings of
// TestOracleChangesAreCaught must each turn one of them).
var assessFixtures = []assessFixture{
	{"ready and nothing lost", Judged{Answer: AnswerReady, Binding: true}, false},
	{"ready then a loss", Judged{Answer: AnswerReady, Binding: true, Lost: 3}, true},
	{"not ready then a loss is an honest answer", Judged{Answer: AnswerNotReady, Binding: true, Lost: 3}, false},
	{"cannot tell then a loss", Judged{Answer: AnswerCannotTell, Binding: true, Lost: 3}, false},
	{"ready, not binding (writes went on before the kill)", Judged{Answer: AnswerReady, Lost: 3}, false},
	{"ready then a redelivery of what was confirmed after the observation", Judged{Answer: AnswerReady, Binding: true, Repeated: 4}, false},
	{"ready then a redelivery of what was confirmed before it", Judged{Answer: AnswerReady, Binding: true, Repeated: 4, RepeatedEarly: 1}, true},
	{"ready, resumed from the slot, a redelivery inside the window", Judged{Answer: AnswerReady, Binding: true, Repeated: 4, FromSlot: true}, false},
	{"ready, resumed from the slot, a redelivery before the window", Judged{Answer: AnswerReady, Binding: true, Repeated: 4, RepeatedEarly: 2, FromSlot: true}, true},
	{"ready without the primary, consumer ahead, not promised", Judged{Answer: AnswerReady, Binding: true, Ahead: 2}, false},
	{"ready without the primary, consumer ahead (so it cannot resume), not promised", Judged{Answer: AnswerReady, Binding: true, Ahead: 2, Lost: 15}, false},
	{"ready, consumer ahead though promised", Judged{Answer: AnswerReady, Binding: true, Ahead: 2, AheadPromised: true}, true},
	{"ready without the primary, offset beyond the standby's WAL, not promised", Judged{Answer: AnswerReady, Binding: true, AheadOfStandby: true, Lost: 15}, false},
	{"ready with the primary, offset beyond the standby's WAL", Judged{Answer: AnswerReady, Binding: true, AheadOfStandby: true, AheadPromised: true}, true},
	// Excuses no wider than rule 8: a consumer ahead, unpromised, excuses only what the
	// standby never had.
	{"ready without the primary, consumer ahead, changes the standby had lost", Judged{Answer: AnswerReady, Binding: true, Ahead: 2, Lost: 15, LostHad: 3}, true},
	{"ready without the primary, consumer ahead, an early redelivery", Judged{Answer: AnswerReady, Binding: true, Ahead: 2, Repeated: 4, RepeatedEarly: 1}, true},
	{"ready, then the consumer cannot resume (its slot missing), nothing owed", Judged{Answer: AnswerReady, Binding: true, CannotResume: true}, true},
	{"not ready, then the consumer cannot resume", Judged{Answer: AnswerNotReady, Binding: true, CannotResume: true}, false},
	{"ready then a loss and a redelivery", Judged{Answer: AnswerReady, Binding: true, Lost: 2, Repeated: 3}, true},
	// The rules at the instant: a lie whatever followed, binding or not.
	{"ready, a rule broken at the instant, no loss followed", Judged{Answer: AnswerReady, Binding: true, Instant: "rule 5 at the instant"}, true},
	{"ready, a rule broken at the instant, not binding", Judged{Answer: AnswerReady, Instant: "rule 4 at the instant"}, true},
	{"not ready, a rule broken at the instant", Judged{Answer: AnswerNotReady, Binding: true, Instant: "rule 5 at the instant"}, false},
	// Rule 8a's residual: a slot changed on the primary after slotsync's last observation,
	// within the note's window, is unknown to any gate; a rule broken at the instant is not.
	{"ready without the primary, a slot changed unobserved, then a loss", Judged{Answer: AnswerReady, Binding: true, Lost: 9, LostHad: 9,
		Unobserved: "rule 8a's residual"}, false},
	{"ready without the primary, a slot changed unobserved, a rule broken at the instant", Judged{Answer: AnswerReady, Binding: true,
		Unobserved: "rule 8a's residual", Instant: "rule 8b at the instant"}, true},
}

func TestAssess(t *testing.T) {
	for _, c := range assessFixtures {
		if got := c.j.Assess(); got.Lie != c.lie || (got.Lie && got.Why == "") {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
}

func TestParseCheck(t *testing.T) {
	out := []byte(`{"ready":false,"exit_code":1,"method":"sql","without_primary":{"observed_at":"2026-12-01T10:00:00Z","synchronized_standby":true},
		"slots":[{"name":"a","gate":true,"verdict":{"ready":true}},{"name":"b","gate":true,"verdict":{"ready":false,"reasons":["copy_catalog_xmin_ahead"],"detail":"the copy's catalog_xmin 772 is 41 transactions newer than the primary's 731"}},{"name":"c","gate":false,"verdict":{"ready":true}},
		{"name":"f","gate":true,"held_back":true,"verdict":{"ready":true}},
		{"name":"w","gate":true,"verdict":{"ready":true},"primary":{"restart_lsn":"0/100","confirmed_flush":"0/500"},"copy":{"restart_lsn":"0/100","confirmed_flush":"0/300"}},
		{"name":"e","gate":true,"verdict":{"ready":true},"primary":{"restart_lsn":"0/100","confirmed_flush":"0/500"},"copy":{"restart_lsn":"0/100","confirmed_flush":"0/500"}}],
		"redelivery":[{"slot":"w","from":"0/300","to":"0/500","bytes":512,"at_least":true}]}`)
	a, err := parseCheck(out, 1, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	if a.For("a") != AnswerReady || a.For("b") != AnswerNotReady || a.For("c") != AnswerNotReady || a.For("d") != AnswerNotReady {
		t.Fatalf("answers: %+v", a)
	}
	// A NOT READY keeps the gate's words, with the numbers behind its reasons; a READY has none.
	if a.Reasons["b"][0] != "copy_catalog_xmin_ahead" || !strings.Contains(a.Details["b"], "772") || len(a.Details) != 1 {
		t.Fatalf("reasons and details: %+v %+v", a.Reasons, a.Details)
	}
	if !a.WithoutPrimary || !a.SynchronizedStandby || a.ObservedAt.IsZero() || a.Method != "sql" {
		t.Fatalf("without the primary: %+v", a)
	}
	// synchronized_standby_slots holds back only failover slots' consumers: the answer promises
	// no consumer ahead only for the slots it says were held back (f), not for a (seed 5000 of
	// draw 4 on 17 counted a's READY, its consumer ahead, as a lie).
	if a.HeldBack["a"] || !a.HeldBack["f"] {
		t.Fatalf("held back: %+v", a.HeldBack)
	}
	// The redelivery window begins where the answer printed it (w), or, for a READY slot it
	// did not list, where the consumer stood: nothing comes again (e).
	if a.WindowFrom["w"] != 0x300 || a.WindowFrom["e"] != 0x500 || len(a.WindowFrom) != 2 {
		t.Fatalf("windows: %+v", a.WindowFrom)
	}
	// Asked with --exact, a READY promises that nothing comes again: the printed window is not
	// the promise (a gate that dropped copy_behind_consumer would still print w's).
	if x, err := parseCheck(out, 1, time.Now(), true); err != nil || x.WindowFrom["w"] != 0x500 || x.WindowFrom["e"] != 0x500 {
		t.Fatalf("exact windows: %+v %v", x.WindowFrom, err)
	}
	if e, err := parseCheck([]byte(`{"ready":false,"exit_code":3,"error":"bad flag"}`), 3, time.Now(), false); err != nil || e.For("a") != AnswerError {
		t.Fatalf("an error is not a NOT READY: %+v %v", e, err)
	}
	tell, err := parseCheck([]byte(`{"ready":false,"exit_code":2,"cannot_tell":true,"primary_alive":true,"error":"x"}`), 2, time.Now(), false)
	if err != nil || tell.For("a") != AnswerCannotTell {
		t.Fatalf("cannot tell: %+v %v", tell, err)
	}
	if (GateAnswer{}).For("a") != AnswerNotAsked {
		t.Fatal("an answer never asked")
	}
	if _, err := parseCheck([]byte("PANIC"), 2, time.Now(), false); err == nil {
		t.Fatal("text accepted as JSON")
	}
}

// TestAnswerDisagreement: the exit code is the answer a hook acts on; an answer whose exit code,
// ready and per-slot verdicts disagree is a problem, whichever way they disagree.
// disagreementFixture is one answer as check --json prints it, with its exit code, and whether
// it disagrees with itself.
type disagreementFixture struct {
	name, json string
	exit       int
	disagrees  bool
}

var (
	readyJSON            = `"slots":[{"name":"a","gate":true,"verdict":{"ready":true}}]`
	notReadyJSON         = `"slots":[{"name":"a","gate":true,"verdict":{"ready":false,"reasons":["missing"]}}]`
	disagreementFixtures = []disagreementFixture{
		{"READY, exit 0", `{"ready":true,"exit_code":0,` + readyJSON + `}`, 0, false},
		{"NOT READY, exit 1", `{"ready":false,"exit_code":1,` + notReadyJSON + `}`, 1, false},
		{"CANNOT TELL, exit 2", `{"ready":false,"exit_code":2,"cannot_tell":true,"error":"x"}`, 2, false},
		{"exit 0, ready false", `{"ready":false,"exit_code":0,` + readyJSON + `}`, 0, true},
		{"exit 1, ready true", `{"ready":true,"exit_code":1,` + readyJSON + `}`, 1, true},
		{"exit 0, a slot NOT READY", `{"ready":true,"exit_code":0,` + notReadyJSON + `}`, 0, true},
		{"exit 0, an error", `{"ready":true,"exit_code":0,"cannot_tell":true,"error":"x"}`, 0, true},
	}
)

func TestAnswerDisagreement(t *testing.T) {
	if bad := disagreementsWrong(GateAnswer.disagreement); len(bad) > 0 {
		t.Error(bad)
	}
}

// disagreementsWrong runs disagreementFixtures through an oracle's disagreement and names the
// fixtures it gets wrong.
func disagreementsWrong(disagreement func(GateAnswer) string) []string {
	var bad []string
	for _, c := range disagreementFixtures {
		a, err := parseCheck([]byte(c.json), c.exit, time.Now(), false)
		if err != nil {
			return []string{err.Error()}
		}
		if got := disagreement(a); (got != "") != c.disagrees {
			bad = append(bad, fmt.Sprintf("%s: disagreement %q, want one: %v", c.name, got, c.disagrees))
		}
	}
	return bad
}

// TestAnswerForALeftOutSlot: exit 0 promises every selected slot; a slot the answer leaves out
// is promised while the primary had it when the answer was asked, not once it is gone there.
func TestAnswerForALeftOutSlot(t *testing.T) {
	wd := &world{truths: []Truth{{When: truthQuestion, Slots: map[string]SlotTruth{"a": {}}}, {When: truthEnd, Slots: map[string]SlotTruth{}}}}
	ok := GateAnswer{Asked: time.Now(), Exit: 0, Ready: true, Slots: map[string]Answer{"b": AnswerReady}}
	if w := wd.answerFor(ok, askedWithPrimary, "a"); w != AnswerReady {
		t.Errorf("left out of an exit-0 answer while on the primary: %s, want READY (promised)", w)
	}
	if w := wd.answerFor(ok, "asked without the primary", "a"); w != AnswerNotReady {
		t.Errorf("left out once gone from the primary: %s, want not promised", w)
	}
	notReady := GateAnswer{Asked: time.Now(), Exit: 1, Slots: map[string]Answer{"b": AnswerNotReady}}
	if w := wd.answerFor(notReady, askedWithPrimary, "a"); w != AnswerNotReady {
		t.Errorf("left out of an exit-1 answer: %s, want NOT READY", w)
	}
	if w := wd.answerFor(ok, askedWithPrimary, "b"); w != AnswerReady {
		t.Errorf("a named slot: %s", w)
	}
}

func TestTally(t *testing.T) {
	its := []ChaosIteration{
		{Major: 15, Method: "statefile", Faults: []Fault{FaultSidecarKill, FaultSidecarKill, FaultPrimaryRoute},
			Judged: []Judged{{Answer: AnswerReady, Binding: true}, {Answer: AnswerNotReady, Lost: 2, Binding: true, Reasons: []string{"missing"}}}},
		{Major: 15, Method: "statefile", Faults: []Fault{FaultPrimaryRoute},
			Judged:   []Judged{{Answer: AnswerReady, Binding: true, Lost: 1, Lie: true}, {Answer: AnswerCannotTell}},
			Failover: drill.FailoverVerdict{Slots: []drill.SlotVerdict{{Repeated: []int{7}}}}, Problems: []string{"x"}},
	}
	tl := TallyOf(its)
	if tl.Failovers != 2 || len(tl.Rows) != 2 {
		t.Fatalf("%+v", tl)
	}
	route := tl.Rows[0]
	if route.Fault != FaultPrimaryRoute || route.Failovers != 2 || route.Ready != 2 || route.Lies != 1 || route.NotReadyLoss != 1 ||
		route.CannotTell != 1 || route.Redelivered != 1 || route.Problems != 1 {
		t.Fatalf("route row: %+v", route)
	}
	if kill := tl.Rows[1]; kill.Failovers != 1 {
		t.Fatalf("a fault twice in a failover counts once: %+v", kill)
	}
	// Binding answers: the READY and the NOT READY of the first, the lying READY of the second;
	// a gate always saying READY would have been caught on the NOT READY (2 lost) and the lie.
	if tl.Total.Binding != 3 || tl.Total.AlwaysReadyCaught != 2 {
		t.Fatalf("always-READY measure: %+v", tl.Total)
	}
	if len(tl.Caught) != 2 || tl.Caught["missing"] != 1 || tl.Caught[string(AnswerReady)] != 1 {
		t.Fatalf("where an always-READY gate is caught: %v", tl.Caught)
	}
	var b bytes.Buffer
	tl.Markdown(&b)
	if !strings.Contains(b.String(), "| all | all | all | 2 | 2 | 1 | 0 |") || !strings.Contains(b.String(), "the answer): READY 1, missing 1\n") {
		t.Fatalf("markdown:\n%s", b.String())
	}
}

// TestChaos is the fault explorer's run in CI: failovers at random moments under random faults
// (slotsync killed and crashed at failpoints, the route to the primary blackholed, the standby's
// WAL receiver cut, restarts, slots made again, long transactions, catalogs vacuumed), the gate
// asked with and without the primary at each, and every READY checked against what the
// consumers then got. SLOTSYNC_CHAOS_ITERATIONS (default 6 per major, about two and a half minutes each) and SLOTSYNC_CHAOS_SEED
// (default 5100, fixed for CI; "clock" draws one, printed) replay or lengthen it; with SLOTSYNC_CHAOS_ITERATIONS set it
// runs on every requested major, and SLOTSYNC_CHAOS_METHOD picks slotsync's --method;
// SLOTSYNC_CHAOS_REPORT=path appends each iteration to path.pgN.jsonl as it is judged; SLOTSYNC_CHAOS_STATE_DIR
// keeps slotsync's logs and journals there; SLOTSYNC_CHAOS_PLANS=matrix runs the plans written
// for the rules (MatrixPlans) instead of drawn ones (a comma-separated list of names: those);
// SLOTSYNC_CHAOS_SHADOWS names the gate mutants asked beside the gate (default: ShadowMutants;
// none: no shadow), whose figures the tally prints.
func TestChaos(t *testing.T) {
	pgtest.Slow(t)
	n, majors := 6, []int{15, 17}
	if s := os.Getenv("SLOTSYNC_CHAOS_ITERATIONS"); s != "" {
		n, _ = strconv.Atoi(s)
		majors = nil
	}
	// A fixed seed, so that CI draws the same plans each run; "clock" draws new ones.
	seed := int64(5100)
	switch s := os.Getenv("SLOTSYNC_CHAOS_SEED"); s {
	case "":
	case "clock":
		seed = time.Now().UnixNano() % 1_000_000_000
	default:
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	shadows, err := ParseShadows(cmp.Or(os.Getenv("SLOTSYNC_CHAOS_SHADOWS"), "default"))
	if err != nil {
		t.Fatalf("SLOTSYNC_CHAOS_SHADOWS: %v", err)
	}
	pgtest.ForEachMajor(t, majors, func(t *testing.T, major int) {
		bin := failpointSlotsync(t)
		var logs bytes.Buffer
		var plans []Plan
		if want := os.Getenv("SLOTSYNC_CHAOS_PLANS"); want != "" {
			plans = matrixPlans(t, want) // the plans written for the rules (mutants.go)
		}
		// Three minutes an iteration: the drawn ones, or each written plan (a sweep of them all
		// was cut at the sixth's bound before).
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(max(n, len(plans)))*3*time.Minute)
		defer cancel()
		state := t.TempDir()
		if dir := os.Getenv("SLOTSYNC_CHAOS_STATE_DIR"); dir != "" {
			state = filepath.Join(dir, fmt.Sprint(major)) // kept: slotsync's logs and journals, to read after a failure
		}
		report := os.Getenv("SLOTSYNC_CHAOS_REPORT")
		rep, err := Chaos(ctx, ChaosOptions{Seed: seed, Iterations: n, Plans: plans, Slotsync: bin, Arm: crashAt, StateDir: state, Shadows: shadows,
			Method: os.Getenv("SLOTSYNC_CHAOS_METHOD"), Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info}),
			NewPair: func(ctx context.Context) (*integration.Pair, error) {
				return integration.NewPair(ctx, integration.Options{Major: major, Backend: os.Getenv(integration.EnvBackend), Conf: ChaosConf})
			},
			Each: func(it ChaosIteration) {
				if report != "" {
					appendJSONLine(t, fmt.Sprintf("%s.pg%d.jsonl", report, major), it)
				}
			}})
		for _, it := range rep.Iterations {
			t.Logf("%s\n  ok %v, switchovers %d, slotsync crashed %d times, answers %s, problems %q", it.Plan, it.OK, it.Switchovers, it.SlotsyncCrashes, answers(it), it.Problems)
			if len(it.Skipped) > 0 {
				t.Logf("  skipped: %q", it.Skipped)
			}
			if len(it.HookAnswers) > 0 {
				t.Logf("  the hook asked %d times: first %q, last %q", len(it.HookAnswers), it.HookAnswers[0], it.HookAnswers[len(it.HookAnswers)-1])
			}
		}
		var table bytes.Buffer
		rep.Tally.Markdown(&table)
		t.Logf("seed %d (replay: SLOTSYNC_CHAOS_SEED=%d)\n%s", seed, seed, table.String())
		want := n
		if len(plans) > 0 {
			want = len(plans) // the written plans, each once, instead of drawn ones
		}
		if err != nil || !rep.OK || len(rep.Iterations) != want {
			t.Fatalf("chaos: %v\n%s", err, logs.String())
		}
	})
}

// appendJSONLine adds one iteration to a report of JSON lines (scripts/chaos-tally sums them).
func appendJSONLine(t *testing.T, path string, it ChaosIteration) {
	data, err := json.Marshal(it)
	if err != nil {
		t.Error(err)
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.Write(append(data, '\n'))
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Error(err)
	}
}

// crashAt is the environment that crashes slotsync at step (name@hit), or stalls it there
// (Plan.Stall).
func crashAt(step string, stall time.Duration) []string { return ArmFailpoint(step, stall) }

// failpointSlotsync builds slotsync with failpoints, once per test binary, into a directory of
// its own (in the run's temp directory, which scripts/test.sh removes): a build another run left
// is never taken for this one's, as one at a path keyed by the process id alone was, once the id
// came round again.
func failpointSlotsync(t *testing.T) string {
	t.Helper()
	bin, err := failpointBuild()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

var failpointBuild = stdsync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "slotsync-chaos-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "slotsync")
	out, err := exec.Command("go", "build", "-tags", "nethttpomithttp2,failpoints", "-o", bin, "../../cmd/slotsync").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build slotsync with failpoints: %w\n%s", err, out)
	}
	return bin, nil
})

// answers is an iteration's gate answers per slot, in one line.
func answers(it ChaosIteration) string {
	var b strings.Builder
	for _, j := range it.Judged {
		fmt.Fprintf(&b, "[%s %s: %s", j.Slot, j.Asked, j.Answer)
		if len(j.Reasons) > 0 {
			fmt.Fprintf(&b, " %v", j.Reasons)
		}
		if !j.Binding {
			b.WriteString(" (not binding)")
		}
		if j.Lost+j.Repeated+j.Ahead > 0 {
			fmt.Fprintf(&b, "; lost %d, repeated %d, ahead %d", j.Lost, j.Repeated, j.Ahead)
		}
		if j.Lie {
			b.WriteString(": " + j.Why)
		}
		if j.Error != "" {
			fmt.Fprintf(&b, " (exit %d: %.300s)", j.ExitCode, j.Error)
		}
		b.WriteString("] ")
	}
	return b.String()
}

// TestChaosCatchesALyingGate: the oracle is checked against a gate that answers READY for every
// slot while nothing syncs them (a stand-in for slotsync: `run` does nothing, `check` always says
// READY). The plan switches over and back, then stops the primary cleanly: each switch made on
// its READY loses the slots, and so does the promotion; the chaos drill must call the switches
// losses after READY and the last answer READY while loss.
func TestChaosCatchesALyingGate(t *testing.T) {
	pgtest.Slow(t)
	pgtest.ForEachMajor(t, []int{17}, func(t *testing.T, major int) {
		liar := filepath.Join(t.TempDir(), "slotsync")
		script := `#!/bin/sh
case "$1" in
run) exec sleep 600 ;;
check) echo '{"ready":true,"exit_code":0,"slots":[{"name":"drill_pgoutput","gate":true,"verdict":{"ready":true}},{"name":"drill_test_decoding","gate":true,"verdict":{"ready":true}}]}' ;;
esac
`
		if err := os.WriteFile(liar, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		// Written, not drawn: a seed draws another plan under each draw version.
		plan := Plan{Name: "a lying gate", Live: 3500 * time.Millisecond, Steps: []Step{{At: 1500 * time.Millisecond, Fault: FaultSwitchover}}}
		rep, err := Chaos(ctx, ChaosOptions{Plans: []Plan{plan}, Slotsync: liar, StateDir: t.TempDir(),
			NewPair: func(ctx context.Context) (*integration.Pair, error) {
				return integration.NewPair(ctx, integration.Options{Major: major, Backend: os.Getenv(integration.EnvBackend)})
			}})
		if err != nil {
			t.Fatal(err)
		}
		it := rep.Iterations[0]
		t.Logf("%s: %s", it.Plan, answers(it))
		if rep.OK || it.Lies == 0 || rep.Tally.Total.Lies != it.Lies {
			t.Fatalf("a gate saying READY for slots the standby does not have was not caught: %+v", it)
		}
		switches := 0
		for _, p := range it.Problems {
			if strings.Contains(p, "switchover after READY") {
				switches++
			}
		}
		if it.Switchovers != 2 || switches != 2 {
			t.Fatalf("the switchovers made on a lying READY were not caught (%d made): %q", it.Switchovers, it.Problems)
		}
	})
}

// TestFailpointStepsAreTheCodes: the steps the chaos drill can crash slotsync at, drawn or
// written (WrittenFailpoints), and those the engine's own tests arm (failpoint.Set), are exactly
// the failpoints the code hits (a step renamed or added in the code and not here would never be
// armed, or would arm nothing).
func TestFailpointStepsAreTheCodes(t *testing.T) {
	hit := regexp.MustCompile(`failpoint\.Hit\("([a-z.-]+)"\)`)
	set := regexp.MustCompile(`failpoint\.Set\("([a-z.-]+)[@=]`)
	inCode, inTests := map[string]bool{}, map[string]bool{}
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		src, err := os.ReadFile(path)
		if strings.HasSuffix(path, "_test.go") {
			for _, m := range set.FindAllStringSubmatch(string(src), -1) {
				inTests[m[1]] = true
			}
			return err
		}
		for _, m := range hit.FindAllStringSubmatch(string(src), -1) {
			inCode[m[1]] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, s := range WrittenFailpoints {
		known[s] = true
		if !inCode[s] {
			t.Errorf("failpoint %s is armed by written plans but no code hits it", s)
		}
	}
	for _, s := range FailpointSteps {
		known[s] = true
		if !inCode[s] {
			t.Errorf("step %s is drawn but no code hits it", s)
		}
	}
	for s := range inTests {
		known[s] = true
		if !inCode[s] {
			t.Errorf("failpoint %s is armed by a test but no code hits it", s)
		}
	}
	for s := range inCode {
		if !known[s] {
			t.Errorf("failpoint %s is in the code but never armed", s)
		}
	}
}

// TestReadIterations: a report read back is the iterations written, and a line cut short (a run
// stopped mid-write) ends it with an error naming the line, keeping what came before.
func TestReadIterations(t *testing.T) {
	its := []ChaosIteration{{Number: 1, Seed: 7, Major: 15, Faults: []Fault{FaultSidecarKill}, OK: true},
		{Number: 2, Seed: 8, Major: 15, Judged: []Judged{{Slot: "a", Answer: AnswerReady, Binding: true}}}}
	var b bytes.Buffer
	for _, it := range its {
		data, _ := json.Marshal(it)
		b.Write(append(data, '\n'))
	}
	got, err := ReadIterations(bytes.NewReader(b.Bytes()))
	if err != nil || len(got) != 2 || got[1].Judged[0].Answer != AnswerReady || got[0].Faults[0] != FaultSidecarKill {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	b.WriteString(`{"number":3,"se`)
	got, err = ReadIterations(&b)
	if err == nil || !strings.Contains(err.Error(), "line 3") || len(got) != 2 {
		t.Fatalf("a line cut short: %d iterations, %v", len(got), err)
	}
}

// TestReadPlans: a report's iteration replays its recorded plan, whatever the draw is now, and so
// does a plan written by hand.
func TestReadPlans(t *testing.T) {
	drawn := DrawPlan(7101, true)
	it, _ := json.Marshal(ChaosIteration{Number: 1, Seed: 7101, Drawn: drawn})
	hand, _ := json.Marshal(Plan{Name: "fresh slot", Live: 3 * time.Second, Steps: []Step{{At: 2700 * time.Millisecond, Fault: FaultSlotRecreated, Slot: "drill_pgoutput"}}})
	path := filepath.Join(t.TempDir(), "plans.jsonl")
	if err := os.WriteFile(path, []byte(string(it)+"\n"+string(hand)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plans, err := ReadPlans(path)
	if err != nil || len(plans) != 2 || plans[0].String() != drawn.String() || plans[1].Name != "fresh slot" || plans[0].Draw != DrawVersion {
		t.Fatalf("read back: %+v %v", plans, err)
	}
	if err := os.WriteFile(path, []byte(`{"seed": 1}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPlans(path); err == nil {
		t.Fatal("a line without a plan was taken")
	}
	bad, _ := json.Marshal(Plan{Name: "linger and hook", Live: 3 * time.Second, Hook: true, Linger: 5 * time.Second})
	if err := os.WriteFile(path, append(bad, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPlans(path); err == nil || !strings.Contains(err.Error(), "linger") {
		t.Fatalf("a plan that lingers with the hook's cutover: %v, want refused", err)
	}
}

// TestWrittenPlansCheck: every written plan is one the drill can carry out as written, and
// DrawPlan never draws a contradiction.
func TestWrittenPlansCheck(t *testing.T) {
	for _, p := range MatrixPlans() {
		if err := p.Check(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
	for seed := int64(0); seed < 2000; seed++ {
		if err := DrawPlan(seed, true).Check(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	if err := (Plan{Live: time.Second, Stall: time.Second}).Check(); err == nil {
		t.Error("a stall with no failpoint: accepted")
	}
	if err := (Plan{Live: time.Second, Freeze: true, Linger: time.Second}).Check(); err == nil {
		t.Error("a linger with the freeze's cutover: accepted")
	}
}

// matrixPlans are the MatrixPlans want names, in its order ("matrix": all of them).
func matrixPlans(t *testing.T, want string) []Plan {
	all := MatrixPlans()
	if want == "matrix" {
		return all
	}
	var out []Plan
	for _, name := range strings.Split(want, ",") {
		i := slices.IndexFunc(all, func(p Plan) bool { return p.Name == name })
		if i < 0 {
			t.Fatalf("SLOTSYNC_CHAOS_PLANS=%s names %q, which is not one of plans/*.yaml", want, name)
		}
		out = append(out, all[i])
	}
	return out
}

// TestQuietWindow: the gate must say READY only where nothing could hold a copy back: the writes
// paused 2 s or more, no fault in the last 5 s, no failpoint or switchover, the standby streaming.
func TestQuietWindow(t *testing.T) {
	ms := time.Millisecond
	streaming := &receiverLog{samples: []receiverSample{{at: time.Now(), streaming: true}}}
	cut := &receiverLog{samples: []receiverSample{{at: time.Now(), streaming: false}}}
	quietPlan := Plan{Live: 8000 * ms, Quiesce: 2000 * ms, Steps: []Step{{At: 1000 * ms, Fault: FaultPrimaryRoute, For: 3000 * ms}}}
	crashPlan := Plan{Live: 8000 * ms, Quiesce: 2000 * ms, Failpoint: "journal.exact-intended@1"}
	for _, c := range []struct {
		name    string
		plan    Plan
		recv    *receiverLog
		quiet   bool
		crashed time.Duration // how long before the question slotsync crashed (0: never)
	}{
		{"quiet", quietPlan, streaming, true, 0},
		{"the standby not streaming", quietPlan, cut, false, 0},
		{"writes paused too briefly", Plan{Live: 8000 * ms, Quiesce: 1500 * ms}, streaming, false, 0},
		{"a blackhole ending 4 s before", Plan{Live: 8000 * ms, Quiesce: 2000 * ms, Steps: []Step{{At: 5000 * ms, Fault: FaultPrimaryRoute, For: 1000 * ms}}}, streaming, false, 0},
		{"a drawn failpoint", Plan{Draw: DrawVersion, Live: 8000 * ms, Quiesce: 2000 * ms, Failpoint: "engine.actions-done@1"}, streaming, false, 0},
		{"a drawn failpoint that crashed long before", Plan{Draw: DrawVersion, Live: 8000 * ms, Quiesce: 2000 * ms, Failpoint: "engine.actions-done@1"},
			streaming, false, 7 * time.Second},
		{"a written stall", Plan{Live: 8000 * ms, Quiesce: 2000 * ms, Failpoint: "journal.exact-intended@1", Stall: time.Second}, streaming, false,
			7 * time.Second},
		// A written plan's crash: the window is quiet once slotsync crashed there, 5 s before.
		{"a written crash not reached", crashPlan, streaming, false, 0},
		{"a written crash 2 s before", crashPlan, streaming, false, 2 * time.Second},
		{"a written crash 6 s before", crashPlan, streaming, true, 6 * time.Second},
		{"a copy dropped once", Plan{Live: 8000 * ms, Quiesce: 2000 * ms, Steps: []Step{{At: 500 * ms, Fault: FaultCopyDropped}}}, streaming, true, 0},
		// The second change of a copy by someone else makes slotsync leave it (other_synchronizer).
		{"a copy dropped twice", Plan{Live: 8000 * ms, Quiesce: 2000 * ms, Steps: []Step{{At: 500 * ms, Fault: FaultCopyDropped},
			{At: 900 * ms, Fault: FaultCopyDropped}}}, streaming, false, 0},
		{"a copy dropped on each standby", Plan{Live: 8000 * ms, Quiesce: 2000 * ms, Steps: []Step{{At: 500 * ms, Fault: FaultCopyDropped},
			{At: 900 * ms, Fault: FaultCopyDropped, Second: true}}}, streaming, true, 0},
		// A consumer away holds its slot's new copy back, unless it came back before the window.
		{"a consumer away", Plan{Live: 8000 * ms, Quiesce: 2000 * ms, Steps: []Step{{At: 500 * ms, Fault: FaultSlotBehind, Slot: "a", Away: true},
			{At: 900 * ms, Fault: FaultConsumerReconnect, Slot: "a"}}}, streaming, false, 0},
		{"a consumer away and back", Plan{Live: 8000 * ms, Quiesce: 2000 * ms, Steps: []Step{{At: 500 * ms, Fault: FaultSlotBehind, Slot: "a", Away: true},
			{At: 900 * ms, Fault: FaultConsumerBack, Slot: "a"}}}, streaming, true, 0},
		{"another consumer back", Plan{Live: 8000 * ms, Quiesce: 2000 * ms, Steps: []Step{{At: 500 * ms, Fault: FaultSlotBehind, Slot: "a", Away: true},
			{At: 900 * ms, Fault: FaultConsumerBack, Slot: "b"}}}, streaming, false, 0},
	} {
		wd := &world{recv: c.recv, side: &sidecar{}}
		if c.crashed > 0 {
			wd.side.crashedAt = time.Now().Add(-c.crashed)
		}
		if got := wd.quiet(c.plan) != ""; got != c.quiet {
			t.Errorf("%s: quiet %v, want %v", c.name, got, c.quiet)
		}
	}
}

// TestLiveEndsEarly: a fault that found its window ends the live phase at once, and every wait
// of the live phase after it returns false.
func TestLiveEndsEarly(t *testing.T) {
	wd := &world{liveEnds: make(chan struct{})}
	ctx := context.Background()
	if !wd.liveUntil(ctx, time.Now().Add(time.Millisecond)) {
		t.Fatal("the live phase ended before anything ended it")
	}
	go wd.endLive()
	start := time.Now()
	if wd.liveUntil(ctx, time.Now().Add(time.Minute)) || time.Since(start) > 10*time.Second {
		t.Fatalf("a wait of the live phase went on %s after it was ended", time.Since(start))
	}
	wd.endLive() // twice is once
	if wd.liveUntil(ctx, time.Now()) {
		t.Fatal("a wait after the end of the live phase returned true")
	}
}

// TestReachedFailpoint: a failpoint is armed at a step the iteration's method reaches.
func TestReachedFailpoint(t *testing.T) {
	for _, c := range []struct {
		fp        string
		statefile bool
		want      string
	}{
		{"engine.gate-record@2", true, "engine.gate-record@2"},
		{"engine.gate-record@2", false, "engine.gate-record@2"},
		{"hold.taken@1", true, "hold.taken@1"},
		{"sql.after-create@3", false, "sql.after-create@3"},
		{"", false, ""},
	} {
		if got := reachedFailpoint(c.fp, c.statefile); got != c.want {
			t.Errorf("%s (statefile %v): armed %q, want %q", c.fp, c.statefile, got, c.want)
		}
	}
	for _, step := range FailpointSteps {
		for _, sf := range []bool{true, false} {
			got, _, _ := strings.Cut(reachedFailpoint(step+"@1", sf), "@")
			own := strings.HasPrefix(got, "statefile.") || strings.HasPrefix(got, "hold.")
			other := strings.HasPrefix(got, "sql.") || strings.HasPrefix(got, "watch.")
			if sf && other || !sf && own {
				t.Errorf("%s on the state-file method %v: armed %s, a step it never reaches", step, sf, got)
			}
		}
	}
}

// TestMethodArgs: the native method's flags drive the server's sync unless the plan leaves it
// to the server's own worker (Plan.ServerSync), and drop stale same-name slots unless it keeps
// them (Plan.KeepStale); a plan naming no method passes none.
func TestMethodArgs(t *testing.T) {
	for _, c := range []struct {
		method string
		native nativeOpts
		want   string
	}{
		{"", nativeOpts{}, ""},
		{"sql", nativeOpts{keepStale: true}, "--method sql"},
		{"native", nativeOpts{}, "--method native --native-drive --drop-stale"},
		{"native", nativeOpts{serverSync: true}, "--method native --drop-stale"},
		{"native", nativeOpts{keepStale: true}, "--method native --native-drive"},
	} {
		if got := strings.Join(methodArgs(c.method, c.native), " "); got != c.want {
			t.Errorf("%q (%+v): %q, want %q", c.method, c.native, got, c.want)
		}
	}
}

// TestPromisedAlive: an answer judged without a primary that was alive is held to a judgement
// with it unless the standby had not streamed for --primary-gone-after when the gate judged,
// not when it was asked: a check watches the standby that long before judging (the explorer's
// hook-route-and-standby-cut plan counted the gate's answer, judged 10 s after it was asked, as
// a lie).
func TestPromisedAlive(t *testing.T) {
	asked := time.Now()
	recv := &receiverLog{samples: []receiverSample{{at: asked.Add(-2 * time.Second), streaming: true}, {at: asked.Add(-700 * time.Millisecond), streaming: true},
		{at: asked.Add(-600 * time.Millisecond), streaming: false}, {at: asked.Add(11 * time.Second), streaming: false}}}
	for _, c := range []struct {
		name     string
		judged   time.Time
		promised bool
	}{
		{"judged at once", asked.Add(50 * time.Millisecond), true},
		{"judged 2 s later", asked.Add(2 * time.Second), true},
		{"judged after watching the standby 10 s", asked.Add(10500 * time.Millisecond), false},
		{"no judgement time given: when asked", time.Time{}, true},
	} {
		got, ago := promisedAlive(GateAnswer{Asked: asked, Judged: c.judged, WithoutPrimary: true}, recv)
		if got != c.promised {
			t.Errorf("%s: promised %v (standby streamed %s before), want %v", c.name, got, ago, c.promised)
		}
	}
}

// TestStandbyRestartingErrors: a fault on the standby is skipped, not counted as a problem, when
// the standby was starting, stopping (a state-file restart ending the fault's session: seen by
// the long run of round 9, seed 20293055 on 15), exiting as it connects, or not listening; any
// other error is a problem.
func TestStandbyRestartingErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		skip bool
	}{
		{&pgconn.PgError{Code: "57P03", Message: "the database system is shutting down"}, true},
		{fmt.Errorf("standby: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}), true},
		{errors.New("dial tcp 127.0.0.1:5433: connect: connection refused"), true},
		// The postmaster exiting as the fault connects (the long run of round 20, seed 20602076
		// on 14: a copy dropped 180 ms in, as the first state-file restart stopped the standby).
		{errors.New("connect to standby: failed to connect to `user=postgres database=postgres`: 127.0.0.1:45691 (127.0.0.1): failed to receive message: " +
			"read tcp 127.0.0.1:44992->127.0.0.1:45691: read: connection reset by peer"), true},
		{&pgconn.PgError{Code: "42501", Message: "permission denied"}, false},
		{nil, false},
	} {
		if got := standbyRestarting(c.err); got != c.skip {
			t.Errorf("%v: skipped %v, want %v", c.err, got, c.skip)
		}
	}
}

// TestIdentifyNamesTheBinary: a report names the slotsync binary it ran by the SHA-256 of its
// bytes and the commit Go recorded in it.
func TestIdentifyNamesTheBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	id := identify(self)
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if id.Path != self || id.SHA256 != hex.EncodeToString(sum[:]) || id.Commit == "" {
		t.Fatalf("identify(%s) = %+v", self, id)
	}
	if none := identify(filepath.Join(t.TempDir(), "missing")); none.SHA256 != "" {
		t.Fatalf("a missing binary: %+v", none)
	}
}

// promiseFixture is what the oracle knows of a record's moment (recordPromise), the standby's
// WAL at the promotion 0/1000.
type promiseFixture struct {
	name     string
	facts    recordFacts
	promised bool
}

// promiseFixtures: judged without the primary, what rule 8 rules out of a consumer ahead of the
// standby (TestRecordPromise; the changes of TestOracleChangesAreCaught turn one each).
var promiseFixtures = []promiseFixture{
	{"a record of a streaming standby, the consumer behind its WAL", recordFacts{confirmedBefore: 0x900}, false},
	{"the slot held back", recordFacts{heldBack: true, confirmedBefore: 0x900}, true},
	{"a record made while the standby did not stream", recordFacts{cutOff: true, confirmedBefore: 0x900}, true},
	{"the consumer past the standby's WAL before the record", recordFacts{confirmedBefore: 0x1100}, true},
	{"the consumer exactly at the standby's WAL", recordFacts{confirmedBefore: 0x1000}, false},
	{"the primary found demoted", recordFacts{demoted: true, confirmedBefore: 0x900}, true},
}

// promisesWrong is the fixtures a recordPromise gets wrong.
func promisesWrong(promise func(recordFacts) string) []string {
	var wrong []string
	for _, c := range promiseFixtures {
		f := c.facts
		f.walEnd = 0x1000
		if got := promise(f); (got != "") != c.promised {
			wrong = append(wrong, c.name)
		}
	}
	return wrong
}

// TestRecordPromise: judged without the primary, what rule 8 rules out of a consumer ahead of
// the standby (excuses no wider than the rules), and whether the standby streamed around a
// record's moment as its samples say.
func TestRecordPromise(t *testing.T) {
	if wrong := promisesWrong(recordPromise); len(wrong) > 0 {
		t.Errorf("wrong on %v", wrong)
	}
	at := time.Now()
	samples := func(streaming ...bool) *receiverLog {
		r := &receiverLog{}
		for i, s := range streaming {
			r.samples = append(r.samples, receiverSample{at: at.Add(time.Duration(i-len(streaming)/2) * receiverEvery), streaming: s})
		}
		return r
	}
	for _, c := range []struct {
		name string
		recv *receiverLog
		want bool
	}{
		{"not streaming all around", samples(false, false, false, false, false), true},
		{"streaming just before", samples(false, true, false, false, false), false},
		{"streaming just after", samples(false, false, false, true, false), false},
		{"streaming before the margin", samples(true, true, false, false, false, false, false, false, false, false, false), true},
		{"no sample", &receiverLog{}, false},
		{"no log", nil, false},
	} {
		if got := c.recv.notStreamingAround(at, recordMargin); got != c.want {
			t.Errorf("%s: not streaming around %v, want %v", c.name, got, c.want)
		}
	}
}

// TestDrawnTimedLastSeconds: draw 11 keeps draw 10's plan from a seed, except that the plans
// that end in the primary's last seconds, but for a cut of the standby's receiver alone, have
// them timed against slotsync's passes: each kind of timing in some plans, each as
// timeLastSeconds says.
func TestDrawnTimedLastSeconds(t *testing.T) {
	kinds := map[string]int{}
	for seed := int64(0); seed < 1000; seed++ {
		before, _, _ := drawBeforeTiming(seed, true)
		p, timed := timedPlan(seed)
		if got := withoutLaterDraws(DrawPlan(seed, true)); got.String() != p.String() {
			t.Fatalf("seed %d: DrawPlan drew (what draws 13-15 add left out)\n%s\nnot\n%s", seed, got, p)
		}
		kinds[timed]++
		if timed == "" {
			if before.String() != p.String() {
				t.Fatalf("seed %d: an untimed plan changed:\n got %s\nwant %s", seed, p, before)
			}
			continue
		}
		if why := timedAsSaid(p, timed); why != "" {
			t.Fatalf("seed %d (%s): %s\n%s", seed, timed, why, p)
		}
	}
	t.Log(kinds)
	for _, k := range []string{timedRecordInCut, timedWritesJustAfter, timedDemoteAfterCut, timedViewEndsEarly} {
		if kinds[k] < 15 {
			t.Errorf("%q drawn in %d of 1000 plans", k, kinds[k])
		}
	}
}

// timedPlan is the plan draw 12 drew from seed (failpoints drawn), its last seconds timed, and
// the timing they were given ("": none).
func timedPlan(seed int64) (Plan, string) {
	p, rng, last := drawBeforeTiming(seed, true)
	if !last {
		return p, ""
	}
	return p, timeLastSeconds(rng, &p)
}

// withoutFault is p without its steps of fault f.
func withoutFault(p Plan, f Fault) Plan {
	p.Steps = slices.DeleteFunc(slices.Clone(p.Steps), func(s Step) bool { return s.Fault == f })
	return p
}

// TestDrawnOlderAdvanced: draw 13 adds to half the plans whose slotsync view ends early an
// advance of the older slot of the slot made again in the gap, 100-400 ms before the view ends,
// and to no other plan; draw 15 moves half of those advances to an interval and 300-600 ms
// before the view ends, the writes paused from 10-60 ms after it until 100-300 ms past the
// view's end.
func TestDrawnOlderAdvanced(t *testing.T) {
	advanced, justBehind := 0, 0
	for seed := int64(0); seed < 1000; seed++ {
		_, timed := timedPlan(seed)
		got := DrawPlan(seed, true)
		i := slices.IndexFunc(got.Steps, func(s Step) bool { return s.Fault == FaultOlderAdvanced })
		if i < 0 {
			continue
		}
		advanced++
		a := got.Steps[i]
		view := slices.IndexFunc(got.Steps, endsView)
		remade := slices.IndexFunc(got.Steps, func(s Step) bool { return s.Fault == FaultSlotBehind && s.Away && s.At > a.At && s.Slot == a.Slot })
		if timed != timedViewEndsEarly {
			t.Fatalf("seed %d (%q): an older slot advanced\n%s", seed, timed, got)
		}
		if view < 0 || remade < 0 {
			t.Fatalf("seed %d: no view's end, or no slot made again from the older slot advanced\n%s", seed, got)
		}
		lo, hi := 100*time.Millisecond, 400*time.Millisecond
		if w, ok := pausedJustAfter(got, a); ok {
			justBehind++
			iv, end := cmp.Or(got.Interval, explorerInterval), got.Steps[view].At
			lo, hi = iv+300*time.Millisecond, iv+600*time.Millisecond
			if w.At+w.For < end+100*time.Millisecond || w.At+w.For > end+300*time.Millisecond {
				t.Fatalf("seed %d: the writes resume %s after the view ends, want 100-300 ms\n%s", seed, w.At+w.For-end, got)
			}
		}
		if before := got.Steps[view].At - a.At; before < lo && a.At > 0 || before > hi {
			t.Fatalf("seed %d: the older slot advanced %s before the view ends, want %s-%s\n%s", seed, before, lo, hi, got)
		}
	}
	if advanced < 15 || justBehind < advanced/4 || justBehind > advanced*3/4 {
		t.Errorf("an older slot advanced in %d of 1000 plans, %d of them just behind the copy", advanced, justBehind)
	}
	t.Logf("an older slot advanced in %d of 1000 plans, %d of them just behind the copy", advanced, justBehind)
}

// pausedJustAfter is the writes' pause draw 15 puts 10-60 ms after the older slot's advance a,
// lasting less than the last seconds' faults, if p has one.
func pausedJustAfter(p Plan, a Step) (Step, bool) {
	i := slices.IndexFunc(p.Steps, func(s Step) bool {
		return s.Fault == FaultWritesPaused && s.For < lastFor && s.At >= a.At+10*time.Millisecond && s.At <= a.At+60*time.Millisecond
	})
	if i < 0 {
		return Step{}, false
	}
	return p.Steps[i], true
}

// withoutLaterDraws is p without what draws 13 to 15 add to a timed plan: the older slot's
// advance, the late confirmations at a cut, and the writes' pause just after the advance.
func withoutLaterDraws(p Plan) Plan {
	if i := slices.IndexFunc(p.Steps, func(s Step) bool { return s.Fault == FaultOlderAdvanced }); i >= 0 {
		if w, ok := pausedJustAfter(p, p.Steps[i]); ok {
			p.Steps = slices.DeleteFunc(slices.Clone(p.Steps), func(s Step) bool { return s == w })
		}
	}
	return withoutFault(withoutFault(p, FaultOlderAdvanced), FaultConsumersConfirmLate)
}

// TestDrawnConfirmLateAtCut: draw 14 has the consumers confirm every 2-5 s from up to 200 ms
// before the standby's cut or stalled walsender in two of three plans whose writes stop just
// after it and whose consumers confirm at each commit, and in no other plan.
func TestDrawnConfirmLateAtCut(t *testing.T) {
	late, eligible := 0, 0
	for seed := int64(0); seed < 1000; seed++ {
		p, timed := timedPlan(seed)
		got := DrawPlan(seed, true)
		if timed == timedWritesJustAfter && p.ConfirmEvery == 0 {
			eligible++
		}
		i := slices.IndexFunc(got.Steps, func(s Step) bool { return s.Fault == FaultConsumersConfirmLate })
		if i < 0 {
			continue
		}
		late++
		s := got.Steps[i]
		c := slices.IndexFunc(got.Steps, func(s Step) bool {
			return s.For == lastFor && (s.Fault == FaultStandbyCutOff || s.Fault == FaultSenderStalled)
		})
		switch {
		case timed != timedWritesJustAfter || got.ConfirmEvery > 0:
			t.Fatalf("seed %d (%q, consumers confirming every %s): late confirmations drawn\n%s", seed, timed, got.ConfirmEvery, got)
		case c < 0 || got.Steps[c].At-s.At > 200*time.Millisecond || s.At > got.Steps[c].At:
			t.Fatalf("seed %d: the late confirmations do not start up to 200 ms before the cut\n%s", seed, got)
		case s.For < 2*time.Second || s.For > 5*time.Second:
			t.Fatalf("seed %d: the consumers confirm every %s, want 2-5 s\n%s", seed, s.For, got)
		}
	}
	t.Logf("late confirmations at the cut in %d of 1000 plans, of %d that could have them", late, eligible)
	if late < eligible/2 || late == eligible {
		t.Errorf("late confirmations at the cut in %d of the %d plans that could have them, want about two in three", late, eligible)
	}
}

// timedAsSaid says how plan p's last seconds break the timing timed ("": they keep it).
func timedAsSaid(p Plan, timed string) string {
	iv := cmp.Or(p.Interval, explorerInterval)
	find := func(ok func(Step) bool) (Step, bool) {
		i := slices.IndexFunc(p.Steps, ok)
		if i < 0 {
			return Step{}, false
		}
		return p.Steps[i], true
	}
	is := func(fs ...Fault) func(Step) bool {
		return func(s Step) bool { return slices.Contains(fs, s.Fault) && s.For == lastFor }
	}
	view, viewOK := find(is(FaultSidecarPause, FaultPrimaryRoute))
	cut, cutOK := find(is(FaultStandbyCutOff))
	stopped, stoppedOK := find(is(FaultWritesPaused))
	switch timed {
	case timedRecordInCut:
		w, ok := find(func(s Step) bool { return s.Fault == FaultWritesPaused && s.For != lastFor })
		resume := w.At + w.For
		if !ok || !cutOK || !viewOK || w.At > cut.At || view.At < cut.At+iv+500*time.Millisecond ||
			resume < view.At+300*time.Millisecond || resume > view.At+time.Second || p.Live < resume+time.Second {
			return "slotsync's view does not end in the writes' pause, a pass after the cut, 1 s before the primary's end"
		}
	case timedWritesJustAfter:
		c, ok := find(is(FaultStandbyCutOff, FaultSenderStalled))
		if !ok || !stoppedOK || stopped.At < c.At+20*time.Millisecond || stopped.At > c.At+250*time.Millisecond {
			return "the writes do not stop 20-250 ms after the standby's cut"
		}
	case timedDemoteAfterCut:
		cut, cutOK = find(func(s Step) bool { return s.Fault == FaultStandbyCutOff && s.For == demotedCutFor })
		if !p.Demote || p.Hook || !cutOK || !viewOK || cut.At > p.Live-600*time.Millisecond || cut.At-view.At > 600*time.Millisecond ||
			cut.At-view.At < 100*time.Millisecond && view.At > 0 {
			return "slotsync not paused just before the cut, or the primary not demoted"
		}
	case timedViewEndsEarly:
		end := stopped.At
		remade, ok := find(func(s Step) bool {
			return s.Fault == FaultSlotBehind && s.Away && s.At > view.At && s.At <= end-300*time.Millisecond
		})
		if !viewOK || !stoppedOK || cutOK || end-view.At < iv+time.Second || end-view.At > 2*iv+2200*time.Millisecond || view.At < 2500*time.Millisecond || !ok {
			return fmt.Sprintf("slotsync's view ends %s before the last commit (want an interval and 1-2.2 s more), or no slot made again between (%v)",
				end-view.At, remade)
		}
	default:
		return "an unknown timing"
	}
	return ""
}
