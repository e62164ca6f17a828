package explore

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/lsncheck"
)

// The rules at the instant: the servers read right before and right after each question, so a
// READY that broke rule 4 (a copy ahead of its primary slot) or rule 5 (a consumer holding more
// than the standby received) at the moment it was given is a lie, whatever follows the
// promotion.

// Instant is what the servers said at one read around a question: each drill slot on the
// primary (with what its walsender had sent) and its copy on the standby, and the standby's end
// of WAL and WAL receiver.
type Instant struct {
	At      time.Time         `json:"at"`
	Primary map[string]SlotAt `json:"primary,omitempty"`
	Copies  map[string]SlotAt `json:"copies,omitempty"`
	// StandbyWALEnd: the larger of the standby's received and replayed WAL (the gate's WAL end);
	// ReceiverPID: its streaming WAL receiver (0: none streams).
	StandbyWALEnd pglogrepl.LSN `json:"standby_wal_end"`
	ReceiverPID   int           `json:"receiver_pid,omitempty"`
	// PrimaryInRecovery: the server read as the primary was in recovery (a demoted primary): its
	// slots are not the consumers' positions (before 17 a shutdown does not save confirmed_flush).
	PrimaryInRecovery bool `json:"primary_in_recovery,omitempty"`
	// PrimaryWALEnd: read in recovery, the primary's end of WAL (received, else replayed), as the
	// gate reads a demoted primary's: its consumers may have received up to there.
	PrimaryWALEnd pglogrepl.LSN `json:"primary_wal_end,omitempty"`
	// RouteCut: the gate's and slotsync's route to the primary was cut (blackholed) at the read:
	// the gate could not reach the primary, so it could not read a demoted primary's WAL end
	// either (rule 8 then judges by --primary-gone-after, not rule 8b).
	RouteCut bool `json:"route_cut,omitempty"`
	// OtherWritable: another node of the cluster (the second standby) that answered read-write:
	// a primary besides the one the standby names ("" when none did, or none was read).
	OtherWritable string `json:"other_writable,omitempty"`
	// PrimaryErr and StandbyErr: a read that failed; what it would have said is absent.
	PrimaryErr string `json:"primary_error,omitempty"`
	StandbyErr string `json:"standby_error,omitempty"`
}

// withoutPrimarySlot is the read with slot absent from the primary's part (a copy: the read
// itself is left as it was).
func (in Instant) withoutPrimarySlot(slot string) Instant {
	primary := maps.Clone(in.Primary)
	delete(primary, slot)
	in.Primary = primary
	return in
}

// SlotAt is one slot as a server listed it; Sent and SenderPID only on the primary.
type SlotAt struct {
	Plugin      string        `json:"plugin"`
	Database    string        `json:"database"`
	TwoPhase    bool          `json:"two_phase,omitempty"`
	Restart     pglogrepl.LSN `json:"restart_lsn"`
	Confirmed   pglogrepl.LSN `json:"confirmed_flush"`
	CatalogXmin uint32        `json:"catalog_xmin"`
	Sent        pglogrepl.LSN `json:"sent,omitempty"`
	SenderPID   int           `json:"sender_pid,omitempty"`
}

// instantTimeout bounds each server's read: a frozen or gone primary leaves its part absent,
// never the question late.
const instantTimeout = 300 * time.Millisecond

// slotsAtSQL lists the named slots the same way on every major (two_phase exists from 14).
const slotsAtSQL = `SELECT s.slot_name::text, coalesce(s.plugin, '')::text, coalesce(s.database, '')::text,
       coalesce((to_jsonb(s)->>'two_phase')::bool, false), coalesce(s.restart_lsn, '0/0')::text,
       coalesce(s.confirmed_flush_lsn, '0/0')::text, coalesce(s.catalog_xmin::text, '0')::bigint,
       coalesce(w.sent_lsn, '0/0')::text, coalesce(w.pid, 0)
  FROM pg_replication_slots s LEFT JOIN pg_stat_replication w ON w.pid = s.active_pid
 WHERE s.slot_type = 'logical' AND s.slot_name = ANY($1)`

