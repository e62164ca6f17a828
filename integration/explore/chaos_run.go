package explore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/drill"
)

// run is one iteration: the live phase under the plan's faults, the cutover with the gate asked
// with and without the primary, the promotion, the consumers' resumption and the oracle.
func (wd *world) run(ctx context.Context, plan Plan, it *ChaosIteration) error {
	sideCtx, stopSide := context.WithCancel(ctx)
	defer stopSide()
	go wd.side.supervise(sideCtx)
	if wd.second != nil {
		go wd.second.supervise(sideCtx)
	}
	sideStopped := false
	defer func() {
		if !sideStopped {
			_ = wd.side.stop(wd.stopWithin)
		}
	}()
	holdCtx, stopHolds := context.WithCancel(ctx)
	defer stopHolds()
	go wd.holds.run(holdCtx)
	go wd.recv.run(holdCtx)
	wd.startWrites(ctx, wd.pair.Primary)
	defer wd.pauseWrites()
	for i := range wd.feeds {
		wd.startFeed(ctx, i, wd.pair.Primary)
	}
	defer wd.stopFeeds()

	wd.reportArranged(plan, it)
	defer func() {
		if wd.demoteSkipped {
			it.Skipped = append(it.Skipped, "demote: a restart read-only needs a local pair; the primary was killed or stopped instead")
		}
		if wd.siblingSkipped {
			it.Skipped = append(it.Skipped, "sibling promoted: no second standby in this iteration ("+wd.secondSkipped+"); the primary was killed or stopped instead")
		}
	}()
	wd.liveStart = time.Now()
	it.Problems = append(it.Problems, wd.faults(ctx, plan, it)...)
	it.Problems = append(it.Problems, wd.switchProblems...)
	with, without, binding, err := wd.cutover(ctx, plan)
	stopHolds()
	if err != nil {
		return err
	}
	if err := wd.standbyUp(ctx); err != nil {
		it.Problems = append(it.Problems, "the standby was left down: "+err.Error())
		if err := wd.pair.Standby.Start(ctx); err != nil {
			return err
		}
	}
	walEnd, err := standbyWALEnd(ctx, wd.pair.Standby)
	if err != nil {
		return err
	}
	wd.walEnd, wd.hook, wd.residualAt = walEnd, plan.Hook, wd.residual(ctx)
	it.Truths, it.Timeline = wd.truths, wd.recv.timeline(wd.liveStart)
	if !binding && wd.bindingByServers(plan, walEnd) {
		binding, it.BindingByServers, wd.byServers = true, true, true
	}
	it.StopUnsent = wd.stopUnsent
	durable := make([]map[int]int, len(wd.feeds))
	consumers := make([]*drill.Consumer, len(wd.feeds))
	for i, f := range wd.feeds {
		confirmed, d := f.c.SnapshotDurable()
		durable[i], consumers[i] = d, f.c
		it.Failover.Slots = append(it.Failover.Slots, drill.SlotVerdict{Slot: f.c.Slot, Plugin: f.c.Plugin, Confirmed: confirmed.String(),
			Durable: drill.CountIDs(d), AheadOfStandby: confirmed > walEnd})
	}
	if err := wd.promote(ctx, plan); err != nil {
		return err
	}
	sideStopped = true
	wd.side.signal(syscall.SIGCONT) // paused by the plan (Freeze, FaultSidecarPause) or not

	if err := wd.side.stop(wd.stopWithin); err != nil {
		it.Problems = append(it.Problems, err.Error())
	}
	if wd.other != nil {
		if err := wd.other.stop(wd.stopWithin); err != nil {
			it.Problems = append(it.Problems, "beside the old primary: "+err.Error())
		}
	}
	if wd.second != nil {
		if err := wd.second.stop(wd.stopWithin); err != nil {
			it.Problems = append(it.Problems, "beside the second standby: "+err.Error())
		}
	}
	it.Switchovers, it.SwitchAnswers, it.HookAnswers = wd.switched, wd.switchAnswers, wd.hookAnswers
	it.Problems = append(it.Problems, wd.liveness...)
	it.Problems = append(it.Problems, wd.disagreements...)
	it.Problems = append(it.Problems, wd.sidecarProblems(it)...)
	if it.Failover, err = drill.Resume(ctx, wd.pair, consumers, wd.w, durable, 3, it.Failover, wd.log); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	wd.judgeIteration(it, with, without, binding)
	return nil
}

