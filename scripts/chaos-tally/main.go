// Command chaos-tally sums the fault explorer's reports (JSON lines, one iteration each, as
// TestChaos writes them with SLOTSYNC_CHAOS_REPORT) into the tables docs/RELIABILITY.md carries:
// by major and method (-by major), by fault over all majors (-by fault), or both crossed
// (-by all, the default).
//
//	go run ./scripts/chaos-tally [-by major|fault|all] report.pg13.jsonl report.pg14.jsonl ...
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/slotsync/slotsync/integration/drill"
)

func main() {
	by := flag.String("by", "all", "major, fault or all")
	flag.Parse()
	if flag.NArg() == 0 || (*by != "major" && *by != "fault" && *by != "all") {
		fmt.Fprintln(os.Stderr, "usage: chaos-tally [-by major|fault|all] REPORT.jsonl...")
		os.Exit(3)
	}
	var all []drill.ChaosIteration
	for _, path := range flag.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		its, err := drill.ReadIterations(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v (%d iterations read before it)\n", path, err, len(its))
		}
		all = append(all, its...)
	}
	for i := range all {
		switch *by {
		case "major":
			all[i].Faults = []drill.Fault{"all"}
		case "fault":
			all[i].Major, all[i].Method = 0, "all"
		}
	}
	t := drill.TallyOf(all)
	t.Markdown(os.Stdout)
	fmt.Printf("\n%d failovers\n", t.Failovers)
}
