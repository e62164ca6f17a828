package explore

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Tally sums a chaos run: per major, method and fault, how often the gate answered what, and
// how often a READY was followed by a loss.
type Tally struct {
	Failovers int        `json:"failovers"`
	Rows      []TallyRow `json:"rows"`
	Total     TallyRow   `json:"total"`
	// Reasons counts every NOT READY reason the gate gave, over all answers judged.
	Reasons map[string]int `json:"reasons"`
	// Caught: of the binding answers an always-READY gate would have been caught lying on, what
	// the gate answered there: each NOT READY reason it named, or the answer itself (CANNOT
	// TELL, error, or READY: the gate's own lie).
	Caught map[string]int `json:"always_ready_caught_where"`
	// Shadows: per major, each gate mutant asked beside the gate (shadow.go) and where it was
	// caught.
	Shadows []ShadowRow `json:"shadows,omitempty"`
}

// ShadowRow counts one gate mutant's iterations on one major: asked in, caught in (by the rules
// at the instant, by the outcome, by an answer that disagreed with itself), the failovers it was
// caught at (hook, kill, stop, demote), and the first seeds that caught it.
type ShadowRow struct {
	Major  int    `json:"major"`
	Mutant string `json:"mutant"`
	// Rule: the rule of docs/RULES.md the mutant switches off.
	Rule       string         `json:"rule"`
	Iterations int            `json:"iterations"`
	Killed     int            `json:"killed"`
	ByInstant  int            `json:"by_the_instant"`
	ByOutcome  int            `json:"by_the_outcome"`
	ByProblem  int            `json:"by_a_problem"`
	ByFailover map[string]int `json:"by_failover"`
	Seeds      []int64        `json:"first_seeds"`
	// Readier: the iterations in which it said READY where the gate beside it did not, or sooner
	// (it was reached); ReadierMissed: the first seeds of those in which it was not caught.
	Readier       int     `json:"ready_where_the_gate_was_not"`
	ReadierMissed []int64 `json:"readier_not_caught_seeds,omitempty"`
}

func (r *ShadowRow) add(it ChaosIteration, v ShadowVerdict) {
	r.Iterations++
	if v.Readier {
		r.Readier++
		if !v.Killed() && len(r.ReadierMissed) < 5 {
			r.ReadierMissed = append(r.ReadierMissed, it.Seed)
		}
	}
	if !v.Killed() {
		return
	}
	r.Killed++
	switch {
	case v.Lies > 0 && v.Instant:
		r.ByInstant++
	case v.Lies > 0:
		r.ByOutcome++
	default:
		r.ByProblem++
	}
	r.ByFailover[failoverKind(it.Drawn)]++
	if len(r.Seeds) < 5 {
		r.Seeds = append(r.Seeds, it.Seed)
	}
}

// failoverKind names a plan's failover for the tally.
func failoverKind(p Plan) string {
	switch {
	case p.Hook:
		return "hook"
	case p.Demote:
		return "demote"
	case p.Kill:
		return "kill"
	}
	return "stop"
}

// shadowRows sums the shadows of its, per major and mutant, in the order first asked.
func shadowRows(its []ChaosIteration) []ShadowRow {
	var out []ShadowRow
	at := map[[2]string]int{}
	for _, it := range its {
		for _, v := range it.Shadows {
			key := [2]string{fmt.Sprint(it.Major), v.Mutant}
			i, ok := at[key]
			if !ok {
				i, at[key] = len(out), len(out)
				out = append(out, ShadowRow{Major: it.Major, Mutant: v.Mutant, Rule: questionMutants[v.Mutant], ByFailover: map[string]int{}})
			}
			out[i].add(it, v)
		}
	}
	slices.SortStableFunc(out, func(a, b ShadowRow) int { return cmp.Compare(a.Major, b.Major) })
	return out
}

// TallyRow counts the failovers a fault was part of (a failover with three faults counts in
// three rows) and the per-slot answers of those failovers.
type TallyRow struct {
	Major      int    `json:"major"`
	Method     string `json:"method"`
	Fault      Fault  `json:"fault"`
	Failovers  int    `json:"failovers"`
	Ready      int    `json:"ready"` // binding READY answers, each checked by the oracle
	NotReady   int    `json:"not_ready"`
	CannotTell int    `json:"cannot_tell"`
	Lies       int    `json:"ready_while_loss"`
	// AheadNotPromised: binding READY answers judged without the primary after which the
	// consumer held changes the standby lacked (rule 8 does not rule that out).
	AheadNotPromised int `json:"ready_consumer_ahead_not_promised"`
	// NotReadyLoss: NOT READY answers after which the consumer did lose (the gate was right).
	NotReadyLoss int `json:"not_ready_then_loss"`
	// Residual: binding READY answers judged without the primary for a slot changed on it after
	// slotsync's last observation, within the note's window, then a loss (rule 8a's residual,
	// Judged.Unobserved): not lies of the rules, counted apart.
	Residual    int `json:"ready_then_loss_rule_8a_residual,omitempty"`
	Redelivered int `json:"redelivered"` // changes received twice, over all slots
	Problems    int `json:"problems"`
	// Errors: answers the gate could not give (counted apart from NOT READY).
	Errors int `json:"errors"`
	// Binding: the answers the oracle checks (whatever the gate said); AlwaysReadyCaught: how
	// many of them a gate that always said READY would have been caught lying on, the measure
	// of what the run could catch.
	Binding           int `json:"binding"`
	AlwaysReadyCaught int `json:"always_ready_caught"`
}

