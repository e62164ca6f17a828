package explore

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/slotsync/slotsync/integration/drill"
	slotsync "github.com/slotsync/slotsync/sync"
)

// The oracle: what the gate answered for a slot at a promotion, against what that slot's
// consumer then got. The gate's promise is that READY means a promotion at that moment loses no
// change; the oracle calls a READY a lie when the consumer then missed a change, got again a
// change it had confirmed before the gate's observation, or (when the answer said no consumer
// could be ahead of the standby) holds changes the new primary does not have.

// Answer is the gate's word on one slot.
type Answer string

// The gate's words.
const (
	AnswerReady      Answer = "READY"
	AnswerNotReady   Answer = "NOT READY"
	AnswerCannotTell Answer = "CANNOT TELL"
	AnswerNotAsked   Answer = "not asked"
	// AnswerError: the gate could not answer (exit 2 without CANNOT TELL, 3, a node that is the
	// primary): neither READY nor a NOT READY it judged.
	AnswerError Answer = "error"
)

// GateAnswer is one `slotsync check --json` answer, as an HA hook reads it.
type GateAnswer struct {
	// Asked and Returned: when the check was started and when it returned; Output: what it
	// printed, whole.
	Asked    time.Time `json:"asked"`
	Returned time.Time `json:"returned,omitzero"`
	Output   string    `json:"output,omitempty"`
	// Judged: when the gate judged (its answer's checked_at); a check may watch the standby for
	// up to --primary-gone-after before it judges without the primary.
	Judged time.Time `json:"judged,omitzero"`
	Exit   int       `json:"exit_code"`
	// Ready: the answer's own word for the whole (its "ready"), beside its exit code and the
	// per-slot verdicts: the three must agree (disagreement).
	Ready      bool              `json:"ready"`
	CannotTell bool              `json:"cannot_tell,omitempty"`
	Error      string            `json:"error,omitempty"`
	Method     string            `json:"method,omitempty"`
	Slots      map[string]Answer `json:"slots"`
	// Reasons: why each slot is NOT READY (the gate's reason codes); Details: the gate's words
	// for them, with the positions and xids behind each.
	Reasons map[string][]string `json:"reasons,omitempty"`
	Details map[string]string   `json:"details,omitempty"`
	// Without the primary: when the judged record was observed, whether the primary's
	// synchronized_standby_slots listed the standby, and the slots for which the answer promised
	// that no consumer could be ahead of the standby (failover slots then: held_back).
	WithoutPrimary      bool            `json:"without_primary"`
	ObservedAt          time.Time       `json:"observed_at,omitzero"`
	SynchronizedStandby bool            `json:"synchronized_standby,omitempty"`
	HeldBack            map[string]bool `json:"held_back,omitempty"`
	// WindowFrom: for each READY slot, where the redelivery window the answer gave begins (the
	// copy's confirmed_flush): a consumer that resumes from the slot's position may get again
	// what committed after it, never what committed before.
	WindowFrom map[string]uint64 `json:"window_from,omitempty"`
	// Before and After: the servers read right before and right after the question (the rules
	// at the instant: instantLie, promotionLie); ForPromotion: asked with --for-promotion.
	Before       *Instant `json:"read_before,omitempty"`
	After        *Instant `json:"read_after,omitempty"`
	ForPromotion bool     `json:"for_promotion,omitempty"`
}

// parseCheck reads the JSON `check --json` printed (any exit code): the gate's one answer type;
// exact: it was asked with --exact, so a READY slot's window begins where its consumer stood when
// the gate observed, whatever window the answer printed.
func parseCheck(out []byte, exit int, asked time.Time, exact bool) (GateAnswer, error) {
	var raw slotsync.Answer
	if err := json.Unmarshal(out, &raw); err != nil {
		return GateAnswer{}, fmt.Errorf("check --json (exit %d): %w: %.300s", exit, err, out)
	}
	a := GateAnswer{
		Asked:      asked,
		Judged:     raw.CheckedAt,
		Exit:       exit,
		Ready:      raw.Ready,
		CannotTell: raw.CannotTell,
		Error:      raw.Error,
		Slots:      map[string]Answer{},
		Reasons:    map[string][]string{},
		Details:    map[string]string{},
	}
	if raw.Report == nil {
		return a, nil
	}
	a.Method = string(raw.Method)
	if w := raw.WithoutPrimary; w != nil {
		a.WithoutPrimary, a.ObservedAt, a.SynchronizedStandby = true, w.ObservedAt, w.SynchronizedStandby
	}
	for _, s := range raw.Slots {
		if !s.Gate {
			continue
		}
		a.Slots[s.Name] = AnswerNotReady
		for _, r := range s.Verdict.Reasons {
			a.Reasons[s.Name] = append(a.Reasons[s.Name], string(r))
		}
		if !s.Verdict.Ready && s.Verdict.Detail != "" {
			a.Details[s.Name] = s.Verdict.Detail
		}
		if s.Verdict.Ready {
			a.Slots[s.Name] = AnswerReady
			if s.Primary != nil && s.Copy != nil { // not listed below: nothing comes again
				a.window(s.Name, uint64(max(s.Primary.ConfirmedFlush, s.Copy.ConfirmedFlush)))
			}
		}
		if s.HeldBack {
			if a.HeldBack == nil {
				a.HeldBack = map[string]bool{}
			}
			a.HeldBack[s.Name] = true
		}
	}
	if !exact { // the windows the answer printed; with --exact a READY promises none
		for _, w := range raw.Redelivery {
			a.window(w.Slot, uint64(w.From))
		}
	}
	return a, nil
}

