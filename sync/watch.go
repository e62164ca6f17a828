package sync

import (
	"context"
	"time"

	"github.com/slotsync/slotsync/internal/failpoint"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// The watch: between full passes, a cheap look at the primary slots' positions and the
// standby's replay position, every WatchInterval, advances the copies whose consumer moved.
// It never decides anything a full pass has not decided already: it only moves copies the last
// pass found idle, owned, of the same incarnation and due for an advance (or up to date), still
// under rule 1 (never backwards, never past the standby's replay position) and rule 2 (a primary
// slot whose restart_lsn or catalog_xmin went back is left to the next full pass). Everything
// else, readiness, journal writes, creations and restarts, stays on the full pass's rhythm.

// watched is a copy the watch may advance.
type watched struct {
	database string
	ref      lsncheck.Seen // the primary slot as the last full pass saw it
	copyAt   lsncheck.LSN  // the copy's confirmed_flush as far as slotsync knows
}

// WatchSample is what the watch reads: the standby's replay position, who the server on the
// primary link is, and the watched primary slots' positions.
type WatchSample struct {
	InRecovery bool
	Replay     lsncheck.LSN
	// From is the server the primary slots were read on.
	From    topology.ServerID
	Primary map[string]lsncheck.Position
}

// watchUntil runs the watch until deadline, or a Wake (it then drops the connections for the
// pass that follows at once); when ctx ends it returns false.
func (e *Engine) watchUntil(ctx context.Context, deadline time.Time) bool {
	for {
		next := time.Now().Add(e.watching.every)
		if len(e.mem.watched) == 0 || e.cfg.WatchInterval <= 0 || next.After(deadline) {
			next = deadline
		}
		select {
		case <-ctx.Done():
			return false
		case <-e.wake:
			e.log.Info("a full pass now, on new connections (woken)")
			e.obs.Reset()
			return true
		case <-time.After(time.Until(next)):
		}
		if !next.Before(deadline) {
			return true
		}
		look := e.watch(ctx)
		// Looking keeps to a tenth of the time or less, however many slots it reads (advances,
		// work the consumer asked for, do not slow it down).
		e.watching.every = max(e.cfg.WatchInterval, 10*look)
	}
}

// watch makes one look and the advances it calls for, and returns how long the look took. Any
// failure ends watching until the next full pass, which sorts it out.
func (e *Engine) watch(ctx context.Context) time.Duration {
	names := make([]string, 0, len(e.mem.watched))
	for name := range e.mem.watched {
		names = append(names, name)
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, e.cfg.ObserveTimeout)
	sample, err := e.obs.Watch(wctx, names)
	cancel()
	look := time.Since(start)
	// Only from the very primary the last full pass verified (rule 7): never from a server in
	// recovery, restarted, or another one the link reaches now.
	if err != nil || !sample.InRecovery || sample.Replay == 0 || len(e.sess) == 0 ||
		(sample.From != e.mem.watchFrom || sample.From.InRecovery) && !failpoint.Mutant("watch-unbound") {
		e.mem.forgetWatch()
		return look
	}
	for _, name := range sortedKeys(e.mem.watched) {
		w := e.mem.watched[name]
		pos, ok := sample.Primary[name]
		if !ok {
			delete(e.mem.watched, name)
			continue
		}
		cur := lsncheck.Seen{Identity: w.ref.Identity, Position: pos}
		if ch, _ := lsncheck.CompareIncarnation(w.ref, cur); ch == lsncheck.NewIncarnation {
			delete(e.mem.watched, name) // maybe another slot: the next full pass decides
			continue
		}
		target, catchUp := advanceTo(pos.ConfirmedFlush, sample.Replay, w.copyAt, e.cfg.AdvanceStep)
		if target == 0 || catchUp {
			continue // nothing to do, or a catch-up: the full pass moves it in bounded steps and reports progress
		}
		sctx, cancel := context.WithTimeout(ctx, e.cfg.SlotTimeout)
		end, err := e.sess[0].Advance(sctx, name, w.database, target)
		cancel()
		if err != nil {
			e.log.Debug("watch: advance failed; left to the next pass", "slot", name, "error", err)
			delete(e.mem.watched, name)
			e.mem.watchMoved(name, 0)
			continue
		}
		w.copyAt = max(end, target)
		e.mem.watchMoved(name, end)
		e.mem.watched[name] = w
		e.watching.advances++
		_ = failpoint.Hit("watch.after-advance")
	}
	return look
}
