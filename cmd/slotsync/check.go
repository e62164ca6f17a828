package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	slotsync "github.com/slotsync/slotsync/sync"
	"github.com/slotsync/slotsync/topology"
	"github.com/urfave/cli/v2"
)

// checkResult is the JSON answer of `check` and of /promotion-ready: the gate's one answer type.
type checkResult = slotsync.Answer

// newCheckResult is the gate's answer from a pass (slotsync.AnswerOf).
func newCheckResult(rep *slotsync.Report, err error) checkResult { return slotsync.AnswerOf(rep, err) }

// failJSON answers a command that could not start judging: with --json the error is printed as
// JSON on stdout as well (exit code and message as without it), so machines always get JSON.
func failJSON(c *cli.Context, err error) error {
	if c.Bool("json") {
		writeJSON(c.App.Writer, newCheckResult(nil, err))
	}
	return err
}

// inspector builds a read-only engine for check and status.
func inspector(c *cli.Context) (*slotsync.Engine, error) {
	cfg, _, err := configure(c, true)
	if err != nil {
		return nil, err
	}
	eng, err := slotsync.New(cfg)
	if err != nil {
		return nil, classifyExit(err)
	}
	return eng, nil
}

func checkCommand() *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "the promotion gate: is it safe to promote the standby now, for every consumer?",
		Description: "Exit 0 when every selected slot's standby copy is READY, 1 when any is not (each is named, with " +
			"the reason and the byte distances), 2 when a node cannot be reached, 3 on a usage or configuration error. " +
			"Changes nothing.",
		Flags: append(pairFlags(),
			&cli.BoolFlag{Name: "json", Usage: "print JSON (schema: docs/CLI.md)", EnvVars: []string{"SLOTSYNC_JSON"}},
			&cli.DurationFlag{Name: "wait", Usage: "keep checking until ready or this long has passed", EnvVars: []string{"SLOTSYNC_WAIT"}},
			&cli.BoolFlag{Name: "summary", Usage: "with --json: list only the slots that are not READY (a hook's answer; the full one lists every slot)", EnvVars: []string{"SLOTSYNC_SUMMARY"}},
			&cli.BoolFlag{Name: "for-promotion", Usage: "the question of a promotion hook, asked after the HA manager demoted the primary: an old primary that answers read-write is alive (CANNOT TELL, exit 2, primary_alive): promoting now would make two primaries", EnvVars: []string{"SLOTSYNC_FOR_PROMOTION"}},
		),
		Action: func(c *cli.Context) error {
			if c.Duration("wait") < 0 {
				return failJSON(c, configError("--wait %s: give a positive duration (or leave it out to answer at once)", c.Duration("wait")))
			}
			eng, err := inspector(c)
			if err != nil {
				return failJSON(c, err)
			}
			defer eng.Close()
			start := time.Now()
			deadline, lastProgress := start.Add(c.Duration("wait")), start
			for {
				rep, err := eng.Inspect(c.Context)
				res := newCheckResult(&rep, err)
				done := res.Ready || res.ExitCode == exitUsage || time.Now().After(deadline) || c.Context.Err() != nil
				if !done && time.Since(lastProgress) >= progressEvery {
					// A long wait says what it waits for, at a steady rhythm (stderr: stdout is the answer).
					lastProgress = time.Now()
					what := res.Error
					if what == "" {
						what = "not ready: " + strings.Join(res.NotReady, ", ")
					}
					fmt.Fprintf(c.App.ErrWriter, "still waiting after %s (up to %s): %s\n", time.Since(start).Round(time.Second), c.Duration("wait"), what)
				}
				if done {
					if c.Bool("json") && c.Bool("summary") {
						writeJSON(c.App.Writer, res.Summary())
					} else if c.Bool("json") {
						writeJSON(c.App.Writer, res)
					} else {
						printCheck(c.App.Writer, res)
					}
					if res.ExitCode != exitOK {
						return cli.Exit("", res.ExitCode)
					}
					return nil
				}
				select {
				case <-c.Context.Done():
				case <-time.After(time.Second):
				}
			}
		},
	}
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func printCheck(w io.Writer, r checkResult) {
	if r.Report != nil && r.Role == slotsync.RolePrimary {
		fmt.Fprintf(w, "PRIMARY: %s\n", r.Error)
		return
	}
	if r.Error != "" {
		label := "CANNOT TELL"
		if r.ExitCode == exitUsage {
			label = "CONFIGURATION ERROR"
		}
		fmt.Fprintf(w, "%s: %s\n", label, r.Error)
		return
	}
	if wp := r.WithoutPrimary; wp != nil {
		fmt.Fprintf(w, "JUDGED WITHOUT THE PRIMARY (%s), from its last observation at %s (%.1f s old)\n%s\n\n",
			wp.Why, wp.ObservedAt.Format(time.RFC3339), wp.AgeSeconds, wp.Meaning)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tDATABASE\tPLUGIN\tREADY\tSYNC LAG\tWHY")
	for _, s := range r.Slots {
		if !s.Gate {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Database, s.Plugin, yesNo(s.Verdict.Ready),
			lagText(s), s.Verdict.Detail)
	}
	tw.Flush()
	for _, wn := range r.Warnings {
		fmt.Fprintf(w, "warning: %s: %s (fix: %s)\n", wn.Node, wn.Issue, wn.Fix)
	}
	printRedelivery(w, r.Redelivery)
	for _, a := range r.ConsumersAhead {
		fmt.Fprintf(w, "consumer of %s is %s ahead of the standby: a promotion now would hand it a history without changes it already "+
			"received\n", a.Slot, bytesText(a.Bytes))
	}
	if r.Ready {
		fmt.Fprintf(w, "READY: promoting the standby now loses nothing for any of %d slots\n", countGated(r.Slots))
		return
	}
	if r.NothingSelected != "" {
		fmt.Fprintf(w, "NOT READY: %s\n", r.NothingSelected)
		return
	}
	fmt.Fprintf(w, "NOT READY: a promotion now would lose or force a resnapshot for: %s\n", strings.Join(r.NotReady, ", "))
}

// printRedelivery says, per READY copy behind its consumer, what a promotion now may deliver again.
func printRedelivery(w io.Writer, windows []slotsync.Redelivery) {
	for _, rd := range windows {
		fmt.Fprintf(w, "redelivery window of %s: %s to %s (%s%s): after a promotion now, a consumer that resumes from its slot's position (not its own) receives "+
			"these again\n",
			rd.Slot, rd.From, rd.To, map[bool]string{true: "at least ", false: ""}[rd.AtLeast], bytesText(rd.Bytes))
	}
}

func countGated(slots []slotsync.SlotReport) int {
	n := 0
	for _, s := range slots {
		if s.Gate {
			n++
		}
	}
	return n
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

// bytesText renders a byte count for people.
func bytesText(n int64) string {
	sign := ""
	if n < 0 {
		sign, n = "-", -n
	}
	switch {
	case n < 1024:
		return fmt.Sprintf("%s%d B", sign, n)
	case n < 1024*1024:
		return fmt.Sprintf("%s%.1f KiB", sign, float64(n)/1024)
	case n < 1024*1024*1024:
		return fmt.Sprintf("%s%.1f MiB", sign, float64(n)/(1024*1024))
	}
	return fmt.Sprintf("%s%.1f GiB", sign, float64(n)/(1024*1024*1024))
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "both nodes' slots side by side: positions, lag, retained WAL, readiness and why",
		Flags: append(pairFlags(),
			&cli.BoolFlag{Name: "json", Usage: "print JSON (the check schema)", EnvVars: []string{"SLOTSYNC_JSON"}},
		),
		Action: func(c *cli.Context) error {
			eng, err := inspector(c)
			if err != nil {
				return failJSON(c, err)
			}
			defer eng.Close()
			rep, err := eng.Inspect(c.Context)
			res := newCheckResult(&rep, err)
			if res.Error == "" {
				res.ExitCode = exitOK // status shows; readiness is check's answer (docs/CLI.md, exit codes)
			}
			if c.Bool("json") {
				writeJSON(c.App.Writer, res)
			} else if res.Error != "" || res.WithoutPrimary != nil {
				printCheck(c.App.Writer, res)
			} else {
				printStatus(c.App.Writer, res)
			}
			if res.Error != "" {
				return cli.Exit("", res.ExitCode)
			}
			return nil
		},
	}
}

func printStatus(w io.Writer, r checkResult) {
	fmt.Fprintf(w, "primary: system %s, PostgreSQL %s, WAL at %s\n", r.Primary.SystemID, topology.Version(r.Primary.VersionNum), r.Primary.WALEnd)
	fmt.Fprintf(w, "standby: replayed %s, holds WAL to %s; method %s\n\n", r.Standby.ReplayLSN, r.Standby.WALEnd, r.Method)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tDATABASE\tPLUGIN\tPRIMARY CONFIRMED\tCOPY CONFIRMED\tSYNC LAG\tRETAINED P/S\tWAL P/S\tREADY\tACTION\tWHY")
	slots := append([]slotsync.SlotReport(nil), r.Slots...)
	sort.Slice(slots, func(i, j int) bool { return slots[i].Name < slots[j].Name })
	for _, s := range slots {
		pc, cc := "-", "-"
		if s.Primary != nil {
			pc = s.Primary.ConfirmedFlush.String()
		}
		if s.Copy != nil {
			cc = s.Copy.ConfirmedFlush.String()
		}
		ready, why := "-", s.Reason
		if s.Gate {
			ready, why = yesNo(s.Verdict.Ready), s.Verdict.Detail
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s / %s\t%s / %s\t%s\t%s\t%s\n", s.Name, s.Database, s.Plugin, pc, cc,
			lagText(s), bytesText(s.PrimaryRetainedWALBytes), copyRetained(s),
			dash(s.PrimaryWALStatus), dash(s.CopyWALStatus), ready, s.Action, why)
	}
	tw.Flush()
	printRedelivery(w, r.Redelivery)
	for _, name := range r.StandbyOnly {
		fmt.Fprintf(w, "standby-only slot %s: not on the primary and not made by slotsync (never touched; it holds WAL and catalog rows on the standby until "+
			"someone drops it)\n", name)
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(w, "warning: %s: %s (fix: %s)\n", wn.Node, wn.Issue, wn.Fix)
	}
}

// lagText is a copy's sync lag, or "-" when there is no copy to lag (a 0 B beside a missing copy
// reads as in sync).
func lagText(s slotsync.SlotReport) string {
	if s.Copy == nil {
		return "-"
	}
	return bytesText(s.Verdict.SyncLagBytes)
}

func copyRetained(s slotsync.SlotReport) string {
	if s.Copy == nil {
		return "-"
	}
	return bytesText(s.CopyRetainedWALBytes)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// progressEvery is the rhythm of progress lines during long waits.
const progressEvery = 10 * time.Second
