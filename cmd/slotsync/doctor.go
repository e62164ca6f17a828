package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	slotsync "github.com/slotsync/slotsync/sync"
	"github.com/slotsync/slotsync/topology"
	"github.com/urfave/cli/v2"
)

// doctorResult is doctor's JSON answer.
type doctorResult struct {
	OK       bool            `json:"ok"`
	ExitCode int             `json:"exit_code"`
	Method   topology.Method `json:"method,omitempty"`
	Error    string          `json:"error,omitempty"`
	// Primary: doctor ran beside the node that is the primary now (exit 0).
	Primary string           `json:"primary,omitempty"`
	Checks  []topology.Check `json:"checks"`
}

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check every prerequisite on both nodes and print the exact fix for each failed one",
		Description: "Exit 0 when nothing blocks slotsync (warnings allowed), 1 when a prerequisite fails, " +
			"2 when a node cannot be reached, 3 on a usage or configuration error. Changes nothing.",
		Flags: append(pairFlags(),
			&cli.BoolFlag{Name: "json", Usage: "print JSON", EnvVars: []string{"SLOTSYNC_JSON"}},
		),
		Action: func(c *cli.Context) error {
			cfg, _, err := configure(c, true)
			if err != nil {
				if c.Bool("json") {
					writeJSON(c.App.Writer, doctorResult{ExitCode: exitCodeOf(err), Error: err.Error(), Checks: []topology.Check{}})
				}
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context, cfg.ObserveTimeout)
			defer cancel()
			res := diagnose(ctx, cfg)
			if c.Bool("json") {
				writeJSON(c.App.Writer, res)
			} else {
				printDoctor(c.App.Writer, res)
			}
			if res.ExitCode != exitOK {
				return cli.Exit("", res.ExitCode)
			}
			return nil
		},
	}
}

// diagnose reads both nodes and runs every check.
func diagnose(ctx context.Context, cfg slotsync.Config) doctorResult {
	fail := func(err error) doctorResult {
		return doctorResult{ExitCode: exitCodeOf(err), Error: err.Error(), Checks: []topology.Check{}}
	}
	snap, err := slotsync.Observe(ctx, cfg)
	if err == nil && !snap.Standby.Info.InRecovery {
		// The same flags on every node (roles move): beside the primary there is nothing to check.
		return doctorResult{OK: true, Primary: "this node is the primary: nothing to check here (slotsync syncs to standbys; run doctor beside one)",
			Checks: []topology.Check{}}
	}
	if err != nil {
		return fail(err)
	}
	pi, si := snap.Primary.Info, snap.Standby.Info
	method, err := topology.ChooseMethod(si, cfg.Method)
	if err != nil {
		return fail(err)
	}
	if method == topology.MethodNative && cfg.Native.Drive {
		si = topology.NativeDrive(si)
	}
	synced, phys, pslots, sslots := snap.SyncedStandbySlots, snap.Physical, snap.Primary.Slots, snap.Standby.Slots
	selected, unselected := cfg.Select.Unselected(pslots)
	standbyOnly := 0
	for name := range sslots {
		if _, ok := pslots[name]; !ok {
			standbyOnly++
		}
	}
	res := doctorResult{OK: true, Method: method, Checks: topology.Doctor(pi, si, phys, method, selected, standbyOnly, synced, unselected)}
	for _, ch := range res.Checks {
		if !ch.OK && ch.Severity == "error" {
			res.OK, res.ExitCode = false, exitNotReady
		}
	}
	return res
}

func printDoctor(w io.Writer, r doctorResult) {
	if r.Error != "" {
		fmt.Fprintf(w, "CANNOT CHECK: %s\n", r.Error)
		return
	}
	if r.Primary != "" {
		fmt.Fprintf(w, "PRIMARY: %s\n", r.Primary)
		return
	}
	fmt.Fprintf(w, "method: %s\n", r.Method)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tNODE\tRESULT\tPROBLEM\tFIX")
	for _, c := range r.Checks {
		result := "ok"
		if !c.OK {
			result = "FAIL"
			if c.Severity == "warning" {
				result = "WARN"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Name, c.Node, result, dash(c.Problem), dash(c.Fix))
	}
	tw.Flush()
	if r.OK {
		fmt.Fprintln(w, "OK: nothing blocks slotsync on this pair")
	} else {
		fmt.Fprintln(w, "FAILED: fix the checks marked FAIL, then run doctor again")
	}
}
