package drill

import (
	"context"
	"errors"
	"fmt"
	"sort"
	stdsync "sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/slotsync/slotsync/integration"
	slotsync "github.com/slotsync/slotsync/sync"
	"github.com/slotsync/slotsync/sync/method/statefile"
	"github.com/slotsync/slotsync/topology"
)

// Options tune a drill.
type Options struct {
	// Duration of the live phase before each failover: writes, consumption and syncing.
	Duration time.Duration
	// Kill crashes the primary with SIGKILL before the promotion instead of stopping it cleanly
	// (local and Docker pairs only).
	Kill bool
	// Failovers is how many times to fail over on the same pair; with 2 the old primary rejoins
	// as a standby and the consumers survive a switch back (local pairs only).
	Failovers int
	// ReadyTimeout bounds the wait for the promotion gate before each failover.
	ReadyTimeout time.Duration
	// StateDir is where slotsync keeps its journal (one subdirectory per failover).
	StateDir string
	Logger   hclog.Logger
}

func (o *Options) defaults() {
	if o.Duration <= 0 {
		o.Duration = 3 * time.Second
	}
	if o.Failovers <= 0 {
		o.Failovers = 1
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 90 * time.Second
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
}

// SlotVerdict is what one consumer saw across one failover.
type SlotVerdict struct {
	Slot      string `json:"slot"`
	Plugin    string `json:"plugin"`
	Confirmed string `json:"confirmed_at_failover"`
	// Durable: changes the consumer had acknowledged before the failover.
	Durable int `json:"durable_before"`
	// Resumed: changes received on the new primary after resuming from Confirmed.
	Resumed int `json:"received_after"`
	// Lost: changes on the new primary the consumer never got. Repeated: changes received again
	// after resuming although already acknowledged. Ahead: acknowledged changes the new primary
	// does not have (the consumer was ahead of the standby).
	Lost     []int `json:"lost"`
	Repeated []int `json:"repeated"`
	Ahead    []int `json:"ahead"`
	// RepeatedBefore: for a consumer that confirms only every few seconds (AckEvery), changes
	// it received twice before this promotion, when a stream restarted from its offset while it
	// held changes it had not confirmed: at-least-once delivery as PostgreSQL gives it, which no
	// promotion caused. A consumer that confirms each commit has none: its twice-received
	// changes before the promotion stay in Repeated.
	RepeatedBefore []int `json:"repeated_before_promotion,omitempty"`
	// AheadOfStandby: the consumer's offset was beyond the WAL the standby had at its promotion
	// (chaos drill): changes the new primary then writes below that offset never reach it,
	// even when the consumer holds no change the new primary lacks.
	AheadOfStandby bool `json:"ahead_of_standby_wal,omitempty"`
	// CannotResume: the consumer could not resume on the new primary (its slot missing or
	// unusable there), whatever it was owed: a consumer that breaks, as lesson 10's retry loops.
	CannotResume string `json:"cannot_resume,omitempty"`
	OK           bool   `json:"ok"`
	// Trace, when not OK: which of the consumer's connections delivered the changes in question
	// (ahead, lost, repeated; ten at most), and every connection it made.
	Trace []string `json:"trace,omitempty"`
}

// FailoverVerdict is one failover of the drill.
type FailoverVerdict struct {
	Number int    `json:"number"`
	Mode   string `json:"mode"` // "clean" or "kill -9"
	Rows   int    `json:"rows_on_new_primary"`
	// IssuedBefore: the last id handed out before the new primary's own writes: a lost change
	// at or below it was one the promoted standby had.
	IssuedBefore int           `json:"issued_before_promotion,omitempty"`
	TimeToReady  time.Duration `json:"time_to_ready_ns"`
	Slots        []SlotVerdict `json:"slots"`
	OK           bool          `json:"ok"`
}

// Verdict is the outcome of a drill.
type Verdict struct {
	OK        bool              `json:"ok"`
	Major     int               `json:"major"`
	Failovers []FailoverVerdict `json:"failovers"`
	Error     string            `json:"error,omitempty"`
}

// SlotSpec names a drill slot and its output plugin.
type SlotSpec struct{ Name, Plugin string }

var Slots = []SlotSpec{{"drill_pgoutput", "pgoutput"}, {"drill_test_decoding", "test_decoding"}}

const DB = "drill"

// Run drills failovers on pair. An error means the drill could not be carried out; losses are
// in the verdict (OK false), never hidden in an error.
func Run(ctx context.Context, pair *integration.Pair, opts Options) (Verdict, error) {
	opts.defaults()
	v := Verdict{Major: pair.Major}
	if opts.Kill && pair.External() {
		return v, errors.New("drill: kill -9 needs a pair slotsync started (local or Docker)")
	}
	if opts.Failovers > 1 && pair.Dir == "" {
		return v, errors.New("drill: more than one failover needs a local pair (the old primary is rebuilt as a standby)")
	}
	if err := Setup(ctx, pair); err != nil {
		return v, err
	}
	consumers := make([]*Consumer, len(Slots))
	for i, s := range Slots {
		consumers[i] = NewConsumer(s.Name, s.Plugin)
	}
	w := &Writer{}
	for n := 1; n <= opts.Failovers; n++ {
		if n > 1 {
			opts.Logger.Info("rebuilding the old primary as a standby of the new one")
			if err := pair.Rejoin(ctx, false); err != nil {
				return v, fmt.Errorf("drill: rejoin the old primary: %w", err)
			}
		}
		fv, err := failover(ctx, pair, consumers, w, n, opts)
		v.Failovers = append(v.Failovers, fv)
		if err != nil {
			v.Error = err.Error()
			return v, err
		}
	}
	v.OK = true
	for _, f := range v.Failovers {
		v.OK = v.OK && f.OK
	}
	return v, nil
}

func Setup(ctx context.Context, pair *integration.Pair) error {
	p := pair.Primary
	for _, step := range []struct{ db, sql string }{
		{"postgres", "CREATE DATABASE " + DB},
		{DB, "CREATE TABLE events (id int PRIMARY KEY, payload text NOT NULL)"},
		{DB, "CREATE PUBLICATION drill_pub FOR TABLE events"},
	} {
		if err := p.ExecDB(ctx, step.db, step.sql); err != nil {
			return fmt.Errorf("drill setup: %w", err)
		}
	}
	for _, s := range Slots {
		if err := p.ExecDB(ctx, DB, "SELECT pg_create_logical_replication_slot($1, $2)", s.Name, s.Plugin); err != nil {
			return fmt.Errorf("drill setup: %w", err)
		}
	}
	return pair.WaitCaughtUp(ctx)
}

// failover runs one live phase, the gate, the promotion, the resumption and the verdict.
func failover(ctx context.Context, pair *integration.Pair, consumers []*Consumer, w *Writer, n int, opts Options) (FailoverVerdict, error) {
	log := opts.Logger.With("failover", n)
	fv := FailoverVerdict{Number: n, Mode: "clean"}
	if opts.Kill {
		fv.Mode = "kill -9"
	}
	eng, gate, err := engines(pair, n, opts, log)
	if err != nil {
		return fv, err
	}
	defer eng.Close()
	defer gate.Close()
	if fv.TimeToReady, err = live(ctx, pair, eng, gate, consumers, w, 2*n, opts, log); err != nil {
		return fv, err
	}
	durable := make([]map[int]int, len(consumers))
	for i, c := range consumers {
		confirmed, d := c.SnapshotDurable()
		durable[i] = d
		fv.Slots = append(fv.Slots, SlotVerdict{Slot: c.Slot, Plugin: c.Plugin, Confirmed: confirmed.String(), Durable: CountIDs(d)})
	}
	if err := promote(ctx, pair, opts.Kill, log); err != nil {
		return fv, err
	}
	return Resume(ctx, pair, consumers, w, durable, 2*n+1, fv, log)
}

// engines makes the syncing engine and the read-only gate of failover n.
func engines(pair *integration.Pair, n int, opts Options, log hclog.Logger) (eng, gate *slotsync.Engine, err error) {
	cfg := slotsync.Config{PrimaryDSN: pair.Primary.DSN("postgres"), StandbyDSN: pair.Standby.DSN("postgres"),
		StateDir: fmt.Sprintf("%s/failover-%d", opts.StateDir, n), Method: topology.MethodAuto,
		Interval: 200 * time.Millisecond, SlotTimeout: 20 * time.Second, Logger: log.Named("slotsync")}
	if !pair.External() {
		// PostgreSQL 15 and older: the state-file method restarts the standby it started.
		cfg.Statefile = statefile.Config{DataDir: pair.Standby.DataDir, Restarter: pair.Standby, MinRestartInterval: time.Second}
	}
	if eng, err = slotsync.New(cfg); err != nil {
		return nil, nil, err
	}
	gateCfg := cfg
	gateCfg.ReadOnly, gateCfg.Logger = true, hclog.NewNullLogger()
	if gate, err = slotsync.New(gateCfg); err != nil {
		eng.Close()
		return nil, nil, err
	}
	return eng, gate, nil
}

// live runs the live phase (writes, consumers acknowledging as they go, slotsync syncing) and
// the cutover, as an operator would: writes stop; the consumers, still connected, catch up and
// acknowledge; the gate opens with every copy exactly at its consumer's position; then the
// consumers disconnect (their offsets are what they acknowledged) and the gate is asked once
// more. A consumer that disconnects early can keep the gate closed: the primary slot's
// restart_lsn moves only on the consumer's confirmations (see the readiness rule 4). It returns
// how long the gate took to open after the writes stopped.
func live(
	ctx context.Context,
	pair *integration.Pair,
	eng, gate *slotsync.Engine,
	consumers []*Consumer,
	w *Writer,
	phase int,
	opts Options,
	log hclog.Logger,
) (time.Duration, error) {
	runCtx, stopSync := context.WithCancel(ctx)
	defer stopSync()
	syncDone := make(chan error, 1)
	go func() { syncDone <- eng.Run(runCtx, nil) }()
	writeCtx, stopWrites := context.WithCancel(ctx)
	writeDone := make(chan error, 1)
	go func() { writeDone <- w.Run(writeCtx, pair.Primary) }()
	consumeCtx, stopConsumers := context.WithCancel(ctx)
	var wg stdsync.WaitGroup
	errs := make(chan error, len(consumers))
	for _, c := range consumers {
		wg.Add(1)
		go func(c *Consumer) {
			defer wg.Done()
			if err := c.stream(consumeCtx, pair.Primary.ReplicationDSN(DB, true), phase, 0); err != nil {
				errs <- err
			}
		}(c)
	}
	log.Info("live phase", "duration_seconds", opts.Duration.Seconds())
	select {
	case <-ctx.Done():
	case <-time.After(opts.Duration):
	}
	start := time.Now()
	stopWrites()
	if err := <-writeDone; err != nil {
		stopConsumers()
		wg.Wait()
		return 0, err
	}
	readyErr := waitReady(ctx, pair, gate, opts.ReadyTimeout, true)
	stopConsumers()
	wg.Wait()
	close(errs)
	for err := range errs {
		return 0, err
	}
	if readyErr == nil {
		readyErr = waitReady(ctx, pair, gate, opts.ReadyTimeout, false)
	}
	if readyErr != nil {
		return 0, readyErr
	}
	took := time.Since(start)
	stopSync()
	<-syncDone
	return took, nil
}

// promote fails the primary over to the standby: kill -9, or a clean stop of a server the drill
// started.
func promote(ctx context.Context, pair *integration.Pair, kill bool, log hclog.Logger) error {
	if kill {
		log.Info("killing the primary with SIGKILL")
		if err := pair.Primary.Kill(ctx); err != nil {
			return err
		}
	} else if !pair.External() {
		if err := pair.Primary.Stop(ctx); err != nil {
			return err
		}
	}
	log.Info("promoting the standby")
	return pair.Promote(ctx)
}

// Resume writes on the new primary and has each consumer Resume (from its own offset, or from
// the slot's position for one that asks so), then
// judges what each got against what the new primary holds.
func Resume(
	ctx context.Context,
	pair *integration.Pair,
	consumers []*Consumer,
	w *Writer,
	durable []map[int]int,
	phase int,
	fv FailoverVerdict,
	log hclog.Logger,
) (FailoverVerdict, error) {
	fv.IssuedBefore = w.Issued()
	if err := w.Batch(ctx, pair.Standby, 5); err != nil {
		return fv, err
	}
	truth, err := TableIDs(ctx, pair.Standby)
	if err != nil {
		return fv, err
	}
	fv.Rows = len(truth)
	var target string
	if err := pair.Standby.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text", nil, &target); err != nil {
		return fv, err
	}
	until, err := pglogrepl.ParseLSN(target)
	if err != nil {
		return fv, err
	}
	fv.OK = true
	for i, c := range consumers {
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		c.resumeAfterPromotion()
		err := c.stream(rctx, pair.Standby.ReplicationDSN(DB, true), phase, until)
		cancel()
		sv := &fv.Slots[i]
		if err != nil {
			// The slot is missing or unusable on the new primary: everything since the offset is lost.
			log.Error("consumer cannot resume on the new primary", "slot", c.Slot, "error", err)
		}
		judge(sv, c.owed(truth), c.mayHave(), durable[i], c.receivedIn(phase), c.AckEvery > 0)
		if slotUnusable(err) {
			sv.CannotResume, sv.OK = err.Error(), false
		}
		if !sv.OK {
			sv.Trace = c.trace(append(append(append([]int(nil), sv.Ahead...), sv.Lost...), sv.Repeated...))
		}
		fv.OK = fv.OK && sv.OK
	}
	return fv, nil
}

