package drill

import (
	"context"
	"fmt"
	stdsync "sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/integration"
)

// Writer inserts rows with increasing ids, three per transaction.
type Writer struct {
	mu   stdsync.Mutex
	next int
	// open: ids handed out whose transaction has not ended yet. A slot made meanwhile may or may
	// not decode them, depending on whether they commit before it.
	open map[int]bool
	// pausedUntil: the writes wait until then (unix nanoseconds; FaultWritesPaused).
	pausedUntil atomic.Int64
}

// IDs hands out n IDs for one transaction; ended says when it is over.
func (w *Writer) IDs(n int) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open == nil {
		w.open = map[int]bool{}
	}
	out := make([]int, n)
	for i := range out {
		w.next++
		out[i] = w.next
		w.open[w.next] = true
	}
	return out
}

// Ended: the transaction of ids committed or failed.
func (w *Writer) Ended(ids []int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		delete(w.open, id)
	}
}

// exec runs one insert of fresh ids on conn.
func (w *Writer) exec(ctx context.Context, conn *pgx.Conn, payload string) error {
	ids := w.IDs(3)
	defer w.Ended(ids)
	_, err := conn.Exec(ctx, "INSERT INTO events SELECT g, $2 FROM unnest($1::int[]) g", ids, payload)
	return err
}

// Batch writes txns transactions and returns.
func (w *Writer) Batch(ctx context.Context, n *integration.Node, txns int) error {
	conn, err := n.Connect(ctx, DB)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for i := 0; i < txns; i++ {
		if err := w.exec(ctx, conn, "drill"); err != nil {
			return fmt.Errorf("drill write: %w", err)
		}
	}
	return nil
}

// Run writes about 50 transactions a second until ctx ends.
func (w *Writer) Run(ctx context.Context, n *integration.Node) error {
	conn, err := n.Connect(ctx, DB)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().UnixNano() < w.pausedUntil.Load() {
			continue
		}
		if err := w.exec(ctx, conn, "drill"); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("drill write: %w", err)
		}
	}
}

// Keep writes until ctx ends, reconnecting after a failure (a primary restart), as an
// application does.
func (w *Writer) Keep(ctx context.Context, n *integration.Node) {
	for ctx.Err() == nil {
		if err := w.Run(ctx, n); err == nil {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Issued is how many ids were handed out.
func (w *Writer) Issued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}

// Held runs f while no id is handed out, with the last id handed out and those whose
// transaction has not ended: a slot made within f owes its consumer only later ones.
func (w *Writer) Held(f func(next int, open map[int]bool) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return f(w.next, w.open)
}

// PauseFor holds the writes for d.
func (w *Writer) PauseFor(d time.Duration) {
	w.pausedUntil.Store(time.Now().Add(d).UnixNano())
}
