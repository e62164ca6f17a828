package drill

import (
	"context"
	"fmt"
	stdsync "sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/integration"
)

// apply carries out one fault.
func (wd *world) apply(ctx context.Context, s Step) error {
	p := wd.pair
	switch s.Fault {
	case FaultSidecarKill:
		wd.side.kill()
	case FaultPrimaryRoute:
		wd.proxy.Blackhole()
		time.AfterFunc(s.For, wd.proxy.Restore)
	case FaultWALReceiver:
		return p.Primary.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_type = 'physical' AND active_pid IS NOT NULL")
	case FaultStandbyRestart:
		return wd.restartStandby(ctx)
	case FaultConsumerReconnect:
		select {
		case wd.feeds[wd.feedOf(s.Slot)].next <- struct{}{}:
		default:
		}
	case FaultSlotRecreated:
		return wd.recreate(ctx, s.Slot)
	case FaultLongTransaction:
		go wd.longTransaction(ctx, s.For)
	case FaultCatalogVacuum:
		for _, sql := range []string{"ALTER TABLE events ADD COLUMN chaos_tmp int", "ALTER TABLE events DROP COLUMN chaos_tmp",
			"VACUUM pg_attribute", "VACUUM pg_class"} {
			if err := p.Primary.ExecDB(ctx, db, sql); err != nil {
				return err
			}
		}
	case FaultPrimaryRestart:
		if err := p.Primary.Kill(ctx); err != nil {
			return err
		}
		return p.Primary.Start(ctx)
	}
	return nil
}

// restartStandby stops and starts the standby; a restart slotsync's state-file method is making
// at the same moment makes pg_ctl fail, which is fine as long as the standby comes back.
func (wd *world) restartStandby(ctx context.Context) error {
	err := wd.pair.Standby.Restart(ctx)
	if err == nil {
		return nil
	}
	wd.log.Info("standby restart failed; waiting for the standby", "error", err)
	if up := wd.standbyUp(ctx); up != nil {
		return fmt.Errorf("%v; then: %v", err, up)
	}
	return nil
}

func (wd *world) feedOf(slot string) int {
	for i, f := range wd.feeds {
		if f.c.slot == slot {
			return i
		}
	}
	return 0
}

// recreate drops a slot and makes it again with the same name and plugin: a new incarnation,
// ahead of the copy on the standby. Its consumer starts over from the new slot, owed only what
// is written after it (writes wait while the slot is made).
func (wd *world) recreate(ctx context.Context, slot string) error {
	i := wd.feedOf(slot)
	f := wd.feeds[i]
	wd.stopFeed(i)
	defer wd.startFeed(ctx, i, wd.pair.Primary)
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := wd.pair.Primary.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", slot)
		if err == nil {
			err = wd.pair.Primary.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot)
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return err
		}
		sleepUntil(ctx, time.Now().Add(300*time.Millisecond))
	}
	wd.w.mu.Lock()
	defer wd.w.mu.Unlock()
	if err := wd.pair.Primary.ExecDB(ctx, db, "SELECT pg_create_logical_replication_slot($1, $2)", slot, f.c.plugin); err != nil {
		return err
	}
	f.c.restartedAfter(wd.w.next)
	return nil
}

// longTransaction writes in a transaction kept open for d (copies made meanwhile must wait for
// it or decode it whole).
func (wd *world) longTransaction(ctx context.Context, d time.Duration) {
	conn, err := wd.pair.Primary.Connect(ctx, db)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, "INSERT INTO events SELECT g, 'long' FROM unnest($1::int[]) g", wd.w.ids(3)); err != nil {
		return
	}
	sleepUntil(ctx, time.Now().Add(d))
	_ = tx.Commit(ctx)
}

// holdWatch samples the primary's catalog holds and keeps the longest any stayed.
type holdWatch struct {
	node *integration.Node

	mu        stdsync.Mutex
	firstSeen map[string]time.Time
	longest   time.Duration
}

func (h *holdWatch) run(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for sleepUntil(ctx, time.Now().Add(500*time.Millisecond)) {
		if conn == nil {
			c, err := h.node.Connect(ctx, "postgres")
			if err != nil {
				continue
			}
			conn = c
		}
		rows, err := conn.Query(ctx, "SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE 'slotsync_hold_%'")
		if err != nil {
			conn.Close(context.Background())
			conn = nil
			continue
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err == nil {
			h.saw(names, time.Now())
		}
	}
}

func (h *holdWatch) saw(names []string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	present := map[string]bool{}
	for _, n := range names {
		present[n] = true
		if _, ok := h.firstSeen[n]; !ok {
			h.firstSeen[n] = now
		}
		h.longest = max(h.longest, now.Sub(h.firstSeen[n]))
	}
	for n := range h.firstSeen {
		if !present[n] {
			delete(h.firstSeen, n)
		}
	}
}

func (h *holdWatch) longestHold() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.longest
}

// keep writes until ctx ends, reconnecting after a failure (a primary restart), as an
// application does.
func (w *writer) keep(ctx context.Context, n *integration.Node) {
	for ctx.Err() == nil {
		if err := w.run(ctx, n); err == nil {
			return
		}
		sleepUntil(ctx, time.Now().Add(200*time.Millisecond))
	}
}

// issued is how many ids were handed out.
func (w *writer) issued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}
