package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/explore"
	"github.com/urfave/cli/v2"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "faulted failovers on throwaway local pairs, each answer of the gate judged",
		Description: "Each iteration starts a pair, runs the slotsync binary as the sidecar, fails over at a random moment under " +
			"faults drawn from --seed (iteration i from seed+i) or written in --plan, asks the gate with and without the primary, " +
			"and says whether it was right. Exit 0 when no READY was followed by a loss and nothing went wrong around it, 1 " +
			"otherwise, 2 when it could not run, 3 on a usage error.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "major", Value: defaultMajor, Usage: "PostgreSQL major of the pairs"},
			&cli.Int64Flag{Name: "seed", Usage: "seed of the draw (default: from the clock; printed)"},
			&cli.IntFlag{Name: "iterations", Value: 1, Usage: "failovers to run"},
			&cli.StringFlag{Name: "plan", Usage: "replay the plans in this file (JSON lines: a report's iterations, or plans), whatever draw made them, or a written plan (.yaml)"},
			&cli.StringFlag{Name: "slotsync", Usage: "the slotsync binary judged (default: slotsync beside this binary, else in PATH)"},
			&cli.StringFlag{Name: "report", Usage: "append each iteration, as a JSON line, to this file"},
			&cli.StringFlag{Name: "shadows", Usage: "gate mutants asked beside the gate at each question and judged as it is (a build with failpoints): " +
				"default (the mutants of rules 4, 5 and 8), none, or names separated by commas (default: default with such a build, else none)"},
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "trace, debug, info, warn or error"},
		},
		Action: runAction,
	}
}

func runAction(c *cli.Context) error {
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	opts, err := runOptions(c)
	if err != nil {
		return err
	}
	stateDir, err := os.MkdirTemp("", "slotsync-explore-")
	if err != nil {
		return cli.Exit(err.Error(), exitCannot)
	}
	defer os.RemoveAll(stateDir)
	opts.StateDir, opts.Logger = stateDir, log.Named("chaos")
	major := c.Int("major")
	opts.NewPair = func(ctx context.Context) (*integration.Pair, error) {
		return integration.NewPair(ctx, integration.Options{Major: major, Conf: explore.ChaosConf})
	}
	log.Info("explorer", "seed", opts.Seed, "iterations", opts.Iterations, "major", major, "plans", len(opts.Plans), "slotsync", opts.Slotsync)
	rep, err := explore.Chaos(c.Context, opts)
	if path := c.String("report"); path != "" {
		if werr := appendReport(path, rep.Iterations); werr != nil {
			log.Error("write the report", "path", path, "error", werr)
		}
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		printReport(c.App.Writer, rep)
	}
	switch {
	case err != nil:
		return cli.Exit("could not run: "+err.Error(), exitCannot)
	case !rep.OK:
		return cli.Exit("", exitFailed)
	}
	return nil
}

// runOptions checks run's flags (a usage error names the fix and nothing runs).
func runOptions(c *cli.Context) (explore.ChaosOptions, error) {
	opts := explore.ChaosOptions{Seed: c.Int64("seed"), Iterations: c.Int("iterations")}
	if c.NArg() > 0 {
		return opts, usageError("run takes no arguments (got %q): plans come with --plan", c.Args().First())
	}
	if !slices.Contains(integration.SupportedMajors, c.Int("major")) {
		return opts, usageError("--major %d: use one of %v", c.Int("major"), integration.SupportedMajors)
	}
	if opts.Iterations < 1 {
		return opts, usageError("--iterations must be at least 1")
	}
	if path := c.String("plan"); path != "" {
		plans, err := explore.ReadPlans(path)
		if err != nil {
			return opts, usageError("--plan %s: %v", path, err)
		}
		opts.Plans = plans
	}
	if opts.Seed == 0 {
		opts.Seed = time.Now().UnixNano() % 1_000_000_000
	}
	bin, err := slotsyncBinary(c.String("slotsync"))
	if err != nil {
		return opts, err
	}
	opts.Slotsync = bin
	shadows := c.String("shadows")
	if explore.HasFailpoints(bin) {
		opts.Arm = explore.ArmFailpoint // failpoints are drawn too, and written ones armed
		if opts.Shadows, err = explore.ParseShadows(cmp.Or(shadows, "default")); err != nil {
			return opts, usageError("--shadows: %v", err)
		}
		return opts, nil
	}
	if shadows != "" && shadows != "none" {
		return opts, usageError("--shadows %s: gate mutants need a slotsync built with failpoints (go build -tags failpoints ./cmd/slotsync); %s was not",
			shadows, bin)
	}
	for _, p := range opts.Plans {
		if p.Failpoint != "" || p.Stall > 0 {
			return opts, usageError("--plan: %s stops slotsync at failpoint %q, which %s was not built with (go build -tags failpoints ./cmd/slotsync)",
				p.Name, p.Failpoint, bin)
		}
	}
	return opts, nil
}

// slotsyncBinary finds the binary judged: the one named, else slotsync beside this binary, else
// slotsync in PATH.
func slotsyncBinary(named string) (string, error) {
	if named != "" {
		if _, err := os.Stat(named); err != nil {
			return "", usageError("--slotsync %s: %v", named, err)
		}
		return filepath.Abs(named)
	}
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), "slotsync")
		if _, err := os.Stat(beside); err == nil {
			return beside, nil
		}
	}
	path, err := exec.LookPath("slotsync")
	if err != nil {
		return "", usageError("no slotsync binary beside this one or in PATH: give its path with --slotsync")
	}
	return path, nil
}

func appendReport(path string, its []explore.ChaosIteration) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, it := range its {
		if err := enc.Encode(it); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func printReport(w io.Writer, rep explore.ChaosReport) {
	for _, it := range rep.Iterations {
		verdict := "the gate was right"
		if it.Lies > 0 {
			verdict = fmt.Sprintf("THE GATE WAS WRONG %d times", it.Lies)
		}
		server := fmt.Sprint(it.Major)
		if it.ServerVersion != "" {
			server = it.ServerVersion
		}
		fmt.Fprintf(w, "failover %d (PostgreSQL %s, %s) %s\n  %s\n", it.Number, server, it.Method, verdict, it.Plan)
		for _, j := range it.Judged {
			fmt.Fprintf(w, "  %-20s %-20s %-11s lost %d, received again %d", j.Slot, j.Asked, j.Answer, j.Lost, j.Repeated)
			if j.Why != "" {
				fmt.Fprintf(w, ": %s", j.Why)
			}
			fmt.Fprintln(w)
		}
		for _, p := range it.Problems {
			fmt.Fprintf(w, "  PROBLEM: %s\n", p)
		}
	}
	rep.Tally.Markdown(w)
	if b := rep.Slotsync; b.SHA256 != "" {
		fmt.Fprintf(w, "slotsync judged: %s (sha256 %s, commit %s)\n", b.Path, b.SHA256, b.Commit)
	}
	t := rep.Tally.Total
	fmt.Fprintf(w, "seed %d, draw %d (replay an iteration with --seed <its seed> --iterations 1 under the same draw, or --plan with its JSON line): "+
		"%d failovers, %d READY answers checked, %d READY while loss, %d problems, %s\n",
		rep.Seed, explore.DrawVersion, rep.Tally.Failovers, t.Ready, t.Lies, t.Problems, map[bool]string{true: "PASS", false: "FAIL"}[rep.OK])
}
