package sync

import (
	"context"
	"errors"
	"fmt"
	stdsync "sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// ErrUnsupportedMethod means the chosen method is not available for this pair in this build.
var ErrUnsupportedMethod = errors.New("method not available")

// Engine runs sync passes. It is not safe for concurrent use; Run and RunOnce serialise passes.
type Engine struct {
	cfg     Config
	log     hclog.Logger
	obs     observer
	newApp  func(method topology.Method) (applier, error)
	app     applier
	method  topology.Method
	sess    []applySession
	journal *Journal

	// lastStop is the last error that stopped Run: a later Run stopping for the same reason
	// (the daemon re-checks) does not log it again.
	lastStop   string
	restarting atomic.Bool
	failures   map[string]*slotFailure
	lastReason map[string]string
	// recopy: owned state-file copies to make again, with why; copies: how many times each
	// slot was copied without becoming READY (no restart loops).
	recopy       map[string]string
	copies       map[string]int
	lastWarnings string
	now          func() time.Time
}

type slotFailure struct {
	count   int
	lastErr string
	retryAt time.Time
}

// New validates cfg, loads the journal and prepares connections (opened lazily).
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	primary, standby, err := cfg.Endpoints()
	if err != nil {
		return nil, err
	}
	j, warning, err := LoadJournal(cfg.StateDir, cfg.ReadOnly)
	if err != nil {
		return nil, err
	}
	if warning != nil {
		cfg.Logger.Error(warning.Error())
	}
	e := newEngine(cfg, &pgObserver{primary: primary, standby: standby}, j)
	e.newApp = func(m topology.Method) (applier, error) {
		sqlm := &sqlMethod{primary: primary, standby: standby, log: cfg.Logger}
		switch m {
		case topology.MethodSQL:
			return sqlm, nil
		case topology.MethodStatefile:
			if err := checkDataDir(cfg.Statefile.DataDir); err != nil {
				return nil, err
			}
			return newStatefileMethod(sqlm, cfg.Statefile, cfg.Logger, &e.restarting), nil
		case topology.MethodNative:
			// The server syncs failover slots; slots that keep failover=false are copied as by
			// the sql method, and the opt-in actions go through the same sessions.
			return sqlm, nil
		}
		return nil, fmt.Errorf("%w: the %s method is not implemented yet; on PostgreSQL 16+ use --method sql", ErrUnsupportedMethod, m)
	}
	return e, nil
}

func newEngine(cfg Config, obs observer, j *Journal) *Engine {
	return &Engine{cfg: cfg, log: cfg.Logger, obs: obs, journal: j,
		failures: map[string]*slotFailure{}, lastReason: map[string]string{}, lastWarnings: "[]", now: time.Now,
		recopy: map[string]string{}, copies: map[string]int{}}
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
	e.obs.Close()
}

// SlotReport is the outcome of one pass for one slot.
type SlotReport struct {
	Name        string             `json:"name"`
	Database    string             `json:"database"`
	Plugin      string             `json:"plugin"`
	Action      Kind               `json:"action"`
	Reason      string             `json:"reason"`
	Error       string             `json:"error,omitempty"`
	ErrorClass  string             `json:"error_class,omitempty"`
	Incarnation string             `json:"incarnation,omitempty"`
	Primary     *lsncheck.Position `json:"primary,omitempty"`
	Copy        *lsncheck.Position `json:"copy,omitempty"`
	// WAL each side keeps for the slot: from its restart_lsn to the node's WAL end.
	PrimaryRetainedWALBytes int64  `json:"primary_retained_wal_bytes"`
	CopyRetainedWALBytes    int64  `json:"copy_retained_wal_bytes"`
	PrimaryWALStatus        string `json:"primary_wal_status,omitempty"`
	CopyWALStatus           string `json:"copy_wal_status,omitempty"`
	// Gate is false for slots the readiness gate ignores (temporary or unselected ones).
	Gate    bool             `json:"gate"`
	Verdict lsncheck.Verdict `json:"verdict"`
}

// Report is the outcome of one pass.
type Report struct {
	Started  time.Time       `json:"started"`
	Duration time.Duration   `json:"duration_ns"`
	Major    int             `json:"major"`
	Method   topology.Method `json:"method"`
	Slots    []SlotReport    `json:"slots"`
	// StandbyRestarts is how many times this pass restarted the standby (state-file method).
	StandbyRestarts int `json:"standby_restarts"`
	// Warnings are conditions that did not stop the pass but need attention.
	Warnings []topology.Problem `json:"warnings,omitempty"`
	Primary  NodeSummary        `json:"primary"`
	Standby  NodeSummary        `json:"standby"`
	// StandbyOnly lists the standby's logical slots that slotsync neither copies nor made.
	StandbyOnly []string `json:"standby_only_slots,omitempty"`
}

