package statefile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/slotsync/slotsync/internal/atomicfile"

	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/lsncheck"
)

// ErrExists means pg_replslot already holds a directory of that name.
var ErrExists = errors.New("slot directory already exists")

// ValidateSlotName applies PostgreSQL's rule (ReplicationSlotValidateName): 1 to 63 characters
// of a-z, 0-9 and underscore. It runs before any path is built from a name.
func ValidateSlotName(name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("slot name %q: must be 1 to 63 characters", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("slot name %q: only a-z, 0-9 and _ are allowed", name)
		}
	}
	return nil
}

// Expect is what the primary listed for a slot; a state file must agree with it.
type Expect struct {
	Name, Plugin string
	DatabaseOID  uint32
	TwoPhase     bool
}

// Validate checks that a state file is a valid, persistent, logical slot matching what the
// primary listed. A file that fails here is never installed (a bad file stops the standby).
func (s *State) Validate(e Expect) error {
	switch {
	case s.Name != e.Name:
		return fmt.Errorf("state file names slot %q, want %q", s.Name, e.Name)
	case s.Database == 0:
		return fmt.Errorf("slot %q: the state file is of a physical slot", e.Name)
	case s.Persistency != Persistent:
		return fmt.Errorf("slot %q: not persistent (persistency %d)", e.Name, s.Persistency)
	case s.Invalid():
		return fmt.Errorf("slot %q: the state file says the slot is invalidated", e.Name)
	case s.Plugin != e.Plugin:
		return fmt.Errorf("slot %q: plugin %q in the file, %q listed", e.Name, s.Plugin, e.Plugin)
	case s.Database != e.DatabaseOID:
		return fmt.Errorf("slot %q: database OID %d in the file, %d listed", e.Name, s.Database, e.DatabaseOID)
	case s.TwoPhase != e.TwoPhase:
		return fmt.Errorf("slot %q: two_phase %v in the file, %v listed", e.Name, s.TwoPhase, e.TwoPhase)
	case s.RestartLSN == 0 || s.ConfirmedFlush == 0 || s.CatalogXmin == 0:
		return fmt.Errorf("slot %q: positions not set yet (still being created)", e.Name)
	}
	return ValidateSlotName(s.Name)
}

// Read fetches a slot's state file from the primary with pg_read_binary_file, after a
// CHECKPOINT when the role may run one (the file on disk is what the last checkpoint saved),
// and validates it against what the primary lists for the slot.
func Read(ctx context.Context, conn *pgx.Conn, e Expect, checkpoint bool) (*State, error) {
	if err := ValidateSlotName(e.Name); err != nil {
		return nil, err
	}
	if checkpoint {
		if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
			return nil, fmt.Errorf("checkpoint on the primary before reading slot %q: %w", e.Name, err)
		}
	}
	var raw []byte
	if err := conn.QueryRow(ctx, "SELECT pg_read_binary_file('pg_replslot/' || $1 || '/state')", e.Name).Scan(&raw); err != nil {
		return nil, fmt.Errorf("read the state file of slot %q on the primary: %w", e.Name, err)
	}
	s, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("slot %q: %w", e.Name, err)
	}
	if err := s.Validate(e); err != nil {
		return nil, err
	}
	return s, nil
}

// ServerRunning reports whether a postmaster runs on dataDir (postmaster.pid names a live
// process).
func ServerRunning(dataDir string) (bool, error) {
	running, _, err := ServerState(dataDir)
	return running, err
}

