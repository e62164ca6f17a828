package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"text/tabwriter"

	slotsync "github.com/slotsync/slotsync/sync"
	"github.com/slotsync/slotsync/sync/method/statefile"
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
			&cli.StringFlag{Name: "standby-data-dir", Usage: "statefile: the standby's data directory, checked as the daemon would (it is the standby's, and this user owns it)", EnvVars: []string{"SLOTSYNC_STANDBY_DATA_DIR"}},
			&cli.DurationFlag{Name: "exact-copy-after", Usage: "sql and native methods: the daemon's --exact-copy-after; exact copies are state-file copies, so the state-file method's checks apply too", EnvVars: []string{"SLOTSYNC_EXACT_COPY_AFTER"}},
		),
		Action: func(c *cli.Context) error {
			cfg, _, err := configure(c, true)
			if err != nil {
				if c.Bool("json") {
					writeJSON(c.App.Writer, doctorResult{ExitCode: exitCodeOf(err), Error: err.Error(), Checks: []topology.Check{}})
				}
				return err
			}
			cfg.ExactCopyAfter = c.Duration("exact-copy-after")
			ctx, cancel := context.WithTimeout(c.Context, cfg.ObserveTimeout)
			defer cancel()
			res := diagnose(ctx, cfg, c.String("standby-data-dir"))
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
func diagnose(ctx context.Context, cfg slotsync.Config, dataDir string) doctorResult {
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
	synced, phys, pslots, sslots := snap.SyncedStandbySlots, snap.Physical, snap.Primary.Slots, snap.Standby.Slots
	selected, unselected := cfg.Select.Unselected(pslots)
	standbyOnly := 0
	for name := range sslots {
		if _, ok := pslots[name]; !ok {
			standbyOnly++
		}
	}
	res := doctorResult{OK: true, Method: method, Checks: topology.Doctor(topology.DoctorInput{Primary: pi, Standby: si, Physical: phys, Method: method,
		Drive: method == topology.MethodNative && cfg.Native.Drive, PrimarySlots: selected, StandbySlots: standbyOnly, Unselected: unselected, Synced: synced,
		StandbySlotList: sslots, ExactCopies: cfg.ExactCopyAfter > 0})}
	if (method == topology.MethodStatefile || cfg.ExactCopyAfter > 0) && dataDir != "" {
		res.Checks = append(res.Checks, dataDirCheck(dataDir, si))
	}
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

// dataDirCheck is the state-file method's check of --standby-data-dir, before any standby is
// stopped: the directory is the standby's (statefile.VerifyDataDir) and this user owns it (the
// copies it installs must be the server's files).
func dataDirCheck(dir string, standby topology.NodeInfo) topology.Check {
	c := topology.Check{Name: "standby_data_dir", Node: "standby", OK: true, Severity: "error"}
	fail := func(problem, fix string) topology.Check {
		c.OK, c.Problem, c.Fix = false, problem, fix
		return c
	}
	if err := statefile.VerifyDataDir(dir, standby); err != nil {
		var ce *topology.ConfigError
		if errors.As(err, &ce) {
			return fail(ce.Problem, ce.Fix)
		}
		return fail(err.Error(), "give --standby-data-dir the standby's data directory")
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fail(err.Error(), "give --standby-data-dir the standby's data directory")
	}
	// root may give the files it installs to the owner; any other user must be the owner.
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() && os.Getuid() != 0 {
		return fail(fmt.Sprintf("%s is owned by uid %d, and slotsync runs as uid %d: the copies it installs would not be the server's", dir, sys.Uid, os.Getuid()),
			"run slotsync as the data directory's owner (usually postgres), as examples/systemd/statefile.conf does")
	}
	return c
}