// judgeIteration judges the gate's answers, and the shadows' beside them, in the iteration's
// History.
func (wd *world) judgeIteration(it *ChaosIteration, with, without GateAnswer, binding bool) {
	it.Method = cmp.Or(with.Method, without.Method)
	it.History = wd.history(with, without, binding)
	it.Judged = judge(it.History, it.Failover, it.Truths)
	it.Shadows = judgeShadows(it.History, it.Failover, it.Truths)
	for _, e := range wd.shadowErrors {
		it.Skipped = append(it.Skipped, "a shadow question: "+e)
	}
}

// promote promotes the standby as the plan's failover does: its replay resumed first if the plan
// paused it (an HA manager resumes a paused standby it promotes), the transactions left
// prepared committed, and the promotion's checkpoint done at once if the plan says so.
func (wd *world) promote(ctx context.Context, plan Plan) error {
	if plan.Has(FaultReplayPaused) || plan.Has(FaultReplayHeldAtRestart) {
		if err := wd.pair.Standby.Exec(ctx, resumeReplaySQL); err != nil {
			return fmt.Errorf("resume the standby's replay: %w", err)
		}
	}
	if err := wd.pair.Promote(ctx); err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	if err := commitPrepared(ctx, wd.pair.Standby); err != nil {
		return fmt.Errorf("after the promotion: %w", err)
	}
	if plan.PromotionCheckpoint {
		if err := wd.pair.Standby.Exec(ctx, "CHECKPOINT"); err != nil {
			return fmt.Errorf("the promotion's checkpoint: %w", err)
		}
	}
	return nil
}

// faults applies the plan's steps at their moments of the live phase and waits out its end; a
// step that could not be carried out is a problem of the iteration, one its pair does not allow
// is skipped; each is reported as applied or skipped.
func (wd *world) faults(ctx context.Context, plan Plan, it *ChaosIteration) []string {
	var problems []string
	start := time.Now()
	for _, s := range plan.Steps {
		if !wd.liveUntil(ctx, start.Add(s.At)) {
			return problems
		}
		wd.log.Info("fault", "fault", s.Fault, "slot", s.Slot, "for", s.For)
		what := fmt.Sprintf("%s %s at %s", s.Fault, s.Slot, time.Since(start).Round(time.Millisecond))
		var skip skippedError
		err := wd.apply(ctx, s)
		if wd.faultNote != "" {
			what, wd.faultNote = what+" ("+wd.faultNote+")", ""
		}
		switch {
		case errors.As(err, &skip):
			it.Skipped = append(it.Skipped, what+": "+skip.why)
		case err != nil:
			problems = append(problems, fmt.Sprintf("fault %s: %v", s.Fault, err))
		default:
			it.Applied = append(it.Applied, what)
		}
	}
	wd.liveUntil(ctx, start.Add(plan.Live))
	return problems
}

// liveUntil waits until t within the live phase: false when ctx ends or a fault ended the live
// phase early (world.endLive).
func (wd *world) liveUntil(ctx context.Context, t time.Time) bool {
	select {
	case <-wd.liveEnds:
		return false
	default:
	}
	select {
	case <-ctx.Done():
		return false
	case <-wd.liveEnds:
		return false
	case <-time.After(time.Until(t)):
		return true
	}
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(t)):
		return true
	}
}

