package topology

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/lsncheck"
)

// Slot is one logical replication slot as pg_replication_slots shows it.
type Slot struct {
	lsncheck.Identity
	lsncheck.Position
	Temporary bool
	Active    bool
	ActivePID int
	// WALStatus is reserved/extended/unreserved/lost (13+), "" when unknown.
	WALStatus string
	// Invalidated: the slot can no longer be used (WAL removed, or a recovery conflict on 16+).
	Invalidated        bool
	InvalidationReason string // 17+: invalidation_reason; earlier majors: derived
	Failover           bool   // 17+
	Synced             bool   // 17+: created and kept by the server's slot sync
	// SentLSN is how far the walsender streaming the slot has read WAL (pg_stat_replication
	// sent_lsn; 0 when none streams it or the role may not see it).
	SentLSN lsncheck.LSN
	// Snapshot: whether pg_logical/snapshots holds a serialized decoding snapshot at the slot's
	// restart_lsn (read on a standby; SnapshotUnknown otherwise).
	Snapshot SnapshotState
	// SyncSkipReason (19+, a synced slot on a standby) is why the server's slot sync last left
	// the slot as it was: wal_not_flushed, wal_or_rows_removed, no_consistent_snapshot or
	// slot_invalidated; "" when its last sync was not skipped. SyncSkipCount is how often it
	// was (pg_stat_replication_slots).
	SyncSkipReason string
	SyncSkipCount  int64
}

// SyncSkip says why the server's slot sync last skipped the slot, how often, and what that
// means (19+; "" when it was not skipped): for check's details and doctor.
func (s Slot) SyncSkip() string {
	if s.SyncSkipReason == "" {
		return ""
	}
	return fmt.Sprintf("%s, %d times (%s)", s.SyncSkipReason, s.SyncSkipCount, SyncSkipMeaning(s.SyncSkipReason))
}

// SyncSkipMeaning says in words what the server's slot sync skip reason means (19+).
func SyncSkipMeaning(reason string) string {
	switch reason {
	case "wal_not_flushed":
		return "the standby has not flushed the WAL up to the primary slot's position"
	case "wal_or_rows_removed":
		return "the primary slot is behind what the standby still keeps: its WAL or catalog rows are gone here"
	case "no_consistent_snapshot":
		return "decoding on the standby has not reached a consistent snapshot at the primary slot's position"
	case "slot_invalidated":
		return "the slot is invalidated on the standby"
	}
	return reason
}

// SnapshotState says whether a node has a slot's decoding snapshot at its restart_lsn.
type SnapshotState uint8

// The states of SnapshotState.
const (
	SnapshotUnknown SnapshotState = iota // not looked at, or the role may not look
	SnapshotPresent
	SnapshotAbsent
)

// snapshotFileSQL names the snapshot file at restart_lsn as snapbuild.c does ("%X-%X.snap"):
// 19's pg_lsn text pads the low half to eight digits ("0/0176FF18"), the file name does not
// ("0-176FF18.snap"), so the padding is taken off (one digit kept).
const snapshotFileSQL = `regexp_replace(restart_lsn::text, '^([0-9A-F]+)/0*([0-9A-F]+)$', '\1-\2') || '.snap'`

