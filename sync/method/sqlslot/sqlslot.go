// Package sqlslot is the sql method (PostgreSQL 16+) and the native method's own copies: a
// standby copy is made by the standby's own decoding with pg_create_logical_replication_slot and
// moved with pg_replication_slot_advance.
package sqlslot

import (
	"context"
	"fmt"
	"strings"
	stdsync "sync"
	"time"

	"github.com/slotsync/slotsync/internal/failpoint"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/topology"
)

// Method makes copies with pg_create_logical_replication_slot on the standby (PG16+) and
// moves them with pg_replication_slot_advance, connected to each slot's database.
type Method struct {
	primary method.PrimaryLink
	standby *topology.Endpoint
	log     hclog.Logger
	nudger  *nudger
	traits  method.Traits
	// statementTimeout: the server-side bound of each statement on the standby (method.Deps).
	statementTimeout time.Duration
}

// SQLTraits are the rules of the sql method's copies: made by the standby's own decoding (rule
// 4). A function, so that no caller can change them for every other.
func SQLTraits() method.Traits { return method.Traits{OwnDecoding: true, Watchable: true} }

// NativeTraits are the native method's: the sql method's, and the server syncs failover slots.
func NativeTraits() method.Traits {
	return method.Traits{OwnDecoding: true, Watchable: true, ServerSyncs: true}
}

var (
	_ method.Method          = (*Method)(nil)
	_ method.Session         = (*Session)(nil)
	_ method.ScratchReporter = (*Session)(nil)
)

// New makes the method with the given traits (SQLTraits(), or NativeTraits() where the server
// syncs failover slots and the opt-in actions go through the same sessions).
func New(deps method.Deps, traits method.Traits) *Method {
	return &Method{primary: deps.Primary, standby: deps.Standby, log: deps.Log, nudger: newNudger(deps.Primary, deps.Log), traits: traits,
		statementTimeout: deps.StatementTimeout}
}

// Traits are the rules of this method's copies.
func (m *Method) Traits() method.Traits { return m.traits }

// Session returns a worker's handle: its standby connections, one per database.
func (m *Method) Session() method.Session { return m.NewSession() }

// NewSession returns a worker's handle as its concrete type (the state-file method builds on it).
func (m *Method) NewSession() *Session {
	return &Session{m: m, conns: map[string]*pgx.Conn{}}
}

// Session is one worker's standby connections, one per database.
type Session struct {
	m       *Method
	conns   map[string]*pgx.Conn    // standby connections by database
	scratch map[string]lsncheck.LSN // the restart_lsn of each copy made, by slot (ScratchAt)
}

// conn returns a standby connection to database db, reusing a healthy one.
func (s *Session) conn(ctx context.Context, db string) (*pgx.Conn, error) {
	if c := s.conns[db]; c != nil && !c.IsClosed() {
		return c, nil
	}
	c, err := s.m.standby.Connect(ctx, db)
	if err != nil {
		return nil, err
	}
	if ms := s.m.statementTimeout.Milliseconds(); ms > 0 {
		if _, err := c.Exec(ctx, fmt.Sprintf("SET statement_timeout = %d", ms)); err != nil {
			c.Close(context.Background())
			return nil, err
		}
	}
	s.conns[db] = c
	return c, nil
}

// exec runs fn on a standby connection to db. A connection the server closed meanwhile (the
// standby restarted) is replaced and fn tried once more; any connection left in doubt is dropped.
func (s *Session) exec(ctx context.Context, db string, fn func(*pgx.Conn) error) error {
	for attempt := 0; ; attempt++ {
		c, err := s.conn(ctx, db)
		if err != nil {
			return err
		}
		err = fn(c)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || c.IsClosed() || topology.StaleConnection(err) {
			c.Close(context.Background())
			delete(s.conns, db)
		}
		if attempt == 0 && ctx.Err() == nil && topology.StaleConnection(err) {
			continue
		}
		return err
	}
}

