package sync

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/slotsync/slotsync/internal/failpoint"

	"github.com/hashicorp/go-hclog"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/topology"
)

// statementMargin is how much longer than --slot-timeout a statement of the method may run on
// the standby before the server ends it (method.Deps.StatementTimeout).
const statementMargin = 10 * time.Second

// ErrUnsupportedMethod means the chosen method is not available for this pair in this build.
var ErrUnsupportedMethod = errors.New("method not available")

// Engine runs sync passes. It is not safe for concurrent use; Run and RunOnce serialise passes.
type Engine struct {
	cfg Config
	log hclog.Logger
	// obs reads the nodes; ctl changes them beside the methods (one pgObserver in production).
	obs nodeReader
	ctl nodeControl
	// methods makes the method chosen; recoverer finishes what a crash interrupted (both nil
	// in read-only engines).
	methods   func(topology.Method) (method.Method, error)
	recoverer method.Recoverer
	// impl is the method chosen (method names it, traits are its rules), made once a pass applies.
	impl    method.Method
	method  topology.Method
	traits  method.Traits
	sess    []method.Session
	journal *Journal
	// seen: the note of the last pass with the primary (seen.go), written by an applying
	// engine, read from the state directory by a read-only one.
	seen *GateSeen

	restarting atomic.Bool
	// mem is what the engine keeps from one pass to the next (memory.go).
	mem memory
	// logged: what the engine said once and does not say again each pass; live: when it
	// began and last saw the standby stream from its primary (liveness.go); watching: the
	// watch between passes (watch.go); writes: how the journal's writes fare (journal.go).
	logged   logged
	live     liveness
	watching watching
	writes   journalWrites
	// driving: the last pass drove the server's slot sync (--native-drive): the next one runs
	// pg_sync_replication_slots() before it reads the nodes, so that the copies it judges are
	// read before the primary slots they are judged against (rule 4).
	driving bool
	// nudge: the running-xacts records asked of the primary for the server's slot sync
	// (nudge.go).
	nudge nudgeState
	// lock makes this engine the state directory's only writer.
	lock  *stateLock
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	// stillFailingEvery: how often a pass failing with the same error is logged again.
	stillFailingEvery time.Duration
	// wake asks Run for a full pass now, on new connections (Wake).
	wake chan struct{}
}

// Wake asks a running engine for a full pass now, on new connections: the primary found again
// from the standby's primary_conninfo (unless pinned), password files read again. It is what a
// reload (SIGHUP) means here; settings given by flags change with a restart. Safe from any
// goroutine; a Wake while no Run waits is taken by the next one.
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// logged is what the engine said once, so as not to say it again each pass.
type logged struct {
	// lastStop is the last error that stopped Run: a later Run stopping for the same reason
	// (the daemon re-checks) does not log it again.
	lastStop string
	// warnings: the last pass's prerequisite warnings.
	warnings string
	// role is the local node's role at the last pass that could tell.
	role Role
	// withoutPrimary: the last judgement was made without the primary.
	withoutPrimary bool
	// nothingSelected: the last pass's selection matched none of the primary's slots.
	nothingSelected bool
	// standbySlotsErr: the last failure to set synchronized_standby_slots.
	standbySlotsErr string
	// seenFailing: the last note of a pass could not be written (seen.go).
	seenFailing bool
}

// liveness is when the engine made its first pass and when a pass last saw the standby stream
// from its primary (liveness.go, primaryLost).
type liveness struct {
	started, lastStreaming time.Time
	// passTook: how long the last pass with the primary took from its observation to its
	// record (before the first: an interval), for the windows the next record grants
	// (windowTook).
	passTook time.Duration
}

// watching is the watch between passes (watch.go): how often it looks now, and how many
// advances it made.
type watching struct {
	every    time.Duration
	advances int
}

// journalWrites: what the last journal write that failed was for ("" once one succeeds), and
// how many writes failed since the engine started.
type journalWrites struct {
	failing string
	errors  int
}