// NodeSummary is a node as the report shows it.
type NodeSummary struct {
	SystemID   string `json:"system_identifier"`
	VersionNum int    `json:"server_version_num"`
	InRecovery bool   `json:"in_recovery"`
	// WALEnd: the primary's insert position, the standby's newest flushed or replayed WAL.
	WALEnd    string `json:"wal_end"`
	ReplayLSN string `json:"replay_lsn,omitempty"`
}

func summarize(n topology.NodeInfo) NodeSummary {
	s := NodeSummary{SystemID: n.SystemID, VersionNum: n.VersionNum, InRecovery: n.InRecovery, WALEnd: n.WALEnd().String()}
	if n.InRecovery {
		s.ReplayLSN = n.ReplayLSN.String()
	}
	return s
}

// standbyOnly names standby slots that are neither on the primary nor in the journal.
func standbyOnly(snap Snapshot, standby map[string]topology.Slot, j *Journal) []string {
	var out []string
	for _, name := range sortedKeys(standby) {
		_, onPrimary := snap.Primary.Slots[name]
		_, owned := j.Slots[name]
		if !onPrimary && !owned {
			out = append(out, name)
		}
	}
	return out
}

// Ready reports whether every gated slot is READY.
func (r Report) Ready() bool {
	for _, s := range r.Slots {
		if s.Gate && !s.Verdict.Ready {
			return false
		}
	}
	return true
}

// RunOnce makes one pass: observe both nodes, plan, apply, and judge every slot. An error means
// the pass changed nothing (a failed observation, a journal that cannot be written) or must
// stop (Classify tells which); per-slot failures are in the report, not in the error.
func (e *Engine) RunOnce(ctx context.Context) (Report, error) {
	if e.cfg.ReadOnly {
		return Report{}, &topology.ConfigError{Field: "engine", Problem: "is read-only", Fix: "give a --state-dir and run without read-only mode"}
	}
	return e.pass(ctx, true)
}

// Inspect observes both nodes, plans and judges every slot, and changes nothing: the promotion
// gate and the status view. Each slot's Action says what a pass would do.
func (e *Engine) Inspect(ctx context.Context) (Report, error) { return e.pass(ctx, false) }

func (e *Engine) pass(ctx context.Context, apply bool) (Report, error) {
	rep := Report{Started: e.now()}
	octx, cancel := context.WithTimeout(ctx, e.cfg.ObserveTimeout)
	snap, err := e.obs.Observe(octx)
	cancel()
	if err != nil {
		return rep, err
	}
	if e.cfg.ReadOnly {
		// A read-only engine (check, status) follows the journal the daemon writes.
		if j, _, err := LoadJournal(e.cfg.StateDir, true); err == nil {
			e.journal = j
		}
	}
	rep.Warnings = snap.Warnings
	rep.Major = snap.Standby.Info.Major()
	rep.Primary, rep.Standby = summarize(snap.Primary.Info), summarize(snap.Standby.Info)
	if err := e.checkJournalCluster(snap.Primary.Info.SystemID); err != nil {
		return rep, err
	}
	method, err := e.chooseMethod(snap.Standby.Info, apply)
	if err != nil {
		return rep, err
	}
	rep.Method = method
	standbyInfo := snap.Standby.Info
	if method == topology.MethodNative && e.cfg.Native.Drive {
		standbyInfo = topology.NativeDrive(standbyInfo)
	}
	if err := topology.VerifyMethod(standbyInfo, method); err != nil {
		return rep, err
	}
	if method == topology.MethodNative || anyFailover(snap.Primary.Slots) {
		snap.Warnings = append(snap.Warnings, topology.NativeWarnings(snap.Primary.Info, snap.Standby.Info, snap.SyncedStandbySlots)...)
		rep.Warnings = snap.Warnings
	}

	started := snap.Primary.Info.StartedAt
	actions := Plan(PlanInput{Primary: snap.Primary, Standby: snap.Standby, Journal: e.journal, Select: e.cfg.Select, Method: method,
		Recopy: e.recopy, Native: e.cfg.Native,
		PrimaryRestarted: e.journal.PrimaryStartedAt != "" && e.journal.PrimaryStartedAt != started})
	results := make([]result, len(actions))
	after := snap.Standby.Slots
	if apply {
		e.logWarnings(snap.Warnings)
		actions = e.holdBackFailing(actions)
		actions = e.giveUpRepeatedCopies(actions)
		// Write-ahead: record the copies about to be made before making them, so a crash in
		// between leaves a journal entry (the copy is recreated) and never an orphan copy.
		if err := e.recordIntents(actions); err != nil {
			return rep, err
		}
		results, rep.StandbyRestarts = e.execute(ctx, actions)
		if err := e.recordResults(actions, results, started); err != nil {
			e.log.Error("journal not updated after the pass; it will be retried", "error", err)
		}
		if method == topology.MethodNative && e.cfg.Native.Drive {
			if err := e.obs.SyncSlots(ctx); err != nil {
				e.log.Warn("pg_sync_replication_slots() on the standby failed", "error", err)
			}
		}
		if e.anyChanged(actions, results) || (method == topology.MethodNative && e.cfg.Native.Drive) {
			if s, err := e.obs.StandbySlots(ctx, snap.Standby.Info.VersionNum); err == nil {
				after = s
			}
		}
	}
	rep.Slots = e.judge(snap, after, actions, results)
	rep.StandbyOnly = standbyOnly(snap, after, e.journal)
	for _, sr := range rep.Slots {
		if sr.Verdict.Ready {
			delete(e.copies, sr.Name)
		}
	}
	if apply {
		e.nudgeIfWaiting(ctx, snap, rep.Slots)
	}
	rep.Duration = e.now().Sub(rep.Started)
	return rep, nil
}