// Create makes the standby copy. On a standby the creation waits for a running-xacts record
// from the primary; asking the primary to log one (pg_log_standby_snapshot, 16+) ends the wait
// in milliseconds instead of up to 15 s.
func (s *Session) Create(ctx context.Context, ps topology.Slot) error {
	defer s.m.nudger.hold()()
	return s.exec(ctx, ps.Database, func(c *pgx.Conn) error {
		// Rule 3: never create on a promoted node. A slot made on a primary starts at its current
		// position and silently skips what the consumer has not read (lesson 9). Checked in this
		// session right before, and right after, since a promotion can land while the create
		// waits for a running-xacts record.
		if err := topology.StillInRecovery(ctx, c); err != nil {
			return fmt.Errorf("create standby copy of slot %q: %w", ps.Name, err)
		}
		if err := failpoint.Hit("sql.before-create"); err != nil {
			return err
		}
		if _, err := c.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, $2, false, $3)", ps.Name, ps.Plugin, ps.TwoPhase); err != nil {
			if ctx.Err() != nil {
				// A new copy is consistent only once every transaction running on the primary when
				// it started has ended: say which one it still waits for.
				return fmt.Errorf("create standby copy of slot %q: %w; it waits for the transactions running on the primary when it began to end (%s)",
					ps.Name, err, s.oldestTransaction())
			}
			return fmt.Errorf("create standby copy of slot %q: %w", ps.Name, err)
		}
		if err := topology.StillInRecovery(ctx, c); err != nil {
			_, derr := c.Exec(context.WithoutCancel(ctx), "SELECT pg_drop_replication_slot($1)", ps.Name)
			s.m.log.Error("the node was promoted while a slot copy was being created: the copy was dropped at once",
				"slot", ps.Name, "dropped", derr == nil, "drop_error", derr)
			return fmt.Errorf("create standby copy of slot %q: %w (the copy made meanwhile was dropped: %v)", ps.Name, err, derr == nil)
		}
		var at lsncheck.LSN
		if err := c.QueryRow(ctx, "SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = $1", ps.Name).Scan(&at); err != nil {
			return fmt.Errorf("create standby copy of slot %q: read where it was made: %w", ps.Name, err)
		}
		s.madeAt(ps.Name, at)
		return failpoint.Hit("sql.after-create")
	})
}

// madeAt records the restart_lsn of a copy this session has just made.
func (s *Session) madeAt(slot string, at lsncheck.LSN) {
	if s.scratch == nil {
		s.scratch = map[string]lsncheck.LSN{}
	}
	s.scratch[slot] = at
}

// ScratchAt is the restart_lsn of the copy of slot this session made last (0: none).
func (s *Session) ScratchAt(slot string) lsncheck.LSN { return s.scratch[slot] }

// oldestTransaction describes the oldest transaction with an xid on the primary, and the oldest
// prepared one: what a new copy waits for. No query text: it may hold secrets.
func (s *Session) oldestTransaction() string {
	ep := s.m.primary.Endpoint()
	if ep == nil {
		return "the primary is unknown"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pc, err := ep.Connect(ctx, "")
	if err != nil {
		return "the primary cannot be asked which: " + err.Error()
	}
	defer pc.Close(context.Background())
	running, prepared, err := topology.OldestTransactions(ctx, pc)
	if err != nil {
		return "the primary cannot be asked which: " + err.Error()
	}
	var parts []string
	for _, p := range []string{running, prepared} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return "none is running on the primary now: the copy needs the primary's next running-xacts record"
	}
	return strings.Join(parts, "; ")
}

// Replace drops the old copy and creates the new one (a standby makes the new one at once).
func (s *Session) Replace(ctx context.Context, ps topology.Slot, copyDB string) error {
	if err := s.Drop(ctx, ps.Name, copyDB); err != nil && !topology.SlotMissing(err) {
		return err
	}
	if err := failpoint.Hit("sql.replace-dropped"); err != nil {
		return err
	}
	return s.Create(ctx, ps)
}

// nudger asks the primary for running-xacts records while any new copy waits for one: one
// connection and one rhythm for every create at once, however many (500 new slots do not open
// 500 connections). Each new waiter restarts the rhythm at 20 ms; it slows to once a second.
type nudger struct {
	primary method.PrimaryLink
	log     hclog.Logger
	mu      stdsync.Mutex
	waiting int
	stop    context.CancelFunc
	kick    chan struct{}
}

func newNudger(primary method.PrimaryLink, log hclog.Logger) *nudger {
	return &nudger{primary: primary, log: log, kick: make(chan struct{}, 1)}
}

