package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	slotsync "github.com/slotsync/slotsync/sync"
	"github.com/slotsync/slotsync/topology"
)

// TestExitCodesFollowTheOneClassification: the exit code is read off slotsync.CauseOf, the
// same sorting that decides the engine's retries, so the two cannot drift apart.
func TestExitCodesFollowTheOneClassification(t *testing.T) {
	cases := []struct {
		err  error
		code int
	}{
		{&topology.ConfigError{Field: "method", Problem: "is unknown", Fix: "use auto"}, exitUsage},
		{&topology.PrereqError{}, exitUsage},
		{fmt.Errorf("wrapped: %w", slotsync.ErrUnsupportedMethod), exitUsage},
		{&topology.ConnError{Role: "standby", Err: &pgconn.PgError{Code: "28P01"}}, exitUsage},
		{&pgconn.PgError{Code: "42501", Message: "permission denied"}, exitUsage},
		{&slotsync.NodeError{Node: "standby", Err: &topology.ConnError{Err: errors.New("refused")}}, exitConnect},
		{&slotsync.NodeError{Node: "primary", Err: topology.ErrNoPrimaryConninfo}, exitConnect},
		{topology.ErrPromoted, exitNotReady},
		{errors.New("anything else"), exitConnect},
	}
	for _, c := range cases {
		if got := exitCodeOf(c.err); got != c.code {
			t.Errorf("%v: exit %d, want %d", c.err, got, c.code)
		}
		cause := slotsync.CauseOf(c.err)
		stop := slotsync.Classify(c.err) == slotsync.Stop
		if (c.code == exitUsage || c.code == exitNotReady) != stop || (c.code == exitUsage) != (cause == slotsync.CauseHuman) {
			t.Errorf("%v: exit %d but the engine classes it %v (%v)", c.err, c.code, slotsync.Classify(c.err), cause)
		}
	}
}

// TestSidecarLinksNoTestCode: the production binary does not link the test harness, containers
// or the drill's test helpers (integration/pgtest, integration/docker, drill/drilltest).
func TestSidecarLinksNoTestCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "testing" || harnessModule(pkg) != "" || strings.HasSuffix(pkg, "/pgtest") ||
			strings.HasSuffix(pkg, "/drilltest") || strings.HasSuffix(pkg, "integration/docker") || strings.HasSuffix(pkg, "integration/explore") {
			t.Errorf("the slotsync binary links %s", pkg)
		}
	}
}

// harnessModule names the test or container module text mentions, if any: what the sidecar
// binary must never link.
func harnessModule(text string) string {
	for _, m := range []string{"testify", "testcontainers", "github.com/docker/", "github.com/moby/", "opentelemetry"} {
		if strings.Contains(text, m) {
			return m
		}
	}
	return ""
}

// maxReleaseBytes is the aim for the stripped release binary (docs/BENCHMARKS.md): 16.5 MB, and
// 0.7 MB more for the exporters' TLS and basic authentication (prometheus/exporter-toolkit). The
// fault explorer is its own program (cmd/slotsync-explore) and stays out. A new dependency still
// shows here, and in the modules checked below.
const maxReleaseBytes = 17_200_000

// TestReleaseBinaryIsLean builds the binary as releases and the image do (the build tags of
// .goreleaser.yaml, which the Dockerfile must use too; -trimpath, -s -w, static) and checks it
// against the size aim, and what Go records of it against the test harness's modules.
func TestReleaseBinaryIsLean(t *testing.T) {
	pgtest.Slow(t)
	if testing.Short() {
		t.Skip("-short: builds the release binary twice (the full run checks it)")
	}
	gr, err := os.ReadFile("../../.goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	df, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`-tags=(\S+)`).FindSubmatch(gr)
	if m == nil {
		t.Fatal(".goreleaser.yaml gives the build no -tags")
	}
	tags := string(m[1])
	if !strings.Contains(string(df), "-tags "+tags+" ") {
		t.Fatalf("the Dockerfile must build with the release's tags (-tags %s)", tags)
	}
	bin := filepath.Join(t.TempDir(), "slotsync")
	cmd := exec.Command("go", "build", "-trimpath", "-tags", tags, "-ldflags", "-s -w", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release build: %v\n%s", err, out)
	}
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("release binary (%s/%s, -tags %s): %d bytes", runtime.GOOS, runtime.GOARCH, tags, st.Size())
	if st.Size() > maxReleaseBytes {
		t.Errorf("the release binary is %d bytes, over the %d aim: see what a new dependency brought", st.Size(), maxReleaseBytes)
	}
	mods, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if m := harnessModule(string(mods)); m != "" {
		t.Errorf("the release binary records module %s", m)
	}
	// No failpoints: they exist only in builds with the tag failpoints (the fault tests').
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(failpointMark)) {
		t.Errorf("the release binary has failpoints (%q found)", failpointMark)
	}
	withFP := filepath.Join(t.TempDir(), "slotsync-failpoints")
	if out, err := exec.Command("go", "build", "-tags", tags+",failpoints", "-o", withFP, ".").CombinedOutput(); err != nil {
		t.Fatalf("failpoint build: %v\n%s", err, out)
	}
	if data, err := os.ReadFile(withFP); err != nil || !bytes.Contains(data, []byte(failpointMark)) {
		t.Errorf("a build with the tag failpoints does not show %q: this check proves nothing (%v)", failpointMark, err)
	}
}