// nudgeIfWaiting asks the primary for a running-xacts record when a copy waits only for the
// primary slot's restart_lsn or catalog_xmin to pass it: those move only when the slot's decoder
// passes such a record (logged every 15 s on its own), so asking cuts the time to READY.
// At most once per pass, and only on 16+.
func (e *Engine) nudgeIfWaiting(ctx context.Context, snap Snapshot, slots []SlotReport) {
	if snap.Primary.Info.Major() < 16 || !snap.Primary.Info.CanLogStandbySnapshot {
		return
	}
	for _, s := range slots {
		if s.Gate && !s.Verdict.Ready && waitsOnlyForPrimaryHorizon(s.Verdict) {
			if err := e.obs.LogStandbySnapshot(ctx); err != nil {
				e.log.Debug("could not ask the primary for a running-xacts record", "error", err)
			}
			return
		}
	}
}

func waitsOnlyForPrimaryHorizon(v lsncheck.Verdict) bool {
	for _, r := range v.Reasons {
		if r != lsncheck.ReasonCopyRestartAhead && r != lsncheck.ReasonCopyCatalogXminAhead {
			return false
		}
	}
	return len(v.Reasons) > 0
}

// chooseMethod resolves the method once; applying also prepares the method's sessions.
func (e *Engine) chooseMethod(standby topology.NodeInfo, apply bool) (topology.Method, error) {
	major := standby.Major()
	if e.method == "" {
		m, err := topology.ChooseMethod(standby, e.cfg.Method)
		if err != nil {
			return "", err
		}
		e.method = m
	}
	if apply && e.app == nil {
		app, err := e.newApp(e.method)
		if err != nil {
			return "", err
		}
		e.app = app
		for i := 0; i < e.cfg.Workers; i++ {
			e.sess = append(e.sess, app.Session())
		}
		e.log.Info("method chosen", "method", e.method, "major", major)
	}
	return e.method, nil
}

// logWarnings logs the pair's warnings when they change, not every pass.
func (e *Engine) logWarnings(ws []topology.Problem) {
	key := fmt.Sprint(ws)
	if key == e.lastWarnings {
		return
	}
	e.lastWarnings = key
	for _, w := range ws {
		e.log.Warn(w.Node+": "+w.Issue, "check", w.Check, "fix", w.Fix)
	}
	if len(ws) == 0 {
		e.log.Info("pair healthy again")
	}
}

func (e *Engine) checkJournalCluster(systemID string) error {
	switch e.journal.SystemID {
	case systemID:
		return nil
	case "":
		e.journal.SystemID = systemID
		return nil
	}
	return &topology.ConfigError{Field: "state directory", Problem: fmt.Sprintf("%s belongs to another cluster (system identifier %s, this pair is %s)",
		e.cfg.StateDir, e.journal.SystemID, systemID), Fix: "give each cluster its own --state-dir"}
}

