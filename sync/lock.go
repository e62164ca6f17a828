package sync

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/slotsync/slotsync/topology"
)

// LockFile is the lock that makes one writer per state directory.
const LockFile = "lock"

// stateLock holds the state directory's lock for the life of a writing engine: two daemons
// writing one journal would each undo the other's records.
type stateLock struct{ f *os.File }

// lockStateDir takes the lock on dir, or says who holds it.
func lockStateDir(dir string) (*stateLock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, &topology.ConfigError{Field: "state directory", Problem: fmt.Sprintf("%s cannot be made: %v", dir, err),
			Fix: "give a --state-dir this user may write"}
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, &topology.ConfigError{Field: "state directory", Problem: fmt.Sprintf("%s cannot be opened: %v", path, err),
			Fix: "give a --state-dir this user may write"}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &topology.ConfigError{
				Field:   "state directory",
				Problem: fmt.Sprintf("%s is in use by another slotsync (%s)", dir, strings.TrimSpace(string(holder))),
				Fix:     "run one slotsync run per state directory: stop the other one, or give this one its own --state-dir",
			}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	host, _ := os.Hostname()
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d on %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))), 0)
	return &stateLock{f: f}, nil
}

// release lets another writer take the directory.
func (l *stateLock) release() {
	if l != nil && l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		l.f.Close()
		l.f = nil
	}
}
