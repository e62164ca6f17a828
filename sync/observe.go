package sync

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/slotsync/slotsync/internal/failpoint"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/topology"
)

// Observation is one complete look at both nodes (not to be confused with PostgreSQL's decoding
// snapshots, which the state-file method copies). A failed or partial observation yields
// no observation, hence no action. Two partial ones come with their reasons: when the local
// node is not in recovery (it is the primary now) only Standby is filled, with no error; when
// the primary cannot be reached, Standby is filled and the error is a primary NodeError, so the
// gate can judge without the primary (rule 8).
type Observation struct {
	Taken time.Time
	// PrimaryChanged: the standby's primary_conninfo points elsewhere than at the last pass.
	PrimaryChanged bool
	// PrimaryUser is the role slotsync logs in to the primary as, at PrimaryAddr.
	PrimaryUser, PrimaryAddr string
	Primary, Standby         NodeState
	Physical                 topology.PhysicalSlot
	// Warnings are conditions that do not stop the pass (see topology.Warnings).
	Warnings []topology.Problem
	// Prepared: the primary's prepared transactions by database, read when a slot has two_phase.
	Prepared map[string][]lsncheck.XID
	// SyncedStandbySlots: the physical slots the primary's synchronized_standby_slots lists (17+).
	SyncedStandbySlots []topology.SyncedStandbySlot
	// OwnStandbySlots: on a local node that is a primary (17+), the slots its own
	// synchronized_standby_slots lists.
	OwnStandbySlots []topology.SyncedStandbySlot
	// Demoted: when the primary was found demoted (ErrPrimaryInRecovery), the end of its WAL,
	// what its consumers may have received, which the standby must hold, and its slots as it
	// left them (rule 8).
	Demoted Demoted
}

// inRecovery ends an observation whose primary link reached a server in recovery (rule 8): the
// standby's half, with why the primary was not asked (JudgeUpstream), or a configuration error.
func (o *pgObserver) inRecovery(ctx context.Context, sconn, pconn *pgx.Conn, obs Observation) (Observation, error) {
	reached := obs.Primary.Info
	obs.Primary = NodeState{}
	// Its timeline is its WAL files' newest too, as the standby's (rule 8): one that streamed
	// from a primary promoted elsewhere, and stopped, holds that primary's timeline.
	err := readWALFiles(ctx, pconn, &reached)
	if err == nil {
		err = o.judgeUpstream(ctx, sconn, pconn, obs.Standby.Info, reached)
	}
	switch {
	case errors.Is(err, ErrPrimaryInRecovery):
		obs.Demoted.WALEnd = reached.WALEnd() // its consumers may hold up to there
		// Its slots as it left them: one made again since the record is not the one judged.
		obs.Demoted.Slots, obs.Demoted.SlotsErr = topology.LogicalSlots(ctx, pconn, reached.VersionNum)
	case Classify(err) == Stop:
		return Observation{}, err
	}
	return obs, &NodeError{"primary", err}
}

// judgeUpstream reads what JudgeUpstream needs of a server in recovery reached as the primary:
// whether the standby streams from it, and whether it streams from the standby.
func (o *pgObserver) judgeUpstream(ctx context.Context, sconn, pconn *pgx.Conn, standby, reached topology.NodeInfo) error {
	f := UpstreamFacts{Standby: standby, Reached: reached}
	if name := standby.PrimarySlotName; name != "" && standby.ReceiverStatus == "streaming" {
		phys, err := topology.ReadPhysicalSlot(ctx, pconn, name)
		if err != nil {
			return err
		}
		f.StandbyStreamsFromIt = phys.Active
	}
	if name := reached.PrimarySlotName; name != "" && reached.ReceiverStatus == "streaming" {
		phys, err := topology.ReadPhysicalSlot(ctx, sconn, name)
		if err != nil {
			return &NodeError{"standby", err}
		}
		f.ItStreamsFromStandby = phys.Active
	}
	return JudgeUpstream(f)
}

func anyTwoPhase(slots map[string]topology.Slot) bool {
	for _, s := range slots {
		if s.TwoPhase {
			return true
		}
	}
	return false
}

