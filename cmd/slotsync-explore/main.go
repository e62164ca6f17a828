// Command slotsync-explore is slotsync's fault explorer: it fails over throwaway local pairs at
// random moments under drawn or written faults, asks a slotsync binary's gate as an HA hook
// would, and says whether each answer was right; it also sums explorer reports into tables.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
)

// Exit codes: the run passed; a gate answer was wrong or something went wrong around it; the
// run could not be carried out; a usage error.
const (
	exitFailed   = 1
	exitCannot   = 2
	exitUsage    = 3
	defaultMajor = 17
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args, os.Stdout, os.Stderr))
}

// run runs the app with args and returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	code := 0
	app.ExitErrHandler = func(_ *cli.Context, err error) {
		code = exitCode(err, stderr)
	}
	if err := app.RunContext(ctx, args); err != nil && code == 0 {
		code = exitCode(err, stderr)
	}
	return code
}

// exitCode prints err's message, if any, and returns its exit code (usage, for errors the
// command-line parser raised).
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(stderr, "slotsync-explore:", msg)
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return exitUsage
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:  "slotsync-explore",
		Usage: "the fault explorer: faulted failovers that judge a slotsync binary's gate",
		Description: "run fails over throwaway local pairs (PostgreSQL from /usr/lib/postgresql/N/bin or $SLOTSYNC_PG_CACHE/N/bin) " +
			"under faults drawn from --seed or written in --plan, with the slotsync binary given as the sidecar and the gate; " +
			"tally sums run reports (JSON lines) into the tables docs/RELIABILITY.md carries.",
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		Commands:        []*cli.Command{runCommand(), tallyCommand()},
	}
}

func usageError(format string, args ...any) error {
	return cli.Exit(fmt.Sprintf(format, args...), exitUsage)
}

func newLogger(c *cli.Context) (hclog.Logger, error) {
	level := hclog.LevelFromString(c.String("log-level"))
	if level == hclog.NoLevel {
		return nil, usageError("--log-level %q: use trace, debug, info, warn or error", c.String("log-level"))
	}
	return hclog.New(&hclog.LoggerOptions{Name: "explore", Level: level, Output: c.App.ErrWriter}), nil
}
