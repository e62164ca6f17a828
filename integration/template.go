package integration

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"regexp"
	stdsync "sync"
	"time"
)

// templates serializes the making of each initdb template within this process; between
// processes, a template appears by an atomic rename, so a second maker's copy is dropped.
var templates stdsync.Mutex

// newCluster makes s.dataDir a cluster as initdb would (trust for the superuser, UTF8, the C
// locale, WAL segments of segMB megabytes), by copying a cluster initdb made once for these
// binaries, run user and segment size, and giving the copy a system identifier of its own: a
// copy costs a tenth of an initdb, and each pair stays a cluster of its own (slotsync tells
// clusters apart by their identifiers).
func (s *localServer) newCluster(ctx context.Context, segMB int) error {
	tmpl, err := s.template(ctx, segMB)
	if err != nil {
		return err
	}
	if err := copyDataDir(tmpl, s.dataDir); err != nil {
		return fmt.Errorf("copy the initdb template %s: %w", tmpl, err)
	}
	if err := setSystemID(s.dataDir, newSystemID()); err != nil {
		return fmt.Errorf("give %s a system identifier of its own: %w", s.dataDir, err)
	}
	return s.run.chownTree(s.dataDir)
}

// template returns the data directory of the initdb template for these binaries, run user and
// segment size, making it first when it is not there. It lives under the temp directory (which
// scripts/test.sh gives each run) and is named by what it was made from, the server binary's
// size and time among them, so new binaries at the same path get a new template.
func (s *localServer) template(ctx context.Context, segMB int) (string, error) {
	st, err := os.Stat(s.bin.Path("postgres"))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%d\x00%d", s.bin.BinDir, st.Size(), st.ModTime().UnixNano(), s.run.uid, segMB))
	dir := filepath.Join(os.TempDir(), "slotsync-initdb-"+hex.EncodeToString(sum[:6]))
	data := filepath.Join(dir, "data")
	templates.Lock()
	defer templates.Unlock()
	if _, err := os.Stat(data); err == nil {
		return data, nil
	}
	work, err := os.MkdirTemp(os.TempDir(), "slotsync-initdb-making-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	if err := os.Chmod(work, 0o755); err != nil {
		return "", err
	}
	if err := s.run.chownTree(work); err != nil {
		return "", err
	}
	maker := &localServer{bin: s.bin, run: s.run, dataDir: filepath.Join(work, "data")}
	if err := maker.initdb(ctx, segMB); err != nil {
		return "", err
	}
	if err := os.Rename(work, dir); err != nil {
		if _, serr := os.Stat(data); serr == nil {
			return data, nil // another process made it meanwhile
		}
		return "", fmt.Errorf("keep the initdb template: %w", err)
	}
	return data, nil
}

// newSystemID is made as initdb makes one: the time in seconds and microseconds, with random
// low bits, so that no two clusters of a run share it.
func newSystemID() uint64 {
	now := time.Now()
	var r [2]byte
	_, _ = rand.Read(r[:])
	return uint64(now.Unix())<<32 | uint64(now.Nanosecond()/1000)<<12 | uint64(binary.LittleEndian.Uint16(r[:])&0xfff)
}

var walSegmentName = regexp.MustCompile(`^[0-9A-F]{24}$`)

// setSystemID writes id as the system identifier of the stopped cluster in dataDir: in
// pg_control, whose CRC-32C (over the fields before it) is written again, and in the long header
// that begins each WAL segment (which no CRC covers), where the server checks it on reading.
func setSystemID(dataDir string, id uint64) error {
	path := filepath.Join(dataDir, "global", "pg_control")
	control, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	at := controlCRCOffset(control)
	if at < 0 {
		return errors.New("pg_control: no CRC-32C found after its fields")
	}
	old := binary.LittleEndian.Uint64(control)
	binary.LittleEndian.PutUint64(control, id)
	binary.LittleEndian.PutUint32(control[at:], crc32.Checksum(control[:at], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(path, control, 0o600); err != nil {
		return err
	}
	entries, err := os.ReadDir(filepath.Join(dataDir, "pg_wal"))
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() && walSegmentName.MatchString(e.Name()) {
			if err := setSegmentSystemID(filepath.Join(dataDir, "pg_wal", e.Name()), old, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// controlCRCOffset finds where pg_control's CRC-32C sits: the first 4-byte aligned offset whose
// four bytes are the CRC-32C of every byte before them (the field is the struct's last, and the
// struct's size differs between majors). -1 when there is none.
func controlCRCOffset(control []byte) int {
	table := crc32.MakeTable(crc32.Castagnoli)
	for at := 16; at+4 <= len(control); at += 4 {
		if crc32.Checksum(control[:at], table) == binary.LittleEndian.Uint32(control[at:]) {
			return at
		}
	}
	return -1
}

// setSegmentSystemID rewrites the system identifier of a WAL segment's long page header
// (XLogLongPageHeaderData: xlp_sysid after the 24-byte short header), checking it held old.
func setSegmentSystemID(path string, old, id uint64) error {
	const xlpLongHeader = 0x0002
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var head [32]byte
	if _, err := f.ReadAt(head[:], 0); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if binary.LittleEndian.Uint16(head[2:])&xlpLongHeader == 0 || binary.LittleEndian.Uint64(head[24:]) != old {
		return fmt.Errorf("%s: no long page header with the cluster's system identifier", path)
	}
	binary.LittleEndian.PutUint64(head[24:], id)
	if _, err := f.WriteAt(head[24:], 24); err != nil {
		return err
	}
	return f.Close()
}
