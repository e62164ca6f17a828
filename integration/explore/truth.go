package explore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/slotsync/slotsync/integration"
)

// Truth is what the servers themselves said at one moment of the cutover, read directly and
// not through slotsync or the consumers' own records: the primary's WAL position, each drill
// slot's confirmed_flush and what the walsender streaming it had sent (what its consumer holds),
// and the standby's received WAL and whether its receiver streamed. Read right before the
// question and right before the primary's end (a hook's: before each question, the last kept).
type Truth struct {
	When       string               `json:"when"`
	At         time.Time            `json:"at"`
	PrimaryWAL pglogrepl.LSN        `json:"primary_wal"`
	Slots      map[string]SlotTruth `json:"slots,omitempty"`
	// StandbyReceived: the standby's received WAL (replayed, when it received none yet).
	StandbyReceived  pglogrepl.LSN `json:"standby_received"`
	StandbyStreaming bool          `json:"standby_streaming"`
	// Err: a read that failed (the primary frozen or gone, the standby restarting); what was
	// read before it stays.
	Err string `json:"error,omitempty"`
}

// SlotTruth is one drill slot on the primary: its confirmed_flush, and the sent_lsn of the
// walsender streaming it (0 when none streams it).
type SlotTruth struct {
	Confirmed pglogrepl.LSN `json:"confirmed"`
	Sent      pglogrepl.LSN `json:"sent"`
}

// Held is what the slot's consumer holds: the larger of what it confirmed and what it was sent.
func (s SlotTruth) Held() pglogrepl.LSN { return max(s.Confirmed, s.Sent) }

// truthTimeout bounds each read: a frozen or stalled server leaves the truth incomplete, never
// the cutover late.
const truthTimeout = time.Second

// readTruth reads the servers' truth of the moment named when for the drill's slots.
func readTruth(ctx context.Context, primary, standby *integration.Node, slots []string, when string) Truth {
	t := Truth{When: when, At: time.Now(), Slots: map[string]SlotTruth{}}
	if err := primaryTruth(ctx, primary, slots, &t); err != nil {
		t.Err = "primary: " + err.Error()
	}
	if err := standbyTruth(ctx, standby, &t); err != nil && t.Err == "" {
		t.Err = "standby: " + err.Error()
	}
	return t
}

func primaryTruth(ctx context.Context, n *integration.Node, slots []string, t *Truth) error {
	ctx, cancel := context.WithTimeout(ctx, truthTimeout)
	defer cancel()
	conn, err := n.Connect(ctx, "postgres")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT pg_current_wal_lsn()::text, s.slot_name::text, coalesce(s.confirmed_flush_lsn, '0/0')::text,
	       coalesce(w.sent_lsn, '0/0')::text
	  FROM pg_replication_slots s LEFT JOIN pg_stat_replication w ON w.pid = s.active_pid
	 WHERE s.slot_name = ANY($1)`, slots)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var wal, name, confirmed, sent string
		if err := rows.Scan(&wal, &name, &confirmed, &sent); err != nil {
			return err
		}
		var st SlotTruth
		t.PrimaryWAL, _ = pglogrepl.ParseLSN(wal)
		st.Confirmed, _ = pglogrepl.ParseLSN(confirmed)
		st.Sent, _ = pglogrepl.ParseLSN(sent)
		t.Slots[name] = st
	}
	return rows.Err()
}

func standbyTruth(ctx context.Context, n *integration.Node, t *Truth) error {
	end, pid, err := readWALEnd(ctx, n, truthTimeout)
	if err != nil {
		return err
	}
	t.StandbyReceived, t.StandbyStreaming = end, pid != 0
	return nil
}

// noneAheadAt says whether the servers said, at truth t, that no drill slot's consumer held
// anything past end (the standby's end of WAL at its promotion): every slot read, none held
// beyond it. A READY given before t then promised the standby all its consumers had.
func noneAheadAt(t Truth, slots []string, end pglogrepl.LSN) bool {
	if t.Err != "" || t.At.IsZero() {
		return false
	}
	for _, s := range slots {
		st, ok := t.Slots[s]
		if !ok || st.Held() > end {
			return false
		}
	}
	return true
}

// heldAt is what slot's consumer held at truth t as the servers said, and whether they said it.
func heldAt(t Truth, slot string) (pglogrepl.LSN, bool) {
	st, ok := t.Slots[slot]
	if t.At.IsZero() || !ok {
		return 0, false
	}
	return st.Held(), true
}

func (t Truth) String() string {
	return fmt.Sprintf("%s at %s: primary %s, standby %s (streaming %v), slots %v %s", t.When, t.At.Format("15:04:05.000"), t.PrimaryWAL,
		t.StandbyReceived, t.StandbyStreaming, t.Slots, t.Err)
}