// cutover ends the live phase as the plan says: the writes pause (or not), the gate is asked
// with the primary, the primary is killed or stopped, the consumers stop with it, and the gate
// is asked again without the primary. binding says whether the first answer was about the
// promotion that follows (nothing written between it and the primary's end, or a clean stop,
// which hands the standby everything).
func (wd *world) cutover(ctx context.Context, plan Plan) (with, without GateAnswer, binding bool, err error) {
	if plan.Quiesce > 0 {
		wd.pauseWrites()
		sleepUntil(ctx, time.Now().Add(plan.Quiesce))
	}
	if plan.Hook {
		return wd.hookCutover(ctx)
	}
	if plan.Sibling && wd.secondNode != nil {
		with, without, err = wd.siblingCutover(ctx)
		return with, without, false, err
	}
	wd.siblingSkipped = plan.Sibling
	issued := wd.w.Issued()
	if plan.Freeze && !statefileMethod(wd.pair, wd.method) {
		wd.side.signal(syscall.SIGSTOP)
		wd.frozen = true
	}
	quiet := wd.quiet(plan)
	wd.noteTruth(ctx, truthQuestion)
	if with, wd.shadowWith, err = wd.askBeside(ctx, wd.shadows); err != nil {
		return with, without, false, err
	}
	if quiet != "" && !with.allReady() {
		wd.liveness = append(wd.liveness, fmt.Sprintf("liveness: not READY in a quiet window (%s): %s", quiet, with.brief()))
	}
	if plan.Linger > 0 && !wd.frozen {
		wd.side.signal(syscall.SIGCONT)
		sleepUntil(ctx, time.Now().Add(plan.Linger))
	}
	wd.noteTruth(ctx, truthEnd)
	local := wd.pair.Dir != ""
	wd.demoteSkipped = plan.Demote && !local
	switch {
	case plan.DemoteToSibling && local && wd.secondNode != nil:
		err = wd.demoteToSibling(ctx)
	case plan.Demote && plan.Kill && local:
		err = wd.pair.DemotePrimaryAfter(ctx, wd.killPrimary)
	case plan.Demote && local:
		err = wd.pair.DemotePrimary(ctx)
	case plan.Kill:
		err = wd.killPrimary(ctx)
	default:
		err = wd.pair.Primary.Stop(ctx)
	}
	if err != nil {
		return with, without, false, err
	}
	wd.pauseWrites()
	wrote := wd.w.Issued() != issued
	binding = !plan.Kill || !wrote
	wd.stopUnsent = stopUnsent(plan, wrote, wd.truthOf(truthEnd))
	wd.stopFeeds()
	without, err = wd.askWithoutPrimary(ctx)
	wd.log.Info("gate", "with_primary", fmt.Sprint(with.Slots), "with_cannot_tell", with.CannotTell,
		"without_primary", fmt.Sprint(without.Slots), "without_cannot_tell", without.CannotTell, "binding", binding)
	return with, without, binding, err
}

// quietFor is how long before the question no fault may have acted for the window to be quiet.
const quietFor = 5 * time.Second

// quiet says why the moment of the question is a quiet window, in which the gate must say READY
// (liveness): the writes paused for 2 s or more, no fault acting in the last 5 s, no failpoint
// (but a written plan's crash, once slotsync crashed there 5 s before or more), no switchover,
// the standby streaming; "" when it is not one.
func (wd *world) quiet(plan Plan) string {
	end := plan.Live + plan.Quiesce // the question, from the start of the live phase
	last, dropped, away := time.Duration(0), 0, map[string]bool{}
	for _, s := range plan.Steps {
		last = max(last, s.At+s.For)
		if s.Fault == FaultSlotDropped {
			return "" // its consumer is away until the slot is made again
		}
		away[s.Slot] = s.Away || away[s.Slot] && s.Fault != FaultConsumerBack
		if s.Fault == FaultCopyDropped && !s.Second {
			dropped++ // (the second standby's copies are its own sidecar's)
		}
	}
	if dropped > 1 {
		return "" // a copy changed under slotsync twice is left alone (other_synchronizer)
	}
	for slot, a := range away {
		if a && !exactCopyDue(plan, slot, end) {
			return "" // a consumer away holds its new copy back
		}
	}
	streamed := wd.recv.lastStreamed(time.Now())
	if plan.Quiesce < 2*time.Second || end-last < quietFor || wd.failpointActing(plan) || wd.switched > 0 || time.Since(streamed) > 2*receiverEvery {
		return ""
	}
	return fmt.Sprintf("writes paused %s, the last fault ended %s before, the standby streaming", plan.Quiesce, (end - last).Round(100*time.Millisecond))
}

