// Command chaos-tally sums the fault explorer's reports (JSON lines, one iteration each, as
// TestChaos writes them with SLOTSYNC_CHAOS_REPORT) into the table docs/RELIABILITY.md carries.
//
//	go run ./scripts/chaos-tally report.pg13.jsonl report.pg14.jsonl ...
package main

import (
	"fmt"
	"os"

	"github.com/slotsync/slotsync/integration/drill"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: chaos-tally REPORT.jsonl...")
		os.Exit(3)
	}
	var all []drill.ChaosIteration
	for _, path := range os.Args[1:] {
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
	t := drill.TallyOf(all)
	t.Markdown(os.Stdout)
	fmt.Printf("\n%d failovers\n", t.Failovers)
}