// New validates cfg, loads the journal and prepares connections (opened lazily).
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case failpoint.Mutant("primary-gone-after-1ms"):
		cfg.PrimaryGoneAfter = time.Millisecond // the fault explorer's mutants (test builds only)
	case failpoint.Mutant("primary-gone-after-5s"):
		cfg.PrimaryGoneAfter = 5 * time.Second
	}
	primary, standby, err := cfg.Endpoints()
	if err != nil {
		return nil, err
	}
	var lock *stateLock
	if !cfg.ReadOnly {
		if lock, err = lockStateDir(cfg.StateDir); err != nil {
			return nil, err
		}
	}
	j, warning, err := LoadJournal(cfg.StateDir, cfg.ReadOnly)
	if err != nil {
		lock.release()
		return nil, err
	}
	if warning != nil {
		cfg.Logger.Error(warning.Error())
	}
	link := cfg.primaryLink(primary)
	e := newEngine(cfg, &pgObserver{primary: link, standby: standby, connectTimeout: cfg.PrimaryConnectTimeout,
		ownStandbySlots: cfg.Native.ManageStandbySlots, silentBound: cfg.SilentReceiverBound}, j)
	e.lock = lock
	e.seen = LoadGateSeen(cfg.StateDir)
	// A statement on the standby outlives --slot-timeout (the client's bound) only when the
	// client's cancel cannot reach it: then the server's own bound ends it a little later.
	deps := method.Deps{Primary: link, Standby: standby, Log: cfg.Logger, Restarting: &e.restarting, StateDir: cfg.StateDir,
		StatementTimeout: cfg.SlotTimeout + statementMargin}
	e.methods = func(m topology.Method) (method.Method, error) { return newMethod(m, cfg, deps) }
	e.recoverer = newRecoverer(cfg, deps)
	return e, nil
}

func newEngine(cfg Config, obs observer, j *Journal) *Engine {
	return &Engine{cfg: cfg, log: cfg.Logger, obs: obs, ctl: obs, journal: j, watching: watching{every: cfg.WatchInterval},
		live: liveness{passTook: cfg.Interval}, mem: newMemory(), logged: logged{warnings: "[]"}, wake: make(chan struct{}, 1),
		now: time.Now, sleep: sleepCtx, stillFailingEvery: 10 * time.Minute}
}

// RestartInProgress reports whether the state-file method is restarting the standby now: a
// process stopping must wait for it, or the standby could be left down.
func (e *Engine) RestartInProgress() bool { return e.restarting.Load() }

// Close releases every connection.
func (e *Engine) Close() {
	for _, s := range e.sess {
		s.Close()
	}
	e.sess = nil
	if c, ok := e.impl.(method.Closer); ok {
		c.Close()
	}
	e.obs.Close()
	e.lock.release()
}

// RunOnce makes one pass: observe both nodes, plan, apply, and judge every slot. An error means
// the pass changed nothing (a failed observation, a journal that cannot be written) or must
// stop (Classify tells which); per-slot failures are in the report, not in the error.
func (e *Engine) RunOnce(ctx context.Context) (Report, error) {
	if e.cfg.ReadOnly {
		return Report{}, &topology.ConfigError{Field: "engine", Problem: "is read-only", Fix: "give a --state-dir and run without read-only mode"}
	}
	rep, err := e.pass(ctx, true)
	rep.Journal = e.journalHealth()
	if err != nil && !failpoint.Mutant("watch-unbound") {
		// The watch never outlives what the last full pass verified.
		e.mem.forgetWatch()
	}
	return rep, err
}

// Inspect observes both nodes, plans and judges every slot, and changes nothing: the promotion
// gate and the status view. Each slot's Action says what a pass would do.
func (e *Engine) Inspect(ctx context.Context) (Report, error) { return e.pass(ctx, false) }

// observe begins a pass: what a crash interrupted is finished first (applying passes), both
// nodes are observed, and a read-only engine (check, status) follows the journal the daemon
// writes.
func (e *Engine) observe(ctx context.Context, apply bool) (Observation, error) {
	if e.live.started.IsZero() {
		// The first pass drives the server's sync before it knows the method for sure: --native-drive
		// with --method native (a single pass, run --once, would otherwise never drive it).
		e.live.started, e.driving = e.now(), drivesServerSync(e.cfg)
	}
	if apply && e.recoverer != nil && e.recoverer.Recover(ctx) {
		e.obs.Reset()
	}
	if apply && e.driving {
		// Before the observation: the server copies each primary slot as it is now, which a
		// primary slot read earlier in the pass may be behind (a consumer confirmed meanwhile).
		if err := e.ctl.SyncSlots(ctx); errors.Is(err, ErrSyncSlotsUnfinished) {
			e.log.Debug("pg_sync_replication_slots() stopped at its bound: the server waits to sync some slots (check says why)", "error", err)
		} else if err != nil {
			e.log.Warn("pg_sync_replication_slots() on the standby failed", "error", err)
		}
	}
	e.driving = false
	octx, cancel := context.WithTimeout(ctx, e.cfg.ObserveTimeout)
	obs, err := e.obs.Observe(octx)
	cancel()
	e.noteStreaming(obs, err, apply)
	if e.cfg.ReadOnly {
		dir := e.cfg.StateDir
		j, seen := readRecordAndSeen(func() *Journal {
			j, _, err := LoadJournal(dir, true)
			if err != nil {
				return nil
			}
			return j
		}, func() *GateSeen { return LoadGateSeen(dir) })
		if j != nil {
			e.journal = j
		}
		e.seen = seen
	}
	return obs, err
}

