package pgtest

import (
	"bytes"
	"os"
	stdsync "sync"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
)

// The test kit every package's tests share: one way to wait, to fail on an error, to get a
// port, and to collect a process's output while the test reads it.

// EnvQuick names the environment variable that leaves the slow tier out: SLOTSYNC_QUICK=1
// scripts/test.sh is a quicker loop on real pairs; CI runs every tier.
const EnvQuick = "SLOTSYNC_QUICK"

// Slow marks a test of the slow tier, one run of which (one major) takes over a minute: under
// SLOTSYNC_QUICK=1 it is skipped, saying so; otherwise it runs.
func Slow(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvQuick) == "1" {
		t.Skip("the slow tier (a run of over a minute), left out under " + EnvQuick + "=1")
	}
}

// Must fails the test at once on a non-nil err.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// WaitFor checks ok every 100 ms until it holds, and fails the test, naming what, after timeout.
func WaitFor(t testing.TB, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// FreePort is a free loopback TCP port.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := integration.FreePort()
	Must(t, err)
	return port
}

// LockedBuffer collects output written from other goroutines (a process, a logger) while the
// test reads it.
type LockedBuffer struct {
	mu  stdsync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
