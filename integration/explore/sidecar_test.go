package explore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSidecarCrashWhileStopping: a failpoint armed by the drill that crashes slotsync at its
// shutdown (the last journal save), or just before the stop with no time to start it again, is
// the drill's crash, counted as one; a process killed while stopping with no failpoint's last
// words is still a problem.
func TestSidecarCrashWhileStopping(t *testing.T) {
	const dieOnTerm = `trap 'echo "%s" >&2; kill -9 $$' TERM; echo started; while :; do sleep 0.05; done`
	for _, c := range []struct {
		name, script string
		problem      bool
	}{
		{"at a failpoint", fmt.Sprintf(dieOnTerm, "failpoint journal.save: crashing (SIGKILL)"), false},
		{"just before the stop", `echo "failpoint journal.save: crashing (SIGKILL)" >&2; kill -9 $$`, false},
		{"by itself", fmt.Sprintf(dieOnTerm, "something else"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			script := c.script
			s, err := newSidecar("/bin/sh", []string{"-c", script}, nil, filepath.Join(t.TempDir(), "log"))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go s.supervise(ctx)
			time.Sleep(150 * time.Millisecond) // within the supervisor's 300 ms before a restart
			err = s.stop(10 * time.Second)
			if got := err != nil; got != c.problem {
				t.Fatalf("stop: %v, want a problem: %v", err, c.problem)
			}
			if c.problem && !strings.Contains(err.Error(), "killed") {
				t.Fatalf("stop: %v", err)
			}
			if want := map[bool]int{false: 1, true: 0}[c.problem]; s.crashes != want {
				t.Fatalf("crashes %d, want %d", s.crashes, want)
			}
		})
	}
}
