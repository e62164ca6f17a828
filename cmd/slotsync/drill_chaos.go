package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/drill"
	"github.com/urfave/cli/v2"
)

// drillChaos runs the chaos drill on throwaway local pairs with this very binary as the sidecar
// and the gate. Exit 0 when no READY was followed by a loss and nothing went wrong around it, 1
// otherwise, 2 when it could not run.
func drillChaos(ctx context.Context, c *cli.Context, p drillRun, stateDir string, log hclog.Logger) error {
	self, err := os.Executable()
	if err != nil {
		return cli.Exit("chaos drill: find this binary: "+err.Error(), exitConnect)
	}
	var plans []drill.Plan
	if path := c.String("plan"); path != "" {
		if plans, err = drill.ReadPlans(path); err != nil {
			return configError("--plan %s: %v", path, err)
		}
	}
	log.Info("chaos drill", "seed", p.seed, "iterations", p.iterations, "major", p.major, "plans", len(plans))
	rep, err := drill.Chaos(ctx, drill.ChaosOptions{Seed: p.seed, Iterations: p.iterations, Slotsync: self, StateDir: stateDir, Plans: plans,
		Logger: log.Named("chaos"), NewPair: func(ctx context.Context) (*integration.Pair, error) {
			return integration.NewPair(ctx, integration.Options{Major: p.major, Conf: drill.ChaosConf})
		}})
	if c.Bool("json") {
		writeJSON(c.App.Writer, rep)
	} else {
		printChaos(c.App.Writer, rep)
	}
	switch {
	case err != nil:
		return cli.Exit("chaos drill: "+err.Error(), exitConnect)
	case !rep.OK:
		return cli.Exit("", exitNotReady)
	}
	return nil
}

func printChaos(w io.Writer, rep drill.ChaosReport) {
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
	fmt.Fprintf(
		w,
		"seed %d, draw %d (replay an iteration with --seed <its seed> --iterations 1 under the same draw, or --plan with its JSON line): %d failovers, %d READY "+
			"answers checked, %d READY while loss, %d problems, %s\n",
		rep.Seed,
		drill.DrawVersion,
		rep.Tally.Failovers,
		t.Ready,
		t.Lies,
		t.Problems,
		map[bool]string{true: "PASS", false: "FAIL"}[rep.OK],
	)
}
