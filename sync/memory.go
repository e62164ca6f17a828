package sync

import (
	"fmt"
	"time"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// memory is what the engine keeps from one pass to the next. After each applying pass it is
// changed in one place, remember; between passes the watch only moves the copies in watched
// and drops those it can no longer vouch for.
type memory struct {
	// failures: slots whose last action failed, with their backoff (lesson 3).
	failures map[string]*slotFailure
	// lastReason: the last waiting or skip reason logged per slot (logged once each).
	lastReason map[string]string
	// progressAt: when each copy catching up last logged its progress.
	progressAt map[string]time.Time
	// recopy: owned copies to make again, with why (their WAL is gone: Traits.ProvesWAL);
	// copies: how many times each slot was copied without becoming READY (lesson 1).
	recopy map[string]string
	copies map[string]int
	// watched: the copies the watch between passes may advance (watch.go), from the primary
	// the last full pass verified (watchFrom) only.
	watched   map[string]watched
	watchFrom topology.ServerID
	// ready: each gated slot's last verdict, and the gate's as a whole ("" before the first),
	// so that each change is logged once (an incident's timeline).
	ready    map[string]bool
	gateOpen string
	// left: where the last applying pass (or the watch since) left each copy slotsync made;
	// changedBy: how many times each was found changed by someone else since (writers.go).
	left      copyLeft
	changedBy map[string]int
}

// The transitions of memory after an applying pass (remember, noteOutcome).

// copySpent: a standby restart was spent on slot's copy, whether the standby took it or refused
// it: after MaxAttempts the planner gives up (lesson 1, no loops).
func (m *memory) copySpent(slot string) { m.copies[slot]++ }

// copyMade: slot's copy was made (again); it is no longer to be made again.
func (m *memory) copyMade(slot string) { delete(m.recopy, slot) }

// copyWALGone: the standby no longer has the WAL from the copy's restart_lsn (ProvesWAL): the
// next pass makes it again.
func (m *memory) copyWALGone(slot string) {
	m.recopy[slot] = "the standby no longer has the WAL from the copy's restart_lsn: copying it again"
}

// copyReady: slot's copy is READY; the copies spent on it no longer count.
func (m *memory) copyReady(slot string) { delete(m.copies, slot) }

// failed: an action on slot failed with err; it is held back with an exponential backoff from
// interval up to most. It returns the backoff, and whether the error is new (to be logged).
func (m *memory) failed(slot string, err error, interval, most time.Duration, now time.Time) (time.Duration, bool) {
	f := m.failures[slot]
	if f == nil {
		f = &slotFailure{}
		m.failures[slot] = f
	}
	f.count++
	backoff := min(interval<<min(f.count, 10), most)
	f.retryAt = now.Add(backoff)
	msg := err.Error()
	news := msg != f.lastErr
	f.lastErr = msg
	return backoff, news
}

// recovered: an action on slot changed it after failures: how many, and whether it had failed.
func (m *memory) recovered(slot string) (int, bool) {
	f := m.failures[slot]
	if f == nil {
		return 0, false
	}
	delete(m.failures, slot)
	return f.count, true
}

// forgetWatch ends the watch until the next full pass that succeeds.
func (m *memory) forgetWatch() {
	m.watched, m.watchFrom = nil, topology.ServerID{}
}

func newMemory() memory {
	return memory{failures: map[string]*slotFailure{}, lastReason: map[string]string{}, progressAt: map[string]time.Time{},
		recopy: map[string]string{}, copies: map[string]int{}, ready: map[string]bool{}, changedBy: map[string]int{}}
}

// noteReadiness logs each slot's readiness when it changes, and the gate's (every selected slot
// READY, or not), once per change.
func (e *Engine) noteReadiness(rep Report) {
	seen := map[string]bool{}
	for _, s := range rep.Slots {
		if !s.Gate {
			continue
		}
		seen[s.Name] = true
		if was, ok := e.mem.ready[s.Name]; !ok || was != s.Verdict.Ready {
			if s.Verdict.Ready {
				e.log.Info("slot copy READY", "slot", s.Name)
			} else if ok {
				e.log.Info("slot copy NOT READY", "slot", s.Name, "reasons", fmt.Sprint(s.Verdict.Reasons), "detail", s.Verdict.Detail)
			}
			e.mem.ready[s.Name] = s.Verdict.Ready
		}
	}
	for name := range e.mem.ready {
		if !seen[name] {
			delete(e.mem.ready, name)
		}
	}
	gate := "closed"
	if rep.Ready() {
		gate = "open"
	}
	if gate != e.mem.gateOpen {
		e.log.Info("promotion gate "+gate, "selected", rep.Selected, "not_ready", len(rep.Slots)-countReady(rep.Slots))
		e.mem.gateOpen = gate
	}
}

func countReady(slots []SlotReport) int {
	n := 0
	for _, s := range slots {
		if !s.Gate || s.Verdict.Ready {
			n++
		}
	}
	return n
}

type slotFailure struct {
	count   int
	lastErr string
	retryAt time.Time
}

// remember is the one place the engine's memory changes after an applying pass: what each
// action did (noteOutcome), the copies counted and to make again, and what the watch may move.
func (e *Engine) remember(obs Observation, actions []Action, results []result, slots []SlotReport, after map[string]topology.Slot, fresh bool) {
	unknown := map[string]bool{}
	for i, a := range actions {
		r := results[i]
		if r.failed() || a.Changes() && !fresh {
			unknown[a.Slot] = true // where the copy stands is not known: not compared next pass
		}
		if r.CountsAsCopy {
			e.mem.copySpent(a.Slot)
		}
		if (a.Kind == KindCreate || a.Kind == KindRecreate) && r.done() {
			e.mem.copyMade(a.Slot)
		}
		if a.Kind == KindAdvance && topology.WALRemoved(r.Err) && copyTraits(e.traits, e.journal.Slots[a.Slot]).ProvesWAL {
			e.mem.copyWALGone(a.Slot)
		}
		e.noteOutcome(a, r)
	}
	for _, sr := range slots {
		if sr.Verdict.Ready {
			e.mem.copyReady(sr.Name)
		}
	}
	e.watchable(actions, results, after)
	e.mem.watchFrom = topology.IDOf(obs.Primary.Info)
	e.mem.leftAt(e.journal, obs.Standby.Info.StartedAt, after, unknown)
}

// backoffs is the planner's view of the failing slots (an inspection holds nothing back).
func (e *Engine) backoffs(apply bool) map[string]Backoff {
	if !apply || len(e.mem.failures) == 0 {
		return nil
	}
	out := make(map[string]Backoff, len(e.mem.failures))
	for name, f := range e.mem.failures {
		out[name] = Backoff{Count: f.count, LastErr: f.lastErr, RetryAt: f.retryAt}
	}
	return out
}

// watchable records, after an applying full pass, which copies the watch may advance.
func (e *Engine) watchable(actions []Action, results []result, after map[string]topology.Slot) {
	e.mem.watched = map[string]watched{}
	// Not for installed copies (state file: 11-15, or exact copies beside the sql method's on
	// 16+, each by its own traits below): their readiness rests on the decoding
	// snapshot at their restart_lsn, which only the full pass looks for (ARCHITECTURE.md, the
	// watch). Not while the server's sync is driven every pass either.
	if e.cfg.WatchInterval <= 0 || !e.traits.Watchable || e.traits.ServerSyncs && e.cfg.Native.Drive {
		return
	}
	for i, a := range actions {
		cp, ok := after[a.Slot]
		ent := e.journal.Slots[a.Slot]
		switch {
		case !ok || ent == nil || cp.Active || cp.Synced || a.Primary.Failover || results[i].failed() || !copyTraits(e.traits, ent).Watchable:
			continue
		case a.Kind == KindAdvance, a.Kind == KindNone && (a.Code == CodeUpToDate || a.Code == CodeStandbyLagging):
			e.mem.watched[a.Slot] = watched{database: a.Primary.Database, ref: a.Primary.Seen(), copyAt: cp.ConfirmedFlush}
		}
	}
}

// progressEvery is the rhythm of progress logs for long operations.
const progressEvery = 10 * time.Second

// noteOutcome remembers and logs what a pass did to one slot: a failure sets its backoff (the
// next plans hold it back until then); changes are logged once each, failures once per
// distinct error, waiting states once per distinct reason; nothing repeats every pass.
func (e *Engine) noteOutcome(a Action, r result) {
	if r.Waiting != "" {
		if e.mem.lastReason[a.Slot] != r.Waiting {
			e.mem.lastReason[a.Slot] = r.Waiting
			e.log.Info("slot copy waits", "slot", a.Slot, "reason", r.Waiting)
		}
		return
	}
	if r.Err != nil {
		if backoff, news := e.mem.failed(a.Slot, r.Err, e.cfg.Interval, e.cfg.MaxBackoff, e.now()); news {
			e.log.Warn("slot action failed", "slot", a.Slot, "action", a.Kind, "error", r.Err.Error(),
				"class", Classify(r.Err).String(), "retry_in_seconds", backoff.Seconds())
		}
		return
	}
	if a.Changes() {
		if after, was := e.mem.recovered(a.Slot); was {
			e.log.Info("slot recovered", "slot", a.Slot, "after_failures", after)
		}
	}
	switch a.Kind {
	case KindCreate, KindRecreate, KindDrop, KindForget, KindSetFailover:
		e.log.Info("slot "+string(a.Kind), "slot", a.Slot, "reason", a.Reason)
		delete(e.mem.lastReason, a.Slot)
	case KindAdvance:
		if a.Code == CodeCatchingUp {
			// Progress at a steady rhythm while a copy catches up, not every pass.
			if last, ok := e.mem.progressAt[a.Slot]; !ok || e.now().Sub(last) >= progressEvery {
				e.mem.progressAt[a.Slot] = e.now()
				e.log.Info("slot copy catching up", "slot", a.Slot, "at", r.end.String(), "behind_bytes", lsncheck.Bytes(a.Primary.ConfirmedFlush, r.end))
			}
		} else if _, ok := e.mem.progressAt[a.Slot]; ok {
			delete(e.mem.progressAt, a.Slot)
			e.log.Info("slot copy caught up", "slot", a.Slot, "at", r.end.String())
		}
		e.log.Debug("slot advanced", "slot", a.Slot, "to", r.end)
		delete(e.mem.lastReason, a.Slot)
	case KindNone:
		// Waiting states carry moving LSNs: at debug level, or they would repeat every pass.
		e.log.Debug("slot unchanged", "slot", a.Slot, "reason", a.Reason)
	case KindSkip:
		if e.mem.failures[a.Slot] != nil {
			return // held back after a failure that was logged already
		}
		if e.mem.lastReason[a.Slot] != a.Reason {
			e.mem.lastReason[a.Slot] = a.Reason
			e.log.Info("slot skipped", "slot", a.Slot, "reason", a.Reason)
		}
	}
}