// hold marks a create as waiting; the returned function ends the wait.
func (n *nudger) hold() func() {
	n.mu.Lock()
	n.waiting++
	if n.waiting == 1 {
		ctx, cancel := context.WithCancel(context.Background())
		n.stop = cancel
		go n.run(ctx)
	}
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
	return func() {
		n.mu.Lock()
		if n.waiting--; n.waiting == 0 {
			n.stop()
		}
		n.mu.Unlock()
	}
}

func (n *nudger) run(ctx context.Context) {
	ep := n.primary.Endpoint()
	if ep == nil {
		return
	}
	pc, err := ep.Connect(ctx, "")
	if err != nil {
		return
	}
	defer pc.Close(context.Background())
	delay := 20 * time.Millisecond
	for {
		if err := LogRunningXacts(ctx, pc); err != nil {
			switch {
			case ctx.Err() != nil:
			case topology.PermissionDenied(err):
				n.log.Warn("cannot ask the primary for a running-xacts record; a new copy may wait up to 15 s for one",
					"error", err, "fix", "GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO <slotsync role>")
			default:
				n.log.Warn("lost the connection to the primary that asks for running-xacts records; a new copy may wait up to 15 s for one",
					"error", err)
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
			delay = 20 * time.Millisecond
		case <-time.After(delay):
			delay = min(2*delay, time.Second)
		}
	}
}

// LogRunningXacts asks the primary for a running-xacts record (pg_log_standby_snapshot, 16+)
// and has it flushed at once. The record is written without a flush, and walsenders send only
// flushed WAL: left alone, it reaches the standby (and the primary's own decoders) at the WAL
// writer's next round, about 150 ms later here (wal_writer_delay is 200 ms by default). Logged
// in a transaction that then takes an xid, its commit flushes it: a transaction that wrote WAL
// and has an xid commits synchronously (one without WAL would not flush). The record is logged
// before the xid exists, so it does not list it; the transaction changes nothing and decodes to
// nothing (no change was logged under its xid); its commit flushes locally and waits for no
// synchronous standby (SET LOCAL synchronous_commit = local: that transaction's alone, so a
// session with asynchronous commits, or one shared through a pooler, keeps its own setting).
// Should that be refused, the record is asked for alone: it arrives, only later.
func LogRunningXacts(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.PgConn().Exec(ctx, "SET LOCAL synchronous_commit = local; SELECT pg_log_standby_snapshot(); SELECT pg_current_xact_id()").ReadAll()
	if err == nil {
		return nil
	}
	_, err = conn.Exec(ctx, "SELECT pg_log_standby_snapshot()")
	return err
}

// Advance moves the copy forward; the server clamps the target to the replay position.
func (s *Session) Advance(ctx context.Context, name, database string, target lsncheck.LSN) (lsncheck.LSN, error) {
	if err := failpoint.Hit("sql.before-advance"); err != nil {
		return 0, err
	}
	var end lsncheck.LSN
	err := s.exec(ctx, database, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, "SELECT end_lsn FROM pg_replication_slot_advance($1, $2::pg_lsn)", name, target.String()).Scan(&end)
	})
	if err != nil {
		return 0, fmt.Errorf("advance slot %q to %s: %w", name, target, err)
	}
	return end, failpoint.Hit("sql.after-advance")
}

// Drop drops the standby copy (a logical slot is dropped from its own database).
// On a node promoted meanwhile nothing is dropped: the slot there is a consumer's now (rule 3).
func (s *Session) Drop(ctx context.Context, name, database string) error {
	return s.exec(ctx, database, func(c *pgx.Conn) error {
		if err := topology.StillInRecovery(ctx, c); err != nil {
			return fmt.Errorf("drop standby copy of slot %q: %w", name, err)
		}
		if err := failpoint.Hit("sql.before-drop"); err != nil {
			return err
		}
		if _, err := c.Exec(ctx, "SELECT pg_drop_replication_slot($1)", name); err != nil {
			return fmt.Errorf("drop standby copy of slot %q: %w", name, err)
		}
		return failpoint.Hit("sql.after-drop")
	})
}

// StillInRecovery returns topology.ErrPromoted when the standby is not in recovery any more.
func (s *Session) StillInRecovery(ctx context.Context) error {
	return s.exec(ctx, "", func(c *pgx.Conn) error { return topology.StillInRecovery(ctx, c) })
}

// Close ends the session's connections.
func (s *Session) Close() {
	for db, c := range s.conns {
		c.Close(context.Background())
		delete(s.conns, db)
	}
}
