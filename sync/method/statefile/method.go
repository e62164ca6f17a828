package statefile

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	stdsync "sync"
	"sync/atomic"
	"time"

	"github.com/slotsync/slotsync/internal/atomicfile"
	"github.com/slotsync/slotsync/internal/failpoint"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/sync/method/sqlslot"
	"github.com/slotsync/slotsync/topology"
)

// Config configures the state-file method (PostgreSQL 11-15; by choice on 16+).
type Config struct {
	// DataDir is the standby's data directory as this process sees it.
	DataDir string
	// Restarter stops and starts the standby. Nil: never restart; copies are staged in
	// pg_replslot and stay NOT READY until the standby's next start.
	Restarter Restarter
	// MinRestartInterval is the least time between two restarts (default 5 minutes).
	MinRestartInterval time.Duration
	// NoCheckpoint skips the CHECKPOINT on the primary before reading state files (for roles
	// that may not run one: the files are then as of the last checkpoint, older but safe).
	NoCheckpoint bool
	// MaxAttempts is how many times a slot is copied before slotsync gives up on it (default 2).
	MaxAttempts int
	// FetchTimeout bounds fetching, from the primary, the WAL new copies need that the standby
	// removed (default 2 minutes); MaxFetchBytes bounds how much (default 4 GiB). The fetch runs
	// once the standby runs again, never while it is stopped; one that fails or is cut short is
	// tried again at the next pass.
	FetchTimeout  time.Duration
	MaxFetchBytes int64
	// HoldTimeout bounds how long the catalog hold of a new copy waits for the standby's
	// feedback to cover it (default 10 minutes, DefaultHoldTimeout); a copy not covered by then
	// is made again.
	HoldTimeout time.Duration
	// OnRequest: the method makes state-file copies only of the slots the plan names
	// (Session.ReplaceExact, --exact-copy-after); every other creation is the sql method's, and
	// its traits are the sql method's (16+).
	OnRequest bool
}

// Method copies slots as state files. Creations are collected during a pass and
// installed in one standby restart at its end (Flush); advances and drops are SQL on the
// standby, as in the sql method.
type Method struct {
	sql         *sqlslot.Method
	primary     method.PrimaryLink
	cfg         Config
	log         hclog.Logger
	stateDir    string
	restart     restartStrategy
	mu          stdsync.Mutex
	pending     []topology.Slot
	lastRestart time.Time
	restarting  *atomic.Bool // shared with the engine, read by a stopping process
	// hold keeps the catalog rows of copies on the primary until the standby's feedback does.
	hold *catalogHold
	// snaps: the decoding snapshot each installed copy restarts from, kept until the copy has
	// moved past it, to put back when the standby lost it (repairSnapshots).
	snaps map[string]*Snapshot
	// walBound: no WAL segment at or past the one holding this position (the standby's received
	// WAL at the pass's observation) is ever fetched: it may be partial, or not yet written.
	walBound lsncheck.LSN
	// stagedWAL: the restart_lsn of each copy staged for a standby start slotsync does not make
	// (--restart never), until that start has loaded it and its WAL was put back (repairWAL).
	stagedWAL map[string]uint64
}

// Traits: an installed copy is exact; it is READY only with its WAL read once on the standby,
// its decoding snapshot, and the standby's catalog horizon covering it (rule 4); copies are
// installed in one restart at the end of a pass, and keep the full pass's rhythm.
func Traits() method.Traits {
	return method.Traits{BatchesCreates: true, ProvesWAL: true, NeedsSnapshot: true, NeedsHorizon: true, Exact: true}
}

var (
	_ method.Method         = (*Method)(nil)
	_ method.Session        = (*Session)(nil)
	_ method.ExactCopier    = (*Session)(nil)
	_ method.Preparer       = (*Method)(nil)
	_ method.Flusher        = (*Method)(nil)
	_ method.StandbyChecker = (*Method)(nil)
	_ method.Closer         = (*Method)(nil)
	_ method.Recoverer      = recovery{}
)