func (r *TallyRow) add(it ChaosIteration) {
	r.Failovers++
	r.Problems += len(it.Problems)
	for _, j := range it.Judged {
		if j.Binding {
			r.Binding++
			if alwaysReadyCaught(j) {
				r.AlwaysReadyCaught++
			}
		}
		switch {
		case j.Answer == AnswerError:
			r.Errors++
		case j.Answer == AnswerReady && j.Binding:
			r.Ready++
			if j.IsAhead() && !j.AheadPromised {
				r.AheadNotPromised++
			}
			if j.Unobserved != "" && !j.Lie && (j.Lost > 0 || j.RepeatedEarly > 0 || j.CannotResume) {
				r.Residual++
			}
		case j.Answer == AnswerNotReady:
			r.NotReady++
			if j.Lost > 0 {
				r.NotReadyLoss++
			}
		case j.Answer == AnswerCannotTell:
			r.CannotTell++
		}
		if j.Lie {
			r.Lies++
		}
	}
	for _, s := range it.Failover.Slots {
		r.Redelivered += len(s.Repeated)
	}
}

// TallyOf sums iterations.
func TallyOf(its []ChaosIteration) Tally {
	t := Tally{Failovers: len(its), Total: TallyRow{Method: "all", Fault: "all"}, Reasons: map[string]int{}, Caught: map[string]int{}}
	rows := map[TallyRow]*TallyRow{}
	for _, it := range its {
		t.Total.add(it)
		for _, j := range it.Judged {
			for _, r := range j.Reasons {
				t.Reasons[r]++
			}
			t.caught(j)
		}
		faults := it.Faults
		if len(faults) == 0 {
			faults = []Fault{"none"}
		}
		for _, f := range slices.Compact(slices.Sorted(slices.Values(faults))) {
			key := TallyRow{Major: it.Major, Method: it.Method, Fault: f}
			if rows[key] == nil {
				rows[key] = &TallyRow{Major: it.Major, Method: it.Method, Fault: f}
			}
			rows[key].add(it)
		}
	}
	for _, r := range rows {
		t.Rows = append(t.Rows, *r)
	}
	t.Shadows = shadowRows(its)
	slices.SortFunc(t.Rows, func(a, b TallyRow) int {
		return cmp.Or(cmp.Compare(a.Major, b.Major), cmp.Compare(a.Method, b.Method), cmp.Compare(a.Fault, b.Fault))
	})
	return t
}

// alwaysReadyCaught says whether a gate that always said READY would have been caught lying on
// binding answer j: the same answer, READY, then what followed.
func alwaysReadyCaught(j Judged) bool {
	liar := j
	liar.Answer = AnswerReady
	return liar.Assess().Lie
}

// caught counts, for an answer an always-READY gate would have been caught lying on, what the
// gate answered.
func (t *Tally) caught(j Judged) {
	if !j.Binding || !alwaysReadyCaught(j) {
		return
	}
	if j.Answer != AnswerNotReady || len(j.Reasons) == 0 {
		t.Caught[string(j.Answer)]++
		return
	}
	for _, r := range j.Reasons {
		t.Caught[r]++
	}
}

// Markdown writes the tally as the table docs/RELIABILITY.md carries.
func (t Tally) Markdown(w io.Writer) {
	fmt.Fprintln(
		w,
		"| major | method | fault | failovers | READY (checked) | READY while loss | READY, consumer ahead (not ruled out) | NOT READY | NOT READY, then loss | "+
			"CANNOT TELL | error | redelivered | problems | binding answers | an always-READY gate caught on |",
	)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range append(t.Rows, t.Total) {
		major := fmt.Sprint(r.Major)
		if r.Major == 0 {
			major = "all"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n", major, r.Method, r.Fault, r.Failovers,
			r.Ready, r.Lies, r.AheadNotPromised, r.NotReady, r.NotReadyLoss, r.CannotTell, r.Errors, r.Redelivered, r.Problems, r.Binding, r.AlwaysReadyCaught)
	}
	if t.Total.Residual > 0 {
		fmt.Fprintf(w, "\nREADY without the primary for a slot changed on it after slotsync's last observation, within the note's window, "+
			"then a loss (rule 8a's residual, not a lie of the rules): %d\n", t.Total.Residual)
	}
	countsLine(w, "\nNOT READY reasons given:", t.Reasons)
	countsLine(w, "An always-READY gate caught where the gate answered (each NOT READY reason named, or the answer):", t.Caught)
	t.shadowsMarkdown(w)
}