// ReadSnapshots fills in Snapshot for each slot: whether the node's pg_logical/snapshots holds
// the file decoding restores when it starts at the slot's restart_lsn. The role needs EXECUTE on
// pg_ls_logicalsnapdir() (list: NodeInfo.CanListSnapshots, one read of the directory) or on
// pg_stat_file(text, boolean) (NodeInfo.CanStatFiles, one call per slot).
func ReadSnapshots(ctx context.Context, conn *pgx.Conn, slots map[string]Slot, list bool) error {
	q := `SELECT slot_name::text, restart_lsn,
		(pg_stat_file('pg_logical/snapshots/' || ` + snapshotFileSQL + `, true)).size IS NOT NULL
		FROM pg_replication_slots WHERE slot_type = 'logical' AND restart_lsn IS NOT NULL`
	if list {
		q = `WITH snap AS MATERIALIZED (SELECT name FROM pg_ls_logicalsnapdir())
		SELECT slot_name::text, restart_lsn, EXISTS (SELECT FROM snap WHERE name = ` + snapshotFileSQL + `)
		FROM pg_replication_slots WHERE slot_type = 'logical' AND restart_lsn IS NOT NULL`
	}
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return fmt.Errorf("look for decoding snapshots: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var restart lsncheck.LSN
		var present bool
		if err := rows.Scan(&name, &restart, &present); err != nil {
			return fmt.Errorf("look for decoding snapshots: %w", err)
		}
		// A slot that moved since it was listed is left unknown (judged again next pass).
		if s, ok := slots[name]; ok && s.RestartLSN == restart {
			s.Snapshot = SnapshotAbsent
			if present {
				s.Snapshot = SnapshotPresent
			}
			slots[name] = s
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("look for decoding snapshots: %w", err)
	}
	return nil
}

// Seen returns the slot's identity and positions for lsncheck.
func (s Slot) Seen() lsncheck.Seen { return lsncheck.Seen{Identity: s.Identity, Position: s.Position} }

// WALAvailable reports whether the WAL from restart_lsn is there and kept: "unreserved" means it
// goes at the next checkpoint (max_slot_wal_keep_size), which after a promotion invalidates the
// slot, so it does not count.
func (s Slot) WALAvailable() bool {
	return !s.Invalidated && s.WALStatus != "lost" && s.WALStatus != "unreserved" && s.RestartLSN != 0
}

// slotColumns builds the select list for a server version: pg_replication_slots gained
// columns over time and 17/18 inserted some mid-list, so it is never read positionally.
func slotColumns(versionNum int) []string {
	cols := []string{
		"slot_name::text",
		"coalesce(plugin::text, '')",
		"coalesce(database::text, '')",
		"temporary",
		"active",
		"coalesce(active_pid, 0)",
		"coalesce(restart_lsn, '0/0')",
		"coalesce(confirmed_flush_lsn, '0/0')",
		"coalesce(catalog_xmin::text, '0')::bigint",
	}
	ifVersion := func(min int, expr, otherwise string) {
		if versionNum >= min {
			cols = append(cols, expr)
		} else {
			cols = append(cols, otherwise)
		}
	}
	ifVersion(130000, "coalesce(wal_status, '')", "''")
	ifVersion(140000, "two_phase", "false")
	ifVersion(160000, "coalesce(conflicting, false)", "false")
	ifVersion(170000, "coalesce(invalidation_reason, '')", "''")
	ifVersion(170000, "failover", "false")
	ifVersion(170000, "synced", "false")
	// What the walsender streaming the slot has read: the consumer may hold changes up to there
	// (rule 5). NULL without pg_read_all_stats for another role's walsender.
	cols = append(cols, "coalesce((SELECT r.sent_lsn FROM pg_stat_replication r WHERE r.pid = active_pid), '0/0')")
	ifVersion(190000, "coalesce(slotsync_skip_reason, '')", "''")
	// Only a synced slot has skips: the stats are not looked up for the others (every slot of the
	// primary, read every pass).
	ifVersion(190000, "CASE WHEN synced THEN coalesce((SELECT st.slotsync_skip_count FROM pg_stat_replication_slots st "+
		"WHERE st.slot_name = pg_replication_slots.slot_name), 0) ELSE 0 END", "0")
	return cols
}

// LogicalSlots lists every logical slot of the node, by name.
func LogicalSlots(ctx context.Context, conn *pgx.Conn, versionNum int) (map[string]Slot, error) {
	q := "SELECT " + strings.Join(slotColumns(versionNum), ", ") + " FROM pg_replication_slots WHERE slot_type = 'logical'"
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list logical slots: %w", err)
	}
	defer rows.Close()
	slots := map[string]Slot{}
	for rows.Next() {
		var r slotRow
		if err := rows.Scan(r.dest()...); err != nil {
			return nil, fmt.Errorf("list logical slots: %w", err)
		}
		s := slotFromRow(r)
		slots[s.Name] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list logical slots: %w", err)
	}
	return slots, nil
}

// slotRow is one row of pg_replication_slots as slotColumns selects it.
type slotRow struct {
	slot        Slot
	xmin        int64
	conflicting bool
}

func (r *slotRow) dest() []any {
	s := &r.slot
	return []any{&s.Name, &s.Plugin, &s.Database, &s.Temporary, &s.Active, &s.ActivePID,
		&s.RestartLSN, &s.ConfirmedFlush, &r.xmin, &s.WALStatus, &s.TwoPhase, &r.conflicting, &s.InvalidationReason,
		&s.Failover, &s.Synced, &s.SentLSN, &s.SyncSkipReason, &s.SyncSkipCount}
}

// slotFromRow maps a row to a Slot. It is pure. Invalidation is told per version:
// invalidation_reason (17+), conflicting (16), wal_status = 'lost' (13+).
func slotFromRow(r slotRow) Slot {
	s := r.slot
	s.CatalogXmin = lsncheck.XID(r.xmin)
	switch {
	case s.InvalidationReason != "":
		s.Invalidated = true
	case r.conflicting:
		s.Invalidated, s.InvalidationReason = true, "conflict"
	case s.WALStatus == "lost":
		s.Invalidated, s.InvalidationReason = true, "wal_removed"
	}
	return s
}

// PhysicalSlot is what the primary holds for a standby's physical slot.
type PhysicalSlot struct {
	Exists, Active bool
	// Xmin and CatalogXmin are held back through hot_standby_feedback (0: none).
	Xmin, CatalogXmin lsncheck.XID
	RestartLSN        lsncheck.LSN
}

// CatalogHorizon is the oldest XID whose catalog rows the primary keeps for the standby: the
// older of the slot's xmin and catalog_xmin (0 when it holds none).
func (p PhysicalSlot) CatalogHorizon() lsncheck.XID {
	switch {
	case p.Xmin == 0:
		return p.CatalogXmin
	case p.CatalogXmin == 0 || lsncheck.XIDPrecedes(p.Xmin, p.CatalogXmin):
		return p.Xmin
	}
	return p.CatalogXmin
}

// ReadPhysicalSlot reads the physical slot name on the primary.
func ReadPhysicalSlot(ctx context.Context, conn *pgx.Conn, name string) (PhysicalSlot, error) {
	var p PhysicalSlot
	var xmin, cxmin int64
	err := conn.QueryRow(ctx, `SELECT true, active, coalesce(xmin::text, '0')::bigint, coalesce(catalog_xmin::text, '0')::bigint,
		coalesce(restart_lsn, '0/0')
		FROM pg_replication_slots WHERE slot_name = $1 AND slot_type = 'physical'`, name).Scan(&p.Exists, &p.Active, &xmin, &cxmin, &p.RestartLSN)
	if errors.Is(err, pgx.ErrNoRows) {
		return PhysicalSlot{}, nil
	}
	if err != nil {
		return PhysicalSlot{}, fmt.Errorf("read physical slot %q: %w", name, err)
	}
	p.Xmin, p.CatalogXmin = lsncheck.XID(xmin), lsncheck.XID(cxmin)
	return p, nil
}
