package topology

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/lsncheck"
)

// The small reads a pass or the watch between passes makes besides the full listings.

// ReadReplay reads whether the node is in recovery and what it has replayed (0 when unknown).
func ReadReplay(ctx context.Context, conn *pgx.Conn) (inRecovery bool, replay lsncheck.LSN, err error) {
	err = conn.QueryRow(ctx, "SELECT pg_is_in_recovery(), coalesce(pg_last_wal_replay_lsn(), '0/0')").Scan(&inRecovery, &replay)
	return inRecovery, replay, err
}

// ReadReceiveLSN reads the newest WAL a standby has received and flushed (0 when unknown).
func ReadReceiveLSN(ctx context.Context, conn *pgx.Conn) (lsncheck.LSN, error) {
	var l lsncheck.LSN
	err := conn.QueryRow(ctx, "SELECT coalesce(pg_last_wal_receive_lsn(), '0/0')").Scan(&l)
	return l, err
}

// SlotPositions reads the positions of the named logical slots (a slot not found is absent).
func SlotPositions(ctx context.Context, conn *pgx.Conn, names []string) (map[string]lsncheck.Position, error) {
	rows, err := conn.Query(ctx, `SELECT slot_name::text, coalesce(restart_lsn, '0/0'), coalesce(confirmed_flush_lsn, '0/0'),
		coalesce(catalog_xmin::text, '0')::bigint FROM pg_replication_slots WHERE slot_type = 'logical' AND slot_name = ANY($1)`, names)
	if err != nil {
		return nil, fmt.Errorf("read slot positions: %w", err)
	}
	defer rows.Close()
	out := map[string]lsncheck.Position{}
	for rows.Next() {
		var name string
		var p lsncheck.Position
		var xmin int64
		if err := rows.Scan(&name, &p.RestartLSN, &p.ConfirmedFlush, &xmin); err != nil {
			return nil, fmt.Errorf("read slot positions: %w", err)
		}
		if p.CatalogXmin, err = xidFromRow(xmin); err != nil {
			return nil, err
		}
		out[name] = p
	}
	return out, rows.Err()
}

// xidFromRow checks an xid read as bigint.
func xidFromRow(x int64) (lsncheck.XID, error) {
	if x < 0 || x > 1<<32-1 {
		return 0, fmt.Errorf("catalog_xmin %d out of range", x)
	}
	return lsncheck.XID(x), nil
}

// DatabaseOID reads the OID of database name.
func DatabaseOID(ctx context.Context, conn *pgx.Conn, name string) (uint32, error) {
	var oid uint32
	if err := conn.QueryRow(ctx, "SELECT oid FROM pg_database WHERE datname = $1", name).Scan(&oid); err != nil {
		return 0, fmt.Errorf("OID of database %q: %w", name, err)
	}
	return oid, nil
}

// OldestTransactions describes the oldest transaction with an xid on the node and the oldest
// prepared one ("" for none): what a new copy on a standby waits for. No query text: it may
// hold secrets.
func OldestTransactions(ctx context.Context, conn *pgx.Conn) (running, prepared string, err error) {
	err = conn.QueryRow(ctx, `SELECT
		coalesce((SELECT format('the oldest is pid %s, xid %s, user %s, application %L, open since %s (%s s)', pid, backend_xid, usename,
			application_name, to_char(xact_start, 'YYYY-MM-DD HH24:MI:SS TZ'), round(extract(epoch FROM now() - xact_start)))
			FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid() ORDER BY xact_start LIMIT 1), ''),
		coalesce((SELECT format('prepared transaction %L, xid %s, since %s (%s s): COMMIT PREPARED or ROLLBACK PREPARED ends it', gid, transaction,
			to_char(prepared, 'YYYY-MM-DD HH24:MI:SS TZ'), round(extract(epoch FROM now() - prepared)))
			FROM pg_prepared_xacts ORDER BY prepared LIMIT 1), '')`).Scan(&running, &prepared)
	return running, prepared, err
}

// TimelineHistory reads, over a replication connection to the node, the history of timeline
// tli: for each earlier timeline of it, the LSN where it ended (switched to the next). A
// timeline not in it is not an ancestor of tli. Timeline 1 has no history.
func TimelineHistory(ctx context.Context, ep *Endpoint, tli int) (map[int]lsncheck.LSN, error) {
	if tli <= 1 {
		return map[int]lsncheck.LSN{}, nil
	}
	conn, err := ep.ConnectReplication(ctx, "")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	res, err := pglogrepl.TimelineHistory(ctx, conn, int32(tli))
	if err != nil {
		return nil, fmt.Errorf("timeline history of %d: %w", tli, err)
	}
	return ParseHistory(res.Content)
}