// shadowsMarkdown writes the gate mutants asked beside the gate, as RELIABILITY.md carries them.
func (t Tally) shadowsMarkdown(w io.Writer) {
	if len(t.Shadows) == 0 {
		return
	}
	fmt.Fprintln(w, "\n| major | gate mutant | rule | iterations | READY where the gate was not | caught in | by the rules at the instant | "+
		"by the outcome | by a problem | at failovers | first seeds | READY where the gate was not, not caught |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range t.Shadows {
		var at []string
		for _, k := range slices.Sorted(maps.Keys(r.ByFailover)) {
			at = append(at, fmt.Sprintf("%s %d", k, r.ByFailover[k]))
		}
		fmt.Fprintf(w, "| %d | `%s` | %s | %d | %d | %d | %d | %d | %d | %s | %s | %s |\n", r.Major, r.Mutant, r.Rule, r.Iterations, r.Readier, r.Killed,
			r.ByInstant, r.ByOutcome, r.ByProblem, strings.Join(at, ", "), strings.Trim(fmt.Sprint(r.Seeds), "[]"),
			strings.Trim(fmt.Sprint(r.ReadierMissed), "[]"))
	}
}

// countsLine writes counts by name after title, most first, on one line (nothing when empty).
func countsLine(w io.Writer, title string, counts map[string]int) {
	if len(counts) == 0 {
		return
	}
	names := slices.SortedFunc(maps.Keys(counts), func(a, b string) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b)) })
	fmt.Fprint(w, title)
	for i, n := range names {
		fmt.Fprintf(w, "%s %s %d", map[bool]string{true: "", false: ","}[i == 0], n, counts[n])
	}
	fmt.Fprintln(w)
}

// Rejudge judges each answer of a report's iterations again by today's oracle, in place, and
// says, one line each, where a verdict changed: a report of an older explorer is read as today's
// would have judged it. An iteration that kept its History is judged whole again from it (judge:
// the answers, receipts, confirmations, streaming samples and truths); an older one from the
// figures each answer keeps (Judged.Assess).
func Rejudge(its []ChaosIteration) []string {
	var changed []string
	for i := range its {
		it := &its[i]
		var now []Judged
		if it.History != nil && len(it.History.Consumers) == len(it.Failover.Slots) {
			now = judge(it.History, it.Failover, it.Truths)
		} else {
			for _, j := range it.Judged {
				now = append(now, j.Assess())
			}
		}
		for _, n := range now {
			before, found := judgedOf(it.Judged, n.Slot, n.Asked)
			if !found || before.Lie != n.Lie {
				changed = append(changed, fmt.Sprintf("iteration %d (seed %d), %s %s: %s, now %s", it.Number, it.Seed, n.Slot, n.Asked,
					verdictOf(before, found), verdict(n)))
			}
		}
		it.Judged = now
		if it.History != nil && len(it.History.Consumers) == len(it.Failover.Slots) {
			it.Shadows = judgeShadows(it.History, it.Failover, it.Truths)
		}
	}
	return changed
}

// judgedOf is the answer judged on slot, asked as asked, among js.
func judgedOf(js []Judged, slot, asked string) (Judged, bool) {
	for _, j := range js {
		if j.Slot == slot && j.Asked == asked {
			return j, true
		}
	}
	return Judged{}, false
}

// verdictOf is verdict(j), or that the report had none.
func verdictOf(j Judged, found bool) string {
	if !found {
		return "not judged"
	}
	return verdict(j)
}

// verdict is the oracle's word on a judged answer.
func verdict(j Judged) string {
	if j.Lie {
		return "a lie (" + j.Why + ")"
	}
	return "not a lie"
}

// ReadIterations reads a report of JSON lines, one iteration each (what a long run appends as
// it goes; a line cut short by a run stopped mid-write ends the report).
func ReadIterations(r io.Reader) ([]ChaosIteration, error) {
	var its []ChaosIteration
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		var it ChaosIteration
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			return its, fmt.Errorf("line %d: %w", line, err)
		}
		its = append(its, it)
	}
	return its, sc.Err()
}