func (a *GateAnswer) window(slot string, from uint64) {
	if a.WindowFrom == nil {
		a.WindowFrom = map[string]uint64{}
	}
	a.WindowFrom[slot] = from
}

// For is the answer's word on one slot.
func (a GateAnswer) For(slot string) Answer {
	switch {
	case a.Asked.IsZero():
		return AnswerNotAsked
	case a.CannotTell:
		return AnswerCannotTell
	case a.Error != "":
		return AnswerError
	}
	if w, ok := a.Slots[slot]; ok {
		return w
	}
	return AnswerNotReady // a slot the gate did not name is not promised
}

// judgedAt is when the gate judged: its own word, else when it was asked.
func (a GateAnswer) judgedAt() time.Time {
	if a.Judged.After(a.Asked) {
		return a.Judged
	}
	return a.Asked
}

// brief is the answer in a line: its exit code, how it judged, and each slot's reasons.
func (a GateAnswer) brief() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s exit %d", a.Asked.Format("15:04:05.000"), a.Exit)
	if d := a.judgedAt().Sub(a.Asked); d >= time.Second {
		fmt.Fprintf(&b, " (judged %.1f s later)", d.Seconds())
	}
	if a.WithoutPrimary {
		b.WriteString(" without the primary")
	}
	if a.CannotTell {
		b.WriteString(" CANNOT TELL")
	}
	if a.Error != "" {
		fmt.Fprintf(&b, " error %.80s", a.Error)
	}
	for _, s := range drill.Slots {
		if why := a.Reasons[s.Name]; len(why) > 0 {
			fmt.Fprintf(&b, "; %s: %s", s.Name, strings.Join(why, ","))
		}
	}
	return b.String()
}

// disagreement says how an answer's exit code, its ready and its per-slot verdicts disagree (""
// when they agree): exit 0 is READY for every slot the answer names, and only then is ready
// true; a hook acts on the exit code alone.
func (a GateAnswer) disagreement() string {
	var notReady []string
	for name, w := range a.Slots {
		if w != AnswerReady {
			notReady = append(notReady, name)
		}
	}
	sort.Strings(notReady)
	switch {
	case a.Exit == 0 && !a.Ready:
		return "exit 0 with ready false"
	case a.Exit != 0 && a.Ready:
		return fmt.Sprintf("exit %d with ready true", a.Exit)
	case a.Exit == 0 && len(notReady) > 0:
		return "exit 0 with slots NOT READY: " + strings.Join(notReady, ", ")
	case a.Exit == 0 && (a.CannotTell || a.Error != ""):
		return "exit 0 with an error: " + a.Error
	}
	return ""
}

// allReady: the answer is READY for every drill slot.
func (a GateAnswer) allReady() bool {
	for _, s := range drill.Slots {
		if a.For(s.Name) != AnswerReady {
			return false
		}
	}
	return true
}

// Judged is one gate answer on one slot, set against that slot's consumer after the promotion.
type Judged struct {
	Slot   string `json:"slot"`
	Asked  string `json:"asked"` // "with the primary" or "without the primary"
	Answer Answer `json:"answer"`
	// Reasons: why the gate said NOT READY (its reason codes); Detail: its words for them.
	Reasons []string `json:"reasons,omitempty"`
	Detail  string   `json:"detail,omitempty"`
	// ExitCode and Error: the gate's exit code, and its error when it could not answer.
	ExitCode int    `json:"exit_code"`
	Error    string `json:"error,omitempty"`
	// Binding: the promotion happened at the answer's moment (without the primary: always;
	// with it: the primary stopped cleanly, or nothing was written between the answer and the
	// kill).
	Binding bool `json:"binding"`
	Lost    int  `json:"lost"`
	// LostHad: of Lost, changes written before the promotion, which the promoted standby had:
	// lost whatever a consumer ahead of the standby excuses.
	LostHad int `json:"lost_the_standby_had,omitempty"`
	// RepeatedEarly: changes received again that the consumer had confirmed before the gate's
	// observation (a redelivery of later ones is what the gate allows without the primary); for
	// a consumer that resumed from the slot's position (FromSlot), changes received again that
	// committed before the redelivery window the answer gave begins (WindowFrom).
	Repeated      int    `json:"repeated"`
	RepeatedEarly int    `json:"repeated_early"`
	FromSlot      bool   `json:"resumed_from_slot,omitempty"`
	WindowFrom    string `json:"window_from,omitempty"`
	Ahead         int    `json:"ahead"`
	// AheadOfStandby: the consumer's offset was beyond the standby's WAL at the promotion.
	AheadOfStandby bool `json:"ahead_of_standby_wal,omitempty"`
	AheadPromised  bool `json:"ahead_promised"` // the answer said no consumer could be ahead
	// PromisedBy: why, judged without the primary (recordPromise).
	PromisedBy string `json:"promised_by,omitempty"`
	// PrimaryAlive: judged without the primary while it was alive (its route cut); StreamedAgo:
	// how long before the question the standby had last been seen streaming (0: never seen).
	PrimaryAlive bool          `json:"judged_without_a_live_primary,omitempty"`
	StreamedAgo  time.Duration `json:"standby_streamed_ago_ns,omitempty"`
	// CannotResume: the consumer could not resume on the new primary at all.
	CannotResume bool `json:"cannot_resume,omitempty"`
	// Unconsumed: a selected slot no consumer of the drill reads (an older slot kept as a
	// backup), judged by rule 4 at the instant alone (judgeUnconsumed).
	Unconsumed bool `json:"unconsumed,omitempty"`
	// Instant: how rule 4 or 5 was broken at the moment of the question, as the servers read
	// right before and after it said (instantLie), whatever the gate answered: a READY with it
	// is a lie whatever followed.
	Instant string `json:"instant,omitempty"`
	// Unobserved: judged without the primary, the slot was changed on the primary after
	// slotsync's last observation, within the note's window (Residual.unobservedRemake): a loss
	// that follows rests on rule 8a's residual, counted apart, not a lie of the rules.
	Unobserved string `json:"unobserved,omitempty"`
	Lie        bool   `json:"ready_while_loss"`
	Why        string `json:"why,omitempty"`
}

