package explore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	stdsync "sync"
	"time"

	"github.com/slotsync/slotsync/integration/drill"
)

// Shadow gates: beside the gate's questions in an iteration, each gate mutant (a check switched off in
// the gate's answer alone, SLOTSYNC_MUTANT given to that one `check`) is asked at the same moment,
// with the servers read once right before all of them and once right after. Where the plan's
// failover does not wait on the answer (a kill or a stop, a demotion, every question without the
// primary), a mutant's answer is as binding as the gate's and is judged by both oracles; a hook's
// questions are asked until the gate says READY, so a mutant's answer there is judged by the rules
// at the instant alone, unless it came with the READY the hook promoted on. One drawn iteration so
// judges every gate mutant, where the mutation matrix runs one iteration per mutant (and switches
// the check off in the sidecar's record too).

// ShadowMutants are the gate mutants asked beside the gate by default: the boundary and
// whole-check mutants of the rules a drawn fault reaches (rules 4, 5 and 8), each decided at the
// gate's question.
var ShadowMutants = []string{
	"readiness:consumer_ahead_of_standby", "readiness:copy_confirmed_flush_ahead", "copy-ahead-allowance-4k",
	"copy-ahead-allowance-64k", "consumer-ahead-slack-4k", "consumer-ahead-confirmed-only", "without:consumer_ahead_of_standby",
	"without:record_standby_cut_off", "primary-gone-after-1ms", "primary-gone-after-5s", "seen-unchecked", "seen-margin-doubled",
	"record-outlived", "record-margin-doubled",
}

// questionMutants are the mutants whose switch decides the gate's own answer at its question, the
// ones a shadow gate carries, each with the rule of docs/RULES.md it switches off; where the
// sidecar reads the switch too (the readiness it records), a shadow switches it off at the
// question alone, the sidecar running as built.
var questionMutants = map[string]string{
	"readiness:consumer_ahead_of_standby": "5", "readiness:copy_confirmed_flush_ahead": "4", "copy-ahead-allowance-4k": "4",
	"copy-ahead-allowance-64k": "4", "consumer-ahead-slack-4k": "5", "consumer-ahead-confirmed-only": "5",
	"without:consumer_ahead_of_standby": "8", "without:record_standby_cut_off": "8", "primary-gone-after-1ms": "8a",
	"primary-gone-after-5s": "8a", "seen-unchecked": "8a", "seen-margin-doubled": "8a", "record-outlived": "8a",
	"record-margin-doubled": "8a", "without:identity_mismatch": "8", "without:missing": "8", "without:copy_invalidated": "8",
	"without:copy_wal_missing": "8", "without:record_of_another_timeline": "8", "without:slot_not_observed": "8b",
	"upstream-unchecked": "8b", "upstream-pending-unchecked": "8b", "for-promotion-unchecked": "8c",
}

// ParseShadows reads a list of shadow mutants: "" or "none" for none, "default" for
// ShadowMutants, else names separated by commas, each one a shadow gate carries.
func ParseShadows(s string) ([]string, error) {
	switch s {
	case "", "none":
		return nil, nil
	case "default":
		return slices.Clone(ShadowMutants), nil
	}
	var out []string
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); questionMutants[name] == "" {
			return nil, fmt.Errorf("%q is not a mutant a shadow gate carries: name one of %s, or default", name,
				strings.Join(slices.Sorted(maps.Keys(questionMutants)), ", "))
		}
		out = append(out, name)
	}
	return out, nil
}

// ShadowAnswer is what one gate mutant answered beside the gate: with the primary (at the
// question the failover followed, or a hook's first) and without it (its first answer that was
// not CANNOT TELL, else its last).
type ShadowAnswer struct {
	Mutant string     `json:"mutant"`
	With   GateAnswer `json:"with"`
	// WithBinding: the answer with the primary bound the promotion as the gate's did.
	WithBinding bool       `json:"with_binding"`
	Without     GateAnswer `json:"without"`
	// Readier: at some question it was asked beside the gate, the mutant said READY for a slot
	// the gate did not, or sooner (readierThan): the check it switches off decided there, so a
	// run in which a mutant is never readier did not reach it.
	Readier bool `json:"ready_where_the_gate_was_not,omitempty"`
}

// readierThan says whether answer m, a mutant's, is readier than gate's, asked beside it: READY
// for a slot (any it named, the older slots too) that gate's is not READY for, or judged READY
// for one sooner than gate's (by more than readierBy: a gate that watched the standby longer
// before it judged, --primary-gone-after), or exit 0 where gate's is not.
func readierThan(m, gate GateAnswer) bool {
	if m.Exit == 0 && gate.Exit != 0 {
		return true
	}
	for slot := range m.Slots {
		if m.For(slot) != AnswerReady {
			continue
		}
		if gate.For(slot) != AnswerReady || !m.Judged.IsZero() && gate.Judged.Sub(m.Judged) > readierBy {
			return true
		}
	}
	return false
}

// readierBy is how much sooner than the gate's a mutant's READY must be judged to count as
// readier: more than the spread of checks started at the same moment.
const readierBy = time.Second

// ShadowVerdict is one gate mutant's answers in an iteration, judged as the gate's are: a READY
// while loss (by the rules at the instant or by the outcome), or an answer that disagrees with
// itself, kills it.
type ShadowVerdict struct {
	Mutant string `json:"mutant"`
	Lies   int    `json:"ready_while_loss"`
	// Instant: a lie was one of the rules at the instant; Why: the first lie, with its slot.
	Instant bool   `json:"instant,omitempty"`
	Why     string `json:"why,omitempty"`
	Problem string `json:"problem,omitempty"`
	// Readier: the mutant said READY where the gate beside it did not, or sooner
	// (ShadowAnswer.Readier).
	Readier bool `json:"ready_where_the_gate_was_not,omitempty"`
}

