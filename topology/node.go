package topology

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/lsncheck"
)

// NodeInfo is what slotsync needs to know about a node before acting.
type NodeInfo struct {
	SystemID             string // pg_control_system().system_identifier, as text (it is a uint64)
	VersionNum           int    // server_version_num, e.g. 170004
	InRecovery           bool
	WALLevel             string
	HotStandbyFeedback   bool
	PrimarySlotName      string // standby: the physical slot it streams through
	HasConninfoDBName    bool   // standby: primary_conninfo names a dbname (PG17 native sync needs it)
	SyncReplicationSlots bool   // PG17+: sync_replication_slots
	CanReplicate         bool   // superuser or REPLICATION: may create and drop slots
	MaxReplicationSlots  int
	// CanLogStandbySnapshot: may call pg_log_standby_snapshot() (16+), which makes new standby
	// copies consistent in milliseconds instead of up to 15 s.
	CanLogStandbySnapshot bool
	// CanReadStateFiles: may call pg_read_binary_file(text) (state-file method, on the primary).
	CanReadStateFiles bool
	// CanCheckpoint: superuser, or pg_checkpoint on 15+.
	CanCheckpoint bool
	// CanStatFiles: may call pg_stat_file(text, boolean) (on the standby: is a copy's decoding
	// snapshot there?).
	CanStatFiles bool
	// CanListSnapshots: may call pg_ls_logicalsnapdir() (15+: superuser or pg_monitor), which
	// answers the same question for every copy at once.
	CanListSnapshots bool
	// SynchronizedStandbySlots is the primary's synchronized_standby_slots (17+).
	SynchronizedStandbySlots string
	// IdleSlotTimeout is idle_replication_slot_timeout (18+; "" before, "0" when off).
	IdleSlotTimeout string
	// Timeline: on a primary, the timeline it writes; on a standby, the timeline its WAL
	// receiver receives (0 when it does not stream, or the role may not see it).
	Timeline int
	// HistoryTimeline: on a standby, the timeline of its WAL history as far as it knows without
	// a WAL receiver: the one it receives, else its last restartpoint's (0 when unknown); the
	// newest of its WAL files' when they are read (ReadWALFiles), if newer.
	HistoryTimeline int
	// ManagedByPatroni: Patroni is connected to this node (application_name "Patroni" before 4,
	// "Patroni heartbeat", "Patroni restapi" and the like from 4).
	ManagedByPatroni bool
	// PrimaryConninfo is the standby's primary_conninfo ("" when empty or unreadable). It may
	// hold a password: never log or print it.
	PrimaryConninfo string `json:"-"`
	// StartedAt is pg_postmaster_start_time(): it changes when the server restarts.
	StartedAt string
	// ReloadedAt is pg_conf_load_time() when it is later than StartedAt: the server's
	// configuration was reloaded since it started (zero: never). A session sees the moment it
	// re-read the configuration itself, at its next statement, so a later reload always shows a
	// later value, whichever session reads it.
	ReloadedAt time.Time
	// ReceiverStatus is pg_stat_wal_receiver.status on a standby ("" when no WAL receiver runs,
	// "unknown" when this role may not see it: pg_read_all_stats).
	ReceiverStatus string
	// WAL positions: the primary's insert position; the standby's replay and flush (receive) positions.
	CurrentLSN, ReplayLSN, ReceiveLSN lsncheck.LSN
	// Port is the server's port setting (the one in its postmaster.pid).
	Port int
	// CanReadAllStats: superuser or pg_read_all_stats (the WAL receiver's status on a standby,
	// what walsenders sent on a primary); CanReadAllSettings: superuser or pg_read_all_settings
	// (a standby's primary_conninfo).
	CanReadAllStats, CanReadAllSettings bool
	// ReceiverSilentFor: on a standby, how long since its WAL receiver last heard from the
	// primary (last_msg_receipt_time); ReceiverTimeout: its wal_receiver_timeout (0: none).
	ReceiverSilentFor, ReceiverTimeout time.Duration
	// SilentBound: how long a receiver whose wal_receiver_timeout is 0 may hear nothing and
	// still stream from a live primary (0: SilentReceiverBound); the observer's setting.
	SilentBound time.Duration
	// ReplayedCommitAge: on a standby, how long ago (by its clock) the primary committed the last
	// transaction it replayed (Clock less ReplayedCommitAt; -1 when none since it started, and on
	// a primary).
	ReplayedCommitAge time.Duration
	// ReplayedCommitAt: on a standby, when the primary committed the last transaction it
	// replayed, by the primary's clock (pg_last_xact_replay_timestamp; zero when none since it
	// started, and on a primary). Clock: the server's clock when it answered (now()). On a
	// primary the two are of one clock, so a later standby's ReplayedCommitAt compares with a
	// primary's Clock without the hosts' clocks being in step.
	ReplayedCommitAt, Clock time.Time
	// PreloadLibraries is shared_preload_libraries ("" when empty, or when the role may not read
	// it: superuser or pg_read_all_settings).
	PreloadLibraries string
	// MaxSlotWALKeepMB is max_slot_wal_keep_size in MB (-1: no limit, and before 13, which has
	// none); WALKeepMB is wal_keep_size in MB (13+; 0 before); WALSegmentBytes is
	// wal_segment_size.
	MaxSlotWALKeepMB, WALKeepMB int64
	WALSegmentBytes             uint64
	// CanListWAL: may call pg_ls_waldir() (superuser or pg_monitor).
	CanListWAL bool
	// OldestWAL: on a standby, where the oldest WAL file in its pg_wal begins, and WALGaps, the
	// stretches of WAL missing between its oldest and newest files (ReadWALFiles; 0 and none
	// when not read, or the role may not list pg_wal).
	OldestWAL lsncheck.LSN
	WALGaps   []WALGap
}

