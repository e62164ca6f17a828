package sync

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slotsync/slotsync/internal/failpoint"
	"github.com/slotsync/slotsync/lsncheck"

	"github.com/slotsync/slotsync/topology"
)

// The exit codes of the gate's answer (check, /promotion-ready's exit_code, run --once --json).
const (
	ExitReady      = 0 // every selected slot is READY
	ExitNotReady   = 1 // some slot is not (named, with why), or there is nothing to promote
	ExitCannotTell = 2 // a node cannot be reached, or the gate cannot judge without the primary
	ExitUsage      = 3 // a usage or configuration error: a human must act
)

// ExitCodeOf is the exit code an error gives (0 for none): an error that carries its own
// (ExitCode() int, as a command line's usage errors do) keeps it; otherwise it is sorted by its
// cause.
func ExitCodeOf(err error) int {
	var coded interface{ ExitCode() int }
	switch {
	case err == nil:
		return ExitReady
	case errors.As(err, &coded):
		return coded.ExitCode()
	}
	switch CauseOf(err) {
	case CauseHuman:
		return ExitUsage
	case CausePromoted:
		return ExitNotReady
	}
	return ExitCannotTell
}

// Answer is the gate's answer, the one type `check --json`, /promotion-ready and `run --once
// --json` print and every reader (HA hooks' tests, the fault explorer) decodes (docs/CLI.md).
type Answer struct {
	Ready     bool      `json:"ready"`
	ExitCode  int       `json:"exit_code"`
	CheckedAt time.Time `json:"checked_at"`
	Error     string    `json:"error,omitempty"`
	// CannotTell: the gate could not judge without the primary (exit 2); PrimaryAlive: because
	// a primary is seen alive, so a promotion now would split the cluster (a hook blocks then,
	// whatever its policy).
	CannotTell   bool `json:"cannot_tell,omitempty"`
	PrimaryAlive bool `json:"primary_alive,omitempty"`
	// NotReady names every slot a promotion right now would lose or force into a resnapshot;
	// AtRisk says for each what is at risk: its name and reason codes ("cdc: copy_behind_consumer"),
	// the words a hook prints.
	NotReady []string `json:"not_ready"`
	AtRisk   []string `json:"at_risk"`
	// NothingSelected: the selection matches none of the primary's logical slots (not READY).
	NothingSelected string `json:"nothing_selected,omitempty"`
	// ConsumersAhead names every consumer that confirmed beyond the standby's WAL.
	ConsumersAhead []ConsumerAhead `json:"consumers_ahead"`
	// Redelivery: for each READY copy behind its consumer, what that consumer may receive again
	// after a promotion now (RedeliveryOf); copies at their consumer's position are left out.
	Redelivery []Redelivery `json:"redelivery"`
	*Report
}

// Redelivery is the redelivery window of one READY copy: after a promotion now, its consumer
// may receive again the transactions that committed after From (the copy's confirmed_flush) up
// to To (what the consumer had confirmed as the gate last saw it): PostgreSQL starts decoding
// for a consumer at the later of its requested start and the slot's confirmed_flush, so one
// that asks for its own position (a subscription, Debezium) gets none of them again; one that
// starts from the slot's (pg_recvlogical without --startpos) gets them all. Judged without the
// primary, To is as last recorded and the consumer may have confirmed more since (AtLeast).
type Redelivery struct {
	Slot    string       `json:"slot"`
	From    lsncheck.LSN `json:"from"`
	To      lsncheck.LSN `json:"to"`
	Bytes   int64        `json:"bytes"`
	AtLeast bool         `json:"at_least,omitempty"`
}

// redeliveryJSON is Redelivery's JSON form: LSNs in PostgreSQL's text form, as operators read
// them (docs/CLI.md).
type redeliveryJSON struct {
	Slot    string `json:"slot"`
	From    string `json:"from"`
	To      string `json:"to"`
	Bytes   int64  `json:"bytes"`
	AtLeast bool   `json:"at_least,omitempty"`
}