// view is what a method's hooks see of the observation.
func (s Observation) view() method.View {
	return method.View{Primary: s.Primary.Info, Standby: s.Standby.Slots, Horizon: s.Physical.CatalogHorizon(), StandbyWALEnd: s.Standby.Info.WALEnd(),
		StandbySlot: s.Standby.Info.PrimarySlotName}
}

// NodeError is a failed observation of one node ("primary" or "standby").
type NodeError struct {
	Node string
	Err  error
}

func (e *NodeError) Error() string { return fmt.Sprintf("observe %s: %v", e.Node, e.Err) }
func (e *NodeError) Unwrap() error { return e.Err }

// observer is what the engine reads and changes on the nodes. The real one is PostgreSQL;
// tests substitute others.
type observer interface {
	nodeReader
	nodeControl
}

// nodeReader is the read side of the nodes: the observation a pass judges, and what a pass or
// the watch reads again.
type nodeReader interface {
	Observe(ctx context.Context) (Observation, error)
	// StandbySlots re-reads the standby's slots after a pass changed them.
	StandbySlots(ctx context.Context, versionNum int) (map[string]topology.Slot, error)
	// History reads the primary's timeline history (topology.TimelineHistory).
	History(ctx context.Context, tli int) (map[int]lsncheck.LSN, error)
	// Watch reads the positions the watch between passes needs (watch.go).
	Watch(ctx context.Context, names []string) (WatchSample, error)
	// Reset drops the connections (the next call reconnects).
	Reset()
	Close()
}

// nodeControl is what the engine changes on the nodes beside the methods' slot actions.
type nodeControl interface {
	// SyncSlots runs pg_sync_replication_slots() on the standby (17+).
	SyncSlots(ctx context.Context) error
	// LogRunningXacts asks the primary for a running-xacts record (pg_log_standby_snapshot(),
	// 16+) and returns where it is.
	LogRunningXacts(ctx context.Context) (lsncheck.LSN, error)
	// SetStandbySlots sets synchronized_standby_slots (ALTER SYSTEM, then a reload) on the
	// primary, or on the local node when it is the primary (onPrimary false).
	SetStandbySlots(ctx context.Context, onPrimary bool, names []string) error
}

var _ observer = (*pgObserver)(nil)

// pgObserver keeps one connection to each node and drops it on any error.
type pgObserver struct {
	primary        *primaryLink
	standby        *topology.Endpoint
	pconn, sconn   *pgx.Conn
	connectTimeout time.Duration // bound on connecting to the primary
	// noVerify: take the observation even when topology.Verify refuses the pair (doctor lists
	// every failed check with its fix instead).
	noVerify bool
	// ownStandbySlots: on a node that is the primary, read what its synchronized_standby_slots
	// lists (only --manage-synchronized-standby-slots uses it).
	ownStandbySlots bool
	// snapshots: the standby is in recovery and the role may look for the copies' decoding
	// snapshots (rule 4); listSnapshots: with pg_ls_logicalsnapdir().
	snapshots, listSnapshots bool
	// silentBound: Config.SilentReceiverBound, carried in the standby's NodeInfo.
	silentBound time.Duration
}

// readSnapshots fills in whether each standby slot has its decoding snapshot, when it may.
func (o *pgObserver) readSnapshots(ctx context.Context, sconn *pgx.Conn, slots map[string]topology.Slot) error {
	if !o.snapshots || len(slots) == 0 {
		return nil
	}
	return topology.ReadSnapshots(ctx, sconn, slots, o.listSnapshots)
}

// errNoPrimary: no primary is known (no --primary, and primary_conninfo is empty).
var errNoPrimary = topology.ErrNoPrimaryConninfo