// failpointActing says whether plan's failpoint may still act on slotsync at the question: a
// drawn one, or a stall, always; a written plan's crash until slotsync has crashed there, and
// for quietFor after.
func (wd *world) failpointActing(plan Plan) bool {
	if plan.Failpoint == "" {
		return false
	}
	if plan.Draw != 0 || plan.Stall > 0 {
		return true
	}
	crashed := wd.side.lastCrash()
	return crashed.IsZero() || time.Since(crashed) < quietFor
}

// exactCopyDue says whether slot's consumer, away since the plan made its slot again, no longer
// holds its copy back by the question at end: the sidecar runs with --exact-copy-after, and the
// bound and exactCopyMargin (a standby restart and a pass or two) have passed since.
func exactCopyDue(plan Plan, slot string, end time.Duration) bool {
	if plan.ExactCopyAfter <= 0 {
		return false
	}
	for _, s := range plan.Steps {
		if s.Slot == slot && s.Away && end-s.At >= plan.ExactCopyAfter+exactCopyMargin {
			return true
		}
	}
	return false
}

// exactCopyMargin is how long after --exact-copy-after an exact copy must be READY (the standby
// restarted once, its WAL read, its catalog rows shown kept): measured 3-5 s on 16-18.
const exactCopyMargin = 20 * time.Second

// hookCutover is the cutover of a hook that promotes on READY (Plan.Hook): the gate asked until
// it exits 0 (READY for every slot), the primary killed -9 the moment it does, the writes and the
// consumers going on until then.
func (wd *world) hookCutover(ctx context.Context) (with, without GateAnswer, binding bool, err error) {
	deadline := time.Now().Add(HookBound)
	for first := true; ; first = false {
		wd.noteTruth(ctx, truthQuestion)
		var shadows []string
		if first {
			shadows = wd.shadows // the shadows at the hook's first question (shadow.go)
		}
		var got map[string]GateAnswer
		if with, got, err = wd.askBeside(ctx, shadows); err != nil {
			return with, without, false, err
		}
		if first {
			wd.shadowWith = got
		}
		wd.hookAnswers = append(wd.hookAnswers, with.brief())
		if with.Exit == 0 || time.Now().After(deadline) { // the hook acts on the exit code, as HA managers do
			break
		}
		if !sleepUntil(ctx, time.Now().Add(hookEvery)) {
			return with, without, false, ctx.Err()
		}
	}
	wd.noteTruth(ctx, truthEnd)
	if err = wd.killPrimary(ctx); err != nil {
		return with, without, false, err
	}
	wd.pauseWrites()
	wd.stopFeeds()
	without, err = wd.askWithoutPrimary(ctx)
	wd.log.Info("gate (hook)", "with_primary", fmt.Sprint(with.Slots), "with_cannot_tell", with.CannotTell,
		"without_primary", fmt.Sprint(without.Slots), "without_cannot_tell", without.CannotTell)
	return with, without, true, err
}

// hookEvery: a hook asks again this soon after a NOT READY.
const hookEvery = 20 * time.Millisecond

// standbyWALEnd is the end of the WAL the standby holds, received or replayed, once its primary
// is gone: where its promotion starts the new timeline.
func standbyWALEnd(ctx context.Context, n *integration.Node) (pglogrepl.LSN, error) {
	var s string
	err := n.QueryRow(ctx, "SELECT greatest(coalesce(pg_last_wal_receive_lsn(), '0/0'), coalesce(pg_last_wal_replay_lsn(), '0/0'))::text", nil, &s)
	if err != nil {
		return 0, fmt.Errorf("the standby's end of WAL: %w", err)
	}
	return pglogrepl.ParseLSN(s)
}