func (e *Engine) pass(ctx context.Context, apply bool) (Report, error) {
	rep := Report{Started: e.now()}
	obs, err := e.observe(ctx, apply)
	switch {
	case err != nil && primaryGone(err) && obs.Standby.Info.VersionNum != 0:
		return e.judgeWithoutPrimary(ctx, rep, obs, err, apply)
	case err != nil:
		if why := feedbackStopped(err); why != "" && apply {
			e.voidAllMarks(why)
		}
		return rep, err
	case !obs.Standby.Info.InRecovery:
		return e.asPrimary(ctx, rep, obs, apply)
	}
	e.noteRole(RoleStandby)
	if e.logged.withoutPrimary {
		e.log.Info("the primary answers again: the gate judges with it")
		e.logged.withoutPrimary = false
	}
	if obs.PrimaryChanged && apply {
		e.log.Info("following the standby's primary_conninfo to its primary", "primary", obs.PrimaryAddr, "logs_in_as", obs.PrimaryUser,
			"system_identifier", obs.Primary.Info.SystemID, "timeline", obs.Primary.Info.Timeline)
	}
	rep.Role = RoleStandby
	rep.Warnings = obs.Warnings
	rep.Major = obs.Standby.Info.Major()
	rep.Primary, rep.Standby = summarize(obs.Primary.Info), summarize(obs.Standby.Info)
	if err := e.checkJournalCluster(obs.Primary.Info.SystemID); err != nil {
		return rep, err
	}
	if e.cfg.ForPromotion && !apply && !failpoint.Mutant("for-promotion-unchecked") {
		return rep, writablePrimaryAlive(obs)
	}
	e.noteHorizonGap(obs, apply)
	method, err := e.chooseMethod(obs.Standby.Info, apply)
	if err != nil {
		return rep, err
	}
	rep.Method = method
	drive := e.traits.ServerSyncs && e.cfg.Native.Drive
	if err := e.verifyMethod(&obs, method, drive); err != nil {
		return rep, err
	}
	e.driving = apply && drive
	if e.driving {
		e.nudgeServerSync(ctx, obs)
	}
	rep.Warnings = obs.Warnings
	if apply && e.cfg.Native.ManageStandbySlots && rep.Major >= 17 {
		e.manageStandbySlots(ctx, true, StandbySlotsInput{Setting: obs.Primary.Info.SynchronizedStandbySlots, Listed: obs.SyncedStandbySlots,
			Own: obs.Standby.Info.PrimarySlotName, OwnStreaming: obs.Physical.Active, GoneAfter: e.cfg.Native.StandbyGoneAfter})
	}

	if apply {
		e.noteChangesUnder(obs.Standby)
	}
	actions := Plan(e.planInput(ctx, obs, apply))
	results := make([]result, len(actions))
	after, fresh := obs.Standby.Slots, true
	if apply {
		var err error
		if results, rep.StandbyRestarts, after, fresh, err = e.applyActions(ctx, obs, actions); err != nil {
			return rep, err
		}
		e.markProtection(obs, after, madeNow(actions))
	}
	rep.Slots = e.judge(obs, after, actions, results, apply)
	if e.cfg.ReadOnly && (e.cfg.StateDir == "" || len(e.journal.Slots) == 0 && e.journal.Gate == nil) {
		withoutJournal(rep.Slots)
	}
	rep.StandbyOnly = standbyOnly(obs, after, e.journal)
	rep.Selected, rep.Unselected = e.cfg.Select.Unselected(obs.Primary.Slots)
	e.noteSelection(rep, apply)
	if apply {
		e.noteReadiness(rep)
		e.recordGate(obs, method, rep.Slots)
		e.remember(obs, actions, results, rep.Slots, after, fresh)
	}
	rep.Duration = e.now().Sub(rep.Started)
	return rep, nil
}

// applyActions carries out a pass's actions: the standby checked before anything is written or
// restarted, the copies about to be made recorded first (write-ahead: a crash in between leaves a
// journal entry, the copy made again, never an orphan copy), the actions run and their results
// recorded; the standby's slots as they are after it (read again when an action changed them;
// fresh: that read succeeded), and how often the standby was restarted. An error means nothing
// was run.
func (e *Engine) applyActions(ctx context.Context, obs Observation, actions []Action) (
	results []result, restarts int, after map[string]topology.Slot, fresh bool, err error) {
	if err := e.checkStandby(obs.Standby.Info); err != nil {
		return nil, 0, nil, false, err
	}
	e.logWarnings(obs.Warnings)
	exact, err := e.recordIntents(actions, obs.Primary.Info.Timeline, obs.Primary.Info.CurrentLSN)
	if err != nil {
		return nil, 0, nil, false, err
	}
	if err := failpoint.Hit("engine.intents-written"); err != nil {
		return nil, 0, nil, false, err
	}
	results, restarts = e.execute(ctx, obs, actions)
	_ = failpoint.Hit("engine.actions-done")
	if err := e.recordResults(actions, results, obs.Primary.Info.StartedAt, obs.Primary.Info.Timeline, exact); err != nil {
		e.log.Error("journal not updated after the pass; it will be retried", "error", err)
	}
	after, fresh = obs.Standby.Slots, true
	if e.anyChanged(actions, results) {
		s, err := e.obs.StandbySlots(ctx, obs.Standby.Info.VersionNum)
		if err == nil {
			after = s
		}
		fresh = err == nil
	}
	return results, restarts, after, fresh, nil
}

