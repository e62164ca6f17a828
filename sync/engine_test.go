package sync

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/topology"
)

func twoNodeSnapshot() Observation {
	s := newScenario().primary(slot(idA, 0x1000000, 0x2000000, 700))
	s.in.Primary.Info.SystemID, s.in.Standby.Info.SystemID = "42", "42"
	s.in.Standby.Info.WALLevel, s.in.Standby.Info.CanReplicate = "logical", true
	s.in.Standby.Info.ReplayedCommitAge = -1 // no commit replayed since it started, unless a test says so
	return Observation{Primary: s.in.Primary, Standby: s.in.Standby}
}

func TestFailedObservationChangesNothing(t *testing.T) {
	// The primary is unreachable or its slot list came back partial: the observer errors and
	// nothing is planned or applied, and the journal is not written.
	app := &simMethod{}
	obs := &simObserver{err: &topology.ConnError{Role: "primary", Err: errors.New("connection refused")}}
	e := testEngine(t, obs, app)
	e.journal.Slots["owned"] = &Entry{Incarnation: "01", Identity: lsncheck.Identity{Name: "owned", Database: "app", Plugin: "pgoutput"}}
	_, err := e.RunOnce(context.Background())
	if err == nil || Classify(err) != Retry {
		t.Fatalf("want a retryable error, got %v (%v)", err, Classify(err))
	}
	if len(app.calls) != 0 {
		t.Fatalf("applied %v after a failed observation", app.calls)
	}
	if _, err := os.Stat(filepath.Join(e.cfg.StateDir, JournalFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("journal written after a failed observation: %v", err)
	}
}

func TestJournalWriteFailureChangesNothing(t *testing.T) {
	// The state directory cannot be written: the new copy is not made (it would be an orphan
	// slotsync could never prove it owns).
	app := &simMethod{}
	e := testEngine(t, &simObserver{snap: twoNodeSnapshot()}, app)
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e.cfg.StateDir = filepath.Join(blocker, "state") // a path under a regular file: every write fails
	_, err := e.RunOnce(context.Background())
	if err == nil || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("want the journal error, got %v", err)
	}
	if len(app.calls) != 0 {
		t.Fatalf("applied %v without a journal", app.calls)
	}
	if len(e.journal.Slots) != 0 {
		t.Fatalf("in-memory journal changed: %+v", e.journal.Slots)
	}
}

func TestOneFailingSlotDoesNotBlockOthers(t *testing.T) {
	snap := twoNodeSnapshot()
	idB := lsncheck.Identity{Name: "b", Database: "app", Plugin: "pgoutput"}
	snap.Primary.Slots["b"] = slot(idB, 0x1000000, 0x2000000, 700)
	app := &simMethod{failing: map[string]error{"a": &pgconn.PgError{Code: "XX000", Message: "boom"}}}
	e := testEngine(t, &simObserver{snap: snap}, app)
	clock := time.Unix(1000, 0)
	e.now = func() time.Time { return clock }
	rep, err := e.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// New copies are made on several sessions at once: the order between slots is not fixed.
	if got := app.sorted(); got != "create a,create b" {
		t.Fatalf("calls %v", got)
	}
	byName := map[string]SlotReport{}
	for _, s := range rep.Slots {
		byName[s.Name] = s
	}
	if byName["a"].Error == "" || byName["b"].Error != "" {
		t.Fatalf("report: %+v", rep.Slots)
	}
	// The failing slot is held back (backoff) on the next pass; the other is not blocked.
	app.calls = nil
	rep, _ = e.RunOnce(context.Background())
	if len(app.calls) != 0 {
		t.Fatalf("failing slot retried inside its backoff: %v", app.calls)
	}
	for _, s := range rep.Slots {
		if s.Name == "a" && (s.Action != KindSkip || !strings.Contains(s.Reason, "boom")) {
			t.Fatalf("held-back slot reported as %+v", s)
		}
	}
	clock = clock.Add(time.Hour)
	app.failing = nil
	if _, err := e.RunOnce(context.Background()); err != nil || strings.Join(app.calls, ",") != "create a" {
		t.Fatalf("after the backoff: %v %v", app.calls, err)
	}
}

