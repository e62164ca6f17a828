package explore

import (
	"cmp"
	"math/rand"
	"slices"
	"time"

	"github.com/slotsync/slotsync/integration/drill"
)

// timeLastSeconds (draw 11) times the faults of the primary's last seconds (drawn by draws 9 and
// 10) against slotsync's passes, so that the windows rules 5 and 8 guard open with something in
// them rather than by chance. Which timing depends on what the last seconds hold:
//   - the standby cut off, the writes stopped (half the plans) or a hook's failover: the writes
//     pause from just before the cut for past a record made in it, and slotsync's view ends in
//     the pause (recordInCut);
//   - the standby cut off and the writes stopped (the other half), or its walsender stalled: the
//     writes stop just after it, the consumers a few kB ahead of the standby (writesJustAfter);
//   - the standby cut off, the writes going on, not a hook's failover: slotsync is paused just
//     before the cut and the primary demoted at the end (demoteAfterCut);
//   - the standby neither cut off nor its receiver cut: slotsync's view of the primary ends (paused,
//     its route cut) a little more than the last pass's note covers before the primary's last
//     commit, and a slot is made again behind its copy in between (viewEndsEarly).
func timeLastSeconds(rng *rand.Rand, p *Plan) (timed string) {
	iv := cmp.Or(p.Interval, explorerInterval)
	cut, stalled := lastStep(p, FaultStandbyCutOff), lastStep(p, FaultSenderStalled)
	w := lastStep(p, FaultWritesPaused)
	switch {
	case cut >= 0 && (w >= 0 && rng.Intn(2) == 0 || w < 0 && p.Hook):
		before := max(0, p.Steps[cut].At-between(rng, 0, 500*time.Millisecond))
		w = writesPauseAt(p, w, before)
		p.Steps[w].At = min(p.Steps[w].At, before)
		recordInCut(rng, p, iv, cut, w)
		timed = timedRecordInCut
	case cut >= 0 && w >= 0, stalled >= 0:
		c := max(cut, stalled)
		p.Steps[c].At = min(p.Steps[c].At, p.Live-300*time.Millisecond) // the writes stop before the end
		w = writesPauseAt(p, w, 0)
		p.Steps[w].At = p.Steps[c].At + between(rng, 20*time.Millisecond, 250*time.Millisecond)
		p.Steps[w].For = lastFor
		timed = timedWritesJustAfter
	case cut >= 0:
		demoteAfterCut(rng, p, cut)
		timed = timedDemoteAfterCut
	case lastStep(p, FaultWALReceiver) < 0:
		viewEndsEarly(rng, p, iv, w)
		timed = timedViewEndsEarly
	}
	slices.SortStableFunc(p.Steps, func(a, b Step) int { return cmp.Compare(a.At, b.At) })
	return timed
}

// writesPauseAt is the index of p's writes pause of the last seconds, w, or of one added at at
// (lasting past the question) when there is none.
func writesPauseAt(p *Plan, w int, at time.Duration) int {
	if w >= 0 {
		return w
	}
	p.Steps = append(p.Steps, Step{At: max(0, at), Fault: FaultWritesPaused, For: lastFor})
	return len(p.Steps) - 1
}

// The timings timeLastSeconds gives a plan's last seconds.
const (
	timedRecordInCut     = "record in the cut"
	timedWritesJustAfter = "writes stop just after the cut"
	timedDemoteAfterCut  = "demoted after the cut"
	timedViewEndsEarly   = "view ends early"
)

// lastStep is the index of the first step of fault f that p's last seconds drew (-1: none):
// one that starts in them and lasts past the question, or has no length; the writes' pause
// may have been made to resume (resumeWrites).
func lastStep(p *Plan, f Fault) int {
	return slices.IndexFunc(p.Steps, func(s Step) bool {
		return p.inLastSeconds(s) && s.Fault == f && (s.For == lastFor || s.For == 0 || f == FaultWritesPaused)
	})
}

// between draws a duration from lo up to hi, in whole milliseconds.
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int63n(int64((hi-lo)/time.Millisecond)+1))*time.Millisecond
}