// primaryConn returns the connection to the current primary, connecting within the connect
// bound: an unreachable primary must not stall the gate.
func (o *pgObserver) primaryConn(ctx context.Context) (*pgx.Conn, error) {
	if o.pconn != nil && !o.pconn.IsClosed() {
		return o.pconn, nil
	}
	ep := o.primary.Endpoint()
	if ep == nil {
		return nil, errNoPrimary
	}
	if o.connectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.connectTimeout)
		defer cancel()
	}
	conn, err := ep.Connect(ctx, "")
	if err != nil {
		return nil, err
	}
	o.pconn = conn
	return conn, nil
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

// Observe reads the standby first (its role, and where its primary_conninfo points now), then
// the primary, checks that they are one pair, and lists both nodes' slots.
// A connection the server closed since the last pass (a restart) is replaced once.
func (o *pgObserver) Observe(ctx context.Context) (Observation, error) {
	obs, err := o.observe(ctx)
	if err != nil && topology.StaleConnection(err) && ctx.Err() == nil {
		o.Reset()
		obs, err = o.observe(ctx)
	}
	return obs, err
}

func (o *pgObserver) observe(ctx context.Context) (obs Observation, err error) {
	obs.Taken = time.Now()
	sconn, err := o.conn(ctx, o.standby, &o.sconn)
	if err != nil {
		return Observation{}, &NodeError{"standby", err}
	}
	defer func() {
		if err != nil && Classify(err) == Retry {
			if ne := (*NodeError)(nil); !errors.As(err, &ne) || ne.Node == "standby" {
				o.reset(&o.sconn)
			}
			o.reset(&o.pconn)
		}
	}()
	// The standby is read before the primary is asked: when the primary does not answer, the
	// gate still judges from it (rule 8).
	if obs.Standby, err = o.observeStandby(ctx, sconn); err != nil {
		return Observation{}, &NodeError{"standby", err}
	}
	standbyOnly := func(perr error) (Observation, error) {
		if perr != nil {
			return obs, &NodeError{"primary", perr}
		}
		return obs, nil
	}
	if !obs.Standby.Info.InRecovery {
		if o.ownStandbySlots && obs.Standby.Info.Major() >= 17 {
			if obs.OwnStandbySlots, err = topology.ReadSyncedStandbySlots(ctx, sconn, obs.Standby.Info.SynchronizedStandbySlots); err != nil {
				return Observation{}, &NodeError{"standby", err}
			}
		}
		return standbyOnly(nil) // this node is a primary now: nothing to sync (rule 9)
	}
	changed, err := o.primary.follow(obs.Standby.Info.PrimaryConninfo)
	if err != nil {
		return Observation{}, err
	}
	if changed {
		o.reset(&o.pconn)
		obs.PrimaryChanged = true
	}
	if ep := o.primary.Endpoint(); ep != nil {
		obs.PrimaryUser, obs.PrimaryAddr = ep.User(), ep.Addr()
	}
	pconn, err := o.primaryConn(ctx)
	if errors.Is(err, errNoPrimary) && !obs.Standby.Info.CanReadAllSettings {
		err = topology.ErrPrimaryConninfoUnreadable // "empty" may only be unreadable
	}
	if err != nil {
		return standbyOnly(err)
	}
	if obs.Primary.Info, err = topology.ReadNodeInfo(ctx, pconn); err != nil {
		o.reset(&o.pconn)
		return standbyOnly(err)
	}
	if obs.Primary.Info.InRecovery && !o.noVerify {
		return o.inRecovery(ctx, sconn, pconn, obs)
	}
	if name := obs.Standby.Info.PrimarySlotName; name != "" {
		if obs.Physical, err = topology.ReadPhysicalSlot(ctx, pconn, name); err != nil {
			return standbyOnly(err)
		}
	}
	if err := topology.Verify(obs.Primary.Info, obs.Standby.Info, obs.Physical, topology.MethodAuto); err != nil && !o.noVerify {
		return Observation{}, err
	}
	if err := topology.CheckFollows(obs.Primary.Info, obs.Standby.Info, obs.Physical); err != nil && !o.noVerify {
		return Observation{}, err // rule 7: a pass to retry
	}
	obs.Warnings = topology.Warnings(obs.Primary.Info, obs.Standby.Info, obs.Physical)
	if obs.Primary.Info.Major() >= 17 {
		if obs.SyncedStandbySlots, err = topology.ReadSyncedStandbySlots(ctx, pconn, obs.Primary.Info.SynchronizedStandbySlots); err != nil {
			return standbyOnly(err)
		}
	}
	if obs.Primary.Slots, err = topology.LogicalSlots(ctx, pconn, obs.Primary.Info.VersionNum); err != nil {
		return standbyOnly(err)
	}
	if anyTwoPhase(obs.Primary.Slots) {
		if obs.Prepared, err = topology.PreparedXacts(ctx, pconn); err != nil {
			return standbyOnly(err)
		}
	}
	// Rule 5 compares what a consumer may hold (read on the primary just now) with what the
	// standby has: its flushed WAL is read again, so that WAL written in between does not count
	// as missing. A failure here keeps the earlier, smaller value.
	if l, err := topology.ReadReceiveLSN(ctx, sconn); err == nil && l > obs.Standby.Info.ReceiveLSN {
		obs.Standby.Info.ReceiveLSN = l
	}
	return obs, nil
}