// standbyUp waits (a state-file restart may be under way) until the standby answers in recovery.
func (wd *world) standbyUp(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		rec, err := wd.pair.Standby.InRecovery(ctx)
		if err == nil && rec {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("not in recovery before the promotion")
		}
		if time.Now().After(deadline) {
			return err
		}
		if !sleepUntil(ctx, time.Now().Add(500*time.Millisecond)) {
			return ctx.Err()
		}
	}
}

// sidecarProblems: slotsync must not exit by itself (a loop, a give-up), and no catalog hold may
// outlive its timeout by more than a pass and a reconnect.
func (wd *world) sidecarProblems(it *ChaosIteration) []string {
	var out []string
	for _, side := range []*sidecar{wd.side, wd.other, wd.second} {
		if side == nil {
			continue
		}
		side.mu.Lock()
		it.SlotsyncCrashes += side.crashes
		for _, e := range side.ownExits {
			out = append(out, "slotsync exited by itself: "+e)
		}
		side.mu.Unlock()
	}
	it.LongestHold = wd.holds.longestHold()
	if it.LongestHold > HoldTimeout+15*time.Second {
		out = append(out, fmt.Sprintf("a catalog hold stayed on the primary for %s (timeout %s)", it.LongestHold.Round(time.Second), HoldTimeout))
	}
	return out
}

// askedWithPrimary: the answer asked before the primary's end, while it was alive.
const askedWithPrimary = "asked with the primary"

// gateGoneAfter is the gate's --primary-gone-after (the drill gives it the default).
const gateGoneAfter = 10 * time.Second

// judgeAnswers sets each answer on each slot against what the slot's consumer got, from the
// iteration's History.
func (wd *world) judgeAnswers(fv drill.FailoverVerdict, with, without GateAnswer, binding bool) []Judged {
	return judge(wd.history(with, without, binding), fv, wd.truths)
}

// judge sets each answer of h on each slot against what the slot's consumer got (fv, whose
// slots are h's consumers in order) and what the servers said (truths). It is pure: a report's
// History is judged again by it (Rejudge).
func judge(h *History, fv drill.FailoverVerdict, truths []Truth) []Judged {
	var out []Judged
	recv := h.receivers()
	for i, c := range h.Consumers {
		if i >= len(fv.Slots) {
			break
		}
		for _, a := range h.asked() {
			j := judgeOne(h, recv, c, fv.Slots[i], fv.IssuedBefore, a.answer, a.asked, truths)
			j.Binding = a.binding
			out = append(out, j.Assess())
		}
	}
	return append(out, judgeUnconsumed(h)...)
}

// judgeUnconsumed judges, by rule 4 at the instant alone, each slot an answer selected that no
// consumer of the drill reads (the older slots a slot is made again from, kept as backups): a
// READY for one whose copy stood ahead of it throughout the question is a lie whoever resumes
// from it later, and nothing after the promotion would show it.
func judgeUnconsumed(h *History) []Judged {
	consumed := map[string]bool{}
	for _, c := range h.Consumers {
		consumed[c.Slot] = true
	}
	var out []Judged
	for _, a := range h.asked() {
		for _, slot := range slices.Sorted(maps.Keys(a.answer.Slots)) {
			if consumed[slot] || a.answer.Before == nil || a.answer.After == nil {
				continue
			}
			j := Judged{Slot: slot, Asked: a.asked, Answer: a.answer.For(slot), Reasons: a.answer.Reasons[slot], Detail: a.answer.Details[slot],
				ExitCode: a.answer.Exit, Error: a.answer.Error, Binding: a.binding, Unconsumed: true,
				Instant: instantLie(*a.answer.Before, *a.answer.After, slot, !a.answer.WithoutPrimary)}
			out = append(out, j.Assess())
		}
	}
	return out
}

