package sync

// The daemon's loop: passes until the context ends, the watch between them, and how failures
// are logged.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slotsync/slotsync/topology"
)

// sleepCtx waits d, or less if ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// Run makes passes every Interval until ctx ends or an error needs a human. Failed passes are
// retried with exponential backoff up to MaxBackoff, logging each distinct error once.
// It returns nil when ctx ends, topology.ErrPromoted when the standby was promoted, or the
// error that needs a human.
func (e *Engine) Run(ctx context.Context, onPass func(Report, error)) error {
	e.freshStart()
	wait := time.Duration(0)
	var lastErr string
	var failingSince, loggedAt time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		default:
		}
		if !e.watchUntil(ctx, time.Now().Add(wait)) {
			return nil
		}
		rep, err := e.RunOnce(ctx)
		if err != nil && ctx.Err() != nil {
			return nil // cut short by the stop: not a pass to report
		}
		if onPass != nil {
			onPass(rep, err)
		}
		switch {
		case err == nil:
			if e.logged.lastStop != "" {
				e.log.Info("the problem that stopped syncing is gone; syncing again")
				e.logged.lastStop = ""
			}
			if lastErr != "" {
				e.log.Info("sync passes succeed again", "failed_for_seconds", e.now().Sub(failingSince).Round(time.Second).Seconds())
				lastErr = ""
			}
			wait = e.cfg.Interval
		case Classify(err) == Stop:
			if msg := err.Error(); msg != e.logged.lastStop {
				e.logged.lastStop = msg
				if errors.Is(err, topology.ErrPromoted) {
					e.log.Warn(msg)
				} else {
					e.log.Error("syncing paused until a human acts (checked again every --recheck)", "error", msg)
				}
			}
			return err
		case primaryGone(err):
			// The primary cannot be asked: keep the rhythm of passes, without backoff. The standby
			// may be re-pointed to a new primary at any moment (followed within a pass), and the
			// gate without the primary answers from these passes (/promotion-ready).
			wait = e.cfg.Interval
			e.noteFailure(err, &lastErr, &failingSince, &loggedAt, wait)
		default:
			wait = min(max(2*wait, e.cfg.Interval), e.cfg.MaxBackoff)
			e.noteFailure(err, &lastErr, &failingSince, &loggedAt, wait)
		}
	}
}

// noteFailure logs a failed pass: each distinct error once, the same one again at a steady
// rhythm (a persistent problem stays visible).
func (e *Engine) noteFailure(err error, lastErr *string, failingSince, loggedAt *time.Time, wait time.Duration) {
	switch msg := err.Error(); {
	case msg != *lastErr:
		if *lastErr == "" {
			*failingSince = e.now()
		}
		*lastErr, *loggedAt = msg, e.now()
		e.log.Warn("sync pass failed; nothing was changed; retrying", "error", msg, "retry_in_seconds", wait.Seconds())
	case e.now().Sub(*loggedAt) >= e.stillFailingEvery:
		*loggedAt = e.now()
		e.log.Warn(fmt.Sprintf("still failing after %s", e.now().Sub(*failingSince).Round(time.Second)), "error", msg)
	}
}
