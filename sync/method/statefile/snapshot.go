package statefile

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// SnapshotMagic is the first word of a serialized decoding snapshot (snapbuild.c's
// SNAPBUILD_MAGIC).
const SnapshotMagic = 0x51A1E001

// Snapshot is a serialized logical decoding snapshot: the file pg_logical/snapshots/<lsn>.snap
// that decoding restores when it starts at a running-xacts record at lsn. The files are not
// WAL-logged, so a standby has none of the primary's; a copy restarting at lsn without one
// rebuilds a snapshot from scratch and skips a transaction open across that point (rule 4).
type Snapshot struct {
	LSN  uint64
	Data []byte
}

// SnapshotName is the file name PostgreSQL gives the snapshot serialized at lsn.
func SnapshotName(lsn uint64) string {
	return fmt.Sprintf("%X-%X.snap", uint32(lsn>>32), uint32(lsn))
}

// ErrSlotMoved means the primary's slot moved on while its files were read: its snapshot at the
// state file's restart_lsn may be gone. Read both again.
var ErrSlotMoved = errors.New("the primary slot moved on while it was read")

// ReadSnapshot fetches the primary's serialized snapshot at s's restart_lsn. It returns nil and
// no error when the primary has none there while the slot still restarts there: the primary's
// own decoding would then rebuild its snapshot from scratch exactly as the copy's will (a slot
// nobody has consumed from since its creation, say). When the file is missing because the slot
// moved on (a checkpoint removed it), the error wraps ErrSlotMoved.
func ReadSnapshot(ctx context.Context, conn *pgx.Conn, s *State) (*Snapshot, error) {
	if s.RestartLSN == 0 {
		return nil, fmt.Errorf("slot %q: no restart_lsn", s.Name)
	}
	data, missing, err := readPrimaryFile(ctx, conn, "pg_logical/snapshots/"+SnapshotName(s.RestartLSN))
	if err != nil {
		return nil, fmt.Errorf("read the decoding snapshot of slot %q on the primary: %w", s.Name, err)
	}
	if !missing {
		if len(data) < 4 || binary.LittleEndian.Uint32(data) != SnapshotMagic {
			return nil, fmt.Errorf("slot %q: the primary's decoding snapshot %s is not one (magic)", s.Name, SnapshotName(s.RestartLSN))
		}
		return &Snapshot{LSN: s.RestartLSN, Data: data}, nil
	}
	now, err := topology.SlotPositions(ctx, conn, []string{s.Name})
	if err != nil {
		return nil, fmt.Errorf("slot %q on the primary: %w", s.Name, err)
	}
	if file := lsncheck.LSN(s.RestartLSN); now[s.Name].RestartLSN != file {
		return nil, fmt.Errorf("slot %q: restart_lsn %s in its state file, %s now: %w", s.Name, file, now[s.Name].RestartLSN, ErrSlotMoved)
	}
	return nil, nil
}

func (in Installer) snapshots() string { return filepath.Join(in.DataDir, "pg_logical", "snapshots") }

// InstallSnapshot writes sn into pg_logical/snapshots the way snapbuild.c does (a temporary
// file, fsync, rename, fsync the directory) and reports whether it wrote it: a file already
// there is kept (the standby's own decoding serialized the same point; PostgreSQL never
// overwrites one either). Into a running server that is safe once a slot restarting at sn.LSN is
// loaded (its checkpoints keep the snapshots at or after the oldest slot's restart_lsn); before,
// a checkpoint may remove it, as the shutdown checkpoint of a restart does with a snapshot
// staged beside a slot the server has not loaded.
func (in Installer) InstallSnapshot(sn *Snapshot) (bool, error) {
	final := filepath.Join(in.snapshots(), SnapshotName(sn.LSN))
	if there, err := exists(final); err != nil || there {
		return false, err
	}
	uid, gid, err := in.owner()
	if err != nil {
		return false, err
	}
	if err := writeFileDurably(final, sn.Data, uid, gid); err != nil {
		return false, fmt.Errorf("install decoding snapshot %s: %w", SnapshotName(sn.LSN), err)
	}
	return true, nil
}