// observeStandby reads the standby: its state, its logical slots, their decoding snapshots and
// its WAL files.
func (o *pgObserver) observeStandby(ctx context.Context, sconn *pgx.Conn) (NodeState, error) {
	var st NodeState
	var err error
	if st.Info, err = topology.ReadNodeInfo(ctx, sconn); err != nil {
		return st, err
	}
	st.Info.SilentBound = o.silentBound
	if st.Slots, err = topology.LogicalSlots(ctx, sconn, st.Info.VersionNum); err != nil {
		return st, err
	}
	i := st.Info
	o.snapshots, o.listSnapshots = i.InRecovery && (i.CanStatFiles || i.CanListSnapshots), i.CanListSnapshots
	if err := o.readSnapshots(ctx, sconn, st.Slots); err != nil {
		return st, err
	}
	return st, readWALFiles(ctx, sconn, &st.Info)
}

func (o *pgObserver) StandbySlots(ctx context.Context, versionNum int) (map[string]topology.Slot, error) {
	sconn, err := o.conn(ctx, o.standby, &o.sconn)
	if err != nil {
		return nil, err
	}
	slots, err := topology.LogicalSlots(ctx, sconn, versionNum)
	if err == nil {
		err = o.readSnapshots(ctx, sconn, slots)
	}
	if err != nil {
		o.reset(&o.sconn)
	}
	return slots, err
}

func (o *pgObserver) Reset() { o.Close() }

func (o *pgObserver) History(ctx context.Context, tli int) (map[int]lsncheck.LSN, error) {
	ep := o.primary.Endpoint()
	if ep == nil {
		return nil, errNoPrimary
	}
	return topology.TimelineHistory(ctx, ep, tli)
}

func (o *pgObserver) SyncSlots(ctx context.Context) error {
	sconn, err := o.conn(ctx, o.standby, &o.sconn)
	if err != nil {
		return err
	}
	// 19's pg_sync_replication_slots() retries, every 30 s or so, each slot it cannot sync yet
	// (its consumer behind the standby's horizon) until it can: bounded, the call does one round
	// of what can be synced now and the pass goes on (the skip reason says why the rest waits).
	// The SET lasts only for the call: an error rolls it back with the implicit transaction.
	_, err = sconn.Exec(ctx, fmt.Sprintf("SET statement_timeout = %d; SELECT pg_sync_replication_slots(); RESET statement_timeout", syncSlotsBound.Milliseconds()))
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "57014" { // query_canceled: the statement_timeout
		return fmt.Errorf("%w: %w", ErrSyncSlotsUnfinished, err)
	}
	return err
}

// syncSlotsBound is how long a pass lets pg_sync_replication_slots() run (SyncSlots).
const syncSlotsBound = 2 * time.Second

// ErrSyncSlotsUnfinished: pg_sync_replication_slots() was still retrying slots it cannot sync
// yet when its bound ran out (19+); what it could sync, it did.
var ErrSyncSlotsUnfinished = errors.New("the server's slot sync was still waiting for some slots")

