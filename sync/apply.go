package sync

import (
	"context"
	"errors"
	"fmt"
	stdsync "sync"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
)

// result is what happened to one action: its outcome, and for an advance where the copy is now.
type result struct {
	method.Outcome
	end lsncheck.LSN
}

// failed reports whether the action failed (a copy that waits has not).
func (r result) failed() bool { return r.Err != nil }

// done reports whether the action was carried out.
func (r result) done() bool { return r.Err == nil && r.Waiting == "" }

// execute carries out the changing actions on Workers sessions, each slot under its own
// timeout, so one slow or failing slot never blocks the others. It returns how many times the
// standby was restarted.
func (e *Engine) execute(ctx context.Context, obs Observation, actions []Action) ([]result, int) {
	if p, ok := e.impl.(method.Preparer); ok {
		p.Prepare(ctx, obs.view())
	}
	results := make([]result, len(actions))
	work, creates := make(chan int), make(chan int)
	var wg stdsync.WaitGroup
	worker := func(sess method.Session, queue chan int, done func()) {
		defer wg.Done()
		defer done()
		for i := range queue {
			sctx, cancel := context.WithTimeout(ctx, e.cfg.SlotTimeout)
			results[i] = e.apply(sctx, sess, actions[i])
			cancel()
		}
	}
	for w := 0; w < len(e.sess); w++ {
		wg.Add(1)
		go worker(e.sess[w], work, func() {})
	}
	// A new copy on a standby waits for a running-xacts record (about 0.2 s, mostly idle): many
	// of them at once (a bulk creation) run on sessions of their own, up to CreateWorkers, closed
	// when the pass is done, so they neither queue behind each other nor hold up the advances.
	newCopies := 0
	for _, a := range actions {
		if a.Kind == KindCreate {
			newCopies++
		}
	}
	for w := 0; w < min(newCopies, e.cfg.CreateWorkers); w++ {
		wg.Add(1)
		sess := e.impl.Session()
		go worker(sess, creates, sess.Close)
	}
	for i, a := range actions {
		switch {
		case a.Kind == KindCreate && e.cfg.CreateWorkers > 0:
			creates <- i
		case a.Kind == KindCreate || a.Kind == KindAdvance || a.Kind == KindRecreate || a.Kind == KindDrop || a.Kind == KindSetFailover:
			work <- i
		}
	}
	close(work)
	close(creates)
	wg.Wait()
	restarts := 0
	if f, ok := e.impl.(method.Flusher); ok {
		outcomes, restarted := f.Flush(ctx, obs.view())
		if restarted {
			restarts++
			// Every standby connection died with the restart: drop them all now rather than
			// failing the next statement on each.
			for _, s := range e.sess {
				s.Close()
			}
			e.obs.Reset()
		}
		for i, a := range actions {
			if errors.Is(results[i].Err, method.ErrCollected) {
				results[i].Outcome = outcomes[a.Slot]
			}
		}
	}
	return results, restarts
}

func (e *Engine) apply(ctx context.Context, sess method.Session, a Action) result {
	fail := func(err error) result { return result{Outcome: method.Outcome{Err: err}} }
	if a.Exact && (a.Kind == KindCreate || a.Kind == KindRecreate) {
		x, ok := sess.(method.ExactCopier)
		if !ok {
			return fail(fmt.Errorf("exact copy of slot %q: method %s makes none", a.Slot, e.method))
		}
		return fail(x.ReplaceExact(ctx, a.Primary, a.CopyDatabase))
	}
	switch a.Kind {
	case KindCreate:
		return made(sess, a.Slot, sess.Create(ctx, a.Primary))
	case KindRecreate:
		return made(sess, a.Slot, sess.Replace(ctx, a.Primary, a.CopyDatabase))
	case KindAdvance:
		end, err := sess.Advance(ctx, a.Slot, a.Primary.Database, a.Target)
		return result{Outcome: method.Outcome{Err: err}, end: end}
	case KindDrop:
		return fail(sess.Drop(ctx, a.Slot, a.Identity.Database))
	case KindSetFailover:
		if err := sess.SetFailover(ctx, a.Slot, a.Primary.Database); err != nil {
			return fail(fmt.Errorf("set failover on slot %q: %w", a.Slot, err))
		}
	}
	return result{}
}

// made is the result of making a copy of slot: where it was made, when its session says (rule 4).
func made(sess method.Session, slot string, err error) result {
	r := result{Outcome: method.Outcome{Err: err}}
	if sr, ok := sess.(method.ScratchReporter); ok && err == nil {
		r.ScratchAt = sr.ScratchAt(slot)
	}
	return r
}

func (e *Engine) anyChanged(actions []Action, results []result) bool {
	for i, a := range actions {
		if a.Kind != KindForget && a.Changes() && results[i].done() {
			return true
		}
	}
	return false
}