// WALGap is a stretch of WAL missing from a node's pg_wal between files it still has: From is
// where the first missing segment begins, To where the next file present begins.
type WALGap struct{ From, To lsncheck.LSN }

// HoldsWALFrom reports whether this node's pg_wal still holds the WAL from restart on, as far as
// its files tell (WALLostFrom; true when unknown). It is pure.
func (n NodeInfo) HoldsWALFrom(restart lsncheck.LSN) bool {
	return n.WALLostFrom(restart) == ""
}

// WALLostFrom says what of the WAL from restart on is gone from this node's pg_wal ("" when
// nothing is, as far as its files tell, or they were not read): the oldest file begins after
// restart, or a file after it is missing. A file removed behind the server's back
// (pg_archivecleanup aimed at pg_wal, a careless rm, a disk error) is gone though a slot's
// wal_status, which counts only what the server removed itself, still says reserved. It is pure.
func (n NodeInfo) WALLostFrom(restart lsncheck.LSN) string {
	if restart == 0 || n.OldestWAL == 0 {
		return ""
	}
	if restart < n.OldestWAL {
		return fmt.Sprintf("its oldest WAL file begins at %s", n.OldestWAL)
	}
	for _, g := range n.WALGaps {
		if g.To > restart {
			return fmt.Sprintf("the WAL from %s to %s is missing from it", g.From, g.To)
		}
	}
	return ""
}

// ReadWALFiles reads where the oldest WAL file in the node's pg_wal begins, which stretches are
// missing between it and the newest (pg_ls_waldir(), which skips a file removed while it lists;
// files of every timeline count alike, as a segment of any of them holds that WAL), and the
// newest timeline of its files (WALTimeline). It is a query of its own, asked only of a role
// that may list pg_wal: PostgreSQL checks a function's privilege when it plans the query, even
// in a CASE branch never taken.
func ReadWALFiles(ctx context.Context, conn *pgx.Conn, segBytes uint64) (oldest lsncheck.LSN, gaps []WALGap, timeline int, err error) {
	rows, err := conn.Query(ctx, `SELECT name FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$' ORDER BY right(name, 16), name`)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("list the WAL files: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, nil, 0, fmt.Errorf("list the WAL files: %w", err)
	}
	var segments []string
	for _, name := range names {
		if seg := name[8:]; len(segments) == 0 || segments[len(segments)-1] != seg {
			segments = append(segments, seg)
		}
	}
	oldest, gaps, err = WALFiles(segments, segBytes)
	return oldest, gaps, WALTimeline(names), err
}

// WALTimeline is the newest timeline of the WAL files named (their first 8 hex digits; 0 for
// none). A standby's WAL receiver writes only the timeline it follows, and a restore_command
// restores only those of its history, so a standby holding a file of a timeline follows it,
// though its last restartpoint, which pg_control_checkpoint() shows, may be of an older one and
// its WAL receiver may be gone. It is pure.
func WALTimeline(names []string) int {
	newest := 0
	for _, name := range names {
		if tli, err := strconv.ParseUint(name[:min(8, len(name))], 16, 32); err == nil && int(tli) > newest {
			newest = int(tli)
		}
	}
	return newest
}

