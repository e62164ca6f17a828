//go:build failpoints

package failpoint

import (
	"os"
	"strings"
	stdsync "sync"
)

var (
	mutantsOnce stdsync.Once
	mutants     map[string]bool
)

// Mutant reports whether the safety check name is switched off in this process
// (SLOTSYNC_MUTANT, a comma-separated list of names; docs/RELIABILITY.md lists them). Only test
// builds read it: the fault explorer must show that it catches the gate without each check.
func Mutant(name string) bool {
	mutantsOnce.Do(func() {
		mutants = map[string]bool{}
		for _, n := range strings.Split(os.Getenv("SLOTSYNC_MUTANT"), ",") {
			if n = strings.TrimSpace(n); n != "" {
				mutants[n] = true
			}
		}
	})
	return mutants[name]
}