// judge compares what the consumer got with what the new primary holds (truth: what the slot
// owes the consumer; may: what it may or may not carry, neither lost nor ahead; lagging: the
// consumer confirms only every few seconds, so a change received twice before the promotion is
// its own redelivery, counted apart).
func judge(sv *SlotVerdict, truth, may map[int]bool, durable map[int]int, after []int, lagging bool) {
	got := map[int]int{}
	for _, id := range after {
		got[id]++
		if durable[id] > 0 || got[id] > 1 {
			sv.Repeated = append(sv.Repeated, id)
		}
	}
	for id := range truth {
		if durable[id] == 0 && got[id] == 0 {
			sv.Lost = append(sv.Lost, id)
		}
	}
	for id, n := range durable {
		if !truth[id] && !may[id] {
			sv.Ahead = append(sv.Ahead, id)
		}
		switch {
		case n > 1 && lagging:
			sv.RepeatedBefore = append(sv.RepeatedBefore, id)
		case n > 1:
			sv.Repeated = append(sv.Repeated, id)
		}
	}
	sort.Ints(sv.Lost)
	sort.Ints(sv.Repeated)
	sort.Ints(sv.RepeatedBefore)
	sort.Ints(sv.Ahead)
	sv.Resumed = len(after)
	sv.OK = len(sv.Lost) == 0 && len(sv.Repeated) == 0 && len(sv.Ahead) == 0
}

