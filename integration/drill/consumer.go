package drill

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	stdsync "sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Consumer is a real logical replication client (START_REPLICATION over the replication
// protocol) that records every inserted id with the end LSN of its transaction and acknowledges
// as it goes, like a CDC tool that stores its offset.
type Consumer struct {
	Slot, Plugin string

	mu        stdsync.Mutex
	confirmed pglogrepl.LSN // the last position acknowledged: the consumer's stored offset
	received  []receipt     // every id received, in order
	pending   []int         // ids of the transaction being read
	inTxn     bool          // a transaction's BEGIN was read, not yet its COMMIT
	history   []Confirmation
	// floor: ids up to it were written before the slot was made again (chaos); this
	// incarnation of the slot owes the consumer only later ones. may: ids up to it whose
	// transaction had not ended then: the new slot carries them if they committed after it.
	floor int
	may   map[int]bool
	// twoPhase: a pgoutput consumer that asks for prepared transactions (protocol 3), as a
	// subscription with two_phase does (chaos).
	twoPhase bool
	// connections: every stream the consumer started, for tracing where a change came from.
	connections []connection
	// FromSlot: after a promotion the consumer resumes from the slot's own position (start 0,
	// as pg_recvlogical without --startpos), not from its offset, so it gets again whatever the
	// copy stands behind it: the redelivery window the gate gave (chaos). resuming: the next
	// stream is that resumption.
	FromSlot, resuming bool
	// AckEvery (0: at each commit): the consumer confirms what it received only this often, as a
	// connector that commits its offsets every few seconds does (chaos): until then it holds
	// changes it has not confirmed. confirmedAt: when it last confirmed; due: what it will.
	AckEvery    time.Duration
	confirmedAt time.Time
	due         pglogrepl.LSN
}

// connection is one START_REPLICATION of the consumer: when, to which server, from where.
type connection struct {
	at    time.Time
	addr  string // host:port, never the DSN (it may hold a password)
	start pglogrepl.LSN
	phase int
}

type receipt struct {
	id    int
	end   pglogrepl.LSN // end of the commit record
	phase int           // which failover phase the receipt belongs to
	conn  int           // the connection (index in connections) that delivered it
	at    time.Time
}

var testDecodingInsert = regexp.MustCompile(`^table public\.events: INSERT: id\[integer\]:(\d+)`)

func NewConsumer(slot, plugin string) *Consumer {
	return &Consumer{Slot: slot, Plugin: plugin}
}

func (c *Consumer) pluginArgs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.Plugin == "pgoutput" && c.twoPhase:
		return []string{"proto_version '3'", "two_phase 'on'", "publication_names 'drill_pub'"}
	case c.Plugin == "pgoutput":
		return []string{"proto_version '1'", "publication_names 'drill_pub'"}
	}
	return nil
}

// AskTwoPhase makes the consumer ask for two-phase decoding from its next connection on.
func (c *Consumer) AskTwoPhase() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.twoPhase = true
}