// New makes the method: sql carries out advances and drops; cfg.DataDir must be the
// standby's data directory as this process sees it.
func New(sql *sqlslot.Method, cfg Config, deps method.Deps) (*Method, error) {
	if err := checkDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	m := &Method{sql: sql, primary: deps.Primary, cfg: cfg, log: deps.Log, stateDir: deps.StateDir, restarting: deps.Restarting,
		restart: strategyFor(cfg.Restarter), hold: newCatalogHold(deps.Log, cfg.HoldTimeout)}
	m.stagedWAL = loadStagedWAL(deps.StateDir, deps.Log)
	return m, nil
}

// StagedWALFile, in the state directory, lists the copies staged for a standby start slotsync
// does not make whose WAL is still to be put back once that start loads them (repairWAL): a
// restart of slotsync in between would otherwise forget it, and the copy would fail its WAL
// read and be made again.
const StagedWALFile = "statefile-staged-wal.json"

// loadStagedWAL reads StagedWALFile (slot name → restart_lsn); a missing or unreadable file
// is an empty list (an unreadable one is logged: at worst a copy is made again).
func loadStagedWAL(dir string, log hclog.Logger) map[string]uint64 {
	out := map[string]uint64{}
	if dir == "" {
		return out
	}
	data, err := os.ReadFile(filepath.Join(dir, StagedWALFile))
	if errors.Is(err, fs.ErrNotExist) {
		return out
	}
	if err == nil {
		err = json.Unmarshal(data, &out)
	}
	if err != nil {
		log.Warn("could not read the list of staged copies whose WAL is still to be fetched; such copies may be made again", "file", StagedWALFile, "error", err)
		return map[string]uint64{}
	}
	return out
}

// saveStagedWAL writes m.stagedWAL to StagedWALFile.
func (m *Method) saveStagedWAL() {
	if m.stateDir == "" {
		return
	}
	data, err := json.Marshal(m.stagedWAL)
	if err == nil {
		err = atomicfile.Write(m.stateDir, StagedWALFile, append(data, '\n'))
	}
	if err != nil {
		m.log.Warn("could not record the staged copies whose WAL is still to be fetched", "error", err)
	}
}

// Traits are the rules of installed copies; on request only, those of the sql method's copies
// (the journal entry of each state-file copy says how it was made: sync.copyTraits).
func (m *Method) Traits() method.Traits {
	if m.cfg.OnRequest {
		return m.sql.Traits()
	}
	return Traits()
}

// Close ends the catalog holds.
func (m *Method) Close() { m.hold.Close() }

// Session returns a worker's handle: creations are collected, the rest is SQL on the standby.
func (m *Method) Session() method.Session {
	return &Session{Session: m.sql.NewSession(), m: m}
}

type Session struct {
	*sqlslot.Session
	m *Method
}

// Create queues the slot for the batched restart (on request only: the sql method makes it).
func (s *Session) Create(ctx context.Context, ps topology.Slot) error {
	if s.m.cfg.OnRequest {
		return s.Session.Create(ctx, ps)
	}
	return s.queue(ps)
}

// queue adds the slot to the copies the batched restart installs.
func (s *Session) queue(ps topology.Slot) error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	s.m.pending = append(s.m.pending, ps)
	return method.ErrCollected
}

// Replace queues the new copy and leaves the old one until the restart: Flush removes the old
// directory and installs the new one in the same stopped-standby window, so the standby is never
// without a copy (the old one, of another incarnation, is NOT READY meanwhile).
// Copies staged into a running standby (--restart never, or a manager's restart command) are
// the exception: the old slot must be dropped first, or the running server would write its own
// state over the staged file when it shuts down.
// On request only, the sql method makes the new copy.
func (s *Session) Replace(ctx context.Context, ps topology.Slot, copyDB string) error {
	if s.m.cfg.OnRequest {
		return s.Session.Replace(ctx, ps, copyDB)
	}
	return s.ReplaceExact(ctx, ps, copyDB)
}

