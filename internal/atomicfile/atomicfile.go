// Package atomicfile writes small state files so that a crash leaves the old file or the new
// one, never a mix.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Mode is the mode of the files Write makes: readable by their group too, so that a gate run as
// another user of that group (an HA manager's hook) can read the state a daemon writes; never
// by others. The directory Write makes is 0750, less the process's umask.
const Mode = 0o640

// Write puts data in dir/name atomically: a temporary file, fsync, rename over the old one,
// fsync the directory (made if missing). On error the old file is intact.
func Write(dir, name string, data []byte) error { return write(dir, name, data, true) }

// WriteNoSync is Write without the fsyncs, for a file rewritten often whose loss in a crash of
// the host only leaves an older version or none (never a mix: the rename is atomic).
func WriteNoSync(dir, name string, data []byte) error { return write(dir, name, data, false) }

func write(dir, name string, data []byte, sync bool) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, name+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(Mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := syncFile(tmp, sync); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	return SyncDir(dir)
}

func syncFile(f *os.File, sync bool) error {
	if !sync {
		return nil
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	return nil
}

// SyncDir fsyncs directory dir, so that a rename or removal in it survives a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