// slowApplier blocks on the slot named "slow" until its per-slot deadline.
type slowApplier struct{ simMethod }

func (a *slowApplier) Session() method.Session { return a }
func (a *slowApplier) Create(ctx context.Context, ps topology.Slot) error {
	if ps.Name == "slow" {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func TestSlowSlotTimesOutAlone(t *testing.T) {
	snap := twoNodeSnapshot()
	for _, n := range []string{"slow", "b", "c"} {
		id := idA
		id.Name = n
		snap.Primary.Slots[n] = slot(id, 0x1000000, 0x2000000, 700)
	}
	e := testEngine(t, &simObserver{snap: snap}, nil)
	app := &slowApplier{}
	e.methods = func(topology.Method) (method.Method, error) { return app, nil }
	e.cfg.SlotTimeout = 200 * time.Millisecond
	e.cfg.Workers = 2
	rep, err := e.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Slots {
		switch {
		case s.Name == "slow" && s.ErrorClass != SkipSlot.String():
			t.Errorf("slow slot: %+v", s)
		case s.Name != "slow" && s.Error != "":
			t.Errorf("%s blocked by the slow slot: %+v", s.Name, s)
		}
	}
}

func TestRunStopsOnlyForHumans(t *testing.T) {
	logs := &pgtest.LockedBuffer{}
	mk := func(err error) *Engine {
		e := testEngine(t, &simObserver{err: err}, &simMethod{})
		e.cfg.Interval, e.cfg.MaxBackoff = 5*time.Millisecond, 20*time.Millisecond
		e.log = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})
		return e
	}
	// A configuration problem stops Run at once with that error.
	stop := &topology.PrereqError{Problems: []topology.Problem{{Check: "wal_level", Node: "primary", Issue: "wal_level is replica", Fix: "ALTER SYSTEM"}}}
	done := make(chan error, 1)
	go func() { done <- mk(stop).Run(context.Background(), nil) }()
	select {
	case err := <-done:
		if !errors.As(err, &stop) {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run kept retrying an error that needs a human")
	}
	// A transient one is retried with backoff, logged once, until the context ends.
	ctx, cancel := context.WithCancel(context.Background())
	passes := 0
	e := mk(&topology.ConnError{Role: "primary", Err: errors.New("connection refused")})
	go func() {
		done <- e.Run(ctx, func(_ Report, err error) {
			if passes++; passes == 5 {
				cancel()
			}
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end with its context")
	}
	if n := strings.Count(logs.String(), "sync pass failed"); n != 1 {
		t.Fatalf("the same error was logged %d times:\n%s", n, logs.String())
	}
}

// stoppedObserver's observation is cut short by the end of its context, as a stop does.
type stoppedObserver struct{ simObserver }

func (o *stoppedObserver) Observe(ctx context.Context) (Observation, error) {
	<-ctx.Done()
	return Observation{}, &NodeError{Node: "standby", Err: ctx.Err()}
}

// TestRunDoesNotReportAPassCutByTheStop: the pass the stop interrupts is not handed to onPass
// (metrics, /promotion-ready): it failed only because the daemon was stopping.
func TestRunDoesNotReportAPassCutByTheStop(t *testing.T) {
	e := testEngine(t, &simObserver{}, &simMethod{})
	e.obs = &stoppedObserver{}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	var reported []error
	if err := e.Run(ctx, func(_ Report, err error) { reported = append(reported, err) }); err != nil {
		t.Fatalf("Run after the stop: %v", err)
	}
	if len(reported) != 0 {
		t.Fatalf("a pass cut short by the stop was reported: %v", reported)
	}
}

// TestNoNudgeForReadiness (rule 4): a copy of the standby's own decoding whose restart_lsn is
// ahead of the primary slot's is READY once it is at its consumer's position (the observer
// offers no way to ask the primary for a running-xacts record any more).
func TestNoNudgeForReadiness(t *testing.T) {
	snap := twoNodeSnapshot()
	snap.Primary.Info.VersionNum, snap.Primary.Info.CanLogStandbySnapshot = 160010, true
	snap.Standby.Info.ReceiveLSN = 0x9000000
	cp := slot(idA, 0x1800000, 0x2000000, 700)
	snap.Standby.Slots["a"] = cp
	obs := &simObserver{snap: snap}
	e := testEngine(t, obs, &simMethod{})
	e.journal.Slots["a"] = &Entry{Incarnation: "01", Identity: idA, Primary: lsncheck.Position{RestartLSN: 0x1000000, ConfirmedFlush: 0x2000000, CatalogXmin: 700}}
	rep, err := e.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Ready() {
		t.Fatalf("not ready: %+v", rep.Slots)
	}
}

func TestRunLogsAStopOnceAcrossRechecks(t *testing.T) {
	logs := &pgtest.LockedBuffer{}
	stop := &topology.PrereqError{Problems: []topology.Problem{{Check: "hot_standby_feedback", Node: "standby", Issue: "off", Fix: "on"}}}
	e := testEngine(t, &simObserver{err: stop}, &simMethod{})
	e.log = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})
	for i := 0; i < 3; i++ { // the daemon re-checks by calling Run again
		if err := e.Run(context.Background(), nil); err == nil {
			t.Fatal("Run did not stop")
		}
	}
	if n := strings.Count(logs.String(), "syncing paused until a human acts"); n != 1 {
		t.Fatalf("logged %d times:\n%s", n, logs.String())
	}
}

// TestPersistentErrorIsLoggedAgain: a pass failing with the same error is logged once, then
// again at a steady rhythm, saying for how long it has failed.
func TestPersistentErrorIsLoggedAgain(t *testing.T) {
	logs := &pgtest.LockedBuffer{}
	e := testEngine(t, &simObserver{err: &topology.ConnError{Role: "primary", Err: errors.New("connection refused")}}, &simMethod{})
	e.log = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	e.cfg.Interval, e.cfg.MaxBackoff = time.Millisecond, 2*time.Millisecond
	clock := time.Unix(0, 0)
	e.now = func() time.Time { clock = clock.Add(time.Minute); return clock }
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_ = e.Run(ctx, nil)
	out := logs.String()
	if n := strings.Count(out, "sync pass failed"); n != 1 {
		t.Fatalf("the error was logged %d times as new:\n%s", n, out)
	}
	if !strings.Contains(out, "still failing after") {
		t.Fatalf("no steady reminder:\n%s", out)
	}
}

// TestRunKeepsItsRhythmWithoutThePrimary (operators review round 4, Day 2): while the primary
// cannot be asked, passes go on every interval, without backoff: a standby re-pointed to a new
// primary is followed within a pass (not after up to 30 s), and the gate without the primary
// answers from fresh passes. Other failures still back off.
func TestRunKeepsItsRhythmWithoutThePrimary(t *testing.T) {
	count := func(err error) int {
		snap := twoNodeSnapshot()
		snap.Standby.Info.InRecovery = true
		e := testEngine(t, &simObserver{snap: snap, err: err}, &simMethod{})
		e.cfg.Interval, e.cfg.MaxBackoff = 20*time.Millisecond, 30*time.Second
		ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
		defer cancel()
		passes := 0
		_ = e.Run(ctx, func(Report, error) { passes++ })
		return passes
	}
	gone := count(&NodeError{Node: "primary", Err: &topology.ConnError{Role: "primary", Err: errors.New("connection refused")}})
	other := count(&NodeError{Node: "standby", Err: errors.New("standby restarting")})
	if gone < 15 || other > 8 {
		t.Fatalf("passes in 600 ms at a 20 ms interval: %d with the primary gone (want a steady rhythm), %d for a standby failure (want backoff)", gone, other)
	}
}

// TestCheckWithoutTheJournalSaysSo: a judgement without the daemon's journal (no --state-dir)
// says so in every NOT READY verdict, instead of sending the reader after a catalog hold or a
// WAL read (operators review round 4, finding 8).
func TestCheckWithoutTheJournalSaysSo(t *testing.T) {
	snap := twoNodeSnapshot()
	snap.Standby.Info.InRecovery, snap.Standby.Info.ReceiveLSN = true, 0x9000000
	cfg := Config{PrimaryDSN: "x", StandbyDSN: "y", ReadOnly: true, Method: topology.MethodSQL}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e := newEngine(cfg, &simObserver{snap: snap}, &Journal{Version: journalVersion, Slots: map[string]*Entry{}})
	rep, err := e.Inspect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Slots {
		if s.Gate && !s.Verdict.Ready && !strings.Contains(s.Verdict.Detail, "without the daemon's journal") {
			t.Fatalf("%s: %s", s.Name, s.Verdict.Detail)
		}
	}
	if rep.Ready() || len(rep.Slots) == 0 {
		t.Fatalf("the sample must hold a NOT READY slot: %+v", rep.Slots)
	}
}

// TestReadinessChangesAreLoggedOnce: each slot's change of readiness, and the gate's, is logged
// once: what an incident's timeline is read from (operators review round 4, finding 15).
func TestReadinessChangesAreLoggedOnce(t *testing.T) {
	e := testEngine(t, &simObserver{}, &simMethod{})
	var logs strings.Builder
	e.log = hclog.New(&hclog.LoggerOptions{Output: &logs})
	rep := func(ready bool) Report {
		return Report{Role: RoleStandby, Selected: 1, Slots: []SlotReport{{Name: "cdc", Gate: true, Verdict: lsncheck.Verdict{Ready: ready}}}}
	}
	for _, ready := range []bool{false, false, true, true, false, false, true} {
		e.noteReadiness(rep(ready))
	}
	for want, n := range map[string]int{"slot copy READY": 2, "slot copy NOT READY": 1, "promotion gate open": 2, "promotion gate closed": 2} {
		if got := strings.Count(logs.String(), want); got != n {
			t.Errorf("%q logged %d times, want %d:\n%s", want, got, n, logs.String())
		}
	}
}

// TestWakeRunsAPassNow: a reload (Wake, on SIGHUP) makes a running engine drop its connections
// and run a full pass at once, not after --interval.
func TestWakeRunsAPassNow(t *testing.T) {
	obs := &simObserver{snap: twoNodeSnapshot()}
	e := testEngine(t, obs, &simMethod{})
	e.cfg.Interval = time.Hour
	passes := make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = e.Run(ctx, func(Report, error) { passes <- struct{}{} }) }()
	<-passes
	e.Wake()
	select {
	case <-passes:
	case <-time.After(5 * time.Second):
		t.Fatal("no pass within 5 s of a wake (interval 1 h)")
	}
	if obs.resets.Load() == 0 {
		t.Fatal("the woken pass ran on the old connections")
	}
}