// ReplaceExact queues a state-file copy of ps in place of the copy in database copyDB (a copy
// already gone is no error), whatever the method's own copies are.
func (s *Session) ReplaceExact(ctx context.Context, ps topology.Slot, copyDB string) error {
	if s.m.restart.staged() {
		if err := s.Drop(ctx, ps.Name, copyDB); err != nil && !topology.SlotMissing(err) {
			return err
		}
	}
	return s.queue(ps)
}

// waiting: nothing failed, the copy waits (rate limit, or no restart configured).
type waiting struct{ why string }

func (e *waiting) Error() string { return e.why }

// Where a copy installed at restart_lsn lsn stands: staged in pg_replslot and not loaded yet,
// loaded by the standby and still at lsn, or gone or moved on from it.
const (
	stagedWaiting = iota
	stagedLoaded
	stagedGone
)

// stagedCopyAt says where the copy name, installed at lsn, stands among the standby's copies.
func (m *Method) stagedCopyAt(copies map[string]topology.Slot, name string, lsn uint64) (topology.Slot, int) {
	cp, ok := copies[name]
	switch {
	case !ok:
		if st := readStaged(m.cfg.DataDir, name); st != nil && st.RestartLSN == lsn {
			return cp, stagedWaiting
		}
		return cp, stagedGone
	case uint64(cp.RestartLSN) == lsn:
		return cp, stagedLoaded
	default:
		return cp, stagedGone
	}
}

// repairSnapshots puts back the decoding snapshot of a copy whose standby lost it: a copy staged
// into a running standby is loaded at its next start, whose shutdown checkpoint removes the
// snapshot staged beside it, since no loaded slot needed it yet. Once the copy is loaded, the
// file stays. A copy that moved on from its first restart_lsn, or is gone, is forgotten.
// copies nil: the copies were just loaded by a restart (write what is missing).
func (m *Method) repairSnapshots(copies map[string]topology.Slot) {
	in := Installer{DataDir: m.cfg.DataDir}
	for name, sn := range m.snaps {
		if copies != nil {
			cp, at := m.stagedCopyAt(copies, name, sn.LSN)
			if at == stagedWaiting {
				continue // its snapshot is put back once it is loaded
			}
			if at == stagedGone {
				delete(m.snaps, name)
				continue
			}
			if cp.Snapshot != topology.SnapshotAbsent {
				continue
			}
		}
		wrote, err := in.InstallSnapshot(sn)
		if err != nil {
			m.log.Warn("could not put back a copy's decoding snapshot", "slot", name, "error", err)
		} else if wrote {
			m.log.Info("put back the decoding snapshot the standby's restart removed", "slot", name, "restart_lsn", lsncheck.LSN(sn.LSN).String())
		}
	}
}

// installWAL puts into the standby the WAL the new copies need from their restart_lsn that its
// restartpoints already removed, fetched from the primary (which keeps it for the slots):
// while it is stopped, or once its manager's restart loaded the staged copies (only segments
// older than the oldest it has, which no server process writes, and which the loaded copies now
// keep from its restartpoints). Without it a copy could not decode, and would be made again.
func (m *Method) installWAL(ctx context.Context, conn *pgx.Conn, primary topology.NodeInfo, in Installer, states []stateCopy, out map[string]error) error {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(m.cfg.FetchTimeout, 2*time.Minute))
	defer cancel()
	var from uint64
	for _, c := range states {
		if out[c.state.Name] == nil && (from == 0 || c.state.RestartLSN < from) {
			from = c.state.RestartLSN
		}
	}
	if from == 0 {
		return nil
	}
	src, err := ReadWALSource(ctx, conn, uint32(primary.Timeline))
	src.MaxBytes = cmp.Or(m.cfg.MaxFetchBytes, 4<<30)
	if err == nil && primary.Timeline > 1 {
		// After a failover the older segments are on the timelines they were written on.
		if ep := m.primary.Endpoint(); ep != nil {
			if src.History, err = topology.TimelineHistory(ctx, ep, primary.Timeline); err != nil {
				m.log.Warn("could not read the primary's timeline history: WAL segments are looked for on its current timeline only", "error", err)
				err = nil
			}
		}
	}
	if err == nil {
		var n int
		n, err = in.InstallWAL(ctx, src, from, uint64(m.walBound))
		_ = failpoint.Hit("statefile.wal-installed")
		if n > 0 {
			m.log.Info("copied from the primary the WAL the new copies need, which the standby had removed", "segments", n, "from", lsncheck.LSN(from).String())
		}
	}
	if err != nil {
		m.log.Warn("could not copy the WAL the new copies need from the primary; tried again at the next pass", "error", err)
	}
	return err
}

