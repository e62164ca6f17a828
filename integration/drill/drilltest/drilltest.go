// Package drilltest runs slotsync's failover drill inside a Go test, for users' own CI.
package drilltest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/docker"
	"github.com/slotsync/slotsync/integration/drill"
	"github.com/slotsync/slotsync/integration/explore"
	"github.com/slotsync/slotsync/integration/pgtest"
)

// Check runs a drill in a Go test: it starts a pair as pairOpts say (set Backend "docker" to use
// testcontainers-go with the official postgres image or pairOpts.Image, or leave it to
// SLOTSYNC_BACKEND), fails
// over with live consumers, and fails the test when any change is lost or repeated. Without a
// reachable Docker engine a Docker drill is skipped, saying why. Use it from your own CI:
//
//	func TestFailoverKeepsOurSlots(t *testing.T) {
//		drilltest.Check(t, integration.Options{Major: 17, Backend: "docker"}, drill.Options{Kill: true})
//	}
func Check(t testing.TB, pairOpts integration.Options, opts drill.Options) drill.Verdict {
	t.Helper()
	pairOpts = backend(t, pairOpts)
	pair := pgtest.StartPair(t, pairOpts)
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	v, err := drill.Run(ctx, pair, opts)
	if err != nil {
		t.Fatalf("drill on PostgreSQL %d could not run: %v", pairOpts.Major, err)
	}
	if len(v.Failovers) == 0 {
		t.Fatalf("drill on PostgreSQL %d: no failover was carried out", pairOpts.Major)
	}
	for _, f := range v.Failovers {
		if len(f.Slots) == 0 {
			t.Errorf("failover %d (%s): no slot was checked", f.Number, f.Mode)
		}
		for _, s := range f.Slots {
			switch {
			case !s.OK:
				t.Errorf("failover %d (%s), slot %s: lost %v, repeated %v, ahead of the new primary %v",
					f.Number, f.Mode, s.Slot, s.Lost, s.Repeated, s.Ahead)
			case s.Durable == 0 || s.Resumed == 0:
				// Nothing confirmed before, or nothing received after: the failover proved nothing.
				t.Errorf("failover %d (%s), slot %s: %d changes confirmed before, %d received after: nothing was proven",
					f.Number, f.Mode, s.Slot, s.Durable, s.Resumed)
			default:
				t.Logf("failover %d (%s), slot %s: %d changes confirmed before, %d received after from %s, none lost or repeated",
					f.Number, f.Mode, s.Slot, s.Durable, s.Resumed, s.Confirmed)
			}
		}
	}
	if !v.OK && !t.Failed() {
		t.Errorf("drill on PostgreSQL %d: not OK", pairOpts.Major)
	}
	return v
}

// Chaos runs the chaos drill in a Go test: iterations failovers at random moments under faults
// drawn from seed (iteration i from seed+i; 0: from the clock), each on a new pair started as
// pairOpts say (Docker with your image works as for Check), with the slotsync binary at
// slotsync (empty: the one in PATH) as the sidecar and as the gate an HA hook asks. It fails the
// test when the gate said READY and a consumer then lost a change, or when the standby was left
// down or slotsync exited by itself, and logs the seed that replays it.
func Chaos(t testing.TB, pairOpts integration.Options, slotsync string, iterations int, seed int64) explore.ChaosReport {
	t.Helper()
	pairOpts = backend(t, pairOpts)
	pairOpts.Conf = append(pairOpts.Conf, explore.ChaosConf...)
	if slotsync == "" {
		path, err := exec.LookPath("slotsync")
		if err != nil {
			t.Fatalf("chaos drill: no slotsync binary in PATH; install it or pass its path: %v", err)
		}
		slotsync = path
	}
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(iterations)*4*time.Minute)
	defer cancel()
	rep, err := explore.Chaos(ctx, explore.ChaosOptions{Seed: seed, Iterations: iterations, Slotsync: slotsync, StateDir: t.TempDir(),
		NewPair: func(ctx context.Context) (*integration.Pair, error) { return integration.NewPair(ctx, pairOpts) }})
	t.Logf("chaos drill, seed %d", seed)
	for _, it := range rep.Iterations {
		t.Logf("failover %d (seed %d, PostgreSQL %d, %s): %s", it.Number, it.Seed, it.Major, it.Method, it.Plan)
		for _, j := range it.Judged {
			if j.Lie {
				t.Errorf("failover %d, slot %s: %s", it.Number, j.Slot, j.Why)
			}
		}
		for _, p := range it.Problems {
			t.Errorf("failover %d: %s", it.Number, p)
		}
	}
	if err != nil {
		t.Fatalf("chaos drill could not run: %v", err)
	}
	return rep
}

// backend completes pairOpts as a drill needs them: the backend from SLOTSYNC_BACKEND when not
// given, the Docker image from SLOTSYNC_DOCKER_IMAGE when not given, and Docker's Launch; it
// skips the test in -short runs and without a reachable Docker engine, saying why.
func backend(t testing.TB, pairOpts integration.Options) integration.Options {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: a drill runs on real PostgreSQL pairs")
	}
	if pairOpts.Backend == "" {
		pairOpts.Backend = os.Getenv(integration.EnvBackend)
	}
	if pairOpts.Backend == "docker" && pairOpts.Image == "" {
		pairOpts.Image = os.Getenv(pgtest.EnvDockerImage)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pairOpts, err := docker.With(ctx, pairOpts)
	if err != nil {
		t.Skipf("a drill on Docker: %v", err)
	}
	return pairOpts
}