// holdBackFailing turns actions on slots in failure backoff into skips.
func (e *Engine) holdBackFailing(actions []Action) []Action {
	now := e.now()
	for i, a := range actions {
		if f := e.failures[a.Slot]; f != nil && a.Changes() && now.Before(f.retryAt) {
			actions[i].Kind = KindSkip
			actions[i].Reason = fmt.Sprintf("retrying after %s: last attempt failed (%d in a row): %s",
				f.retryAt.Sub(now).Round(time.Second), f.count, f.lastErr)
		}
	}
	return actions
}

// giveUpRepeatedCopies stops copying a slot by state file after MaxAttempts copies that did
// not become READY: restarting the standby again would only loop (lesson 1). A restart of
// slotsync, or the slot becoming READY, resets the count.
func (e *Engine) giveUpRepeatedCopies(actions []Action) []Action {
	if e.method != topology.MethodStatefile {
		return actions
	}
	for i, a := range actions {
		if (a.Kind == KindCreate || a.Kind == KindRecreate) && e.copies[a.Slot] >= e.cfg.Statefile.MaxAttempts {
			actions[i].Kind = KindSkip
			actions[i].Reason = fmt.Sprintf("gave up after %d copies that did not become READY (last reason to copy: %s); fix the cause and restart slotsync",
				e.copies[a.Slot], a.Reason)
		}
	}
	return actions
}

func (e *Engine) recordIntents(actions []Action) error {
	var changed bool
	next := e.journal.clone()
	for _, a := range actions {
		if a.Kind != KindCreate && a.Kind != KindRecreate {
			continue
		}
		id, err := NewIncarnationID()
		if err != nil {
			return err
		}
		now := e.now().UTC()
		if old := next.Slots[a.Slot]; old != nil && a.Kind == KindCreate && old.Identity == a.Primary.Identity {
			// The copy vanished but the slot is the same incarnation: keep its ID.
			id = old.Incarnation
		}
		next.Slots[a.Slot] = &Entry{Incarnation: id, Identity: a.Primary.Identity, FirstSeen: a.Primary.Position,
			Primary: a.Primary.Position, Method: string(e.method), CreatedAt: now, UpdatedAt: now}
		changed = true
	}
	if !changed {
		return nil
	}
	if err := next.Save(e.cfg.StateDir); err != nil {
		return fmt.Errorf("record new copies in the journal (nothing was changed): %w", err)
	}
	e.journal = next
	return nil
}

// result is what happened to one action.
type result struct {
	err error
	end lsncheck.LSN // Advance: where the copy is now
}

// flusher is a method that batches creations until the end of a pass (the state-file method
// installs them in one standby restart).
type flusher interface {
	Flush(ctx context.Context) (map[string]error, bool)
}

// execute carries out the changing actions on Workers sessions, each slot under its own
// timeout, so one slow or failing slot never blocks the others. It returns how many times the
// standby was restarted.
func (e *Engine) execute(ctx context.Context, actions []Action) ([]result, int) {
	results := make([]result, len(actions))
	work := make(chan int)
	var wg stdsync.WaitGroup
	for w := 0; w < len(e.sess); w++ {
		wg.Add(1)
		go func(sess applySession) {
			defer wg.Done()
			for i := range work {
				sctx, cancel := context.WithTimeout(ctx, e.cfg.SlotTimeout)
				results[i] = e.apply(sctx, sess, actions[i])
				cancel()
			}
		}(e.sess[w])
	}
	for i, a := range actions {
		if a.Kind == KindCreate || a.Kind == KindAdvance || a.Kind == KindRecreate || a.Kind == KindDrop || a.Kind == KindSetFailover {
			work <- i
		}
	}
	close(work)
	wg.Wait()
	restarts := 0
	if f, ok := e.app.(flusher); ok {
		outcomes, restarted := f.Flush(ctx)
		if restarted {
			restarts++
			// Every standby connection died with the restart: drop them all now rather than
			// failing the next statement on each.
			for _, s := range e.sess {
				s.Close()
			}
			e.obs.Reset()
		}
		for i, a := range actions {
			if results[i].err == errStaged {
				results[i].err = outcomes[a.Slot]
				if results[i].err == nil {
					e.copies[a.Slot]++
					delete(e.recopy, a.Slot)
				}
			}
		}
	}
	for i, a := range actions {
		if a.Kind == KindAdvance && isWALRemoved(results[i].err) && e.method == topology.MethodStatefile {
			e.recopy[a.Slot] = "the standby no longer has the WAL from the copy's restart_lsn: copying it again"
		}
		e.logOutcome(a, results[i])
	}
	return results, restarts
}

