package statefile

import (
	"context"
	"fmt"
	"time"

	"github.com/slotsync/slotsync/internal/failpoint"

	"github.com/slotsync/slotsync/topology"
)

// restartStrategy is how the copies read in a pass reach the standby: staged for a start
// slotsync does not make (noRestart), staged and loaded by the manager's restart command
// (stagedRestart), or installed while slotsync stops and starts the standby (stopStart).
type restartStrategy interface {
	// staged: copies are written into the running standby's pg_replslot (the server reads it
	// only when it starts), so the old copy of a slot is dropped before its new one is staged.
	staged() bool
	// admit returns the pending copies to read now, recording in out those that wait.
	admit(m *Method, pending []topology.Slot, out map[string]error) []topology.Slot
	// install puts the copies in place and reports whether the standby was restarted;
	// fetchWAL copies from the primary the WAL they need that the standby removed.
	install(ctx context.Context, m *Method, in Installer, states []stateCopy, out map[string]error, fetchWAL func(context.Context) error) bool
}

var (
	_ restartStrategy = noRestart{}
	_ restartStrategy = stagedRestart{}
	_ restartStrategy = stopStart{}
)

func strategyFor(r Restarter) restartStrategy {
	switch r := r.(type) {
	case nil:
		return noRestart{}
	case stagedRestarter:
		return stagedRestart{r}
	default:
		return stopStart{r}
	}
}

// noRestart (--restart never) stages copies for the standby's next start, whoever makes it.
type noRestart struct{}

func (noRestart) staged() bool { return true }

const stagedForNextStart = "staged in pg_replslot: loaded at the standby's next start (no restart is configured)"

// admit leaves a copy already staged for this incarnation as it is: reading it again would
// CHECKPOINT the primary every pass.
func (noRestart) admit(m *Method, pending []topology.Slot, out map[string]error) []topology.Slot {
	var fresh []topology.Slot
	for _, ps := range pending {
		if stagedFor(m.cfg.DataDir, ps) {
			out[ps.Name] = &waiting{stagedForNextStart}
			continue
		}
		fresh = append(fresh, ps)
	}
	return fresh
}

// install stages the copies (a file staged earlier is of another incarnation, admit said so)
// and remembers their restart_lsn: once a start loads them, their WAL is put back (repairWAL).
func (noRestart) install(_ context.Context, m *Method, in Installer, states []stateCopy, out map[string]error, _ func(context.Context) error) bool {
	staged := m.installAll(in, states, out)
	for _, name := range staged {
		out[name] = &waiting{stagedForNextStart}
	}
	m.fetchAfterStart(states, staged)
	return false
}

// stillInRecovery asks the standby, right before a restart, whether it is still in recovery.
func (m *Method) stillInRecovery(ctx context.Context) error {
	s := m.sql.NewSession()
	defer s.Close()
	return s.StillInRecovery(ctx)
}

// admitRestart holds every copy back until the next allowed restart (MinRestartInterval).
func admitRestart(m *Method, pending []topology.Slot, out map[string]error) []topology.Slot {
	if m.lastRestart.IsZero() || time.Since(m.lastRestart) >= m.cfg.MinRestartInterval {
		return pending
	}
	next := m.lastRestart.Add(m.cfg.MinRestartInterval)
	failAll(pending, out, &waiting{fmt.Sprintf("waiting for the next allowed standby restart at %s (minimum interval %s)",
		next.Format(time.RFC3339), m.cfg.MinRestartInterval)})
	return nil
}

// restartContext bounds a restart on its own: once the standby is being stopped, the restart
// runs to its end even if slotsync is asked to stop meanwhile (a standby left down would be
// worse than a late exit). The flag tells a stopping process to wait.
func (m *Method) restartContext(ctx context.Context, states []stateCopy) (context.Context, func()) {
	names := make([]any, 0, len(states))
	for _, c := range states {
		names = append(names, c.state.Name)
	}
	m.log.Info("restarting the standby to install slot copies", "slots", names)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Minute)
	m.restarting.Store(true)
	return ctx, func() { m.restarting.Store(false); cancel() }
}

// stagedRestart stages every copy in the running standby's pg_replslot and has the standby's
// manager restart it (--restart-command).
type stagedRestart struct{ r stagedRestarter }

func (stagedRestart) staged() bool { return true }

func (stagedRestart) admit(m *Method, pending []topology.Slot, out map[string]error) []topology.Slot {
	return admitRestart(m, pending, out)
}