// endView moves the steps that end slotsync's view of the primary in p's last seconds (slotsync
// paused, its route cut, past the question) to at, adding a pause when there is none.
func endView(p *Plan, at time.Duration) {
	moved := false
	for i, s := range p.Steps {
		if p.inLastSeconds(s) && endsView(s) {
			p.Steps[i].At, moved = at, true
		}
	}
	if !moved {
		p.Steps = append(p.Steps, Step{At: at, Fault: FaultSidecarPause, For: lastFor})
	}
}

// recordInCut: the standby cut off at c, the writes paused from just before it; slotsync's view
// ends after a pass past the cut and up to 6 s more (the record renewed, GateRecordInterval 5 s),
// the writes resume 0.3-1 s after that, and the primary ends 1-2 s later: a READY without the
// primary then rests on a record made while the standby did not stream, and the consumers got
// what it never will (rule 8, record_standby_cut_off).
func recordInCut(rng *rand.Rand, p *Plan, iv time.Duration, c, w int) {
	cutAt := p.Steps[c].At
	view := cutAt + iv + between(rng, 500*time.Millisecond, 6500*time.Millisecond)
	resume := view + between(rng, 300*time.Millisecond, time.Second)
	end := resume + between(rng, time.Second, 2*time.Second)
	endView(p, view)
	p.Steps[w].For = resume - p.Steps[w].At
	p.Live = max(p.Live, end)
}

// demoteAfterCut: slotsync paused 100-600 ms before the standby is cut off at c, at least 600 ms
// before the end, the writes going on, and the primary demoted at the end (stopped or killed,
// then started read-only): its consumers confirm what the standby never gets, and the gate reads
// a server in recovery whose WAL ends past the standby's (rule 8b). Draw 12: the cut lasts
// demotedCutFor, past the questions a demotion's failover asks (with the primary, then without
// it, each watching the standby up to --primary-gone-after), else the standby fetches that WAL
// from the demoted primary first; and in half these plans a cut of slotsync's route to the
// primary in the last seconds is left out: through it neither the gate nor the explorer reads
// the demoted primary, which then promises nothing (the other half keep it, for rule 8a's
// --primary-gone-after).
func demoteAfterCut(rng *rand.Rand, p *Plan, c int) {
	p.Steps[c].At, p.Steps[c].For = min(p.Steps[c].At, p.Live-600*time.Millisecond), demotedCutFor
	cutAt := p.Steps[c].At
	if rng.Intn(2) == 0 {
		p.Steps = slices.DeleteFunc(p.Steps, func(s Step) bool {
			return s.Fault == FaultPrimaryRoute && s.For == lastFor && p.inLastSeconds(s)
		})
	}
	endView(p, max(0, cutAt-between(rng, 100*time.Millisecond, 600*time.Millisecond)))
	p.Demote = true
}

// demotedCutFor is how long demoteAfterCut cuts the standby off.
const demotedCutFor = 90 * time.Second

// viewEndsEarly: slotsync's view of the primary ends (paused, its route cut) gap before the
// primary's last commit, where the writes stop for good (w, or a pause added up to 300 ms before
// the end: else they go on through the question, for seconds where the route is cut), and gap is
// 1 s to 2.2 s and an interval past the interval: past the window the last pass's note covers (two passes) by about
// SeenLagMargin to twice it, whatever the pass's phase. A slot is made again behind its copy in
// between, its consumer away, 100 ms after the view ends at the earliest and 300 ms before the
// last commit at the latest. A live phase too short to leave slotsync 2.5 s before is made longer,
// the last seconds' steps with it.
func viewEndsEarly(rng *rand.Rand, p *Plan, iv time.Duration, w int) {
	if w < 0 { // the writes would go on through the question (seconds, with the route cut)
		w = writesPauseAt(p, w, p.Live-between(rng, 0, 300*time.Millisecond))
	}
	last := p.Steps[w].At
	gap := iv + time.Second + between(rng, 0, iv+1200*time.Millisecond)
	if shift := 2500*time.Millisecond - (last - gap); shift > 0 {
		for i, s := range p.Steps {
			if p.inLastSeconds(s) {
				p.Steps[i].At += shift
			}
		}
		p.Live, last = p.Live+shift, last+shift
	}
	endView(p, last-gap)
	remade := last - gap + between(rng, 100*time.Millisecond, gap-300*time.Millisecond)
	if b := lastStep(p, FaultSlotBehind); b >= 0 && p.Steps[b].Away {
		p.Steps[b].At = remade
		return
	}
	if !p.Has(FaultSlotBehind) {
		p.OlderOutside = rng.Intn(2) == 0
	}
	p.Steps = append(p.Steps, Step{At: remade, Fault: FaultSlotBehind, Slot: drill.Slots[rng.Intn(len(drill.Slots))].Name, Away: true})
}

