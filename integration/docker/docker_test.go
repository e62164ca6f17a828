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
}