// judgeOne is the figures of one answer on one consumer's slot (unassessed, Binding unset);
// issuedBefore is the failover's last id handed out before the new primary's own writes.
func judgeOne(h *History, recv *receiverLog, c ConsumerHistory, sv drill.SlotVerdict, issuedBefore int, a GateAnswer, asked string,
	truths []Truth) Judged {
	// What the answer promises depends on how the gate judged: an answer asked while the
	// primary ran may still be judged without it (its route cut). Without the primary, a
	// consumer ahead is ruled out only as far as rule 8 says (recordPromise).
	observed, promised, promisedBy := a.Asked, !a.WithoutPrimary, ""
	alive := asked == askedWithPrimary
	var streamedAgo time.Duration
	if a.WithoutPrimary {
		observed = a.ObservedAt
		promisedBy = recordPromise(factsOfRecord(a, c, recv, h.WALEnd))
		promised = promisedBy != ""
		if alive {
			var live bool
			live, streamedAgo = promisedAlive(a, recv)
			promised = promised || live
		}
	}
	if h.WritesAfterAnswer && asked == askedWithPrimary && !a.WithoutPrimary {
		// The writes went on after the answer (a hook's cutover, a kill bound by the servers'
		// word, whose last reading comes a moment before the kill, or a clean stop that could
		// not send them to the standby): a consumer that went ahead of the standby after it did
		// so on its own; the answer promised only that none was ahead when it was asked: as the
		// servers said right before it, else as the consumer recorded.
		promised = c.confirmedAt(a.Asked) > h.WALEnd
		if held, ok := heldAt(truthIn(truths, truthQuestion), c.Slot); ok {
			promised = held > h.WALEnd
		}
	}
	// What may come again: after what the consumer had confirmed when the gate observed; for
	// one resuming from the slot's position, after where the answer's redelivery window begins
	// (#34: a window that begins too late is a lie).
	allowed, window := c.confirmedAt(observed), ""
	if from, ok := a.WindowFrom[c.Slot]; ok && c.FromSlot {
		allowed, window = pglogrepl.LSN(from), pglogrepl.LSN(from).String()
	}
	had := 0
	for _, id := range sv.Lost {
		if id <= issuedBefore {
			had++
		}
	}
	early, first := 0, c.firstEnd()
	for _, id := range sv.Repeated {
		if first[id] <= allowed {
			early++
		}
	}
	unobserved := ""
	if a.WithoutPrimary {
		unobserved = h.Residual.unobservedRemake(c.Slot, a.ObservedAt)
	}
	return Judged{Slot: c.Slot, Asked: asked, Answer: answerIn(a, asked, c.Slot, truths), Instant: instantOf(a, c.Slot, unobserved != ""), Unobserved: unobserved,
		Reasons: a.Reasons[c.Slot], Detail: a.Details[c.Slot], ExitCode: a.Exit, Error: a.Error,
		Lost: len(sv.Lost), LostHad: had, Repeated: len(sv.Repeated), RepeatedEarly: early, Ahead: len(sv.Ahead),
		AheadOfStandby: sv.AheadOfStandby, AheadPromised: promised, PromisedBy: promisedBy, PrimaryAlive: alive && a.WithoutPrimary,
		StreamedAgo: streamedAgo, CannotResume: sv.CannotResume != "", FromSlot: c.FromSlot, WindowFrom: window}
}

// instantOf is how the rules at the instant were broken at answer a for slot ("": they were not,
// or the servers were not read around it). unobserved: the slot on the primary was changed
// after slotsync's last observation of it, within the note's window (Residual.unobservedRemake).
// Judged without the primary, that slot is rule 8a's residual: no read of the gate could show
// it, so rule 4 at the instant does not hold the answer to it; rules 8, 8b and 8c still do.
func instantOf(a GateAnswer, slot string, unobserved bool) string {
	if a.Before == nil || a.After == nil {
		return ""
	}
	before, after := *a.Before, *a.After
	if unobserved && a.WithoutPrimary {
		before, after = before.withoutPrimarySlot(slot), after.withoutPrimarySlot(slot)
	}
	instant := instantLie(before, after, slot, !a.WithoutPrimary)
	if instant == "" && a.ForPromotion {
		instant = promotionLie(before, after)
	}
	if instant == "" && a.WithoutPrimary {
		instant = cmp.Or(otherPrimaryLie(before, after), demotedLie(before, after))
	}
	return instant
}