// Prepare puts back, before the pass's actions advance any copy, what a standby start removed
// from copies it loaded: their decoding snapshots (repairSnapshots) and, for copies staged for
// a start slotsync does not make, their WAL (repairWAL).
func (m *Method) Prepare(ctx context.Context, v method.View) {
	m.walBound = v.StandbyWALEnd
	m.repairSnapshots(v.Standby)
	m.repairWAL(ctx, v)
}

// repairWAL puts back the WAL that copies staged for a standby start slotsync does not make
// (--restart never) need, once that start has loaded them: the standby may have removed it
// meanwhile, as installWAL says. A copy gone, or moved on from its first restart_lsn, is
// forgotten; so is one whose WAL was looked after.
func (m *Method) repairWAL(ctx context.Context, v method.View) {
	var loaded []stateCopy
	n := len(m.stagedWAL)
	for name, lsn := range m.stagedWAL {
		_, at := m.stagedCopyAt(v.Standby, name, lsn)
		switch at {
		case stagedGone:
			delete(m.stagedWAL, name)
		case stagedLoaded:
			loaded = append(loaded, stateCopy{state: &State{Name: name, RestartLSN: lsn}})
		}
	}
	if len(m.stagedWAL) != n {
		m.saveStagedWAL()
	}
	if len(loaded) == 0 {
		return
	}
	ep := m.primary.Endpoint()
	if ep == nil {
		return
	}
	conn, err := ep.Connect(ctx, "")
	if err != nil {
		m.log.Warn("could not connect to the primary for the WAL of copies the standby's start loaded", "error", err)
		return
	}
	defer conn.Close(context.Background())
	if m.installWAL(ctx, conn, v.Primary, Installer{DataDir: m.cfg.DataDir, AllowRunning: true}, loaded, map[string]error{}) == nil {
		for _, c := range loaded {
			delete(m.stagedWAL, c.state.Name) // its WAL is in place (or the primary has none older)
		}
		m.saveStagedWAL()
	}
}

// fetchAfterStart marks the installed copies' WAL as still to be fetched, until a fetch into
// the running standby succeeds (repairWAL, at the next passes).
func (m *Method) fetchAfterStart(states []stateCopy, installed []string) {
	if len(installed) == 0 {
		return
	}
	for _, c := range states {
		if slices.Contains(installed, c.state.Name) {
			m.stagedWAL[c.state.Name] = c.state.RestartLSN
		}
	}
	m.saveStagedWAL()
}

// stateCopy is what a copy is made of: the primary's state file and its decoding snapshot at
// the state file's restart_lsn (nil when the primary has none there either).
type stateCopy struct {
	state *State
	snap  *Snapshot
}

