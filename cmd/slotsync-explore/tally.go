package main

import (
	"fmt"
	"os"

	"github.com/slotsync/slotsync/integration/explore"
	"github.com/urfave/cli/v2"
)

func tallyCommand() *cli.Command {
	return &cli.Command{
		Name:      "tally",
		Usage:     "sum run reports (JSON lines, one iteration each) into tables",
		ArgsUsage: "REPORT.jsonl...",
		Description: "By major and method (--by major), by fault over all majors (--by fault), or both crossed (--by all). " +
			"A damaged line stops that file's reading and is named; the lines before it count. " +
			"--rejudge judges each iteration again by this build's oracle, from the history the report keeps (from each answer's " +
			"figures for a report without one), and names each verdict that changed.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "by", Value: "all", Usage: "major, fault or all"},
			&cli.BoolFlag{Name: "rejudge", Usage: "judge each answer again by this build's oracle before the tally"},
		},
		Action: tallyAction,
	}
}

func tallyAction(c *cli.Context) error {
	by := c.String("by")
	if by != "major" && by != "fault" && by != "all" {
		return usageError("--by %q: use major, fault or all", by)
	}
	if c.NArg() == 0 {
		return usageError("tally needs at least one report file (JSON lines, as run --report writes them)")
	}
	var all []explore.ChaosIteration
	damaged := false
	for _, path := range c.Args().Slice() {
		f, err := os.Open(path)
		if err != nil {
			return cli.Exit(fmt.Sprintf("tally: %v", err), exitCannot)
		}
		its, err := explore.ReadIterations(f)
		f.Close()
		if err != nil {
			damaged = true
			fmt.Fprintf(c.App.ErrWriter, "%s: %v (%d iterations read before it)\n", path, err, len(its))
		}
		all = append(all, its...)
	}
	if c.Bool("rejudge") {
		changed := explore.Rejudge(all)
		for _, line := range changed {
			fmt.Fprintln(c.App.Writer, "judged again: "+line)
		}
		fmt.Fprintf(c.App.Writer, "%d verdicts changed when judged again\n\n", len(changed))
	}
	for i := range all {
		switch by {
		case "major":
			all[i].Faults = []explore.Fault{"all"}
		case "fault":
			all[i].Major, all[i].Method = 0, "all"
		}
	}
	t := explore.TallyOf(all)
	t.Markdown(c.App.Writer)
	fmt.Fprintf(c.App.Writer, "\n%d failovers\n", t.Failovers)
	if damaged {
		return cli.Exit("", exitFailed)
	}
	return nil
}
