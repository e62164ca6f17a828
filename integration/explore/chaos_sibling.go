package explore

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/slotsync/slotsync/integration"
)

// siblingCutover is the cutover of Plan.Sibling, a three-node cluster failing over twice. The
// standby streams through the leader's address (a VIP, a Service), which moves with the
// leader: no change of its configuration tells the standby's sidecar that its upstream
// changed. The second standby, cut off from the primary, is promoted while the primary lives
// on (an HA manager that lost sight of it) and takes writes; slotsync, paused, last observed the
// primary before its last segment switch, which its consumers confirmed past; the primary is
// killed; the leader's address moves to the second one, which the standby, having received no
// more than it (its walsender stalled first), follows onto its new timeline; the second one is
// killed in turn; then the gate is asked without a primary. The transactions the second one
// took lie before the consumers' offsets on the new timeline, so a promotion of the standby
// skips them: a record of another timeline is no ground for READY (rule 8). The answer with
// the primary is not binding: the standby promoted is not the one it judged.
func (wd *world) siblingCutover(ctx context.Context) (with, without GateAnswer, err error) {
	s2 := wd.secondNode
	if err := wd.streamThroughLeader(ctx); err != nil {
		return with, without, fmt.Errorf("the standby streaming through the leader's address: %w", err)
	}
	wd.pauseWrites()
	if err := wd.pair.WaitCaughtUp(ctx); err != nil {
		return with, without, err
	}
	wd.stopFeeds() // the consumers away while the second one forks off: none confirms WAL the standby lacks
	if err := wd.siblingForks(ctx, s2); err != nil {
		return with, without, fmt.Errorf("the second standby promoted: %w", err)
	}
	sleepUntil(ctx, time.Now().Add(time.Second)) // slotsync's passes observe the primary after those writes
	wd.noteTruth(ctx, truthQuestion)
	if with, err = wd.ask(ctx); err != nil {
		return with, without, err
	}
	wd.side.signal(syscall.SIGSTOP)
	wd.frozen = true
	end, err := wd.switchPastConsumers(ctx)
	if err != nil {
		return with, without, fmt.Errorf("the primary's last segment switch: %w", err)
	}
	wd.noteTruth(ctx, truthEnd)
	if err := wd.killPrimary(ctx); err != nil {
		return with, without, err
	}
	wd.stopFeeds()
	if err := writeWALPast(ctx, s2, end); err != nil {
		return with, without, fmt.Errorf("the second standby's WAL past the consumers': %w", err)
	}
	if err := wd.followSibling(ctx, s2); err != nil {
		return with, without, fmt.Errorf("the standby following the promoted second standby: %w", err)
	}
	if err := s2.Kill(ctx); err != nil {
		return with, without, err
	}
	without, err = wd.askWithoutPrimary(ctx)
	wd.log.Info("gate (sibling promoted)", "with_primary", fmt.Sprint(with.Slots), "without_primary", fmt.Sprint(without.Slots),
		"without_cannot_tell", without.CannotTell)
	return with, without, err
}

// streamThroughLeader re-points the standby to stream from the primary through the leader's
// address (wd.leader, a proxy), then lets slotsync's record be written again after that reload
// (the record is renewed every 5 s): a reload after the record would make the gate doubt
// hot_standby_feedback (rule 8), which is not what this cutover is about.
func (wd *world) streamThroughLeader(ctx context.Context) error {
	addr, err := wd.pair.Primary.Addr(ctx)
	if err != nil {
		return err
	}
	if wd.leader, err = integration.NewProxy(addr); err != nil {
		return err
	}
	to := fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=postgres application_name=standby", wd.leader.Port(), integration.Superuser)
	if err := setPrimaryConninfo(ctx, wd.pair.Standby, to); err != nil {
		return err
	}
	err = integration.Poll(ctx, time.Minute, "the standby to stream through the leader's address", func(ctx context.Context) (bool, error) {
		var n int
		err := wd.pair.Standby.QueryRow(ctx, "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming' AND sender_port = $1",
			[]any{wd.leader.Port()}, &n)
		return n == 1, err
	})
	if err != nil {
		return err
	}
	sleepUntil(ctx, time.Now().Add(7*time.Second))
	return nil
}

// siblingForks stops the second standby's sidecar, stalls the primary's walsender to the
// standby, cuts the second standby off once it has all the standby has, promotes it and writes
// on it: the second one's new timeline forks off at or after where the standby stands.
func (wd *world) siblingForks(ctx context.Context, s2 *integration.Node) error {
	wd.stopSecondSidecar()
	if _, err := wd.stallSender(ctx); err != nil {
		return err
	}
	sent, err := standbyWALEnd(ctx, wd.pair.Standby)
	if err != nil {
		return err
	}
	if err := waitWALEnd(ctx, s2, sent, "the second standby to receive what the standby has"); err != nil {
		return err
	}
	if err := setPrimaryConninfo(ctx, s2, ""); err != nil {
		return err
	}
	if err := integration.Poll(ctx, time.Minute, "the second standby's WAL receiver to stop", func(ctx context.Context) (bool, error) {
		var n int
		err := s2.QueryRow(ctx, "SELECT count(*) FROM pg_stat_wal_receiver", nil, &n)
		return n == 0, err
	}); err != nil {
		return err
	}
	var ok bool
	if err := s2.QueryRow(ctx, "SELECT pg_promote(true, 60)", nil, &ok); err != nil || !ok {
		return fmt.Errorf("promote: %v (promoted: %v)", err, ok)
	}
	wd.log.Info("the second standby promoted while the primary lives on", "forked_after", sent.String())
	return wd.w.Batch(ctx, s2, 100)
}