func (e *Engine) apply(ctx context.Context, sess applySession, a Action) result {
	switch a.Kind {
	case KindCreate:
		return result{err: sess.Create(ctx, a.Primary)}
	case KindRecreate:
		if err := sess.Drop(ctx, a.Slot, a.CopyDatabase); err != nil && !isUndefinedObject(err) {
			return result{err: err}
		}
		return result{err: sess.Create(ctx, a.Primary)}
	case KindAdvance:
		end, err := sess.Advance(ctx, a.Slot, a.Primary.Database, a.Target)
		return result{end: end, err: err}
	case KindDrop:
		return result{err: sess.Drop(ctx, a.Slot, a.Identity.Database)}
	case KindSetFailover:
		fs, ok := sess.(interface {
			SetFailover(ctx context.Context, name, database string) error
		})
		if !ok {
			return result{err: fmt.Errorf("set failover on slot %q: not supported by this method", a.Slot)}
		}
		return result{err: fs.SetFailover(ctx, a.Slot, a.Primary.Database)}
	}
	return result{}
}

// logOutcome logs what a pass did: changes once each, failures once per distinct error,
// waiting states once per distinct reason; nothing repeats every pass.
func (e *Engine) logOutcome(a Action, r result) {
	var deferred *deferredError
	if errors.As(r.err, &deferred) {
		if e.lastReason[a.Slot] != deferred.why {
			e.lastReason[a.Slot] = deferred.why
			e.log.Info("slot copy waits", "slot", a.Slot, "reason", deferred.why)
		}
		return
	}
	if r.err != nil {
		f := e.failures[a.Slot]
		if f == nil {
			f = &slotFailure{}
			e.failures[a.Slot] = f
		}
		f.count++
		backoff := min(e.cfg.Interval<<min(f.count, 10), e.cfg.MaxBackoff)
		f.retryAt = e.now().Add(backoff)
		if msg := r.err.Error(); msg != f.lastErr {
			f.lastErr = msg
			e.log.Warn("slot action failed", "slot", a.Slot, "action", a.Kind, "error", msg,
				"class", Classify(r.err), "retry_in", backoff)
		}
		return
	}
	if f := e.failures[a.Slot]; f != nil && a.Changes() {
		e.log.Info("slot recovered", "slot", a.Slot, "after_failures", f.count)
		delete(e.failures, a.Slot)
	}
	switch a.Kind {
	case KindCreate, KindRecreate, KindDrop, KindForget, KindSetFailover:
		e.log.Info("slot "+string(a.Kind), "slot", a.Slot, "reason", a.Reason)
		delete(e.lastReason, a.Slot)
	case KindAdvance:
		e.log.Debug("slot advanced", "slot", a.Slot, "to", r.end)
		delete(e.lastReason, a.Slot)
	case KindNone:
		// Waiting states carry moving LSNs: at debug level, or they would repeat every pass.
		e.log.Debug("slot unchanged", "slot", a.Slot, "reason", a.Reason)
	case KindSkip:
		if e.failures[a.Slot] != nil {
			return // held back after a failure that was logged already
		}
		if e.lastReason[a.Slot] != a.Reason {
			e.lastReason[a.Slot] = a.Reason
			e.log.Info("slot skipped", "slot", a.Slot, "reason", a.Reason)
		}
	}
}