// answerFor is answerIn with the world's truths.
func (wd *world) answerFor(a GateAnswer, asked, slot string) Answer {
	return answerIn(a, asked, slot, wd.truths)
}

// answerIn is an answer's word on one slot's consumer. Exit 0 promises every selected slot, so a
// slot the answer leaves out while the primary still had it (the servers' truth read right
// before the question, or right before the primary's end for the answer asked after it) is
// promised too; one gone from the primary, or not seen there, is not.
func answerIn(a GateAnswer, asked, slot string, truths []Truth) Answer {
	w := a.For(slot)
	if _, named := a.Slots[slot]; named || w != AnswerNotReady || a.Exit != 0 {
		return w
	}
	when := truthEnd
	if asked == askedWithPrimary {
		when = truthQuestion
	}
	if _, onPrimary := truthIn(truths, when).Slots[slot]; onPrimary {
		return AnswerReady
	}
	return w
}

// The oracle's margins around a record's moment: the standby's samples all around it say
// whether it streamed then (the daemon read it between two samples); a confirmation that much
// before it had reached the primary slot the record read (a consumer sends it with the commit,
// or within 200 ms when idle).
const (
	recordMargin  = 300 * time.Millisecond
	confirmMargin = time.Second
)

// recordFacts is what the oracle knows of a record a gate judged from without the primary, and
// of the servers since, for one slot (recordPromise).
type recordFacts struct {
	heldBack bool // the answer says the record held the slot back
	cutOff   bool // the standby did not stream all around the record's moment
	// demoted: the primary was read in recovery right before the question, with its WAL end,
	// its route not cut (the gate reads it too, rule 8b): no consumer of it can hold WAL past
	// that end.
	demoted bool
	// confirmedBefore: what the slot's consumer had confirmed confirmMargin before the record.
	confirmedBefore pglogrepl.LSN
	walEnd          pglogrepl.LSN // the standby's WAL at the promotion
}

// factsOfRecord gathers a without-primary answer's recordFacts for consumer c, from the standby's
// streaming samples (recv) and its WAL end at the promotion.
func factsOfRecord(a GateAnswer, c ConsumerHistory, recv *receiverLog, walEnd pglogrepl.LSN) recordFacts {
	rf := recordFacts{heldBack: a.HeldBack[c.Slot], cutOff: recv.notStreamingAround(a.ObservedAt, recordMargin), walEnd: walEnd,
		demoted: a.Before != nil && a.Before.PrimaryInRecovery && a.Before.PrimaryWALEnd != 0 && !a.Before.RouteCut}
	if !a.ObservedAt.IsZero() {
		rf.confirmedBefore = c.confirmedAt(a.ObservedAt.Add(-confirmMargin))
	}
	return rf
}

// recordPromise is what an answer judged without the primary rules out of a consumer ahead of
// the standby, and why ("": nothing; rule 8 leaves a consumer ahead unpromised): any, for a
// slot the record held back (synchronized_standby_slots listed the standby); any, when the
// record was made while the standby did not stream (record_standby_cut_off: no ground for a
// READY at all); and any, when the consumer had confirmed past the standby's WAL at the
// promotion, which is no less than at the record, before the record read its slot
// (consumer_ahead_of_standby); and any, when the primary was found demoted, its WAL end read
// (rule 8b: the standby must hold it).
func recordPromise(f recordFacts) string {
	switch {
	case f.heldBack:
		return "the record held the slot back (synchronized_standby_slots)"
	case f.demoted:
		return "the primary was demoted, its WAL end read (rule 8b: the standby must hold it)"
	case f.cutOff:
		return "the record was made while the standby did not stream (rule 8: no ground for READY)"
	case f.confirmedBefore > f.walEnd:
		return fmt.Sprintf("the consumer had confirmed %s, past the standby's WAL (%s), before the record (rule 8: consumer_ahead_of_standby)",
			f.confirmedBefore, f.walEnd)
	}
	return ""
}

