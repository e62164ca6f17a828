package integration

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// SupportedMajors are the PostgreSQL majors a pair can be started for, oldest first.
var SupportedMajors = []int{11, 12, 13, 14, 15, 16, 17, 18, 19}

// EnvMajors names the environment variable that chooses the majors tests run on.
const EnvMajors = "SLOTSYNC_PG_MAJORS"

// EnvCache names the environment variable that points at the binary cache filled by
// scripts/fetch-postgres.sh (default: .pgcache at the repository root).
const EnvCache = "SLOTSYNC_PG_CACHE"

// ErrBinariesMissing is wrapped by FindBinaries when no server binaries exist for a major.
var ErrBinariesMissing = errors.New("postgres binaries not found")

// Binaries locates the server programs of one PostgreSQL major.
type Binaries struct {
	Major  int
	BinDir string // holds initdb, pg_ctl and postgres
}

// Path returns the full path of the named program.
func (b Binaries) Path(program string) string { return filepath.Join(b.BinDir, program) }

// Has reports whether the named program exists (pg_basebackup and psql are optional).
func (b Binaries) Has(program string) bool {
	st, err := os.Stat(b.Path(program))
	return err == nil && !st.IsDir()
}

// FindBinaries looks for a major's server binaries: first the distribution's
// /usr/lib/postgresql/<major>/bin, then the cache (see EnvCache).
func FindBinaries(major int) (Binaries, error) {
	var tried []string
	for _, dir := range binDirCandidates(major) {
		tried = append(tried, dir)
		b := Binaries{Major: major, BinDir: dir}
		if b.Has("postgres") && b.Has("initdb") && b.Has("pg_ctl") {
			return b, nil
		}
	}
	return Binaries{}, fmt.Errorf("%w for PostgreSQL %d (looked in %s); get them with %s",
		ErrBinariesMissing, major, strings.Join(tried, ", "), HowToGet(major))
}

// FindMinorBinaries looks for an older minor's server binaries (minor "16.2"), which only the
// cache holds: scripts/fetch-postgres.sh 16.2 fills it.
func FindMinorBinaries(major int, minor string) (Binaries, error) {
	c := cacheDir()
	if c != "" {
		b := Binaries{Major: major, BinDir: filepath.Join(c, minor, "bin")}
		if b.Has("postgres") && b.Has("initdb") && b.Has("pg_ctl") {
			return b, nil
		}
	}
	return Binaries{}, fmt.Errorf("%w for PostgreSQL %s (looked in %s); get them with scripts/fetch-postgres.sh %s",
		ErrBinariesMissing, minor, filepath.Join(c, minor, "bin"), minor)
}

// HowToGet says how to install a major's server binaries, from a package or, in a slotsync
// checkout, into the cache; it names no repository script alone, since an installed binary has
// none beside it.
func HowToGet(major int) string {
	return fmt.Sprintf("install the PostgreSQL %d server (apt-get install -y postgresql-%d, from Debian or apt.postgresql.org), "+
		"or set %s to a directory holding %d/bin (a slotsync checkout fills .pgcache with scripts/fetch-postgres.sh %d)", major, major, EnvCache, major, major)
}

func binDirCandidates(major int) []string {
	dirs := []string{fmt.Sprintf("/usr/lib/postgresql/%d/bin", major)}
	if c := cacheDir(); c != "" {
		dirs = append(dirs, filepath.Join(c, strconv.Itoa(major), "bin"))
	}
	return dirs
}

// cacheDir returns EnvCache, or .pgcache in the nearest enclosing directory holding this
// module's go.mod (so tests run from any package directory find it), or "".
func cacheDir() string {
	if c := os.Getenv(EnvCache); c != "" {
		return c
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(data), "module github.com/slotsync/slotsync") {
			return filepath.Join(dir, ".pgcache")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// RequestedMajors parses EnvMajors. ok is false when the variable is unset or empty, in which
// case callers run every major whose binaries are present.
func RequestedMajors() (majors []int, ok bool, err error) {
	return ParseMajors(os.Getenv(EnvMajors))
}

// ParseMajors parses a comma- or space-separated list such as "15,16,17,18".
func ParseMajors(s string) (majors []int, ok bool, err error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
	if len(fields) == 0 {
		return nil, false, nil
	}
	seen := map[int]bool{}
	for _, f := range fields {
		m, err := strconv.Atoi(f)
		if err != nil || !isSupported(m) {
			return nil, true, fmt.Errorf("%s: %q is not a supported major; use some of %v", EnvMajors, f, SupportedMajors)
		}
		if !seen[m] {
			seen[m] = true
			majors = append(majors, m)
		}
	}
	return majors, true, nil
}

func isSupported(m int) bool {
	for _, s := range SupportedMajors {
		if s == m {
			return true
		}
	}
	return false
}
