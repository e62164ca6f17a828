package statefile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/slotsync/slotsync/sync/method"
)

// Restarter stops and starts the standby for the state-file method.
type Restarter interface {
	Stop(ctx context.Context) error
	Start(ctx context.Context) error
}

// PgCtl restarts the standby with pg_ctl; slotsync must run as the data directory's owner.
type PgCtl struct {
	Path    string // pg_ctl; default: found on PATH
	DataDir string
	LogFile string // pg_ctl -l; empty: the server's own logging settings
}

func (p PgCtl) run(ctx context.Context, args ...string) error {
	bin := p.Path
	if bin == "" {
		bin = "pg_ctl"
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"-D", p.DataDir}, args...)...)
	// Without -l the postmaster inherits pg_ctl's stdout and stderr and keeps them open for its
	// whole life: stop waiting for them shortly after pg_ctl itself exits (rule 6: no restart may
	// hang slotsync).
	cmd.WaitDelay = pipeGrace
	out, err := cmd.Output()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // pg_ctl succeeded; the server it started still holds the pipes
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("pg_ctl %s: %w: %s%s", args[len(args)-1], err, out, ee.Stderr)
		}
		return fmt.Errorf("pg_ctl %s: %w", args[len(args)-1], err)
	}
	return nil
}

// Stop stops the standby (fast mode) and waits.
func (p PgCtl) Stop(ctx context.Context) error {
	return p.run(ctx, "-m", "fast", "-w", "-t", "300", "stop")
}

// Start starts the standby and waits until it accepts connections.
func (p PgCtl) Start(ctx context.Context) error {
	args := []string{"-w", "-t", "600"}
	if p.LogFile != "" {
		args = append(args, "-l", p.LogFile)
	}
	return p.run(ctx, append(args, "start")...)
}

// Commands restarts the standby with the user's shell commands (e.g. systemctl).
type Commands struct{ StopCommand, StartCommand string }

// pipeGrace is how long a restart command's output is read after the command exits: a server it
// started in the background may hold the pipes open for good.
const pipeGrace = 2 * time.Second

func (c Commands) sh(ctx context.Context, command string) error {
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.WaitDelay = pipeGrace
	out, err := cmd.CombinedOutput()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // the command succeeded; what it started in the background holds the pipes
	}
	if err != nil {
		return fmt.Errorf("%q: %w: %s", command, err, out)
	}
	return nil
}

// Stop runs the stop command.
func (c Commands) Stop(ctx context.Context) error { return c.sh(ctx, c.StopCommand) }

// Start runs the start command.
func (c Commands) Start(ctx context.Context) error { return c.sh(ctx, c.StartCommand) }

// RestartCommand restarts the standby with one shell command of the manager that owns the
// server (patronictl restart, say), which must return once the standby accepts connections
// again. The copies are staged in pg_replslot while the standby runs (the server reads that
// directory only when it starts); the command's restart loads them.
type RestartCommand struct{ Command string }

// Restart runs the command.
func (c RestartCommand) Restart(ctx context.Context) error { return Commands{}.sh(ctx, c.Command) }

// Stop does nothing: the standby keeps running while copies are staged.
func (c RestartCommand) Stop(context.Context) error { return nil }

// Start restarts the standby, loading what was staged.
func (c RestartCommand) Start(ctx context.Context) error { return c.Restart(ctx) }

// stagedRestarter restarts a running standby in one step: copies are staged before it.
type stagedRestarter interface {
	Restart(ctx context.Context) error
}

// RestartMarker, in the state directory, says a standby restart by slotsync is under way: it is
// written before the standby is stopped and removed once it runs again. Found by a later pass
// (slotsync killed in between) with the standby down, it means the standby is started again.
const RestartMarker = "standby-restart-in-progress"

func markRestart(stateDir string) error {
	if stateDir == "" {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(stateDir, RestartMarker), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("mark the standby restart: %w", err)
	}
	_, _ = fmt.Fprintf(f, "pid %d at %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("mark the standby restart: %w", err)
	}
	return f.Close()
}

func clearRestart(stateDir string) {
	if stateDir != "" {
		_ = os.Remove(filepath.Join(stateDir, RestartMarker))
	}
}

// recovery starts the standby when a restart slotsync began was interrupted (the
// marker is there) and the standby is not running (rule 6: never leave the standby down).
type recovery struct {
	cfg  Config
	deps method.Deps
}

// NewRecovery finishes a standby restart that a crash of slotsync interrupted, whatever method
// the next pass chooses (the standby may be down, and then nothing can be chosen). Nil when
// slotsync restarts nothing.
func NewRecovery(cfg Config, deps method.Deps) method.Recoverer {
	if deps.StateDir == "" || cfg.Restarter == nil || cfg.DataDir == "" {
		return nil
	}
	return recovery{cfg: cfg, deps: deps}
}

// Recover reports whether it started the standby.
func (r recovery) Recover(ctx context.Context) bool {
	marker, err := os.ReadFile(filepath.Join(r.deps.StateDir, RestartMarker))
	if err != nil {
		return false
	}
	running, stopping, err := ServerState(r.cfg.DataDir)
	switch {
	case err == nil && stopping:
		// A stop that timed out may still be under way: the marker stays until the postmaster
		// is gone and started again (rule 6).
		return false
	case err != nil || running:
		clearRestart(r.deps.StateDir)
		return false
	}
	r.deps.Log.Warn("a standby restart by slotsync was interrupted and left the standby stopped: starting it", "marker", strings.TrimSpace(string(marker)))
	r.deps.Restarting.Store(true)
	defer r.deps.Restarting.Store(false)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Minute)
	defer cancel()
	if err := r.cfg.Restarter.Start(sctx); err != nil {
		r.deps.Log.Error("the standby left stopped by an interrupted restart does not start; start it by hand and read its log", "error", err)
		return false
	}
	clearRestart(r.deps.StateDir)
	return true
}

// progressEvery is the rhythm of progress logs while the standby stops, starts or restarts.
const progressEvery = 10 * time.Second

// withProgress runs fn (a standby stop, start or restart) and logs every `every` that it is
// still running, so a long restart shows in the logs at a steady rhythm, not only at its end.
func withProgress(log hclog.Logger, every time.Duration, what string, fn func() error) error {
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- fn() }()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			if time.Since(start) >= every {
				log.Info(what+" finished", "elapsed_seconds", time.Since(start).Seconds(), "ok", err == nil)
			}
			return err
		case <-t.C:
			log.Info("still "+what, "elapsed_seconds", time.Since(start).Round(time.Second).Seconds())
		}
	}
}