// switchPastConsumers switches the primary's segment, brings the consumers back to it and waits
// (10 s at most) until every drill slot confirmed past the switch, which its consumers, idle,
// do from the keepalives; it returns the primary's end of WAL.
func (wd *world) switchPastConsumers(ctx context.Context) (pglogrepl.LSN, error) {
	if err := wd.pair.SwitchSegments(ctx, 1); err != nil {
		return 0, err
	}
	for i := range wd.feeds {
		wd.startFeed(ctx, i, wd.pair.Primary)
	}
	end, err := wd.pair.CurrentLSN(ctx)
	if err != nil {
		return 0, err
	}
	err = integration.Poll(ctx, 10*time.Second, "the consumers to confirm past the switch", func(ctx context.Context) (bool, error) {
		var behind int
		err := wd.pair.Primary.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = ANY($1) AND confirmed_flush_lsn < $2::text::pg_lsn",
			[]any{wd.slotNames(), end.String()}, &behind)
		return behind == 0, err
	})
	if err != nil {
		wd.log.Warn("the consumers did not all confirm past the primary's last switch", "end", end.String(), "error", err)
	}
	return wd.pair.CurrentLSN(ctx)
}

// writeWALPast makes the promoted second standby's WAL reach past end, with no transaction: a
// segment switch and checkpoints (at most 200).
func writeWALPast(ctx context.Context, n *integration.Node, end pglogrepl.LSN) error {
	if err := n.Exec(ctx, "SELECT pg_switch_wal()"); err != nil {
		return err
	}
	for range 200 {
		var s string
		if err := n.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text", nil, &s); err != nil {
			return err
		}
		if at, err := pglogrepl.ParseLSN(s); err != nil || at > end+1024 {
			return err
		}
		if err := n.Exec(ctx, "CHECKPOINT"); err != nil {
			return err
		}
	}
	return fmt.Errorf("its WAL did not pass %s", end)
}

// followSibling moves the leader's address to the promoted second standby (through a physical
// slot of the standby's name there) and waits until the standby received all its WAL.
func (wd *world) followSibling(ctx context.Context, s2 *integration.Node) error {
	addr, err := s2.Addr(ctx)
	if err != nil {
		return err
	}
	if err := s2.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true)", integration.PhysicalSlot); err != nil {
		return err
	}
	var target string
	if err := s2.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text", nil, &target); err != nil {
		return err
	}
	end, err := pglogrepl.ParseLSN(target)
	if err != nil {
		return err
	}
	wd.leader.Redirect(addr)
	return waitWALEnd(ctx, wd.pair.Standby, end, "the standby to receive the promoted second standby's WAL")
}

// waitWALEnd waits (a minute at most) until a standby holds WAL up to lsn (standbyWALEnd).
func waitWALEnd(ctx context.Context, n *integration.Node, lsn pglogrepl.LSN, what string) error {
	return integration.Poll(ctx, time.Minute, what, func(ctx context.Context) (bool, error) {
		got, err := standbyWALEnd(ctx, n)
		return got >= lsn, err
	})
}

// demoteToSibling is the failover of Plan.DemoteToSibling: the primary stopped cleanly and
// started in recovery following the second standby through a route that reaches nothing for a
// second (its WAL receiver between two attempts), the second standby promoted meanwhile, with
// its sidecar stopped, and taking writes; then the route reaches it. The standby's
// primary_conninfo still names the primary: the gate beside it must not take the primary for
// one that follows no one (rule 8).
func (wd *world) demoteToSibling(ctx context.Context) error {
	s2 := wd.secondNode
	wd.stopSecondSidecar()
	dead, err := integration.FreePort()
	if err != nil {
		return err
	}
	route, err := integration.NewProxy(fmt.Sprintf("127.0.0.1:%d", dead))
	if err != nil {
		return err
	}
	wd.demotedRoute = route
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=postgres application_name=demoted", route.Port(), integration.Superuser)
	if err := wd.pair.DemotePrimaryFollowing(ctx, conninfo, ""); err != nil {
		return err
	}
	var ok bool
	if err := s2.QueryRow(ctx, "SELECT pg_promote(true, 60)", nil, &ok); err != nil || !ok {
		return fmt.Errorf("promote the second standby: %v (promoted: %v)", err, ok)
	}
	addr, err := s2.Addr(ctx)
	if err != nil {
		return err
	}
	time.AfterFunc(time.Second, func() { route.Redirect(addr) })
	wd.log.Info("the primary demoted to follow the second standby, promoted meanwhile")
	return wd.w.Batch(ctx, s2, 100)
}

// stopSecondSidecar stops the second standby's sidecar, before that standby is promoted.
func (wd *world) stopSecondSidecar() {
	if wd.second != nil {
		if err := wd.second.stop(wd.stopWithin); err != nil {
			wd.log.Warn("the second standby's sidecar did not stop", "error", err)
		}
		wd.second = nil
	}
}
