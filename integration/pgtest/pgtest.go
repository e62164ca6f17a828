// Package pgtest ties real PostgreSQL pairs to Go tests: one subtest per requested major, and a
// pair stopped when its test ends, also on failure. It links the Docker backend (for
// SLOTSYNC_BACKEND=docker) only in builds with the tag docker, so unit tests do not compile it.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
)

// withDocker gives options the Docker backend's Launch, or says why it cannot run; nil unless
// the tests are built with the tag docker (docker.go), or the caller sets Options.Launch.
var withDocker func(ctx context.Context, opts integration.Options) (integration.Options, error)

// EnvDockerImage names the image the Docker backend's tests use (default: the official
// postgres:<major>); EnvDockerMajor, the major they run (default 17), which must match it.
const (
	EnvDockerImage = "SLOTSYNC_DOCKER_IMAGE"
	EnvDockerMajor = "SLOTSYNC_DOCKER_MAJOR"
)

// DockerMajor is the major the Docker backend's tests run: $SLOTSYNC_DOCKER_MAJOR, else 17.
func DockerMajor() int {
	if m, err := strconv.Atoi(os.Getenv(EnvDockerMajor)); err == nil {
		return m
	}
	return 17
}

// ForEachMajor (skipped with -short) runs fn as a subtest "pgNN" for every major in majors (nil: all supported)
// that the environment asks for. With SLOTSYNC_PG_MAJORS set, a requested major whose binaries
// are missing fails with the command that gets them, and an unrequested one is skipped; unset,
// every major whose binaries are present runs and the others are skipped with that command.
func ForEachMajor(t *testing.T, majors []int, fn func(t *testing.T, major int)) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test runs on real PostgreSQL pairs")
	}
	requested, explicit, err := integration.RequestedMajors()
	if err != nil {
		t.Fatal(err)
	}
	if majors == nil {
		majors = integration.SupportedMajors
	}
	for _, m := range majors {
		t.Run(fmt.Sprintf("pg%d", m), func(t *testing.T) {
			if explicit && !slices.Contains(requested, m) {
				t.Skipf("PostgreSQL %d not requested (%s=%s)", m, integration.EnvMajors, os.Getenv(integration.EnvMajors))
			}
			if os.Getenv(integration.EnvBackend) != "docker" {
				if _, err := integration.FindBinaries(m); err != nil {
					if explicit {
						t.Fatalf("PostgreSQL %d was requested in %s: %v", m, integration.EnvMajors, err)
					}
					t.Skipf("%v (or set %s to choose majors)", err, integration.EnvMajors)
				}
			}
			fn(t, m)
		})
	}
}

// StartPair starts a pair for a test and stops it when the test ends, also when it fails or
// panics. On failure the servers' logs are printed. The Docker backend (Backend "docker", or
// SLOTSYNC_BACKEND=docker) runs Options.Launch, docker.Launch in builds with the tag docker;
// without a reachable engine the test is skipped, saying why.
func StartPair(t testing.TB, opts integration.Options) *integration.Pair {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test runs on real PostgreSQL pairs")
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	if opts.Backend == "" {
		opts.Backend = os.Getenv(integration.EnvBackend)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if opts.Backend == "docker" && opts.Image == "" {
		opts.Image = os.Getenv(EnvDockerImage)
	}
	if opts.Backend == "docker" && opts.Launch == nil {
		if withDocker == nil {
			t.Fatalf(
				"%s=docker: the Docker backend is not linked into these tests: run them with -tags docker (scripts/test.sh does when %s=docker), or set Options.Launch "+
					"to docker.Launch",
				integration.EnvBackend,
				integration.EnvBackend,
			)
		}
		var err error
		if opts, err = withDocker(ctx, opts); err != nil {
			t.Skipf("%s=docker: %v", integration.EnvBackend, err)
		}
	}
	p, err := integration.NewPair(ctx, opts)
	if err != nil {
		t.Fatalf("start PostgreSQL %d pair: %v", opts.Major, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(p.LogTails())
		}
		if err := p.Close(); err != nil {
			t.Errorf("stop pair: %v", err)
		}
	})
	return p
}