// stream reads from the slot on dsn starting at the consumer's confirmed position until ctx ends
// or, when until is set, the stream has passed until and gone quiet. It acknowledges each
// transaction as soon as it is recorded.
func (c *Consumer) stream(ctx context.Context, dsn string, phase int, until pglogrepl.LSN) error {
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("consumer %s: connect: %w", c.Slot, err)
	}
	defer conn.Close(context.Background())
	start := c.restart()
	if err := pglogrepl.StartReplication(ctx, conn, c.Slot, start, pglogrepl.StartReplicationOptions{PluginArgs: c.pluginArgs()}); err != nil {
		return fmt.Errorf("consumer %s: START_REPLICATION at %s: %w", c.Slot, start, err)
	}
	c.connected(conn, start, phase)
	var seen pglogrepl.LSN // furthest position the server reported
	lastActivity := time.Now()
	for {
		if until != 0 && seen >= until && time.Since(lastActivity) > 500*time.Millisecond {
			return c.ack(ctx, conn)
		}
		rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		msg, err := conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				// Stopping: a last acknowledgement on a fresh context, as a client closing cleanly.
				actx, acancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer acancel()
				_ = c.ack(actx, conn)
				return nil
			}
			if pgconn.Timeout(err) {
				if err := c.ack(ctx, conn); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("consumer %s: receive: %w", c.Slot, err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok {
			if er, ok := msg.(*pgproto3.ErrorResponse); ok {
				return fmt.Errorf("consumer %s: server error: %s", c.Slot, er.Message)
			}
			continue
		}
		switch cd.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
			if err != nil {
				return err
			}
			seen = max(seen, ka.ServerWALEnd)
			c.idleAt(ka.ServerWALEnd)
			if ka.ReplyRequested {
				if err := c.ack(ctx, conn); err != nil {
					return err
				}
			}
		case pglogrepl.XLogDataByteID:
			xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
			if err != nil {
				return err
			}
			lastActivity = time.Now()
			seen = max(seen, xld.WALStart)
			committed, err := c.handle(xld, phase)
			if err != nil {
				return err
			}
			if committed {
				if err := c.ack(ctx, conn); err != nil {
					return err
				}
			}
		}
	}
}

// restart begins a new stream at the consumer's offset: a transaction cut off by the last
// connection's end is sent again from its start, so what was read of it is dropped (kept, it
// would count as received twice).
func (c *Consumer) restart() pglogrepl.LSN {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending, c.inTxn = c.pending[:0], false
	if c.resuming {
		c.resuming = false
		if c.FromSlot {
			return 0 // PostgreSQL starts at the slot's confirmed_flush
		}
	}
	return c.confirmed
}

// resumeAfterPromotion: the next stream is the first on the promoted standby.
func (c *Consumer) resumeAfterPromotion() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resuming = true
}

// handle records one decoded message; it reports whether a transaction just committed.
func (c *Consumer) handle(xld pglogrepl.XLogData, phase int) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Plugin == "pgoutput" {
		if done, ok := c.twoPhaseMessage(xld.WALData, phase); ok {
			return done, nil
		}
		m, err := pglogrepl.Parse(xld.WALData)
		if err != nil {
			return false, fmt.Errorf("consumer %s: parse pgoutput: %w", c.Slot, err)
		}
		switch m := m.(type) {
		case *pglogrepl.BeginMessage:
			c.inTxn = true
		case *pglogrepl.InsertMessage:
			if m.Tuple == nil || len(m.Tuple.Columns) == 0 {
				return false, errors.New("insert without columns")
			}
			id, err := strconv.Atoi(string(m.Tuple.Columns[0].Data))
			if err != nil {
				return false, fmt.Errorf("consumer %s: id %q: %w", c.Slot, m.Tuple.Columns[0].Data, err)
			}
			c.pending = append(c.pending, id)
		case *pglogrepl.CommitMessage:
			c.commit(m.TransactionEndLSN, phase)
			return true, nil
		}
		return false, nil
	}
	text := string(xld.WALData)
	if strings.HasPrefix(text, "BEGIN") {
		c.inTxn = true
	}
	if mm := testDecodingInsert.FindStringSubmatch(text); mm != nil {
		id, _ := strconv.Atoi(mm[1])
		c.pending = append(c.pending, id)
	} else if strings.HasPrefix(text, "COMMIT") || strings.HasPrefix(text, "PREPARE TRANSACTION") {
		// test_decoding's COMMIT (and, for a two_phase slot, PREPARE TRANSACTION and COMMIT
		// PREPARED) is sent at the end of its record; a prepared transaction's changes come
		// with its PREPARE, its COMMIT PREPARED brings none.
		c.commit(xld.WALStart, phase)
		return true, nil
	}
	return false, nil
}