// recordResults updates the journal after the pass, in one atomic write.
func (e *Engine) recordResults(actions []Action, results []result, primaryStartedAt string) error {
	next := e.journal.clone()
	changed := false
	if primaryStartedAt != "" && next.PrimaryStartedAt != primaryStartedAt {
		next.PrimaryStartedAt, changed = primaryStartedAt, true
	}
	for i, a := range actions {
		if a.Rebase && a.Kind != KindAdvance {
			if ent := next.Slots[a.Slot]; ent != nil {
				ent.Primary, changed = a.Primary.Position, true
			}
		}
		if results[i].err != nil {
			continue
		}
		switch a.Kind {
		case KindAdvance:
			if ent := next.Slots[a.Slot]; ent != nil {
				ent.Primary, ent.UpdatedAt = a.Primary.Position, e.now().UTC()
				ent.WALVerified = true // the advance read the WAL from the copy's restart_lsn
				changed = true
			}
		case KindDrop, KindForget:
			delete(next.Slots, a.Slot)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := next.Save(e.cfg.StateDir); err != nil {
		return err
	}
	e.journal = next
	return nil
}

func (e *Engine) anyChanged(actions []Action, results []result) bool {
	for i, a := range actions {
		if a.Kind != KindForget && a.Changes() && results[i].err == nil {
			return true
		}
	}
	return false
}

// judge builds the per-slot report with each slot's readiness verdict.
func (e *Engine) judge(snap Snapshot, standbySlots map[string]topology.Slot, actions []Action, results []result) []SlotReport {
	var out []SlotReport
	for i, a := range actions {
		sr := SlotReport{Name: a.Slot, Database: a.Identity.Database, Plugin: a.Identity.Plugin, Action: a.Kind, Reason: a.Reason}
		var deferred *deferredError
		if err := results[i].err; errors.As(err, &deferred) {
			sr.Reason = deferred.why // waiting, not failing
		} else if err != nil {
			sr.Error, sr.ErrorClass = err.Error(), Classify(err).String()
		}
		if ent := e.journal.Slots[a.Slot]; ent != nil {
			sr.Incarnation = ent.Incarnation
		}
		ps, onPrimary := snap.Primary.Slots[a.Slot]
		cp, hasCopy := standbySlots[a.Slot]
		if hasCopy {
			pos := cp.Position
			sr.Copy = &pos
			sr.CopyWALStatus = cp.WALStatus
			sr.CopyRetainedWALBytes = retained(snap.Standby.Info.WALEnd(), cp.RestartLSN)
		}
		if onPrimary {
			sr.PrimaryWALStatus = ps.WALStatus
			sr.PrimaryRetainedWALBytes = retained(snap.Primary.Info.WALEnd(), ps.RestartLSN)
		}
		if onPrimary && !ps.Temporary {
			pos := ps.Position
			sr.Primary = &pos
			sr.Gate = true
			ent := e.journal.Slots[a.Slot]
			sr.Verdict = lsncheck.Readiness(lsncheck.ReadinessInput{
				Primary: ps.Seen(), PrimaryInvalidated: ps.Invalidated,
				CopyExists: hasCopy, Copy: cp.Seen(), CopyInvalidated: cp.Invalidated, CopyWALAvailable: cp.WALAvailable(),
				CopyTemporary: cp.Temporary, CopySynced: cp.Synced, RequireSynced: ps.Failover,
				StandbyWALEnd:  snap.Standby.Info.WALEnd(),
				RequireHorizon: e.method == topology.MethodStatefile,
				StandbyHorizon: snap.Physical.CatalogHorizon(),
				WALVerified:    ent != nil && ent.WALVerified,
			})
		}
		out = append(out, sr)
	}
	return out
}

// Run makes passes every Interval until ctx ends or an error needs a human. Failed passes are
// retried with exponential backoff up to MaxBackoff, logging each distinct error once.
// It returns nil when ctx ends, topology.ErrPromoted when the standby was promoted, or the
// error that needs a human.
func (e *Engine) Run(ctx context.Context, onPass func(Report, error)) error {
	wait := time.Duration(0)
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		rep, err := e.RunOnce(ctx)
		if onPass != nil {
			onPass(rep, err)
		}
		switch {
		case err == nil:
			if e.lastStop != "" {
				e.log.Info("the problem that stopped syncing is gone; syncing again")
				e.lastStop = ""
			}
			if lastErr != "" {
				e.log.Info("sync passes succeed again")
				lastErr = ""
			}
			wait = e.cfg.Interval
		case ctx.Err() != nil:
			return nil
		case Classify(err) == Stop:
			if msg := err.Error(); msg != e.lastStop {
				e.lastStop = msg
				if errors.Is(err, topology.ErrPromoted) {
					e.log.Warn(msg)
				} else {
					e.log.Error("stopping: this needs a human", "error", msg)
				}
			}
			return err
		default:
			wait = min(max(2*wait, e.cfg.Interval), e.cfg.MaxBackoff)
			if msg := err.Error(); msg != lastErr {
				lastErr = msg
				e.log.Warn("sync pass failed; nothing was changed; retrying", "error", msg, "retry_in", wait)
			}
		}
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

// retained is the WAL a slot holds back on a node (0 when unknown).
func retained(end, restart lsncheck.LSN) int64 {
	if restart == 0 || end < restart {
		return 0
	}
	return lsncheck.Bytes(end, restart)
}
