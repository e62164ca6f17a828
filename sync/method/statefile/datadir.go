package statefile

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/slotsync/slotsync/topology"
)

// VerifyDataDir checks that dir is the data directory of the standby slotsync observes, before
// anything is written into it or a restart is made on it: its global/pg_control holds the
// standby's system identifier, and a postmaster running on it (postmaster.pid) listens on the
// standby's port. A wrong path (another cluster on the same host, a shared env file) would
// otherwise get slot files it cannot start with, and a restart it was never meant to have.
func VerifyDataDir(dir string, standby topology.NodeInfo) error {
	fail := func(problem string) error {
		return &topology.ConfigError{Field: "standby data directory", Problem: fmt.Sprintf("%s %s", dir, problem),
			Fix: "give --standby-data-dir the data directory of the standby that --standby reaches (SHOW data_directory on it)"}
	}
	ctl, err := os.ReadFile(filepath.Join(dir, "global", "pg_control"))
	if err != nil {
		return &topology.ConfigError{Field: "standby data directory", Problem: fmt.Sprintf("cannot read %s: %v", filepath.Join(dir, "global", "pg_control"), err),
			Fix: "run slotsync as the standby's operating-system user (the data directory's owner) and give --standby-data-dir the standby's data directory"}
	}
	if len(ctl) < 8 {
		return fail("has a truncated global/pg_control")
	}
	// ControlFileData begins with system_identifier (uint64, the machine's byte order).
	if id := strconv.FormatUint(binary.NativeEndian.Uint64(ctl[:8]), 10); id != standby.SystemID {
		return fail(fmt.Sprintf("is of another cluster (system identifier %s; the standby's is %s)", id, standby.SystemID))
	}
	pid, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return nil // not running now (a restart in progress): the identifier is what can be checked
	}
	// postmaster.pid: pid, data directory, start time, port, socket directory, ...
	lines := strings.Split(string(pid), "\n")
	if len(lines) > 3 && standby.Port != 0 && strings.TrimSpace(lines[3]) != strconv.Itoa(standby.Port) {
		return fail(fmt.Sprintf("is served on port %s, not on the standby's port %d: another server of the same cluster (a second standby?)",
			strings.TrimSpace(lines[3]), standby.Port))
	}
	return nil
}

// CheckStandby refuses a data directory that is not the observed standby's (VerifyDataDir).
func (m *Method) CheckStandby(standby topology.NodeInfo) error {
	return VerifyDataDir(m.cfg.DataDir, standby)
}