// twoPhaseMessage handles pgoutput's two-phase messages (protocol 3), which pglogrepl does not
// parse: BEGIN PREPARE opens a transaction, PREPARE ends it with its changes (its end LSN after a
// flags byte and the prepare LSN), COMMIT PREPARED confirms its own end and brings no change.
// ok is false for any other message.
func (c *Consumer) twoPhaseMessage(data []byte, phase int) (committed, ok bool) {
	if len(data) == 0 {
		return false, false
	}
	switch data[0] {
	case 'b':
		c.inTxn = true
		return false, true
	case 'P', 'K':
		if len(data) < 18 {
			return false, true
		}
		c.commit(pglogrepl.LSN(binary.BigEndian.Uint64(data[10:18])), phase)
		return true, true
	}
	return false, false
}

// connected records a stream that started.
func (c *Consumer) connected(conn *pgconn.PgConn, start pglogrepl.LSN, phase int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	addr := conn.Conn().RemoteAddr().String()
	c.connections = append(c.connections, connection{at: time.Now(), addr: addr, start: start, phase: phase})
}

// trace says, for each of ids (at most ten), which connection delivered it and at which commit
// end, then lists the connections: how a lost, repeated or unexplained change came about.
func (c *Consumer) trace(ids []int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := map[int]bool{}
	for _, id := range ids[:min(len(ids), 10)] {
		want[id] = true
	}
	var out []string
	for _, r := range c.received {
		if want[r.id] {
			out = append(out, fmt.Sprintf("id %d: commit end %s, phase %d, connection %d, at %s", r.id, r.end, r.phase, r.conn, r.at.Format("15:04:05.000")))
		}
	}
	for i, cn := range c.connections {
		out = append(out, fmt.Sprintf("connection %d: %s from %s, phase %d, at %s", i, cn.addr, cn.start, cn.phase, cn.at.Format("15:04:05.000")))
	}
	return out
}

func (c *Consumer) commit(end pglogrepl.LSN, phase int) {
	c.inTxn = false
	for _, id := range c.pending {
		c.received = append(c.received, receipt{id: id, end: end, phase: phase, conn: len(c.connections) - 1, at: time.Now()})
	}
	c.pending = c.pending[:0]
	c.confirmUpTo(end)
}

// confirmUpTo moves the consumer's offset to end, or, for a consumer that confirms only every
// AckEvery, notes it due until that much time has passed since it last confirmed. Called with
// c.mu held or from the stream's own goroutine.
func (c *Consumer) confirmUpTo(end pglogrepl.LSN) {
	now := time.Now()
	if c.AckEvery > 0 && now.Sub(c.confirmedAt) < c.AckEvery {
		c.due = max(c.due, end)
		return
	}
	end = max(end, c.due)
	if end > c.confirmed {
		c.confirmed, c.confirmedAt = end, now
		c.history = append(c.history, Confirmation{At: now, LSN: end})
	}
}

// idleAt: between transactions, a keepalive's WAL end is confirmed too, as pg_recvlogical and
// subscriptions do: nothing before it is still to come. (A consumer that confirms only commit
// ends keeps a walsender waiting at the primary's shutdown for a flush report up to what it
// sent, which a commit end may not reach.)
func (c *Consumer) idleAt(walEnd pglogrepl.LSN) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.inTxn && walEnd > c.confirmed {
		c.confirmUpTo(walEnd)
	}
}

// ConfirmedAt is the consumer's offset at time t.
func (c *Consumer) ConfirmedAt(t time.Time) pglogrepl.LSN {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ConfirmedIn(c.history, t)
}

// ConfirmedIn is the offset at time t of a consumer whose offset moved as cs says (in order).
func ConfirmedIn(cs []Confirmation, t time.Time) pglogrepl.LSN {
	var at pglogrepl.LSN
	for _, h := range cs {
		if h.At.After(t) {
			break
		}
		at = h.LSN
	}
	return at
}

// RestartedAfter forgets the previous incarnation of the slot: the consumer starts over from the
// new slot's own position, owed only the ids after floor, and may get those of open (ids up to
// floor whose transaction had not ended: committed after the slot was made, it carries them).
func (c *Consumer) RestartedAfter(floor int, open map[int]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.confirmed, c.received, c.pending, c.history, c.floor = 0, nil, nil, nil, floor
	c.may = map[int]bool{}
	for id := range open {
		c.may[id] = true
	}
}