// WALFiles maps the sorted segment parts of the WAL file names in a pg_wal (their last 16 hex
// digits, each once) to where the oldest begins and the stretches missing between the files
// (0 and none for no file). It is pure.
func WALFiles(segments []string, segBytes uint64) (lsncheck.LSN, []WALGap, error) {
	var oldest, next lsncheck.LSN
	var gaps []WALGap
	for i, seg := range segments {
		start, err := lsncheck.SegmentStart(seg, segBytes)
		if err != nil {
			return 0, nil, err
		}
		if i == 0 {
			oldest = start
		} else if start > next {
			gaps = append(gaps, WALGap{From: next, To: start})
		}
		next = start + lsncheck.LSN(segBytes)
	}
	return oldest, gaps, nil
}

// otherSynchronizers are the libraries that, loaded on a standby, copy the primary's logical
// slots to it themselves: slotsync writing the same slots would fight them.
var otherSynchronizers = []string{"pg_failover_slots"}

// OtherSynchronizer names another tool this node has loaded that syncs logical slots from its
// primary ("" when none, or when the role may not read shared_preload_libraries).
func (n NodeInfo) OtherSynchronizer() string {
	for _, lib := range strings.Split(n.PreloadLibraries, ",") {
		lib = strings.Trim(strings.TrimSpace(lib), `"`)
		lib = strings.TrimSuffix(lib[strings.LastIndex(lib, "/")+1:], ".so")
		for _, other := range otherSynchronizers {
			if lib == other {
				return other
			}
		}
	}
	return ""
}

// SilentReceiverBound is how long a standby whose wal_receiver_timeout is 0 may hear nothing from
// its primary and still be taken to stream from a live one: a primary sends keepalives at least
// every wal_sender_timeout / 2 (30 s by default).
const SilentReceiverBound = time.Minute

// StreamsLive reports a standby whose WAL receiver streams and has heard from its primary within
// wal_receiver_timeout (SilentBound, or SilentReceiverBound, when that is 0): a receiver on a connection that died
// silently (a host lost its power, packets dropped) keeps the status "streaming" until then, and
// says nothing of the primary after it.
func (n NodeInfo) StreamsLive() bool {
	bound := n.ReceiverTimeout
	if bound <= 0 {
		bound = n.SilentBound
	}
	if bound <= 0 {
		bound = SilentReceiverBound
	}
	return n.ReceiverStatus == "streaming" && n.ReceiverSilentFor < bound
}

// NotStreaming reports a standby known not to stream from its primary right now (starting,
// rewound, re-pointed, or cut off); a status this role may not see is not taken for that.
func (n NodeInfo) NotStreaming() bool {
	return n.InRecovery && n.ReceiverStatus != "streaming" && n.ReceiverStatus != "unknown"
}

// Major returns the PostgreSQL major version, e.g. 17.
func (n NodeInfo) Major() int { return n.VersionNum / 10000 }

// WALEnd is the newest WAL the node holds: its insert position on a primary, the larger of
// replay and flush on a standby.
func (n NodeInfo) WALEnd() lsncheck.LSN {
	if !n.InRecovery {
		return n.CurrentLSN
	}
	if n.ReceiveLSN > n.ReplayLSN {
		return n.ReceiveLSN
	}
	return n.ReplayLSN
}

// KeepsSlotWAL reports whether this node, its WAL reaching end, keeps for a slot the WAL from
// restart on past its next checkpoint, as it would once it writes WAL itself (a standby
// promoted): a checkpoint removes the segments more than max_slot_wal_keep_size (or
// wal_keep_size, if larger) behind the end of WAL, and invalidates the slots that need them
// (KeepLogSeg and InvalidateObsoleteReplicationSlots, xlog.c and slot.c). A standby's wal_status
// does not show this: it says "reserved" until a restartpoint invalidates the slot, and
// "unreserved" only once promoted, when the promotion's checkpoint is already on its way. It is
// pure.
func (n NodeInfo) KeepsSlotWAL(restart, end lsncheck.LSN) bool {
	segMB := int64(n.WALSegmentBytes >> 20)
	if n.MaxSlotWALKeepMB < 0 || segMB == 0 || restart == 0 {
		return true
	}
	keep := max(n.MaxSlotWALKeepMB/segMB, n.WALKeepMB/segMB)
	last, seg := uint64(end)/n.WALSegmentBytes, uint64(restart)/n.WALSegmentBytes
	return last <= seg || last-seg <= uint64(keep)
}

