package examples

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slotsync/slotsync/integration/pgtest"
)

// TestGoreleaserSnapshot runs the release configuration through goreleaser itself, when it is
// installed (CI installs it): `goreleaser check` must accept it without a deprecation, and a
// snapshot release (everything but the image, the SBOMs, the signatures and publishing, which
// need buildx, syft, cosign and a registry) must build the archives and packages, with a checksum
// file that matches them and binaries that report the commit they were built from.
func TestGoreleaserSnapshot(t *testing.T) {
	pgtest.Slow(t)
	gr, err := exec.LookPath("goreleaser")
	if err != nil {
		t.Skip("goreleaser is not installed (CI installs it: go install github.com/goreleaser/goreleaser/v2@v2.15.1)")
	}
	if testing.Short() {
		t.Skip("a snapshot release takes a minute")
	}
	check := exec.Command(gr, "check")
	check.Dir = ".."
	out, err := check.CombinedOutput()
	if err != nil || strings.Contains(strings.ToLower(string(out)), "deprecat") {
		t.Fatalf("goreleaser check: %v\n%s", err, out)
	}
	// A clone of this commit with a release tag, as a release starts from (goreleaser reads the
	// commit and version from git; the checkout itself is left as it is).
	src := filepath.Join(t.TempDir(), "src")
	for _, args := range [][]string{{"clone", "-q", "--no-hardlinks", "..", src}, {"-C", src, "tag", "v0.0.1"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	dist := filepath.Join(t.TempDir(), "dist")
	snap := exec.Command(gr, "release", "--snapshot", "--clean", "--skip=docker,sbom,sign,publish,announce")
	snap.Dir = src
	snap.Env = append(os.Environ(), "GORELEASER_CURRENT_TAG=v0.0.1")
	if err := os.WriteFile(filepath.Join(src, ".goreleaser.yaml"), append(readFile(t, filepath.Join(src, ".goreleaser.yaml")),
		[]byte("\ndist: "+dist+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := snap.CombinedOutput(); err != nil {
		t.Fatalf("goreleaser release --snapshot: %v\n%s", err, out)
	}
	head, err := exec.Command("git", "-C", src, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, dist, strings.TrimSpace(string(head)))
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkSnapshot: every archive and package is in the checksum file with its own digest, and the
// amd64 binary reports the commit it was built from.
func checkSnapshot(t *testing.T, dist, commit string) {
	sums, err := os.ReadFile(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			listed[f[1]] = f[0]
		}
	}
	kinds := map[string]int{}
	for _, pattern := range []string{"*.tar.gz", "*.deb", "*.rpm"} {
		files, _ := filepath.Glob(filepath.Join(dist, pattern))
		kinds[pattern] = len(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			if listed[filepath.Base(f)] != hex.EncodeToString(sum[:]) {
				t.Errorf("%s: checksums.txt says %q", filepath.Base(f), listed[filepath.Base(f)])
			}
		}
	}
	if kinds["*.tar.gz"] != 2 || kinds["*.deb"] != 2 || kinds["*.rpm"] != 2 {
		t.Errorf("archives and packages for amd64 and arm64: %v", kinds)
	}
	bins, _ := filepath.Glob(filepath.Join(dist, "slotsync_linux_amd64*", "slotsync"))
	if len(bins) != 1 {
		t.Fatalf("the amd64 binary: %v", bins)
	}
	out, err := exec.Command(bins[0], "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Version, Commit, Date string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if v.Commit != commit || v.Date == "unknown" || !strings.HasPrefix(v.Version, "0.0.1") {
		t.Errorf("the release binary reports %+v, built from %s at v0.0.1", v, commit)
	}
}
