package explore

import (
	"slices"
	"testing"
	"time"
)

// oracleChange is a change of the oracle: a looser one (a lie it no longer sees) or an unsound
// one (a lie it sees where there is none). Each is written as the oracle's own function with its
// input or output changed, and the oracle's fixtures must turn at least one verdict for it.
type oracleChange struct {
	name     string
	assess   func(Judged) Judged
	instant  func(before, after Instant, slot string, withPrimary bool) string
	disagree func(GateAnswer) string
	promise  func(recordFacts) string
	demoted  func(before, after Instant) string
	residual func(r Residual, slot string, record time.Time) string
	// instantOf: the rules at the instant for one answer, rule 8a's residual given.
	instantOf func(a GateAnswer, slot string, unobserved bool) string
}

// promiseWith is recordPromise after change alters what it is given.
func promiseWith(change func(*recordFacts)) func(recordFacts) string {
	return func(f recordFacts) string {
		change(&f)
		return recordPromise(f)
	}
}

// assessWith is the oracle's Assess after change alters what it is given.
func assessWith(change func(*Judged)) func(Judged) Judged {
	return func(j Judged) Judged {
		change(&j)
		return j.Assess()
	}
}

// instantWith is instantLie after change alters the two reads (copies of them).
func instantWith(change func(before, after *Instant, withPrimary *bool)) func(Instant, Instant, string, bool) string {
	return func(before, after Instant, slot string, withPrimary bool) string {
		before, after = cloneInstant(before), cloneInstant(after)
		change(&before, &after, &withPrimary)
		return instantLie(before, after, slot, withPrimary)
	}
}

func cloneInstant(in Instant) Instant {
	out := in
	out.Primary, out.Copies = map[string]SlotAt{}, map[string]SlotAt{}
	for k, v := range in.Primary {
		out.Primary[k] = v
	}
	for k, v := range in.Copies {
		out.Copies[k] = v
	}
	return out
}

// disagreeWith is the answer's disagreement after change alters the answer.
func disagreeWith(change func(*GateAnswer)) func(GateAnswer) string {
	return func(a GateAnswer) string {
		change(&a)
		return a.disagreement()
	}
}

// oracleChanges are the loosenings (and unsound changes) of the oracle that must each be caught.
func oracleChanges() []oracleChange {
	return slices.Concat(outcomeChanges(), instantChanges(), recordChanges(), exitCodeChanges())
}

// outcomeChanges loosen the outcome oracle.
func outcomeChanges() []oracleChange {
	return []oracleChange{
		{name: "a consumer that cannot resume is fine", assess: assessWith(func(j *Judged) { j.CannotResume = false })},
		{name: "lost changes ignored", assess: assessWith(func(j *Judged) { j.Lost, j.LostHad = 0, 0 })},
		{name: "changes the standby had excused by a consumer ahead", assess: assessWith(func(j *Judged) { j.LostHad = 0 })},
		{name: "early redelivery ignored", assess: assessWith(func(j *Judged) { j.RepeatedEarly = 0 })},
		{name: "the redelivery window ignored", assess: assessWith(func(j *Judged) {
			if j.FromSlot {
				j.RepeatedEarly = 0
			}
		})},
		{name: "a consumer ahead is never promised against", assess: assessWith(func(j *Judged) { j.AheadPromised = false })},
		{name: "an offset past the standby's WAL ignored", assess: assessWith(func(j *Judged) { j.AheadOfStandby = false })},
		{name: "changes ahead ignored", assess: assessWith(func(j *Judged) { j.Ahead = 0 })},
		{name: "a loss excused by a redelivery", assess: assessWith(func(j *Judged) {
			if j.Repeated > 0 {
				j.Lost, j.LostHad = 0, 0
			}
		})},
	}
}

