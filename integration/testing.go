package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"
)

// ForEachMajor runs fn as a subtest "pgNN" for every major in majors (nil: all supported)
// that the environment asks for. With SLOTSYNC_PG_MAJORS set, a requested major whose binaries
// are missing fails with the command that gets them, and an unrequested one is skipped; unset,
// every major whose binaries are present runs and the others are skipped with that command.
func ForEachMajor(t *testing.T, majors []int, fn func(t *testing.T, major int)) {
	t.Helper()
	requested, explicit, err := RequestedMajors()
	if err != nil {
		t.Fatal(err)
	}
	if majors == nil {
		majors = SupportedMajors
	}
	for _, m := range majors {
		t.Run(fmt.Sprintf("pg%d", m), func(t *testing.T) {
			if explicit && !slices.Contains(requested, m) {
				t.Skipf("PostgreSQL %d not requested (%s=%s)", m, EnvMajors, os.Getenv(EnvMajors))
			}
			if os.Getenv(EnvBackend) != "docker" {
				if _, err := FindBinaries(m); err != nil {
					if explicit {
						t.Fatalf("PostgreSQL %d was requested in %s: %v", m, EnvMajors, err)
					}
					t.Skipf("%v (or set %s to choose majors)", err, EnvMajors)
				}
			}
			fn(t, m)
		})
	}
}

// StartPair starts a pair for a test and stops it when the test ends, also when it fails or
// panics. On failure the servers' logs are printed. With SLOTSYNC_BACKEND=docker and no
// reachable engine the test is skipped, saying why.
func StartPair(t testing.TB, opts Options) *Pair {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	if opts.Backend == "" {
		opts.Backend = os.Getenv(EnvBackend)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if opts.Backend == "docker" {
		if err := DockerAvailable(ctx); err != nil {
			t.Skipf("%s=docker: %v", EnvBackend, err)
		}
	}
	p, err := NewPair(ctx, opts)
	if err != nil {
		t.Fatalf("start PostgreSQL %d pair: %v", opts.Major, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			p.dumpLogs(t)
		}
		if err := p.Close(); err != nil {
			t.Errorf("stop pair: %v", err)
		}
	})
	return p
}

// dumpLogs prints the tail of each local server's log.
func (p *Pair) dumpLogs(t testing.TB) {
	for _, n := range []*Node{p.Primary, p.Standby} {
		if n == nil {
			continue
		}
		if s, ok := n.life.(*localServer); ok {
			t.Logf("%s log:%s", n.Name, s.logTail())
		}
	}
}
