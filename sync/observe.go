package sync

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/topology"
)

// Snapshot is one complete observation of both nodes. A failed or partial observation yields
// no snapshot, hence no action.
type Snapshot struct {
	Taken            time.Time
	Primary, Standby NodeState
	Physical         topology.PhysicalSlot
	// Warnings are conditions that do not stop the pass (see topology.Warnings).
	Warnings []topology.Problem
	// SyncedStandbySlots: the physical slots the primary's synchronized_standby_slots lists (17+).
	SyncedStandbySlots []topology.SyncedStandbySlot
}

// NodeError is a failed observation of one node ("primary" or "standby").
type NodeError struct {
	Node string
	Err  error
}

func (e *NodeError) Error() string { return fmt.Sprintf("observe %s: %v", e.Node, e.Err) }
func (e *NodeError) Unwrap() error { return e.Err }

// observer takes snapshots. The real one reads PostgreSQL; tests substitute others.
type observer interface {
	Observe(ctx context.Context) (Snapshot, error)
	// StandbySlots re-reads the standby's slots after a pass changed them.
	StandbySlots(ctx context.Context, versionNum int) (map[string]topology.Slot, error)
	// LogStandbySnapshot asks the primary to log a running-xacts record (16+).
	LogStandbySnapshot(ctx context.Context) error
	// SyncSlots runs pg_sync_replication_slots() on the standby (17+).
	SyncSlots(ctx context.Context) error
	// Reset drops the connections (the next call reconnects).
	Reset()
	Close()
}

// pgObserver keeps one connection to each node and drops it on any error.
type pgObserver struct {
	primary, standby *topology.Endpoint
	pconn, sconn     *pgx.Conn
}

func (o *pgObserver) conn(ctx context.Context, ep *topology.Endpoint, c **pgx.Conn) (*pgx.Conn, error) {
	if *c != nil && !(*c).IsClosed() {
		return *c, nil
	}
	conn, err := ep.Connect(ctx, "")
	if err != nil {
		return nil, err
	}
	*c = conn
	return conn, nil
}

func (o *pgObserver) reset(c **pgx.Conn) {
	if *c != nil {
		(*c).Close(context.Background())
		*c = nil
	}
}

// Observe reads the standby first (a promoted standby stops everything, even with the old
// primary gone), then the primary, checks that they are one pair, and lists both nodes' slots.
// A connection the server closed since the last pass (a restart) is replaced once.
func (o *pgObserver) Observe(ctx context.Context) (Snapshot, error) {
	snap, err := o.observe(ctx)
	if err != nil && staleConnection(err) && ctx.Err() == nil {
		o.Reset()
		snap, err = o.observe(ctx)
	}
	return snap, err
}

func (o *pgObserver) observe(ctx context.Context) (snap Snapshot, err error) {
	snap.Taken = time.Now()
	sconn, err := o.conn(ctx, o.standby, &o.sconn)
	if err != nil {
		return Snapshot{}, &NodeError{"standby", err}
	}
	defer func() {
		if err != nil && Classify(err) == Retry {
			o.reset(&o.sconn)
			o.reset(&o.pconn)
		}
	}()
	if snap.Standby.Info, err = topology.ReadNodeInfo(ctx, sconn); err != nil {
		return Snapshot{}, &NodeError{"standby", err}
	}
	if !snap.Standby.Info.InRecovery {
		return Snapshot{}, topology.ErrPromoted
	}
	pconn, err := o.conn(ctx, o.primary, &o.pconn)
	if err != nil {
		return Snapshot{}, &NodeError{"primary", err}
	}
	if snap.Primary.Info, err = topology.ReadNodeInfo(ctx, pconn); err != nil {
		return Snapshot{}, &NodeError{"primary", err}
	}
	if name := snap.Standby.Info.PrimarySlotName; name != "" {
		if snap.Physical, err = topology.ReadPhysicalSlot(ctx, pconn, name); err != nil {
			return Snapshot{}, &NodeError{"primary", err}
		}
	}
	if err := topology.Verify(snap.Primary.Info, snap.Standby.Info, snap.Physical, topology.MethodAuto); err != nil {
		return Snapshot{}, err
	}
	snap.Warnings = topology.Warnings(snap.Primary.Info, snap.Standby.Info, snap.Physical)
	if snap.Primary.Info.Major() >= 17 {
		if snap.SyncedStandbySlots, err = topology.ReadSyncedStandbySlots(ctx, pconn, snap.Primary.Info.SynchronizedStandbySlots); err != nil {
			return Snapshot{}, &NodeError{"primary", err}
		}
	}
	if snap.Primary.Slots, err = topology.LogicalSlots(ctx, pconn, snap.Primary.Info.VersionNum); err != nil {
		return Snapshot{}, &NodeError{"primary", err}
	}
	if snap.Standby.Slots, err = topology.LogicalSlots(ctx, sconn, snap.Standby.Info.VersionNum); err != nil {
		return Snapshot{}, &NodeError{"standby", err}
	}
	return snap, nil
}

func (o *pgObserver) StandbySlots(ctx context.Context, versionNum int) (map[string]topology.Slot, error) {
	sconn, err := o.conn(ctx, o.standby, &o.sconn)
	if err != nil {
		return nil, err
	}
	slots, err := topology.LogicalSlots(ctx, sconn, versionNum)
	if err != nil {
		o.reset(&o.sconn)
	}
	return slots, err
}

func (o *pgObserver) LogStandbySnapshot(ctx context.Context) error {
	pconn, err := o.conn(ctx, o.primary, &o.pconn)
	if err != nil {
		return err
	}
	_, err = pconn.Exec(ctx, "SELECT pg_log_standby_snapshot()")
	return err
}

func (o *pgObserver) Reset() { o.Close() }

func (o *pgObserver) SyncSlots(ctx context.Context) error {
	sconn, err := o.conn(ctx, o.standby, &o.sconn)
	if err != nil {
		return err
	}
	_, err = sconn.Exec(ctx, "SELECT pg_sync_replication_slots()")
	return err
}

func (o *pgObserver) Close() {
	o.reset(&o.sconn)
	o.reset(&o.pconn)
}