// install: once the copies are loaded, their decoding snapshots and the WAL they need that the
// standby removed are put back. A restart that fails leaves the standby to its manager; if the
// server is down then, the staged copies are removed and the restart tried once more without them.
func (s stagedRestart) install(
	ctx context.Context,
	m *Method,
	in Installer,
	states []stateCopy,
	out map[string]error,
	fetchWAL func(context.Context) error,
) bool {
	ctx, done := m.restartContext(ctx, states)
	defer done()
	if err := m.stillInRecovery(ctx); err != nil {
		for _, c := range states {
			out[c.state.Name] = fmt.Errorf("restart the standby to load slot copies: %w", err)
		}
		return false
	}
	installed := m.installAll(in, states, out)
	if len(installed) == 0 {
		return false
	}
	m.lastRestart = time.Now()
	err := withProgress(m.log, progressEvery, "restarting the standby through its manager", func() error { return s.r.Restart(ctx) })
	if err == nil {
		m.repairSnapshots(nil) // the restart's shutdown checkpoint removed them: the copies are loaded now
		if fetchWAL(ctx) != nil {
			m.fetchAfterStart(states, installed)
		}
		return true
	}
	if running, rerr := ServerRunning(m.cfg.DataDir); rerr == nil && !running {
		m.log.Error("the standby is down after its restart with new slot copies; removing them and restarting it again", "error", err)
		for _, name := range installed {
			_ = in.Remove(name)
		}
		if err2 := s.r.Restart(ctx); err2 != nil {
			err = fmt.Errorf("%w; restarting it again without the copies failed too: %v", err, err2)
		}
	}
	for _, name := range installed {
		out[name] = fmt.Errorf("restart the standby: %w", err)
	}
	return true
}

// stopStart stops the standby, installs the copies and their WAL, and starts it again
// (pg_ctl, or the stop and start commands). If it does not start, the new copies are removed
// and it is started again without them.
type stopStart struct{ r Restarter }

func (stopStart) staged() bool { return false }

func (stopStart) admit(m *Method, pending []topology.Slot, out map[string]error) []topology.Slot {
	return admitRestart(m, pending, out)
}

func (s stopStart) install(ctx context.Context, m *Method, in Installer, states []stateCopy, out map[string]error, fetchWAL func(context.Context) error) bool {
	ctx, done := m.restartContext(ctx, states)
	defer done()
	failed := func(err error) bool {
		for _, c := range states {
			if out[c.state.Name] == nil {
				out[c.state.Name] = err
			}
		}
		return false
	}
	// Never stop a node promoted since the pass observed it: it serves consumers now (rule 3).
	if err := m.stillInRecovery(ctx); err != nil {
		return failed(fmt.Errorf("stop the standby to install slot copies: %w", err))
	}
	if err := markRestart(m.stateDir); err != nil {
		return failed(err)
	}
	m.lastRestart = time.Now()
	if err := withProgress(m.log, progressEvery, "stopping the standby", func() error { return s.r.Stop(ctx) }); err != nil {
		// A stop that failed or timed out is a restart spent (lesson 1: it counts toward
		// giving up); the marker stays, so a standby left down is started again (rule 6).
		failed(fmt.Errorf("stop the standby: %w", err))
		return true
	}
	_ = failpoint.Hit("statefile.standby-stopped")
	installed := m.installAll(in, states, out)
	_ = failpoint.Hit("statefile.copies-installed")
	// Nothing slow or remote runs while the standby is stopped: the WAL the copies need is
	// fetched once it runs again (rule 6), and each start has a deadline of its own.
	_ = failpoint.Hit("statefile.before-start")
	startErr := withProgress(m.log, progressEvery, "starting the standby with the new slot copies", func() error { return s.start(ctx) })
	if startErr != nil {
		m.log.Error("the standby did not start with the new slot copies; removing them and starting it again", "error", startErr)
		_ = s.r.Stop(ctx)
		for _, name := range installed {
			_ = in.Remove(name)
		}
		if err := s.start(ctx); err != nil {
			return failed(&topology.ConfigError{Field: "standby", Problem: fmt.Sprintf("does not start after slot copies were removed again: %v", err),
				Fix: "start the standby by hand and read its log"})
		}
		clearRestart(m.stateDir)
		failed(fmt.Errorf("the standby refused the slot copies: %w", startErr))
		return true // it was restarted: the refused copies count as copies made
	}
	clearRestart(m.stateDir)
	if fetchWAL(ctx) != nil {
		m.fetchAfterStart(states, installed)
	}
	return true
}

// start starts the standby under a deadline of its own: however long the stop and install took.
func (s stopStart) start(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	return s.r.Start(sctx)
}

// startTimeout bounds one start of the standby.
const startTimeout = 15 * time.Minute
