// Package drilltest runs slotsync's failover drill inside a Go test, for users' own CI.
package drilltest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/docker"
	"github.com/slotsync/slotsync/integration/drill"
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
	if testing.Short() {
		t.Skip("-short: a drill runs on real PostgreSQL pairs")
	}
	if pairOpts.Backend == "" {
		pairOpts.Backend = os.Getenv(integration.EnvBackend)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
	pairOpts, err := docker.With(dctx, pairOpts)
	dcancel()
	if err != nil {
		t.Skipf("a drill on Docker: %v", err)
	}
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