// ServerState reports whether a postmaster runs on dataDir, and whether it is shutting down
// (postmaster.pid's status line says "stopping").
func ServerState(dataDir string) (running, stopping bool, err error) {
	data, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	lines := strings.Split(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid <= 0 {
		return false, false, fmt.Errorf("postmaster.pid in %s is unreadable", dataDir)
	}
	err = syscall.Kill(pid, 0)
	running = err == nil || errors.Is(err, syscall.EPERM)
	stopping = len(lines) > 7 && strings.TrimSpace(lines[7]) == "stopping"
	return running, running && stopping, nil
}

// Installer writes slot directories into a stopped standby's data directory.
type Installer struct {
	DataDir string
	// AllowRunning permits staging into a running server's pg_replslot (loaded at its next
	// start); otherwise Install refuses while the server runs.
	AllowRunning bool
}

func (in Installer) replslot() string { return filepath.Join(in.DataDir, "pg_replslot") }

func (in Installer) checkStopped() error {
	if in.AllowRunning {
		return nil
	}
	running, err := ServerRunning(in.DataDir)
	if err != nil {
		return err
	}
	if running {
		return fmt.Errorf("the standby is running on %s: slot state is installed only while it is stopped", in.DataDir)
	}
	return nil
}

// owner returns the data directory's owner: every file written gets it.
func (in Installer) owner() (int, int, error) {
	st, err := os.Stat(in.DataDir)
	if err != nil {
		return 0, 0, fmt.Errorf("standby data directory: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, -1, nil
	}
	return int(sys.Uid), int(sys.Gid), nil
}

// Install writes s as pg_replslot/<name> the way PostgreSQL does: <name>.tmp/state (mode 0600,
// the data directory's owner), fsync, rename to <name>, fsync pg_replslot. A crash before the
// rename leaves only <name>.tmp, which the server removes at its next start. snap, the primary's
// decoding snapshot at s's restart_lsn (nil when it has none), is written first, into
// pg_logical/snapshots: a slot in place always has it. Nothing else in the data directory is
// touched.
func (in Installer) Install(s *State, snap *Snapshot) error {
	if snap != nil {
		if err := in.checkStopped(); err != nil {
			return err
		}
		if snap.LSN != s.RestartLSN {
			return fmt.Errorf("slot %q: decoding snapshot at %s, restart_lsn %s", s.Name, lsncheck.LSN(snap.LSN), lsncheck.LSN(s.RestartLSN))
		}
		if _, err := in.InstallSnapshot(snap); err != nil {
			return err
		}
	}
	dir, err := in.stage(s)
	if err != nil {
		return err
	}
	return in.commit(dir)
}

// stage writes <name>.tmp/state and fsyncs it; commit renames it into place.
func (in Installer) stage(s *State) (string, error) {
	if err := ValidateSlotName(s.Name); err != nil {
		return "", err
	}
	if err := in.checkStopped(); err != nil {
		return "", err
	}
	// A copy is never a synced slot (17+): the server's sync would claim it, and a synced slot
	// on a standby can be neither advanced nor dropped by slotsync. The primary's own file says
	// synced only where that primary was once a standby whose server synced the slot.
	unsynced := *s
	unsynced.Synced = false
	data, err := unsynced.Encode()
	if err != nil {
		return "", err
	}
	final := filepath.Join(in.replslot(), s.Name)
	if _, err := os.Lstat(final); err == nil {
		return "", fmt.Errorf("install slot %q: %w", s.Name, ErrExists)
	}
	uid, gid, err := in.owner()
	if err != nil {
		return "", err
	}
	tmp := final + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return "", fmt.Errorf("install slot %q: %w", s.Name, err)
	}
	if err := os.Lchown(tmp, uid, gid); err != nil && uid >= 0 {
		return "", err
	}
	f, err := os.OpenFile(filepath.Join(tmp, "state"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := os.Lchown(filepath.Join(tmp, "state"), uid, gid); err != nil && uid >= 0 {
		return "", err
	}
	if err := atomicfile.SyncDir(tmp); err != nil {
		return "", err
	}
	return tmp, nil
}

func (in Installer) commit(tmp string) error {
	final := strings.TrimSuffix(tmp, ".tmp")
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("install slot: %w", err)
	}
	return atomicfile.SyncDir(in.replslot())
}

// Remove deletes pg_replslot/<name> of a stopped server, first renaming it to <name>.tmp so a
// crash midway leaves what the server cleans up itself.
func (in Installer) Remove(name string) error {
	if err := ValidateSlotName(name); err != nil {
		return err
	}
	if err := in.checkStopped(); err != nil {
		return err
	}
	final := filepath.Join(in.replslot(), name)
	if _, err := os.Lstat(final); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// Only a logical slot's directory is ever removed: a physical slot of the same name (the one
	// a cascaded standby streams through, say) or a file slotsync cannot read is left alone.
	if data, err := os.ReadFile(filepath.Join(final, "state")); err == nil {
		st, perr := Parse(data)
		if perr != nil {
			return fmt.Errorf("pg_replslot/%s holds a state file slotsync cannot read (%v): not removing it", name, perr)
		}
		if st.Database == 0 {
			return fmt.Errorf("pg_replslot/%s is a physical slot: slotsync never removes it", name)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read pg_replslot/%s/state: %w", name, err)
	}
	tmp := final + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.Rename(final, tmp); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(in.replslot()); err != nil {
		return err
	}
	return os.RemoveAll(tmp)
}

// StageForTest writes <name>.tmp/state and stops short of the rename: the state slotsync
// leaves when killed between the two steps. For tests only.
func StageForTest(in Installer, s *State) (string, error) { return in.stage(s) }