// mayHave is what this incarnation of the slot may or may not carry (see restartedAfter).
func (c *Consumer) mayHave() map[int]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.may
}

// owed is the part of truth this incarnation of the slot owes the consumer.
func (c *Consumer) owed(truth map[int]bool) map[int]bool {
	c.mu.Lock()
	floor := c.floor
	c.mu.Unlock()
	if floor == 0 {
		return truth
	}
	out := map[int]bool{}
	for id := range truth {
		if id > floor {
			out[id] = true
		}
	}
	return out
}

// FirstEnd is the commit end of the first receipt of each id (to tell a redelivery the gate
// allowed from one it did not).
func (c *Consumer) FirstEnd() map[int]pglogrepl.LSN {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int]pglogrepl.LSN{}
	for _, r := range c.received {
		if _, ok := out[r.id]; !ok {
			out[r.id] = r.end
		}
	}
	return out
}

// Follow streams from the DSN dsn gives (taken again at each reconnection) until ctx ends, reconnecting after any failure (a primary restart, a
// terminated walsender, a reconnect the explorer asked for through next), as a CDC tool does.
func (c *Consumer) Follow(ctx context.Context, dsn func() string, phase int, next <-chan struct{}) {
	for ctx.Err() == nil {
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = c.stream(sctx, dsn(), phase, 0)
		}()
		select {
		case <-done:
		case <-next:
		case <-ctx.Done():
		}
		cancel()
		<-done
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// ack sends the consumer's confirmed position (its stored offset) to the server; everything
// received up to it becomes durable.
func (c *Consumer) ack(ctx context.Context, conn *pgconn.PgConn) error {
	c.mu.Lock()
	pos := c.confirmed
	c.mu.Unlock()
	if pos == 0 {
		return nil
	}
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pos}); err != nil {
		return fmt.Errorf("consumer %s: acknowledge %s: %w", c.Slot, pos, err)
	}
	return nil
}

// SnapshotDurable freezes what the consumer has acknowledged, at a failover.
func (c *Consumer) SnapshotDurable() (pglogrepl.LSN, map[int]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := map[int]int{}
	for _, r := range c.received {
		if r.end <= c.confirmed {
			d[r.id]++
		}
	}
	return c.confirmed, d
}

// receivedIn returns the ids received in a phase.
func (c *Consumer) receivedIn(phase int) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []int
	for _, r := range c.received {
		if r.phase == phase {
			ids = append(ids, r.id)
		}
	}
	return ids
}

// Gaps counts, among the ids up to upTo, those this incarnation of the slot owes the consumer
// (held by truth) that it has not received, and those it received that truth lacks.
func (c *Consumer) Gaps(truth map[int]bool, upTo int) (missing, ahead int) {
	owed := c.owed(truth)
	c.mu.Lock()
	defer c.mu.Unlock()
	got := map[int]bool{}
	for _, r := range c.received {
		got[r.id] = true
		if r.id <= upTo && !truth[r.id] {
			ahead++
		}
	}
	for id := range owed {
		if id <= upTo && !got[id] {
			missing++
		}
	}
	return missing, ahead
}

// NoteConfirmed records that the consumer confirmed lsn at at, as a replayed report says.
func (c *Consumer) NoteConfirmed(at time.Time, lsn pglogrepl.LSN) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.history = append(c.history, Confirmation{At: at, LSN: lsn})
	if lsn > c.confirmed {
		c.confirmed = lsn
	}
}

// Confirmation is one move of a consumer's offset: when, and to where (for judging a gate
// answer against what the consumer had confirmed when the gate observed it).
type Confirmation struct {
	At  time.Time     `json:"at"`
	LSN pglogrepl.LSN `json:"lsn"`
}

// Confirmations is every move of the consumer's offset in this incarnation of its slot, in
// order (what ConfirmedAt reads).
func (c *Consumer) Confirmations() []Confirmation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.history)
}

// ConfirmEvery has the consumer confirm what it receives only every d from now on (0: at each
// commit again).
func (c *Consumer) ConfirmEvery(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.AckEvery, c.confirmedAt = d, time.Now()
}
