package statefile

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/slotsync/slotsync/internal/atomicfile"
)

// readPrimaryFile reads a file of the primary's data directory with pg_read_binary_file;
// missing reports that the file is not there (58P01), which is no error.
func readPrimaryFile(ctx context.Context, conn *pgx.Conn, path string) (data []byte, missing bool, err error) {
	err = conn.QueryRow(ctx, "SELECT pg_read_binary_file($1)", path).Scan(&data)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "58P01" {
		return nil, true, nil
	}
	return data, false, err
}

// exists reports whether path is there (an error other than its absence is returned).
func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// writeFileDurably writes data to path through a temporary file: write, fsync, chown, rename,
// fsync the directory.
func writeFileDurably(path string, data []byte, uid, gid int) error {
	tmp := path + ".slotsync.tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil && uid >= 0 {
		werr = os.Lchown(tmp, uid, gid)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return werr
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}