// MarshalJSON writes the window's LSNs as "X/Y".
func (r Redelivery) MarshalJSON() ([]byte, error) {
	return json.Marshal(redeliveryJSON{r.Slot, r.From.String(), r.To.String(), r.Bytes, r.AtLeast})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Redelivery) UnmarshalJSON(data []byte) error {
	var j redeliveryJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	from, err := lsncheck.ParseLSN(j.From)
	if err != nil {
		return fmt.Errorf("redelivery window of %s: from: %w", j.Slot, err)
	}
	to, err := lsncheck.ParseLSN(j.To)
	if err != nil {
		return fmt.Errorf("redelivery window of %s: to: %w", j.Slot, err)
	}
	*r = Redelivery{Slot: j.Slot, From: from, To: to, Bytes: j.Bytes, AtLeast: j.AtLeast}
	return nil
}

// RedeliveryOf is a slot's redelivery window (false when the copy is not READY, or has no
// positions).
func RedeliveryOf(s SlotReport, withoutPrimary bool) (Redelivery, bool) {
	if !s.Gate || !s.Verdict.Ready || s.Primary == nil || s.Copy == nil {
		return Redelivery{}, false
	}
	r := Redelivery{Slot: s.Name, From: s.Copy.ConfirmedFlush, To: max(s.Primary.ConfirmedFlush, s.Copy.ConfirmedFlush), AtLeast: withoutPrimary}
	if failpoint.Mutant("redelivery-window-late") {
		r.From = r.To // the fault explorer's mutant: a window that says nothing comes again (test builds only)
	}
	r.Bytes = int64(r.To - r.From)
	return r, true
}

// ConsumerAhead is a consumer that confirmed beyond the standby's WAL, and by how much.
type ConsumerAhead struct {
	Slot  string `json:"slot"`
	Bytes int64  `json:"bytes"`
}

// AnswerOf is the gate's answer from a pass (rep, nil when there was none) and its error. A pass
// that failed only because the primary is gone still answers when it carries a verdict judged
// without the primary (rule 8).
func AnswerOf(rep *Report, err error) Answer {
	r := Answer{CheckedAt: time.Now().UTC(), NotReady: []string{}, AtRisk: []string{}, ConsumersAhead: []ConsumerAhead{}, Redelivery: []Redelivery{}}
	if err != nil && (rep == nil || rep.WithoutPrimary == nil) {
		r.ExitCode, r.Error = ExitCodeOf(err), err.Error()
		r.CannotTell, r.PrimaryAlive = errors.Is(err, ErrCannotTell), errors.Is(err, ErrPrimaryAlive)
		return r
	}
	r.Report = rep
	if rep.Role == RolePrimary {
		r.ExitCode = ExitNotReady
		r.Error = "this node is the primary (not in recovery): there is nothing to promote and slotsync syncs nothing here"
		return r
	}
	for _, s := range rep.Slots {
		if !s.Gate {
			continue
		}
		if !s.Verdict.Ready {
			r.NotReady = append(r.NotReady, s.Name)
			r.AtRisk = append(r.AtRisk, s.Name+": "+reasonsText(s.Verdict.Reasons))
		}
		if s.Verdict.ConsumerAheadBytes > 0 {
			r.ConsumersAhead = append(r.ConsumersAhead, ConsumerAhead{s.Name, s.Verdict.ConsumerAheadBytes})
		}
		if w, ok := RedeliveryOf(s, rep.WithoutPrimary != nil); ok && (w.Bytes > 0 || w.AtLeast) {
			r.Redelivery = append(r.Redelivery, w)
		}
	}
	r.Ready = len(r.NotReady) == 0 && !rep.NothingSelected()
	if p := topology.SelectionProblem(rep.Selected, rep.Unselected); p != nil {
		r.NothingSelected = p.Issue + " (fix: " + p.Fix + ")"
	}
	if !r.Ready {
		r.ExitCode = ExitNotReady
	}
	return r
}

// Summary is the answer for hooks and endpoints: everything but the slots that are READY (with
// a thousand slots the full answer is a megabyte, printed into an HA manager's log at every
// promotion). SlotsReady counts what was left out.
func (a Answer) Summary() Answer {
	if a.Report == nil {
		return a
	}
	rep := *a.Report
	rep.Slots = nil
	for _, s := range a.Report.Slots {
		if s.Gate && !s.Verdict.Ready {
			rep.Slots = append(rep.Slots, s)
		} else if s.Gate {
			rep.SlotsReady++
		}
	}
	a.Report = &rep
	return a
}

// reasonsText is a verdict's reason codes in one word list.
func reasonsText(rs []lsncheck.Reason) string {
	if len(rs) == 0 {
		return "not ready"
	}
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return strings.Join(out, " ")
}