// Assess calls the answer a lie or not. A consumer ahead of the standby is a lie only when the
// answer ruled it out (judged with the primary, or with synchronized_standby_slots listing
// the standby); otherwise it is counted apart.
func (j Judged) Assess() Judged {
	j.Lie, j.Why = false, ""
	if j.Answer != AnswerReady {
		return j
	}
	if j.Binding {
		j = j.byOutcome()
	}
	if j.Lie && j.Unobserved != "" {
		j.Lie, j.Why = false, j.Why+"; not a lie of the rules: "+j.Unobserved
	}
	if j.Instant != "" {
		// The rules at the instant: a lie whatever followed. Where the outcome saw no loss the
		// two oracles disagree, which the report says.
		outcome := "the outcome: " + j.Why
		if !j.Lie {
			outcome = "no loss followed (the outcome oracle disagrees)"
		}
		j.Lie, j.Why = true, fmt.Sprintf("READY %s broke %s; %s", j.Asked, j.Instant, outcome)
	}
	return j
}

// byOutcome judges a binding READY by what the consumer got after the promotion.
func (j Judged) byOutcome() Judged {
	switch {
	case j.CannotResume:
		j.Lie, j.Why = true, fmt.Sprintf("READY %s, then the consumer could not resume on the new primary (its slot missing or unusable there)", j.Asked)
	case j.LostHad > 0:
		// Changes the promoted standby had: no consumer ahead of it excuses their loss (rule 8
		// leaves unpromised only what the standby never had).
		j.Lie, j.Why = true, fmt.Sprintf("READY %s, then %d changes the promoted standby had never reached the consumer", j.Asked, j.LostHad)
	case j.RepeatedEarly > 0 && j.FromSlot:
		j.Lie, j.Why = true, fmt.Sprintf("READY %s, then %d changes that committed before the redelivery window it gave (from %s) came again",
			j.Asked, j.RepeatedEarly, j.WindowFrom)
	case j.RepeatedEarly > 0:
		j.Lie, j.Why = true, fmt.Sprintf("READY %s, then %d changes confirmed before the gate's observation came again", j.Asked, j.RepeatedEarly)
	case j.IsAhead() && !j.AheadPromised:
		// Judged without the primary, no consumer-ahead is promised (rule 8): a consumer that
		// got changes this standby never had, or confirmed WAL it never had, cannot resume on
		// it, whatever the copy.
		j.Why = fmt.Sprintf("READY %s; the consumer was ahead of the standby (%d changes; offset beyond its WAL: %v), which the answer did not rule out",
			j.Asked, j.Ahead, j.AheadOfStandby)
	case j.Lost > 0:
		j.Lie, j.Why = true, fmt.Sprintf("READY %s, then %d changes never reached the consumer", j.Asked, j.Lost)
	case j.IsAhead() && j.AheadPromised:
		j.Lie, j.Why = true, fmt.Sprintf(
			"READY %s with no consumer ahead promised%s, then the consumer was ahead of the standby (%d changes; offset beyond its WAL: %v)",
			j.Asked,
			map[bool]string{true: " (" + j.PromisedBy + ")"}[j.PromisedBy != ""],
			j.Ahead,
			j.AheadOfStandby,
		)
	}
	return j
}

// IsAhead: the consumer held changes the new primary lacks, or had confirmed WAL its standby
// never received.
func (j Judged) IsAhead() bool { return j.Ahead > 0 || j.AheadOfStandby }