// failpointMark is text only the failpoint build links (internal/failpoint/on.go).
const failpointMark = "SLOTSYNC_FAILPOINTS"

// TestVersionSaysWhereTheBinaryCameFrom: version, commit, build date and Go version, from the
// release build's -ldflags, or else from what Go records of the module and the VCS.
func TestVersionSaysWhereTheBinaryCameFrom(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "slotsync")
	ld := "-X main.version=v1.2.3 -X main.commit=abc1234 -X main.date=2026-11-29T00:00:00Z"
	if out, err := exec.Command("go", "build", "-ldflags", ld, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "slotsync v1.2.3 (commit abc1234, built 2026-11-29T00:00:00Z, "+runtime.Version()+")" {
		t.Fatalf("version: %q %v", out, err)
	}
	if flag, err := exec.Command(bin, "--version").Output(); err != nil || string(flag) != string(out) {
		t.Fatalf("--version says %q, version says %q (%v): one version string", flag, out, err)
	}
	if b := currentBuild(); b.Version == "" || b.Commit == "" || b.Date == "" || b.GoVersion != runtime.Version() {
		t.Fatalf("a build without -ldflags: %+v", b)
	}
}

// TestDrillAgainstAGivenPair: a drill that promotes someone's standby asks for --promote-yes,
// takes its pair from the command line only, refuses two nodes that are not one pair, says what
// it will do, and then runs.
func TestDrillAgainstAGivenPair(t *testing.T) {
	pgtest.ForEachMajor(t, []int{17}, func(t *testing.T, major int) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		pair := pgtest.StartPair(t, integration.Options{Major: major})
		p, s := pair.Primary.DSN("postgres"), pair.Standby.DSN("postgres")
		stillStandby := func(when string) {
			t.Helper()
			if rec, err := pair.Standby.InRecovery(ctx); err != nil || !rec {
				t.Fatalf("%s: the standby was promoted (%v)", when, err)
			}
		}
		if r := slotsyncCmd(t, nil, "drill", "--primary", p, "--standby", s); r.code != exitUsage || !strings.Contains(r.stderr, "--promote-yes") {
			t.Fatalf("without --promote-yes: %d %s", r.code, r.stderr)
		}
		stillStandby("without --promote-yes")
		if r := slotsyncCmd(t, []string{"SLOTSYNC_PRIMARY=" + p, "SLOTSYNC_STANDBY=" + s}, "drill", "--promote-yes"); r.code != exitUsage || !strings.Contains(r.stderr, "command line") {
			t.Fatalf("DSNs from the environment only: %d %s", r.code, r.stderr)
		}
		stillStandby("DSNs from the environment")
		if r := slotsyncCmd(t, nil, "drill", "--primary", p, "--standby", p, "--promote-yes"); r.code != exitUsage || !strings.Contains(r.stderr, "not in recovery") {
			t.Fatalf("two nodes that are not one pair: %d %s", r.code, r.stderr)
		}
		stillStandby("not one pair")
		r := slotsyncCmd(t, nil, "drill", "--primary", p, "--standby", s, "--promote-yes", "--duration", "1s", "--json")
		if r.code != 0 || !strings.Contains(r.stderr, "PROMOTES the standby") {
			t.Fatalf("the drill: %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
	})
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"256MB": 256 << 20, "1GB": 1 << 30, "512kB": 512 << 10, "4096": 4096, " 2 GB ": 2 << 30} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1MB", "1.5GB", "12XB", "MB", "9999999999TB"} {
		if _, err := parseSize(bad); err == nil || !strings.Contains(err.Error(), "e.g. 256MB") {
			t.Errorf("parseSize(%q): %v", bad, err)
		}
	}
}
