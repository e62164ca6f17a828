package sync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	stdsync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/topology"
)

// The engine's one test double: a simulated pair (simObserver) and a method that carries out
// actions on it (simMethod). The scenario scripts drive it command by command; the engine
// tests set it up in Go.

// testEngine is an engine (sql method, one worker, a fresh state directory) on a simulated pair:
// app makes its copies on obs's standby.
func testEngine(t *testing.T, obs *simObserver, app *simMethod) *Engine {
	t.Helper()
	cfg := Config{PrimaryDSN: "x", StandbyDSN: "y", StateDir: t.TempDir(), Method: topology.MethodSQL, Workers: 1}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Logger = hclog.NewNullLogger()
	for _, n := range []*NodeState{&obs.snap.Primary, &obs.snap.Standby} {
		if n.Slots == nil {
			n.Slots = map[string]topology.Slot{}
		}
	}
	e := newEngine(cfg, obs, &Journal{Version: journalVersion, Slots: map[string]*Entry{}})
	if app != nil {
		if app.obs == nil {
			app.obs = obs
		}
		if app.traits == (method.Traits{}) {
			app.traits = TraitsOf(topology.MethodSQL)
		}
		e.methods = func(topology.Method) (method.Method, error) { return app, nil }
	}
	return e
}

// simObserver is the observer of the engine's one test double: it returns the simulated nodes
// (a copy, as a real observation is), which simMethod changes; the primary can be made
// unreachable (gone), demoted, or any observation fail (err).
type simObserver struct {
	snap    Observation
	err     error // every observation fails with it (the nodes returned as they are)
	gone    bool
	demoted bool
	// watch: what Watch reads (none: Watch fails). resets: how many times the engine dropped
	// its connections.
	watch  *WatchSample
	resets atomic.Int32
	// upstream: what the server in recovery reached as the primary shows (primary-demoted).
	upstream UpstreamFacts
	now      func() time.Time
	history  map[int]lsncheck.LSN
	// runningXacts: how many running-xacts records the engine asked for; syncWaits: the
	// server's slot sync makes no copy (it waits for a running-xacts record its consumer has
	// confirmed past).
	runningXacts int
	syncWaits    bool
	// confirmAtSync: confirmations made just before the next slot sync.
	confirmAtSync []confirmAt
}

type confirmAt struct {
	slot string
	lsn  lsncheck.LSN
}

func (o *simObserver) node(name string) *NodeState {
	if name == "primary" {
		return &o.snap.Primary
	}
	return &o.snap.Standby
}

// Observe returns a copy of the nodes, as a real observation would be.
func (o *simObserver) Observe(context.Context) (Observation, error) {
	if o.err != nil {
		return o.snap, o.err
	}
	s := o.snap
	s.Taken = time.Now()
	if o.now != nil {
		s.Taken = o.now()
	}
	s.Primary.Slots, s.Standby.Slots = clone(o.snap.Primary.Slots), clone(o.snap.Standby.Slots)
	s.Primary.Info.Clock = s.Taken // one clock for the nodes and slotsync here
	if age := s.Standby.Info.ReplayedCommitAge; age >= 0 {
		s.Standby.Info.ReplayedCommitAt = s.Taken.Add(-age)
	}
	if !s.Standby.Info.InRecovery {
		return Observation{Standby: s.Standby}, nil
	}
	if o.gone {
		return Observation{Standby: s.Standby}, &NodeError{Node: "primary", Err: &topology.ConnError{Role: "primary", Err: errors.New("connection refused")}}
	}
	if o.demoted {
		f := o.upstream
		f.Standby = s.Standby.Info
		err := JudgeUpstream(f)
		out := Observation{Standby: s.Standby}
		if errors.Is(err, ErrPrimaryInRecovery) {
			// The demoted server keeps the primary's slots as they were.
			out.Demoted = Demoted{WALEnd: f.Reached.WALEnd(), Slots: clone(o.snap.Primary.Slots)}
		}
		if Classify(err) == Stop {
			return Observation{}, err
		}
		return out, &NodeError{Node: "primary", Err: err}
	}
	return s, nil
}