// setting reads a GUC through pg_settings, which hides (rather than errors on) settings the
// role may not read.
func setting(name string) string {
	return fmt.Sprintf("coalesce((SELECT setting FROM pg_settings WHERE name = '%s'), '')", name)
}

// recoverySetting reads a recovery setting; on 11, where recovery.conf holds it and it is no
// setting, the WAL receiver's column of it (the conninfo without its obfuscated password: a
// password then comes from a passfile or PGPASSWORD).
func recoverySetting(name, receiverColumn string) string {
	receiver := fmt.Sprintf("(SELECT %s FROM pg_stat_wal_receiver)", receiverColumn)
	if receiverColumn == "conninfo" {
		receiver = fmt.Sprintf(`regexp_replace(%s, '\s*password=\S+', '', 'g')`, receiver)
	}
	return fmt.Sprintf("CASE WHEN current_setting('server_version_num')::int < 120000 THEN coalesce(%s, '') ELSE %s END", receiver, setting(name))
}

// ReadNodeInfo reads the node's identity, role, settings and WAL positions in one query.
func ReadNodeInfo(ctx context.Context, conn *pgx.Conn) (NodeInfo, error) {
	var n NodeInfo
	// Functions that exist on every supported major; the ones that raise in the wrong role
	// (pg_current_wal_lsn on a standby) are guarded by CASE.
	q := `SELECT (SELECT system_identifier::text FROM pg_control_system()),
		current_setting('server_version_num')::int,
		pg_is_in_recovery(),
		current_setting('wal_level'),
		current_setting('hot_standby_feedback') = 'on',
		` + recoverySetting("primary_slot_name", "slot_name") + `,
		` + setting("primary_conninfo") + ` ~ '(^|\s)dbname\s*=' OR ` + setting("primary_conninfo") + ` ~ '^postgres(ql)?://[^?]*/[^/?]+',
		` + setting("sync_replication_slots") + ` = 'on',
		(SELECT rolsuper OR rolreplication FROM pg_roles WHERE rolname = current_user),
		current_setting('max_replication_slots')::int,
		CASE WHEN current_setting('server_version_num')::int >= 160000
			THEN has_function_privilege('pg_log_standby_snapshot()', 'EXECUTE') ELSE false END,
		has_function_privilege('pg_read_binary_file(text)', 'EXECUTE'),
		has_function_privilege('pg_stat_file(text, boolean)', 'EXECUTE'),
		CASE WHEN current_setting('server_version_num')::int >= 150000
			THEN has_function_privilege('pg_ls_logicalsnapdir()', 'EXECUTE') ELSE false END,
		(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) OR
			(current_setting('server_version_num')::int >= 150000 AND pg_has_role('pg_checkpoint', 'MEMBER')),
		CASE WHEN pg_is_in_recovery() THEN '0/0'::pg_lsn ELSE pg_current_wal_lsn() END,
		coalesce(pg_last_wal_replay_lsn(), '0/0'),
		coalesce(pg_last_wal_receive_lsn(), '0/0'),
		coalesce((SELECT coalesce(status, 'unknown') FROM pg_stat_wal_receiver), ''),
		pg_postmaster_start_time()::text,
		` + setting("synchronized_standby_slots") + `,
		` + recoverySetting("primary_conninfo", "conninfo") + `,
		EXISTS (SELECT FROM pg_stat_activity WHERE application_name = 'Patroni' OR application_name LIKE 'Patroni %'),
		CASE WHEN pg_is_in_recovery() THEN coalesce((SELECT received_tli FROM pg_stat_wal_receiver), 0)
			ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END,
		` + setting("idle_replication_slot_timeout") + `,
		CASE WHEN pg_is_in_recovery() THEN coalesce((SELECT nullif(received_tli, 0) FROM pg_stat_wal_receiver),
			(SELECT timeline_id FROM pg_control_checkpoint()), 0) ELSE 0 END,
		current_setting('port')::int,
		coalesce((SELECT (extract(epoch FROM now() - last_msg_receipt_time) * 1000)::bigint FROM pg_stat_wal_receiver), 0),
		coalesce((SELECT setting::bigint FROM pg_settings WHERE name = 'wal_receiver_timeout'), 0),
		(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) OR pg_has_role('pg_read_all_stats', 'MEMBER'),
		(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) OR pg_has_role('pg_read_all_settings', 'MEMBER'),
		` + setting("shared_preload_libraries") + `,
		CASE WHEN pg_conf_load_time() > pg_postmaster_start_time() THEN pg_conf_load_time() END,
		coalesce((SELECT setting::bigint FROM pg_settings WHERE name = 'max_slot_wal_keep_size'), -1),
		coalesce((SELECT setting::bigint FROM pg_settings WHERE name = 'wal_keep_size'), 0),
		coalesce((SELECT setting::bigint * CASE unit WHEN 'kB' THEN 1024 WHEN 'MB' THEN 1048576 ELSE 1 END
			FROM pg_settings WHERE name = 'wal_segment_size'), 0),
		has_function_privilege('pg_ls_waldir()', 'EXECUTE'),
		pg_last_xact_replay_timestamp(),
		now()`
	var silentMs, timeoutMs int64
	var reloadedAt, commitAt *time.Time
	err := conn.QueryRow(ctx, q).Scan(&n.SystemID, &n.VersionNum, &n.InRecovery, &n.WALLevel,
		&n.HotStandbyFeedback, &n.PrimarySlotName, &n.HasConninfoDBName, &n.SyncReplicationSlots,
		&n.CanReplicate, &n.MaxReplicationSlots, &n.CanLogStandbySnapshot, &n.CanReadStateFiles, &n.CanStatFiles, &n.CanListSnapshots,
		&n.CanCheckpoint,
		&n.CurrentLSN, &n.ReplayLSN, &n.ReceiveLSN, &n.ReceiverStatus, &n.StartedAt, &n.SynchronizedStandbySlots, &n.PrimaryConninfo, &n.ManagedByPatroni,
		&n.Timeline, &n.IdleSlotTimeout, &n.HistoryTimeline, &n.Port, &silentMs, &timeoutMs, &n.CanReadAllStats, &n.CanReadAllSettings,
		&n.PreloadLibraries, &reloadedAt, &n.MaxSlotWALKeepMB, &n.WALKeepMB, &n.WALSegmentBytes, &n.CanListWAL,
		&commitAt, &n.Clock)
	if err != nil {
		return NodeInfo{}, fmt.Errorf("read node info: %w", err)
	}
	if reloadedAt != nil {
		n.ReloadedAt = reloadedAt.UTC()
	}
	if commitAt != nil {
		n.ReplayedCommitAt = commitAt.UTC()
	}
	n.Clock = n.Clock.UTC()
	n.ReceiverSilentFor, n.ReceiverTimeout = time.Duration(silentMs)*time.Millisecond, time.Duration(timeoutMs)*time.Millisecond
	n.ReplayedCommitAge = -1
	if !n.ReplayedCommitAt.IsZero() {
		n.ReplayedCommitAge = n.Clock.Sub(n.ReplayedCommitAt) // the same query's now(): one clock
	}
	return n, nil
}

// ReadSyncedStandbySlots reads the state of each physical slot the primary's
// synchronized_standby_slots lists ("*" and empty lists yield nothing).
func ReadSyncedStandbySlots(ctx context.Context, conn *pgx.Conn, setting string) ([]SyncedStandbySlot, error) {
	var out []SyncedStandbySlot
	for _, name := range strings.Split(setting, ",") {
		name = strings.Trim(strings.TrimSpace(name), `"`)
		if name == "" || name == "*" {
			continue
		}
		s := SyncedStandbySlot{Name: name}
		var inactiveMs int64
		err := conn.QueryRow(ctx, `SELECT true, active, coalesce((extract(epoch FROM now() - inactive_since) * 1000)::bigint, 0)
			FROM pg_replication_slots WHERE slot_name = $1 AND slot_type = 'physical'`, name).Scan(&s.Exists, &s.Active, &inactiveMs)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("read synchronized_standby_slots entry %q: %w", name, err)
		}
		s.InactiveFor = time.Duration(inactiveMs) * time.Millisecond
		out = append(out, s)
	}
	return out, nil
}