// readInstant reads the primary's slots, then the standby's copies and WAL end, as the gate does,
// then whether any of others answers read-write.
func readInstant(ctx context.Context, primary, standby *integration.Node, slots []string, others ...*integration.Node) Instant {
	in := Instant{At: time.Now()}
	var err error
	if in.Primary, err = readSlotsAt(ctx, primary, slots); err == nil {
		err = readInRecovery(ctx, primary, &in.PrimaryInRecovery)
	}
	if err == nil && in.PrimaryInRecovery {
		in.PrimaryWALEnd, _, err = readWALEnd(ctx, primary, instantTimeout)
	}
	if err != nil {
		in.PrimaryErr = err.Error()
	}
	if in.Copies, err = readSlotsAt(ctx, standby, slots); err == nil {
		in.StandbyWALEnd, in.ReceiverPID, err = readWALEnd(ctx, standby, instantTimeout)
	}
	if err != nil {
		in.StandbyErr = err.Error()
	}
	for _, n := range others {
		var inRecovery bool
		if n != nil && readInRecovery(ctx, n, &inRecovery) == nil && !inRecovery {
			in.OtherWritable = n.Name
		}
	}
	return in
}

func readSlotsAt(ctx context.Context, n *integration.Node, slots []string) (map[string]SlotAt, error) {
	ctx, cancel := context.WithTimeout(ctx, instantTimeout)
	defer cancel()
	conn, err := n.Connect(ctx, "postgres")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, slotsAtSQL, slots)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]SlotAt{}
	for rows.Next() {
		var name, restart, confirmed, sent string
		var xmin int64
		var s SlotAt
		if err := rows.Scan(&name, &s.Plugin, &s.Database, &s.TwoPhase, &restart, &confirmed, &xmin, &sent, &s.SenderPID); err != nil {
			return nil, err
		}
		s.Restart, _ = pglogrepl.ParseLSN(restart)
		s.Confirmed, _ = pglogrepl.ParseLSN(confirmed)
		s.Sent, _ = pglogrepl.ParseLSN(sent)
		s.CatalogXmin = uint32(xmin)
		out[name] = s
	}
	return out, rows.Err()
}

func readInRecovery(ctx context.Context, n *integration.Node, inRecovery *bool) error {
	ctx, cancel := context.WithTimeout(ctx, instantTimeout)
	defer cancel()
	return n.QueryRow(ctx, "SELECT pg_is_in_recovery()", nil, inRecovery)
}

// readWALEnd reads a server in recovery's WAL end (received, else replayed) and its streaming
// WAL receiver's pid (0: none streams): for the rules at the instant and the servers' truth alike.
func readWALEnd(ctx context.Context, n *integration.Node, within time.Duration) (pglogrepl.LSN, int, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var end string
	var pid int
	err := n.QueryRow(ctx, `SELECT greatest(coalesce(pg_last_wal_receive_lsn(), '0/0'), coalesce(pg_last_wal_replay_lsn(), '0/0'))::text,
	       coalesce((SELECT pid FROM pg_stat_wal_receiver WHERE status = 'streaming'), 0)`, nil, &end, &pid)
	if err != nil {
		return 0, 0, err
	}
	lsn, err := pglogrepl.ParseLSN(end)
	return lsn, pid, err
}

// sameSlot: b, read after a, is the same slot (same plugin, database and two_phase, no position
// gone back): not dropped and made again between the reads.
func sameSlot(a, b SlotAt) bool {
	return a.Plugin == b.Plugin && a.Database == b.Database && a.TwoPhase == b.TwoPhase && b.Restart >= a.Restart &&
		b.Confirmed >= a.Confirmed && !lsncheck.XIDPrecedes(lsncheck.XID(b.CatalogXmin), lsncheck.XID(a.CatalogXmin))
}