func CountIDs(m map[int]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// waitReady waits until the standby has replayed everything and the gate says ready; with
// exact, also until every copy is exactly at its consumer's confirmed position.
func waitReady(ctx context.Context, pair *integration.Pair, gate *slotsync.Engine, timeout time.Duration, exact bool) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		if err := pair.WaitCaughtUp(ctx); err != nil {
			return err
		}
		rep, err := gate.Inspect(ctx)
		if err == nil && rep.Ready() && (!exact || inSync(rep)) {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			for _, s := range rep.Slots {
				if s.Gate && !s.Verdict.Ready {
					last = s.Name + ": " + s.Verdict.Detail
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the promotion gate did not open within %s: %s", timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func TableIDs(ctx context.Context, n *integration.Node) (map[int]bool, error) {
	conn, err := n.Connect(ctx, DB)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT id FROM events")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := map[int]bool{}
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids[id] = true
	}
	return ids, rows.Err()
}

// inSync reports whether every gated copy is exactly at its consumer's confirmed position.
func inSync(rep slotsync.Report) bool {
	for _, s := range rep.Slots {
		if s.Gate && s.Verdict.SyncLagBytes != 0 {
			return false
		}
	}
	return true
}

// slotUnusable says whether a consumer's failure to resume is its slot's: missing on the new
// primary (42704) or not usable there (55000: invalidated), not a drill or network error.
func slotUnusable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42704" || pgErr.Code == "55000")
}