// instantChanges loosen the rules at the instant, or make them unsound.
func instantChanges() []oracleChange {
	return []oracleChange{
		{name: "the rules at the instant ignored", assess: assessWith(func(j *Judged) { j.Instant = "" })},
		{name: "the rules at the instant only for binding answers", assess: assessWith(func(j *Judged) {
			if !j.Binding {
				j.Instant = ""
			}
		})},
		{name: "the rules at the instant only where a loss followed", assess: assessWith(func(j *Judged) {
			if j.Lost == 0 && !j.IsAhead() {
				j.Instant = ""
			}
		})},
		{name: "rule 4 at the instant off", instant: instantWith(func(b, a *Instant, _ *bool) { b.Copies, a.Copies = nil, nil })},
		{name: "rule 5 at the instant off", instant: instantWith(func(_, _ *Instant, with *bool) { *with = false })},
		{name: "rule 4 at the instant allows 4 kB", instant: instantWith(func(b, _ *Instant, _ *bool) {
			for k, c := range b.Copies {
				c.Confirmed = max(c.Confirmed, 4096) - 4096
				b.Copies[k] = c
			}
		})},
		{name: "rule 5 at the instant allows 4 kB", instant: instantWith(func(_, a *Instant, _ *bool) { a.StandbyWALEnd += 4096 })},
		{name: "rule 5 at the instant counts only what was confirmed", instant: instantWith(func(b, _ *Instant, _ *bool) {
			for k, p := range b.Primary {
				p.Sent = 0
				b.Primary[k] = p
			}
		})},
		{name: "rule 5 at the instant only while a WAL receiver streams", instant: func(b, a Instant, slot string, with bool) string {
			if b.ReceiverPID == 0 {
				return ""
			}
			return instantLie(b, a, slot, with)
		}},
		// The rules at the instant, unsound.
		{name: "rule 5 across two walsenders", instant: instantWith(func(b, a *Instant, _ *bool) {
			for k, p := range a.Primary {
				p.SenderPID = b.Primary[k].SenderPID
				a.Primary[k] = p
			}
		})},
		{name: "rule 5 across two WAL receivers", instant: instantWith(func(b, a *Instant, _ *bool) { a.ReceiverPID = b.ReceiverPID })},
		{name: "rule 5 without a WAL receiver across a WAL end gone back", instant: instantWith(func(b, a *Instant, _ *bool) {
			a.StandbyWALEnd = max(a.StandbyWALEnd, b.StandbyWALEnd)
		})},
		{name: "rule 4 broken at both reads taken for throughout", instant: func(b, a Instant, slot string, with bool) string {
			if got := instantLie(b, a, slot, with); got != "" {
				return got
			}
			c0, ok0 := b.Copies[slot]
			c1, ok1 := a.Copies[slot]
			if ok0 && ok1 && c0.Confirmed > b.Primary[slot].Confirmed && c1.Confirmed > a.Primary[slot].Confirmed {
				return "rule 4 at the instant (at both reads)"
			}
			return ""
		}},
		{name: "a copy made again between the reads taken for the same", instant: instantWith(func(b, a *Instant, _ *bool) {
			for k, c := range a.Copies {
				c.Plugin, c.Database, c.TwoPhase = b.Copies[k].Plugin, b.Copies[k].Database, b.Copies[k].TwoPhase
				a.Copies[k] = c
			}
		})},
		{name: "a demoted primary's slots taken for the consumers' positions", instant: instantWith(func(b, a *Instant, _ *bool) {
			b.PrimaryInRecovery, a.PrimaryInRecovery = false, false
		})},
		{name: "rule 8b at the instant off", demoted: func(Instant, Instant) string { return "" }},
		{name: "rule 8b at the instant allows 4 kB", demoted: func(b, a Instant) string {
			a.StandbyWALEnd += 4096
			return demotedLie(b, a)
		}},
		{name: "rule 8b across two WAL receivers", demoted: func(b, a Instant) string {
			a.ReceiverPID = b.ReceiverPID
			return demotedLie(b, a)
		}},
		{name: "rule 8b held to a demoted primary the gate could not reach", demoted: func(b, a Instant) string {
			b.RouteCut, a.RouteCut = false, false
			return demotedLie(b, a)
		}},
	}
}