func (o *pgObserver) LogRunningXacts(ctx context.Context) (lsncheck.LSN, error) {
	pconn, err := o.primaryConn(ctx)
	if err != nil {
		return 0, err
	}
	// Not sqlslot.LogRunningXacts, which takes an xid to flush the record at once: the server's
	// sync compares the primary slot's catalog_xmin, taken from this record, with the standby's
	// oldest safe xid, and an xid taken after the record would put that one past it again. The
	// WAL writer flushes the record within wal_writer_delay.
	var at lsncheck.LSN
	err = pconn.QueryRow(ctx, "SELECT pg_log_standby_snapshot()").Scan(&at)
	if err != nil && !topology.PermissionDenied(err) {
		o.reset(&o.pconn)
	}
	return at, err
}

func (o *pgObserver) SetStandbySlots(ctx context.Context, onPrimary bool, names []string) error {
	stmt, err := StandbySlotsSQL(names)
	if err != nil {
		return err
	}
	var conn *pgx.Conn
	if onPrimary {
		conn, err = o.primaryConn(ctx)
	} else {
		conn, err = o.conn(ctx, o.standby, &o.sconn)
	}
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
	return err
}

func (o *pgObserver) Close() {
	o.reset(&o.sconn)
	o.reset(&o.pconn)
}

// Observe takes one observation of the pair cfg names, as a pass would (the primary found from
// the standby's primary_conninfo unless pinned), and changes nothing. Unlike a pass it does not
// refuse a pair that fails topology.Verify: doctor judges every prerequisite itself.
func Observe(ctx context.Context, cfg Config) (Observation, error) {
	if err := cfg.Validate(); err != nil {
		return Observation{}, err
	}
	primary, standby, err := cfg.Endpoints()
	if err != nil {
		return Observation{}, err
	}
	o := &pgObserver{primary: cfg.primaryLink(primary), standby: standby, connectTimeout: cfg.PrimaryConnectTimeout, noVerify: true,
		silentBound: cfg.SilentReceiverBound}
	defer o.Close()
	ctx, cancel := context.WithTimeout(ctx, cfg.ObserveTimeout)
	defer cancel()
	return o.Observe(ctx)
}

// Watch reads the standby's recovery state and replay position, then the named primary slots'
// positions: two small queries on the connections the passes use.
func (o *pgObserver) Watch(ctx context.Context, names []string) (WatchSample, error) {
	s := WatchSample{Primary: map[string]lsncheck.Position{}}
	sconn, err := o.conn(ctx, o.standby, &o.sconn)
	if err != nil {
		return s, err
	}
	if s.InRecovery, s.Replay, err = topology.ReadReplay(ctx, sconn); err != nil {
		o.reset(&o.sconn)
		return s, err
	}
	pconn, err := o.primaryConn(ctx)
	if err != nil {
		return s, err
	}
	if s.From, s.Primary, err = topology.SlotPositionsFrom(ctx, pconn, names); err != nil {
		o.reset(&o.pconn)
	}
	return s, err
}

// readWALFiles reads, on a standby whose role may list pg_wal, where its oldest WAL file begins,
// the stretches missing after it (rule 4), and the newest timeline of its files, which its
// history timeline takes when newer (rule 8: a standby whose new upstream died has no WAL
// receiver to say the timeline it follows).
func readWALFiles(ctx context.Context, conn *pgx.Conn, i *topology.NodeInfo) error {
	if !i.InRecovery || !i.CanListWAL || i.WALSegmentBytes == 0 || failpoint.Mutant("wal-files-unchecked") {
		return nil
	}
	oldest, gaps, tli, err := topology.ReadWALFiles(ctx, conn, i.WALSegmentBytes)
	if err != nil {
		return err
	}
	i.OldestWAL, i.WALGaps = oldest, gaps
	if failpoint.Mutant("wal-holes-unchecked") {
		i.WALGaps = nil
	}
	if !failpoint.Mutant("wal-timeline-unread") {
		i.HistoryTimeline = max(i.HistoryTimeline, tli)
	}
	return nil
}