// promisedAlive: an answer judged without a primary that was alive promised what a judgement
// with it promises unless the standby had not streamed for --primary-gone-after when the gate
// judged (rule 8; a check watches the standby up to that long first), with a second of margin
// for the sampling; streamedAgo is how long that was (0: never seen streaming).
func promisedAlive(a GateAnswer, recv *receiverLog) (promised bool, streamedAgo time.Duration) {
	judged := a.judgedAt()
	last := recv.lastStreamed(judged)
	if last.IsZero() {
		return false, 0
	}
	streamedAgo = judged.Sub(last)
	return streamedAgo < gateGoneAfter-time.Second, streamedAgo
}

func (wd *world) startFeed(ctx context.Context, i int, n *integration.Node) {
	f := wd.feeds[i]
	fctx, cancel := context.WithCancel(ctx)
	f.cancel, f.done = cancel, make(chan struct{})
	go func() {
		defer close(f.done)
		// The DSN is taken again at each reconnection: a server started again may listen on
		// another port (a container's new host port).
		f.c.Follow(fctx, func() string { return n.ReplicationDSN(drill.DB, true) }, 2, f.next)
	}()
}

func (wd *world) stopFeed(i int) {
	if f := wd.feeds[i]; f.cancel != nil {
		f.cancel()
		<-f.done
		f.cancel = nil
	}
}

func (wd *world) stopFeeds() {
	for i := range wd.feeds {
		wd.stopFeed(i)
	}
}

// The moments whose truth is read (Truth.When).
const (
	truthQuestion = "question"
	truthEnd      = "primary's end"
)

// stopUnsent: a clean stop (or a demotion's) sends a standby what the primary wrote after the
// answer only if the standby streams then. One that did not, as the servers said right before
// the stop (a standby restarting to load state-file copies: a long run, seed
// 27001036 on 13), misses what the consumers got after the answer, as after a kill: the answer
// promised only that no consumer was ahead when it was asked. The standby is read whatever the
// primary's read gave (readTruth): streaming is its word alone.
func stopUnsent(plan Plan, wrote bool, end Truth) bool {
	return !plan.Kill && !plan.Hook && wrote && !end.StandbyStreaming
}

// bindingByServers: an answer with the primary followed by a kill while the writes went on
// still binds the gate when the servers said, right before the kill, that no consumer held
// anything the standby lacked at its promotion, and no step of the plan acted from the
// question on: whatever was lost then, the gate's READY had promised. A consumer ahead of the
// standby it had promised against only as of the question (judgeAnswers): a transaction in
// flight may commit between that reading and the kill. After a sibling's promotion the standby
// promoted is not the one the answer judged: it follows another timeline.
func (wd *world) bindingByServers(plan Plan, walEnd pglogrepl.LSN) bool {
	if !plan.Kill || plan.Hook || plan.Sibling || wd.switched > 0 {
		return false
	}
	question := plan.Live + plan.Quiesce
	for _, s := range plan.Steps {
		if s.At+s.For >= question {
			return false
		}
	}
	return noneAheadAt(wd.truthOf(truthEnd), wd.slotNames(), walEnd)
}

// reportArranged reports what arrange set up for the plan, or why not.
func (wd *world) reportArranged(plan Plan, it *ChaosIteration) {
	for _, a := range []struct {
		asked         bool
		what, skipped string
	}{
		{plan.SecondStandby, "a second standby with its own sidecar", wd.secondSkipped},
		{plan.SyncStandbySlots, "synchronized_standby_slots = " + integration.PhysicalSlot, wd.syncStandbySkipped},
	} {
		switch {
		case !a.asked:
		case a.skipped != "":
			it.Skipped = append(it.Skipped, a.what+": "+a.skipped)
		default:
			it.Applied = append(it.Applied, a.what)
		}
	}
}