// ParseHistory reads a timeline history file (<tli>.history): lines of "parent switchpoint
// reason", comments and blank lines ignored. It is pure.
func ParseHistory(content []byte) (map[int]lsncheck.LSN, error) {
	out := map[int]lsncheck.LSN{}
	for _, line := range strings.Split(string(content), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("timeline history: malformed line %q", line)
		}
		tli, err := strconv.Atoi(f[0])
		if err != nil || tli < 1 {
			return nil, fmt.Errorf("timeline history: malformed timeline in %q", line)
		}
		end, err := lsncheck.ParseLSN(f[1])
		if err != nil {
			return nil, fmt.Errorf("timeline history: %w", err)
		}
		out[tli] = end
	}
	return out, nil
}

// PreparedXacts lists the node's prepared transactions by database (pg_prepared_xacts).
func PreparedXacts(ctx context.Context, conn *pgx.Conn) (map[string][]lsncheck.XID, error) {
	rows, err := conn.Query(ctx, "SELECT database::text, transaction::text::bigint FROM pg_prepared_xacts")
	if err != nil {
		return nil, fmt.Errorf("list prepared transactions: %w", err)
	}
	defer rows.Close()
	out := map[string][]lsncheck.XID{}
	for rows.Next() {
		var db string
		var x int64
		if err := rows.Scan(&db, &x); err != nil {
			return nil, fmt.Errorf("list prepared transactions: %w", err)
		}
		xid, err := xidFromRow(x)
		if err != nil {
			return nil, err
		}
		out[db] = append(out[db], xid)
	}
	return out, rows.Err()
}

// WALSegmentSize reads the node's wal_segment_size in bytes.
func WALSegmentSize(ctx context.Context, conn *pgx.Conn) (uint64, error) {
	var seg int64
	err := conn.QueryRow(ctx, `SELECT setting::bigint * CASE unit WHEN 'B' THEN 1 WHEN 'kB' THEN 1024 WHEN 'MB' THEN 1048576 ELSE 1 END
		FROM pg_settings WHERE name = 'wal_segment_size'`).Scan(&seg)
	return uint64(seg), err
}

// ServerID tells one run of one server from every other: its cluster, its start, and whether it
// is in recovery.
type ServerID struct {
	SystemID, StartedAt string
	InRecovery          bool
}

// IDOf is the ServerID of a node as ReadNodeInfo read it.
func IDOf(n NodeInfo) ServerID {
	return ServerID{SystemID: n.SystemID, StartedAt: n.StartedAt, InRecovery: n.InRecovery}
}

// SlotPositionsFrom reads, in one query, who the server on conn is (as ReadNodeInfo reads it)
// and the positions of the named logical slots there (a slot not found is absent): the watch
// between passes checks that it reads the primary the last pass verified, at no extra round trip.
func SlotPositionsFrom(ctx context.Context, conn *pgx.Conn, names []string) (ServerID, map[string]lsncheck.Position, error) {
	rows, err := conn.Query(ctx, `SELECT id.system_identifier, id.started_at, id.in_recovery, s.slot_name::text,
		coalesce(s.restart_lsn, '0/0'), coalesce(s.confirmed_flush_lsn, '0/0'), coalesce(s.catalog_xmin::text, '0')::bigint
		FROM (SELECT (SELECT system_identifier::text FROM pg_control_system()) AS system_identifier,
			pg_postmaster_start_time()::text AS started_at, pg_is_in_recovery() AS in_recovery) id
		LEFT JOIN pg_replication_slots s ON s.slot_type = 'logical' AND s.slot_name = ANY($1)`, names)
	if err != nil {
		return ServerID{}, nil, fmt.Errorf("read slot positions: %w", err)
	}
	defer rows.Close()
	var id ServerID
	out := map[string]lsncheck.Position{}
	for rows.Next() {
		var name *string
		var p lsncheck.Position
		var xmin int64
		if err := rows.Scan(&id.SystemID, &id.StartedAt, &id.InRecovery, &name, &p.RestartLSN, &p.ConfirmedFlush, &xmin); err != nil {
			return ServerID{}, nil, fmt.Errorf("read slot positions: %w", err)
		}
		if name == nil {
			continue // no slot of those names: the identity alone
		}
		if p.CatalogXmin, err = xidFromRow(xmin); err != nil {
			return ServerID{}, nil, err
		}
		out[*name] = p
	}
	return id, out, rows.Err()
}