// TestCopyTraits: each copy answers to the rules of the method its journal entry names (an exact
// copy beside the sql method's own is judged as a state-file copy); an entry of a primary's own
// slots, or none, to the method in force's; whether the server syncs is the method in force's.
func TestCopyTraits(t *testing.T) {
	sql, native := TraitsOf(topology.MethodSQL), TraitsOf(topology.MethodNative)
	exact := TraitsOf(topology.MethodStatefile)
	for _, c := range []struct {
		inForce method.Traits
		ent     *Entry
		want    method.Traits
	}{
		{sql, nil, sql},
		{sql, &Entry{Method: "own"}, sql},
		{sql, &Entry{Method: ""}, sql},
		{sql, &Entry{Method: "sql"}, sql},
		{sql, &Entry{Method: "statefile"}, exact},
		{exact, &Entry{Method: "sql"}, sql},
		{native, &Entry{Method: "statefile"}, func() method.Traits { t := exact; t.ServerSyncs = true; return t }()},
		{sql, &Entry{Method: "native"}, func() method.Traits { t := native; t.ServerSyncs = false; return t }()},
	} {
		if got := copyTraits(c.inForce, c.ent); got != c.want {
			t.Errorf("in force %+v, entry %+v: %+v, want %+v", c.inForce, c.ent, got, c.want)
		}
	}
}
