package explore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/integration"
	slotsync "github.com/slotsync/slotsync/sync"
)

// Rule 8a's residual: judged without the primary, the gate answers from slotsync's last
// observation of it, and a primary whose standby's last replayed commit falls within the note of
// that observation (the next pass due, and SeenLagMargin) may have had a slot dropped, made
// again or moved back between the observation and its end, which nothing the gate can read
// shows (the answer says: slots made again since are unknown). A READY for such a slot, followed
// by a loss, rests on that residual, not on a rule the gate broke: the oracle counts it apart,
// and only when the servers' truth places the slot's change after the observation and the
// standby's WAL within the window the rules give (not the note's own word for its length).

// Residual is what rule 8a's residual needs to be judged: slotsync's note of its last pass (read
// from its state directory at the promotion), when the explorer changed each slot on the primary
// (the drop of a slot made again), the standby's last replayed commit at the promotion (the
// primary's clock), and the sidecar's --interval.
type Residual struct {
	Seen         *slotsync.GateSeen   `json:"seen,omitempty"`
	Remade       map[string]time.Time `json:"remade,omitempty"`
	LastReplayed time.Time            `json:"last_replayed,omitzero"`
	Interval     time.Duration        `json:"interval,omitempty"`
}

// residualPass bounds the time of one pass that the oracle allows in the note's window: the
// note counts each pass's own time, which a stall after its observation must not widen (rule 8a).
const residualPass = time.Second

// unobservedRemake says why a READY for slot judged without the primary, from the record observed
// at record, rests on rule 8a's residual ("" when it does not): the note names that record, the
// slot was changed on the primary after the note's observation, and the standby's last replayed
// commit is within the window the rules give after it (two passes, each the interval and at most
// residualPass, and SeenLagMargin; the note's own renew_by when shorter).
func (r Residual) unobservedRemake(slot string, record time.Time) string {
	s, at := r.Seen, r.Remade[slot]
	if s == nil || at.IsZero() || r.LastReplayed.IsZero() || !s.Record.Equal(record) || !at.After(s.PrimaryClock) {
		return ""
	}
	end := s.PrimaryClock.Add(2 * (r.Interval + residualPass))
	if s.RenewBy.Before(end) {
		end = s.RenewBy
	}
	end = end.Add(slotsync.SeenLagMargin)
	if r.LastReplayed.After(end) {
		return ""
	}
	return fmt.Sprintf("rule 8a's residual: the slot was changed on the primary at %s, %s after slotsync's last observation of it, "+
		"and the standby's last replayed commit (%s) is within the note's window (to %s): no read of the gate could show the change",
		at.Format("15:04:05.000"), at.Sub(s.PrimaryClock).Round(time.Millisecond), r.LastReplayed.Format("15:04:05.000"), end.Format("15:04:05.000"))
}

// dropSlot drops slot on the primary, if it is there, and notes when (the drop statement's start
// by the primary's clock, the clock of slotsync's note: the drop took effect after it).
func (wd *world) dropSlot(ctx context.Context, slot string) error {
	var at time.Time
	var dropped string
	err := wd.pair.Primary.QueryRow(ctx, "SELECT statement_timestamp(), pg_drop_replication_slot(slot_name)::text FROM pg_replication_slots WHERE slot_name = $1",
		[]any{slot}, &at, &dropped)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	wd.remadeMu.Lock()
	defer wd.remadeMu.Unlock()
	if wd.remadeAt == nil {
		wd.remadeAt = map[string]time.Time{}
	}
	wd.remadeAt[slot] = at
	return nil
}

// residual gathers the Residual at the promotion: the note slotsync left, the slots changed, and
// the standby's last replayed commit.
func (wd *world) residual(ctx context.Context) Residual {
	wd.remadeMu.Lock()
	r := Residual{Remade: maps.Clone(wd.remadeAt), Interval: cmp.Or(wd.interval, explorerInterval), Seen: slotsync.LoadGateSeen(wd.stateDir)}
	wd.remadeMu.Unlock()
	r.LastReplayed = lastReplayed(ctx, wd.pair.Standby)
	return r
}

// lastReplayed is the standby's last replayed commit's time (the primary's clock; zero when none
// or unread).
func lastReplayed(ctx context.Context, n *integration.Node) time.Time {
	var at *time.Time
	if err := n.QueryRow(ctx, "SELECT pg_last_xact_replay_timestamp()", nil, &at); err != nil || at == nil {
		return time.Time{}
	}
	return *at
}