// instantLie says how a READY for slot, given between the reads before and after, broke rule 4
// or rule 5 at every moment between them ("" when it did not, or the reads cannot say). Only
// what is sure between the reads counts: positions move forward, so a copy whose
// confirmed_flush before was past its primary slot's after stood ahead throughout (rule 4); a
// consumer that held, before, more than the standby's WAL end after, with the same walsender
// and the same WAL receiver at both reads (or none streaming at either, the WAL end not gone
// back: nothing reached the standby between them), held more than the standby had throughout
// (rule 5, which an answer judged without the primary does not promise: rule 8). A receiver
// that starts reports from the start of a segment, so a change of receiver says nothing.
func instantLie(before, after Instant, slot string, withPrimary bool) string {
	if before.PrimaryInRecovery || after.PrimaryInRecovery {
		return "" // a demoted primary's slots say nothing of where the consumers stand
	}
	p0, ok0 := before.Primary[slot]
	p1, ok1 := after.Primary[slot]
	if !ok0 || !ok1 || !sameSlot(p0, p1) {
		return ""
	}
	c0, okc0 := before.Copies[slot]
	c1, okc1 := after.Copies[slot]
	if okc0 && okc1 && sameSlot(c0, c1) && c0.Confirmed > p1.Confirmed {
		return fmt.Sprintf("rule 4 at the instant: the copy's confirmed_flush was %s before the question, past the primary slot's %s after it",
			c0.Confirmed, p1.Confirmed)
	}
	if !withPrimary || before.ReceiverPID != after.ReceiverPID || after.StandbyWALEnd == 0 || after.StandbyWALEnd < before.StandbyWALEnd {
		return ""
	}
	held := p0.Confirmed
	if p0.SenderPID != 0 && p0.SenderPID == p1.SenderPID {
		held = max(held, p0.Sent)
	}
	if held > after.StandbyWALEnd {
		return fmt.Sprintf("rule 5 at the instant: the consumer held %s before the question, past the standby's WAL end %s after it",
			held, after.StandbyWALEnd)
	}
	return ""
}

// promotionLie says how a READY to a promotion's question (--for-promotion), given between the
// reads before and after, broke rule 8c: the old primary answered read-write at both reads, so
// it was alive throughout, and promoting the standby then makes two primaries ("" when a read
// failed or found it in recovery).
func promotionLie(before, after Instant) string {
	if before.PrimaryErr != "" || after.PrimaryErr != "" || before.PrimaryInRecovery || after.PrimaryInRecovery {
		return ""
	}
	return "rule 8c at the instant: asked for a promotion while the old primary answered read-write before and after the question"
}

// demotedLie says how a READY judged without the primary, given between the reads before and
// after, broke rule 8b: the primary, in recovery at both reads (demoted: it writes no WAL of its
// own) and within the gate's reach (its route not cut), had WAL before the question past the
// standby's WAL end after it, with the same WAL receiver (or none) at both reads (a receiver that
// starts reports from the start of a segment), so the standby lacked what the demoted primary's
// consumers may have received at every moment between ("" when it did not, or a read cannot
// say).
func demotedLie(before, after Instant) string {
	if !before.PrimaryInRecovery || !after.PrimaryInRecovery || before.RouteCut || after.RouteCut || before.PrimaryWALEnd == 0 ||
		after.StandbyErr != "" || after.StandbyWALEnd == 0 ||
		before.ReceiverPID != after.ReceiverPID || before.PrimaryWALEnd <= after.StandbyWALEnd {
		return ""
	}
	return fmt.Sprintf("rule 8b at the instant: judged without the primary while the demoted primary had WAL up to %s before the question, "+
		"past the standby's WAL end %s after it", before.PrimaryWALEnd, after.StandbyWALEnd)
}

// otherPrimaryLie says how a READY judged without the primary, given between the reads before
// and after, broke rule 8: another node of the cluster answered read-write at both reads, so a
// primary lived throughout, and promoting the standby then makes two ("" when it did not).
func otherPrimaryLie(before, after Instant) string {
	if before.OtherWritable == "" || after.OtherWritable == "" {
		return ""
	}
	return fmt.Sprintf("rule 8 at the instant: judged without the primary while %s answered read-write before and after the question", after.OtherWritable)
}