// Killed: the mutant was caught in the iteration.
func (v ShadowVerdict) Killed() bool { return v.Lies > 0 || v.Problem != "" }

// judgeShadows judges each shadow answer of h as judge judges the gate's, in the same History
// (the same consumers, truths and promotion).
func judgeShadows(h *History, fv drill.FailoverVerdict, truths []Truth) []ShadowVerdict {
	var out []ShadowVerdict
	for _, s := range h.Shadows {
		hs := *h
		hs.With, hs.WithBinding, hs.Without, hs.Shadows = s.With, s.WithBinding, s.Without, nil
		v := ShadowVerdict{Mutant: s.Mutant, Readier: s.Readier}
		for _, j := range judge(&hs, fv, truths) {
			if !j.Lie {
				continue
			}
			v.Lies++
			if v.Why == "" {
				v.Why, v.Instant = j.Slot+": "+j.Why, j.Instant != ""
			}
		}
		for _, a := range []GateAnswer{s.With, s.Without} {
			if d := a.disagreement(); d != "" && !a.Asked.IsZero() && v.Problem == "" {
				v.Problem = d
			}
		}
		out = append(out, v)
	}
	return out
}

// askBeside asks the gate and, at the same moment, each of shadows, with the servers read once
// right before all of them and once right after: the gate's answer, and each shadow's by name.
func (wd *world) askBeside(ctx context.Context, shadows []string) (GateAnswer, map[string]GateAnswer, error) {
	args := append([]string{"check", "--json"}, wd.gateArgs...)
	if wd.exact {
		args = append(args, "--exact")
	}
	if wd.forPromotion {
		args = append(args, "--for-promotion")
	}
	before := readInstant(ctx, wd.pair.Primary, wd.pair.Standby, wd.instantSlots(), wd.secondNode)
	before.RouteCut = wd.proxy.Blackholed()
	answers, errs := make([]GateAnswer, len(shadows)+1), make([]error, len(shadows)+1)
	var wg stdsync.WaitGroup
	for i := range answers {
		mutant := ""
		if i > 0 {
			mutant = shadows[i-1]
		}
		wg.Go(func() { answers[i], errs[i] = wd.check(ctx, args, mutant) })
	}
	wg.Wait()
	after := readInstant(ctx, wd.pair.Primary, wd.pair.Standby, wd.instantSlots(), wd.secondNode)
	after.RouteCut = wd.proxy.Blackholed()
	for i := range answers {
		answers[i].Before, answers[i].After = &before, &after
	}
	a := answers[0]
	if d := a.disagreement(); errs[0] == nil && d != "" {
		wd.disagreements = append(wd.disagreements, fmt.Sprintf("the gate's answer disagrees with itself at %s: %s", a.Asked.Format("15:04:05.000"), d))
	}
	got := map[string]GateAnswer{}
	for i, m := range shadows {
		if errs[i+1] != nil {
			wd.shadowErrors = append(wd.shadowErrors, fmt.Sprintf("%s: %v", m, errs[i+1]))
			continue
		}
		got[m] = answers[i+1]
		if errs[0] == nil && readierThan(answers[i+1], a) {
			if wd.shadowReadier == nil {
				wd.shadowReadier = map[string]bool{}
			}
			wd.shadowReadier[m] = true
		}
	}
	return a, got, errs[0]
}

// check runs one `slotsync check` with args, as the gate ("": in the explorer's own environment)
// or as the gate mutant named.
func (wd *world) check(ctx context.Context, args []string, mutant string) (GateAnswer, error) {
	asked := time.Now()
	cmd := exec.CommandContext(ctx, wd.bin, args...)
	if mutant != "" {
		cmd.Env = append(os.Environ(), "SLOTSYNC_MUTANT="+mutant)
	}
	out, err := cmd.Output()
	returned := time.Now()
	exit := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		exit = ee.ExitCode()
	} else if err != nil {
		return GateAnswer{}, fmt.Errorf("gate: %w", err)
	}
	a, err := parseCheck(out, exit, asked, wd.exact)
	a.ForPromotion, a.Returned, a.Output = wd.forPromotion, returned, string(out)
	return a, err
}

// shadowsWithout keeps the shadows' answers without the primary, as askWithoutPrimary asks again:
// each shadow's first that is not CANNOT TELL, else its last; the shadows still to ask.
func (wd *world) shadowsWithout(pending []string, got map[string]GateAnswer) []string {
	if wd.shadowWithout == nil {
		wd.shadowWithout = map[string]GateAnswer{}
	}
	var still []string
	for _, m := range pending {
		a, ok := got[m]
		if ok {
			wd.shadowWithout[m] = a
		}
		if !ok || a.CannotTell {
			still = append(still, m)
		}
	}
	return still
}

// shadowHistory is the shadows' answers as a History keeps them, in the order they were asked;
// binding: the gate's answer with the primary bound the promotion. Those with the primary came
// with that answer unless a hook asked again after its first question, the only one shadowed.
func (wd *world) shadowHistory(binding bool) []ShadowAnswer {
	atBinding := !wd.hook || len(wd.hookAnswers) == 1
	var out []ShadowAnswer
	for _, m := range wd.shadows {
		out = append(out, ShadowAnswer{Mutant: m, With: wd.shadowWith[m], WithBinding: binding && atBinding, Without: wd.shadowWithout[m],
			Readier: wd.shadowReadier[m]})
	}
	return out
}