// advanceOlderNear (draw 13): in half the plans whose slotsync view ends early, the older slot of
// the slot made again in the gap is advanced 100-400 ms before the view ends: the slot made again
// keeps a restart_lsn that did not go back (no new incarnation to see), and the copy, synced up
// to the view's end, stands ahead of it by what was written and confirmed in between (rule 4
// alone decides).
func advanceOlderNear(rng *rand.Rand, p *Plan) {
	b := lastStep(p, FaultSlotBehind)
	if b < 0 || rng.Intn(2) != 0 {
		return
	}
	view := slices.IndexFunc(p.Steps, endsView) // endView put it before the slot made again
	if view < 0 {
		return
	}
	at := max(0, p.Steps[view].At-between(rng, 100*time.Millisecond, 400*time.Millisecond))
	p.Steps = append(p.Steps, Step{At: at, Fault: FaultOlderAdvanced, Slot: p.Steps[b].Slot})
	slices.SortStableFunc(p.Steps, func(a, b Step) int { return cmp.Compare(a.At, b.At) })
}

// advanceJustBehind (draw 15): in half the plans that advance an older slot (advanceOlderNear),
// the advance comes an interval and 300-600 ms before slotsync's view ends, and the writes pause
// from 10-60 ms after it until 100-300 ms past the view's end: a pass in the pause syncs the copy
// to where the consumer stood when the writes paused, so the slot made again from the older one
// stands behind its copy by the one to three transactions written in between, a few hundred
// bytes to a few kB (rule 4's boundary, copy-ahead-allowance-4k).
func advanceJustBehind(rng *rand.Rand, p *Plan) {
	a := slices.IndexFunc(p.Steps, func(s Step) bool { return s.Fault == FaultOlderAdvanced })
	view := slices.IndexFunc(p.Steps, endsView)
	if a < 0 || view < 0 || rng.Intn(2) != 0 {
		return
	}
	iv, end := cmp.Or(p.Interval, explorerInterval), p.Steps[view].At
	at := max(0, end-iv-between(rng, 300*time.Millisecond, 600*time.Millisecond))
	pause := at + between(rng, 10*time.Millisecond, 60*time.Millisecond)
	until := end + between(rng, 100*time.Millisecond, 300*time.Millisecond)
	p.Steps[a].At = at
	p.Steps = append(p.Steps, Step{At: pause, Fault: FaultWritesPaused, For: until - pause})
	slices.SortStableFunc(p.Steps, func(a, b Step) int { return cmp.Compare(a.At, b.At) })
}

// confirmLateAtCut (draw 14): in two of three plans whose writes stop just after the standby's
// cut or its stalled walsender, the consumers confirming at each commit, the consumers confirm
// only every 2-5 s from up to 200 ms before the cut, as connectors that commit their offsets
// every few seconds: at the question they hold what they were sent past the standby and have not
// confirmed it (rule 5 counts what the walsender sent, not only what was confirmed).
func confirmLateAtCut(rng *rand.Rand, p *Plan) {
	c := max(lastStep(p, FaultStandbyCutOff), lastStep(p, FaultSenderStalled))
	if c < 0 || p.ConfirmEvery > 0 || rng.Intn(3) == 0 {
		return
	}
	at := max(0, p.Steps[c].At-between(rng, 0, 200*time.Millisecond))
	p.Steps = append(p.Steps, Step{At: at, Fault: FaultConsumersConfirmLate, For: between(rng, 2*time.Second, 5*time.Second)})
	slices.SortStableFunc(p.Steps, func(a, b Step) int { return cmp.Compare(a.At, b.At) })
}

// endsView says whether step s ends slotsync's view of the primary past the question (slotsync
// paused, its route cut: endView).
func endsView(s Step) bool {
	return s.For == lastFor && (s.Fault == FaultSidecarPause || s.Fault == FaultPrimaryRoute)
}

// inLastSeconds says whether step s starts in the last 2 s of p's live phase, where draw 9 draws
// the faults of the primary's last seconds.
func (p *Plan) inLastSeconds(s Step) bool { return s.At >= p.Live-2*time.Second }