// Flush installs every queued copy: read and validate each state file on the primary, with the
// primary's decoding snapshot at its restart_lsn, then install them all the way the restart
// strategy does (restartStrategy). A slot whose file is bad is left out. It returns each queued
// slot's outcome and whether the standby restarted.
func (m *Method) Flush(ctx context.Context, v method.View) (map[string]method.Outcome, bool) {
	m.mu.Lock()
	pending := m.pending
	m.pending = nil
	m.mu.Unlock()
	queued := map[string]bool{}
	for _, ps := range pending {
		queued[ps.Name] = true
	}
	m.hold.Release(ctx, v.Horizon, v.Standby, func(name string) bool { return queued[name] })
	// scratch: the restart_lsn of each copy for which the primary had no decoding snapshot
	// either (the primary's own decoding rebuilds one from scratch there too).
	scratch := map[string]lsncheck.LSN{}
	errs, restarted := m.flush(ctx, pending, v, scratch)
	out := make(map[string]method.Outcome, len(pending))
	for _, ps := range pending {
		o := method.Outcome{Err: errs[ps.Name], ScratchAt: scratch[ps.Name]}
		var w *waiting
		if errors.As(o.Err, &w) {
			o.Err, o.Waiting = nil, w.why
		}
		o.CountsAsCopy = restarted && o.Waiting == ""
		out[ps.Name] = o
	}
	return out, restarted
}

func (m *Method) flush(ctx context.Context, pending []topology.Slot, v method.View, scratch map[string]lsncheck.LSN) (map[string]error, bool) {
	primary := v.Primary
	out := map[string]error{}
	if pending = m.restart.admit(m, pending, out); len(pending) == 0 {
		return out, false
	}
	ep := m.primary.Endpoint()
	if ep == nil {
		return failAll(pending, out, topology.ErrNoPrimaryConninfo), false
	}
	conn, err := ep.Connect(ctx, "")
	if err != nil {
		return failAll(pending, out, err), false
	}
	defer conn.Close(context.Background())
	// The catalog rows each copy needs are held before its state file is read (hold.go).
	for _, ps := range pending {
		m.hold.Take(ctx, ep, v.StandbySlot, ps, primary.Major())
	}
	states := m.readStates(ctx, conn, pending, out, scratch)
	if len(states) == 0 {
		return out, false
	}
	in := Installer{DataDir: m.cfg.DataDir, AllowRunning: m.restart.staged()}
	// The WAL the copies need is fetched into the running standby, once they are loaded.
	running := Installer{DataDir: m.cfg.DataDir, AllowRunning: true}
	fetchWAL := func(ctx context.Context) error { return m.installWAL(ctx, conn, primary, running, states, out) }
	return out, m.restart.install(ctx, m, in, states, out, fetchWAL)
}

// failAll records err for every pending slot without an outcome yet.
func failAll(pending []topology.Slot, out map[string]error, err error) map[string]error {
	for _, ps := range pending {
		if out[ps.Name] == nil {
			out[ps.Name] = err
		}
	}
	return out
}

// readStates reads each pending slot's state file on the primary (one CHECKPOINT for the
// batch) and the primary's decoding snapshot at its restart_lsn, recording failures in out.
func (m *Method) readStates(ctx context.Context, conn *pgx.Conn, pending []topology.Slot, out map[string]error, scratch map[string]lsncheck.LSN) []stateCopy {
	checkpoint := !m.cfg.NoCheckpoint
	var states []stateCopy
	for _, ps := range pending {
		oid, err := topology.DatabaseOID(ctx, conn, ps.Database)
		if err != nil {
			out[ps.Name] = fmt.Errorf("slot %q: %w", ps.Name, err)
			continue
		}
		st, err := Read(ctx, conn, Expect{Name: ps.Name, Plugin: ps.Plugin, DatabaseOID: oid, TwoPhase: ps.TwoPhase}, checkpoint)
		checkpoint = false // one checkpoint serves the whole batch
		if err != nil {
			out[ps.Name] = err
			continue
		}
		// Between the two reads its consumer may come back and move the slot on (failpoint
		// builds stall here to show it).
		_ = failpoint.Hit("statefile.state-read")
		// Rule 4: the copy decodes consistently from its restart_lsn only with the primary's
		// serialized snapshot there, copied with the state file.
		snap, err := ReadSnapshot(ctx, conn, st)
		if errors.Is(err, ErrSlotMoved) {
			out[ps.Name] = &waiting{"the primary slot moved on while its state file and decoding snapshot were read: copied at the next pass"}
			continue
		}
		if err != nil {
			out[ps.Name] = err
			continue
		}
		if snap == nil {
			scratch[ps.Name] = lsncheck.LSN(st.RestartLSN)
			m.log.Debug(
				"the primary has no decoding snapshot at the slot's restart_lsn either: the copy decodes from there as the primary would",
				"slot",
				ps.Name,
				"restart_lsn",
				lsncheck.LSN(st.RestartLSN).String(),
			)
		} else {
			m.log.Debug("copying the slot with the primary's decoding "+
				"snapshot", "slot", ps.Name, "restart_lsn", lsncheck.LSN(st.RestartLSN).String(), "snapshot_bytes", len(snap.Data))
		}
		states = append(states, stateCopy{st, snap})
	}
	return states
}

