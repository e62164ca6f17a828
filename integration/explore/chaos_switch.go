package explore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/drill"
)

// switchoverAndBack is FaultSwitchover: a switchover as an HA manager makes one (the gate beside
// the standby asked until READY, the primary demoted: stopped cleanly and started in recovery,
// the gate asked again as Patroni's pre_promote hook asks it then, the standby promoted, the old
// primary rebuilt as its standby), then the same back, with slotsync beside each node as in a
// cluster where every node runs one. After each switch the consumers resume on the new primary
// and must receive every change up to a few written there (READY was the ground for the
// switch). A switch the gate does not allow within a minute is not made.
func (wd *world) switchoverAndBack(ctx context.Context) error {
	if wd.pair.Dir == "" {
		return skipped("a switchover needs a local pair")
	}
	if wd.otherArgs == nil {
		wd.otherArgs = gateArgs(wd.pair.Standby.DSN("postgres"), wd.pair.Primary.DSN("postgres"), filepath.Join(wd.dir, "other-state"), wd.method, wd.native)
		wd.otherArgs = append(wd.otherArgs, wd.settings...)
	}
	if done, err := wd.switchTo(ctx); err != nil || !done {
		return err
	}
	if wd.other == nil {
		if err := wd.startOther(ctx); err != nil {
			return err
		}
	}
	_, err := wd.switchTo(ctx)
	return err
}

// startOther starts slotsync beside the first primary, now a standby (its gate's arguments are
// wd.gateArgs since the switch).
func (wd *world) startOther(ctx context.Context) error {
	args, err := sidecarArgs(wd.pair, wd.method, 0, wd.interval, wd.gateArgs)
	if err != nil {
		return err
	}
	if wd.other, err = newSidecar(wd.bin, args, nil, filepath.Join(wd.dir, "slotsync-other.log")); err != nil {
		return err
	}
	go wd.other.supervise(ctx)
	return nil
}

// switchTo switches the roles once the gate beside the standby says READY for every drill slot;
// done is false when it did not within a minute. A consumer that then misses a change is kept in
// wd.switchProblems; an error means the switch could not be carried out. From then on the gate
// asked (wd.gateArgs) is the one beside the new standby.
func (wd *world) switchTo(ctx context.Context) (done bool, err error) {
	if ready, err := wd.untilReady(ctx, time.Minute); err != nil || !ready {
		wd.log.Info("switchover not made: the gate did not say READY", "error", err)
		return false, err
	}
	wd.pauseWrites()
	wd.stopFeeds()
	if err := wd.pair.DemotePrimary(ctx); err != nil {
		return false, fmt.Errorf("switchover: demote the primary: %w", err)
	}
	wd.askDemoted(ctx)
	if err := wd.pair.Promote(ctx); err != nil {
		return false, fmt.Errorf("switchover: %w", err)
	}
	wd.switched++
	wd.gateArgs, wd.otherArgs = wd.otherArgs, wd.gateArgs
	newPrimary := wd.pair.Standby
	if err := commitPrepared(ctx, newPrimary); err != nil {
		return true, err
	}
	for i := range wd.feeds {
		wd.startFeed(ctx, i, newPrimary)
	}
	// A few transactions on the new primary, then every change up to them must reach the
	// consumers: those before the switch and those after, through the slots the switch kept.
	if err := wd.w.Batch(ctx, newPrimary, 3); err != nil {
		return true, fmt.Errorf("switchover: write on the new primary: %w", err)
	}
	if err := wd.consumersCaughtUp(ctx, newPrimary, wd.w.Issued()); err != nil {
		wd.switchProblems = append(wd.switchProblems, err.Error())
	}
	wd.startWrites(ctx, newPrimary)
	if err := wd.pair.Rejoin(ctx, wd.native.keepStale); err != nil {
		// Rebuilt, but its start failed: the slotsync beside it may have been restarting it
		// (the state-file method) at that moment. Fine if it comes up as a standby.
		if wd.pair.Primary != newPrimary || wd.standbyUp(ctx) != nil {
			return true, fmt.Errorf("switchover: rebuild the old primary as a standby: %w", err)
		}
		wd.log.Info("the rebuilt standby's start failed, and it came up anyway", "error", err)
	}
	wd.recv.node.Store(wd.pair.Standby)
	return true, nil
}

// askDemoted asks the gate beside the standby once the primary is demoted, as an HA manager's
// hook does before promoting. The primary stopped cleanly after a READY: the gate must judge
// (READY, or NOT READY from a record made while writes ran); an error or a usage exit (3) is a
// problem: a hook would take it for a misconfiguration.
func (wd *world) askDemoted(ctx context.Context) {
	a, err := wd.ask(ctx)
	switch {
	case err != nil:
		wd.switchProblems = append(wd.switchProblems, fmt.Sprintf("switchover: the gate with the primary demoted: %v", err))
	case a.Exit == 3:
		wd.switchProblems = append(wd.switchProblems, fmt.Sprintf("switchover: the gate with the primary demoted answered exit 3: %s", a.Error))
	default:
		answer := fmt.Sprintf("exit %d", a.Exit)
		if a.WithoutPrimary {
			answer += " without the primary"
		}
		for _, s := range drill.Slots {
			if why := a.Reasons[s.Name]; len(why) > 0 {
				answer += fmt.Sprintf("; %s: %s", s.Name, strings.Join(why, ","))
			}
		}
		wd.switchAnswers = append(wd.switchAnswers, answer)
		wd.log.Info("the gate with the primary demoted", "exit", a.Exit, "without_primary", a.WithoutPrimary, "cannot_tell", a.CannotTell, "error", a.Error)
	}
}

// untilReady asks the gate beside the standby until it says READY for every drill slot.
func (wd *world) untilReady(ctx context.Context, bound time.Duration) (bool, error) {
	deadline := time.Now().Add(bound)
	for {
		a, err := wd.ask(ctx)
		if err != nil {
			return false, err
		}
		if a.allReady() {
			return true, nil
		}
		if time.Now().After(deadline) || !sleepUntil(ctx, time.Now().Add(time.Second)) {
			return false, nil
		}
	}
}

// consumersCaughtUp waits until every consumer, resumed on the new primary, has received each
// change up to id upTo that the new primary holds, and holds none it lacks; after a READY,
// anything else is a loss.
func (wd *world) consumersCaughtUp(ctx context.Context, n *integration.Node, upTo int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		truth, err := drill.TableIDs(ctx, n)
		if err != nil {
			return fmt.Errorf("switchover: %w", err)
		}
		var behind []string
		for _, f := range wd.feeds {
			if missing, ahead := f.c.Gaps(truth, upTo); missing+ahead > 0 {
				behind = append(behind, fmt.Sprintf("%s lacks %d changes and holds %d the new primary lacks", f.c.Slot, missing, ahead))
			}
		}
		if len(behind) == 0 {
			return nil
		}
		if time.Now().After(deadline) || !sleepUntil(ctx, time.Now().Add(500*time.Millisecond)) {
			return fmt.Errorf("switchover after READY: %v", behind)
		}
	}
}

func (wd *world) startWrites(ctx context.Context, n *integration.Node) {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	wd.writes = writes{cancel: cancel, done: done}
	go func() { wd.w.Keep(wctx, n); close(done) }()
}

// pauseWrites stops the writer and waits for it (nothing when it is not running).
func (wd *world) pauseWrites() {
	if wd.writes.cancel != nil {
		wd.writes.cancel()
		<-wd.writes.done
		wd.writes.cancel = nil
	}
}