func clone(m map[string]topology.Slot) map[string]topology.Slot {
	c := make(map[string]topology.Slot, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func (o *simObserver) StandbySlots(context.Context, int) (map[string]topology.Slot, error) {
	return clone(o.snap.Standby.Slots), nil
}
func (o *simObserver) Watch(context.Context, []string) (WatchSample, error) {
	if o.watch == nil {
		return WatchSample{}, errors.New("no watch here")
	}
	return *o.watch, nil
}
func (o *simObserver) History(context.Context, int) (map[int]lsncheck.LSN, error) {
	return o.history, nil
}

// LogRunningXacts: the simulated primary logs nothing; it says where its WAL ends.
func (o *simObserver) LogRunningXacts(context.Context) (lsncheck.LSN, error) {
	o.runningXacts++
	return o.snap.Primary.Info.CurrentLSN, nil
}

// SyncSlots is the server's slot sync: the primary's failover slots copied as they are now.
func (o *simObserver) SyncSlots(context.Context) error {
	for _, c := range o.confirmAtSync {
		s := o.snap.Primary.Slots[c.slot]
		s.ConfirmedFlush = c.lsn
		o.snap.Primary.Slots[c.slot] = s
	}
	o.confirmAtSync = nil
	if o.syncWaits {
		return nil
	}
	for name, s := range o.snap.Primary.Slots {
		if s.Failover {
			s.Synced, s.Failover = true, true
			o.snap.Standby.Slots[name] = s
		}
	}
	return nil
}
func (o *simObserver) SetStandbySlots(context.Context, bool, []string) error { return nil }
func (o *simObserver) Reset()                                                { o.resets.Add(1) }
func (o *simObserver) Close()                                                {}

// simMethod carries out actions on the simulated standby: a new copy takes the primary slot's
// positions; an advance moves confirmed_flush to the target (restart_lsn follows up to the
// primary's). With batching traits, creations wait for Flush, and each collected copy spends a
// restart.
// It is safe for the engine's concurrent sessions.
type simMethod struct {
	mu      stdsync.Mutex
	obs     *simObserver
	traits  method.Traits
	failing map[string]error
	calls   []string
	pending []topology.Slot
	// exact: the pending copies made from state files beside the method's own (ReplaceExact).
	exact map[string]bool
}

// sorted is the calls made so far in name order, for passes that apply slots concurrently.
func (m *simMethod) sorted() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := slices.Clone(m.calls)
	slices.Sort(c)
	return strings.Join(c, ",")
}

var (
	_ method.Method          = (*simMethod)(nil)
	_ method.Session         = (*simMethod)(nil)
	_ method.Flusher         = (*simMethod)(nil)
	_ method.ExactCopier     = (*simMethod)(nil)
	_ method.ScratchReporter = (*simMethod)(nil)
)

// ScratchAt is where the standby's own decoding made the copy of slot (its restart_lsn then).
func (m *simMethod) ScratchAt(slot string) lsncheck.LSN {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.traits.BatchesCreates || m.obs == nil {
		return 0
	}
	return m.obs.snap.Standby.Slots[slot].RestartLSN
}

func (m *simMethod) Traits() method.Traits   { return m.traits }
func (m *simMethod) Session() method.Session { return m }
func (m *simMethod) Close()                  {}

func (m *simMethod) Create(_ context.Context, ps topology.Slot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "create "+ps.Name)
	if m.traits.BatchesCreates {
		m.pending = append(m.pending, ps)
		return method.ErrCollected
	}
	return m.install(ps)
}

// install makes the copy (m.mu held).
func (m *simMethod) install(ps topology.Slot) error {
	if err := m.failing[ps.Name]; err != nil {
		return err
	}
	cp := ps
	cp.Active, cp.ActivePID, cp.Failover, cp.SentLSN = false, 0, false, 0
	if m.traits.Exact || m.exact[ps.Name] {
		cp.Snapshot = topology.SnapshotPresent // copied with the state file
	}
	m.obs.snap.Standby.Slots[ps.Name] = cp
	return nil
}

func (m *simMethod) Replace(ctx context.Context, ps topology.Slot, copyDB string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "replace "+ps.Name)
	if !m.traits.BatchesCreates {
		delete(m.obs.snap.Standby.Slots, ps.Name)
	}
	if m.traits.BatchesCreates {
		m.pending = append(m.pending, ps)
		return method.ErrCollected
	}
	return m.install(ps)
}

// ReplaceExact collects an exact copy for Flush, whatever the method's traits.
func (m *simMethod) ReplaceExact(_ context.Context, ps topology.Slot, _ string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "exact copy "+ps.Name)
	if m.exact == nil {
		m.exact = map[string]bool{}
	}
	m.exact[ps.Name] = true
	m.pending = append(m.pending, ps)
	return method.ErrCollected
}

func (m *simMethod) Advance(_ context.Context, name, _ string, target lsncheck.LSN) (lsncheck.LSN, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, fmt.Sprintf("advance %s to %s", name, target))
	if err := m.failing[name]; err != nil {
		return 0, err
	}
	cp := m.obs.snap.Standby.Slots[name]
	ps := m.obs.snap.Primary.Slots[name]
	cp.ConfirmedFlush = max(cp.ConfirmedFlush, target)
	if restart := max(cp.RestartLSN, min(ps.RestartLSN, target)); restart != cp.RestartLSN {
		// Decoding moves restart_lsn only onto a snapshot it serialized (snapbuild.c).
		cp.RestartLSN, cp.Snapshot = restart, topology.SnapshotPresent
	}
	if !lsncheck.XIDPrecedes(ps.CatalogXmin, cp.CatalogXmin) {
		cp.CatalogXmin = ps.CatalogXmin
	}
	m.obs.snap.Standby.Slots[name] = cp
	return cp.ConfirmedFlush, nil
}

func (m *simMethod) Drop(_ context.Context, name, _ string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "drop "+name)
	if err := m.failing[name]; err != nil {
		return err
	}
	delete(m.obs.snap.Standby.Slots, name)
	return nil
}

func (m *simMethod) SetFailover(_ context.Context, name, _ string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "set failover "+name)
	if err := m.failing[name]; err != nil {
		return err
	}
	ps := m.obs.snap.Primary.Slots[name]
	ps.Failover = true
	m.obs.snap.Primary.Slots[name] = ps
	return nil
}

// Flush installs the collected copies in one simulated restart.
func (m *simMethod) Flush(context.Context, method.View) (map[string]method.Outcome, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pending) == 0 {
		return nil, false
	}
	out := map[string]method.Outcome{}
	slices.SortFunc(m.pending, func(a, b topology.Slot) int { return strings.Compare(a.Name, b.Name) })
	for _, ps := range m.pending {
		out[ps.Name] = method.Outcome{Err: m.install(ps), CountsAsCopy: true}
	}
	m.calls = append(m.calls, fmt.Sprintf("restart the standby for %d copies", len(m.pending)))
	m.pending = nil
	m.exact = nil
	return out, true
}