// recordChanges loosen what a record promises without the primary, or make it unsound, and
// widen rule 8a's residual.
func recordChanges() []oracleChange {
	return []oracleChange{
		{name: "a slot held back promises nothing", promise: promiseWith(func(f *recordFacts) { f.heldBack = false })},
		{name: "a demoted primary promises nothing", promise: promiseWith(func(f *recordFacts) { f.demoted = false })},
		{name: "a record of a standby cut off excuses a consumer ahead", promise: promiseWith(func(f *recordFacts) { f.cutOff = false })},
		{name: "a consumer past the standby before the record excused", promise: promiseWith(func(f *recordFacts) { f.confirmedBefore = 0 })},
		{name: "a consumer at the standby's WAL taken for ahead", promise: promiseWith(func(f *recordFacts) { f.walEnd-- })},
		// Rule 8a's residual, looser.
		{name: "the residual without the window", residual: func(r Residual, slot string, record time.Time) string {
			if r.Seen != nil {
				r.LastReplayed = r.Seen.PrimaryClock
			}
			return r.unobservedRemake(slot, record)
		}},
		{name: "the residual for a slot changed before the last observation", residual: func(r Residual, slot string, record time.Time) string {
			if r.Seen != nil {
				r.Remade = map[string]time.Time{slot: r.Seen.PrimaryClock.Add(time.Millisecond)}
			}
			return r.unobservedRemake(slot, record)
		}},
		{name: "the residual by the note's own window", residual: func(r Residual, slot string, record time.Time) string {
			r.Interval = time.Hour
			return r.unobservedRemake(slot, record)
		}},
		{name: "the residual excusing a lie at the instant", assess: assessWith(func(j *Judged) {
			if j.Unobserved != "" {
				j.Instant = ""
			}
		})},
		{name: "the residual at the instant for every slot judged without the primary", instantOf: func(a GateAnswer, slot string, _ bool) string {
			return instantOf(a, slot, true)
		}},
		{name: "the residual at the instant with the primary", instantOf: func(a GateAnswer, slot string, unobserved bool) string {
			if unobserved && a.Before != nil && a.After != nil {
				before, after := a.Before.withoutPrimarySlot(slot), a.After.withoutPrimarySlot(slot)
				a.Before, a.After = &before, &after
			}
			return instantOf(a, slot, false)
		}},
		{name: "the residual hiding rules 8, 8b and 8c at the instant", instantOf: func(a GateAnswer, slot string, unobserved bool) string {
			if unobserved && a.WithoutPrimary {
				return ""
			}
			return instantOf(a, slot, unobserved)
		}},
	}
}

// exitCodeChanges loosen the exit code's agreement with the answer.
func exitCodeChanges() []oracleChange {
	return []oracleChange{
		{name: "exit 0 with ready false accepted", disagree: disagreeWith(func(a *GateAnswer) {
			if a.Exit == 0 {
				a.Ready = true
			}
		})},
		{name: "exit 1 with ready true accepted", disagree: disagreeWith(func(a *GateAnswer) {
			if a.Exit != 0 {
				a.Ready = false
			}
		})},
		{name: "exit 0 with a slot NOT READY accepted", disagree: disagreeWith(func(a *GateAnswer) { a.Slots = nil })},
		{name: "exit 0 with an error accepted", disagree: disagreeWith(func(a *GateAnswer) { a.CannotTell, a.Error = false, "" })},
	}
}

// TestOracleChangesAreCaught: each change of the oracle, looser or unsound, turns at least one
// of its fixtures (the known lies and excused cases of TestAssess, TestInstantLie and
// TestAnswerDisagreement), so the fixtures pin every clause of it.
func TestOracleChangesAreCaught(t *testing.T) {
	changes := oracleChanges()
	if len(changes) < 20 {
		t.Fatalf("%d changes of the oracle: at least 20 are run", len(changes))
	}
	for _, c := range changes {
		var wrong []string
		switch {
		case c.assess != nil:
			for _, f := range assessFixtures {
				if got := c.assess(f.j); got.Lie != f.lie {
					wrong = append(wrong, f.name)
				}
			}
		case c.instant != nil:
			wrong = instantWrong(c.instant)
		case c.disagree != nil:
			wrong = disagreementsWrong(c.disagree)
		case c.promise != nil:
			wrong = promisesWrong(c.promise)
		case c.demoted != nil:
			wrong = demotedWrong(c.demoted)
		case c.residual != nil:
			wrong = residualWrong(c.residual)
		case c.instantOf != nil:
			wrong = instantOfWrong(c.instantOf)
		}
		if len(wrong) == 0 {
			t.Errorf("the oracle changed so (%s) passes every fixture: add the case that tells", c.name)
		}
	}
}
