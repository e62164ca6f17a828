package docker_test

import (
	"context"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/docker"
	"github.com/slotsync/slotsync/integration/pgtest"
)

// TestDockerBackend starts a pair of official postgres containers (pg_basebackup standby) and
// checks that the standby replays; it skips, saying why, when no Docker engine is reachable.
func TestDockerBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test runs on real PostgreSQL pairs")
	}
	opts, err := docker.With(context.Background(), integration.Options{Major: pgtest.DockerMajor(), Backend: "docker"})
	if err != nil {
		t.Skipf("docker: %v", err)
	}
	p := pgtest.StartPair(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Primary.Exec(ctx, "CREATE TABLE d AS SELECT 1 AS x"); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	var x int
	if err := p.Standby.QueryRow(ctx, "SELECT x FROM d", nil, &x); err != nil || x != 1 {
		t.Fatalf("standby read %d, %v", x, err)
	}
	// A server stopped or killed and started again is found where it was (the drills' faults
	// reach it by its address): Docker gives an unpinned published port a new host port at each
	// start.
	for _, n := range []*integration.Node{p.Standby, p.Primary} {
		before, err := n.Addr(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if err := n.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if after, err := n.Addr(ctx); err != nil || after != before {
			t.Fatalf("%s restarted and killed: at %s, %v; want %s, where it was", n.Name, after, err, before)
		}
	}
}