// stagedFor reports whether pg_replslot holds a staged copy of ps's incarnation: same plugin and
// two_phase, and positions the primary slot has not gone back from (rule 2). A copy of another
// incarnation, or one that cannot be read, is not.
func stagedFor(dataDir string, ps topology.Slot) bool {
	st := readStaged(dataDir, ps.Name)
	if st == nil || st.Database == 0 || st.Plugin != ps.Plugin || st.TwoPhase != ps.TwoPhase {
		return false
	}
	staged := lsncheck.Seen{Identity: ps.Identity, Position: lsncheck.Position{
		RestartLSN: lsncheck.LSN(st.RestartLSN), ConfirmedFlush: lsncheck.LSN(st.ConfirmedFlush), CatalogXmin: lsncheck.XID(st.CatalogXmin)}}
	change, _ := lsncheck.CompareIncarnation(staged, ps.Seen())
	return change != lsncheck.NewIncarnation
}

// readStaged reads the state file in pg_replslot/<name> (nil when there is none, or it cannot
// be read).
func readStaged(dataDir, name string) *State {
	data, err := os.ReadFile(filepath.Join(dataDir, "pg_replslot", name, "state"))
	if err != nil {
		return nil
	}
	st, err := Parse(data)
	if err != nil {
		return nil
	}
	return st
}

// installAll puts each copy in place of whatever pg_replslot holds under its name (a copy of an
// older incarnation whose drop did not happen, say), recording failures in out, and remembers
// the decoding snapshots installed (repairSnapshots); it returns the names installed.
func (m *Method) installAll(in Installer, states []stateCopy, out map[string]error) []string {
	if m.snaps == nil {
		m.snaps = map[string]*Snapshot{}
	}
	var installed []string
	for _, c := range states {
		name := c.state.Name
		if err := in.Remove(name); err != nil {
			out[name] = err
			continue
		}
		if err := in.Install(c.state, c.snap); err != nil {
			out[name] = err
			continue
		}
		if c.snap != nil {
			m.snaps[name] = c.snap
		}
		installed = append(installed, name)
	}
	return installed
}

// checkDataDir checks that dir is a data directory this process can see.
func checkDataDir(dir string) error {
	if dir == "" {
		return &topology.ConfigError{Field: "standby data directory", Problem: "is empty",
			Fix: "give --standby-data-dir: the state-file method installs slot copies there"}
	}
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return &topology.ConfigError{Field: "standby data directory", Problem: fmt.Sprintf("%s is not a directory", dir),
			Fix: "give the standby's data directory (where postgresql.auto.conf is)"}
	}
	if _, err := os.Stat(dir + "/pg_replslot"); err != nil {
		return &topology.ConfigError{Field: "standby data directory", Problem: fmt.Sprintf("%s has no pg_replslot", dir),
			Fix: "give the standby's data directory (where postgresql.auto.conf is)"}
	}
	return nil
}
