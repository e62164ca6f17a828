package drill

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSidecarCrashWhileStopping: a failpoint armed by the drill that crashes slotsync at its
// shutdown (the last journal save) is the drill's crash, counted as one; a process killed while
// stopping with no failpoint's last words is still a problem.
func TestSidecarCrashWhileStopping(t *testing.T) {
	for _, c := range []struct {
		name, words string
		problem     bool
	}{
		{"at a failpoint", "failpoint journal.save: crashing (SIGKILL)", false},
		{"by itself", "something else", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			// On SIGTERM, say its last words and die by SIGKILL, as a failpoint does.
			script := `trap 'echo "` + c.words + `" >&2; kill -9 $$' TERM; echo started; while :; do sleep 0.05; done`
			s, err := newSidecar("/bin/sh", []string{"-c", script}, nil, filepath.Join(t.TempDir(), "log"))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go s.supervise(ctx)
			time.Sleep(300 * time.Millisecond)
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