// planInput is what the plan of a pass decides from: the observation, the journal, the memory
// and the configuration.
func (e *Engine) planInput(ctx context.Context, obs Observation, apply bool) PlanInput {
	started := obs.Primary.Info.StartedAt
	return PlanInput{
		History:       e.history(ctx, obs.Primary.Info.Timeline),
		Prepared:      obs.Prepared,
		Primary:       obs.Primary,
		Standby:       obs.Standby,
		Journal:       e.journal,
		Select:        e.cfg.Select,
		Traits:        e.traits,
		Recopy:        e.mem.recopy,
		Native:        e.cfg.Native,
		DropLeftAlone: e.cfg.DropLeftAlone,
		AdoptCopies:   e.cfg.AdoptCopies,
		AdvanceStep:   e.cfg.AdvanceStep,
		PrimaryRestarted: e.journal.PrimaryStartedAt != "" && e.journal.PrimaryStartedAt != started ||
			lsncheck.RestartLSNMayRegress(obs.Primary.Info.VersionNum),
		Failing:        e.backoffs(apply),
		Now:            e.now(),
		Copies:         e.mem.copies,
		MaxCopies:      e.cfg.Statefile.MaxAttempts,
		ExactCopyAfter: exactCopyAfter(e.cfg, e.method),
	}
}

// withoutJournal says in every NOT READY verdict that it was judged without the daemon's journal:
// what a copy's catalog protection, WAL and snapshot checks rest on is in it, and without it the
// reasons send the reader the wrong way (an operators review, finding 8).
func withoutJournal(slots []SlotReport) {
	for i := range slots {
		if v := &slots[i].Verdict; slots[i].Gate && !v.Ready {
			v.Detail = "judged without the daemon's journal (give check the daemon's --state-dir; what follows may only be that): " + v.Detail
		}
	}
}

// noteSelection logs, once per change, a selection that matches none of the primary's logical
// slots (an applying engine only: check and doctor say it in their answer).
func (e *Engine) noteSelection(rep Report, apply bool) {
	if !apply || rep.NothingSelected() == e.logged.nothingSelected {
		return
	}
	e.logged.nothingSelected = rep.NothingSelected()
	if p := topology.SelectionProblem(rep.Selected, rep.Unselected); p != nil {
		e.log.Error(p.Issue, "fix", p.Fix)
	} else {
		e.log.Info("the selection matches the primary's slots again", "selected", rep.Selected)
	}
}

// checkStandby asks the method whether what it writes outside SQL is the observed standby's.
func (e *Engine) checkStandby(standby topology.NodeInfo) error {
	if c, ok := e.impl.(method.StandbyChecker); ok {
		return c.CheckStandby(standby)
	}
	return nil
}

// history reads the primary's timeline history when a journal entry was synced on another
// timeline (after a failover, a demoted primary's own slots); nil when none was. A history that
// cannot be read is empty: those copies are made again (rule 2 beyond a fork).
func (e *Engine) history(ctx context.Context, tli int) map[int]lsncheck.LSN {
	need := false
	for _, ent := range e.journal.Slots {
		need = need || ent.Timeline != 0 && tli != 0 && ent.Timeline != tli
	}
	if !need {
		return nil
	}
	h, err := e.obs.History(ctx, tli)
	if err != nil {
		e.log.Warn("cannot read the primary's timeline history: copies synced on another timeline are made again",
			"timeline", tli, "error", err, "fix", "the slotsync role needs the REPLICATION attribute on the primary")
		return map[int]lsncheck.LSN{}
	}
	return h
}

// logWarnings logs the pair's warnings when they change, not every pass.
func (e *Engine) logWarnings(ws []topology.Problem) {
	key := fmt.Sprint(ws)
	if key == e.logged.warnings {
		return
	}
	e.logged.warnings = key
	for _, w := range ws {
		e.log.Warn(w.Node+": "+w.Issue, "check", w.Check, "fix", w.Fix)
	}
	if len(ws) == 0 {
		e.log.Info("pair healthy again")
	}
}

func anyFailover(slots map[string]topology.Slot) bool {
	for _, s := range slots {
		if s.Failover {
			return true
		}
	}
	return false
}
