package statefile

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// WALSource is the primary as the WAL a copy needs is fetched from it: its timeline and segment
// size, and a connection that may call pg_read_binary_file.
type WALSource struct {
	Conn        *pgx.Conn
	Timeline    uint32
	SegmentSize uint64
	// MaxBytes bounds how much WAL one fetch installs (0: unbounded).
	MaxBytes int64
	// History is the primary's timeline history (timeline → where it ended); nil or empty on
	// timeline 1 or when it could not be read (then every segment is named on Timeline).
	History map[int]lsncheck.LSN
}

// TimelineOf is the timeline whose file holds the segment of lsn on the primary, as its
// walsender reads it: the newest timeline of its history that began in that segment or before.
// A timeline's switch segment is thus the next timeline's file (the old one was renamed
// .partial at the switch). It is pure.
func (s WALSource) TimelineOf(lsn uint64) uint32 {
	seg := lsn / s.SegmentSize
	begin := map[uint32]uint64{s.Timeline: 0}
	parents := make([]int, 0, len(s.History))
	for t := range s.History {
		parents = append(parents, t)
	}
	slices.Sort(parents)
	for i, t := range parents {
		next := s.Timeline
		if i+1 < len(parents) {
			next = uint32(parents[i+1])
		}
		begin[next] = uint64(s.History[t]) / s.SegmentSize
	}
	if len(parents) > 0 {
		begin[uint32(parents[0])] = 0
	}
	var best uint32 // the newest timeline that began at or before seg
	for t, b := range begin {
		if b <= seg && t > best {
			best = t
		}
	}
	if best == 0 {
		return s.Timeline
	}
	return best
}

// ReadWALSource reads the primary's WAL segment size; timeline is the one it writes, as observed
// (topology.NodeInfo.Timeline).
func ReadWALSource(ctx context.Context, conn *pgx.Conn, timeline uint32) (WALSource, error) {
	src := WALSource{Conn: conn, Timeline: timeline}
	seg, err := topology.WALSegmentSize(ctx, conn)
	if err != nil {
		return src, fmt.Errorf("read the primary's WAL segment size: %w", err)
	}
	src.SegmentSize = seg
	return src, nil
}

// InstallWAL puts into the standby's pg_wal every WAL segment from the one holding from up to
// the first one it still has (stopped, or running with AllowRunning once copies that keep them
// are loaded: those segments are older than any it reads or writes), fetched from the primary (which keeps them for the slot the
// copy is of). A standby's restartpoints remove the segments no slot of its own needs, so the
// WAL from an older restart_lsn is usually gone before the copy arrives; without it the copy
// could not decode. A segment the primary no longer has ends the fetch (the copy's WAL read then
// fails and it is made again, or given up on). It returns how many segments it wrote.
func (in Installer) InstallWAL(ctx context.Context, src WALSource, from, upto uint64) (int, error) {
	if err := in.checkStopped(); err != nil {
		return 0, err
	}
	if src.SegmentSize == 0 || src.Timeline == 0 {
		return 0, errors.New("install WAL: unknown timeline or segment size")
	}
	dir := filepath.Join(in.DataDir, "pg_wal")
	uid, gid, err := in.owner()
	if err != nil {
		return 0, err
	}
	written := 0
	// Every segment from from's up to the one before upto's (that one may be partial on the
	// primary, or not yet written): those the standby lacks are fetched, holes included.
	for lsn := from - from%src.SegmentSize; lsn+src.SegmentSize <= upto-upto%src.SegmentSize; lsn += src.SegmentSize {
		name := lsncheck.SegmentName(src.TimelineOf(lsn), lsncheck.LSN(lsn), src.SegmentSize)
		final := filepath.Join(dir, name)
		if there, err := exists(final); err != nil || there {
			if err != nil {
				return written, err
			}
			continue
		}
		data, missing, err := src.read(ctx, "pg_wal/"+name)
		if missing {
			return written, nil
		}
		if err != nil {
			return written, fmt.Errorf("read WAL segment %s on the primary: %w", name, err)
		}
		if src.MaxBytes > 0 && int64(written+1)*int64(src.SegmentSize) > src.MaxBytes {
			return written, fmt.Errorf("install WAL: more than %d bytes to fetch from the primary; the rest is fetched at the next pass", src.MaxBytes)
		}
		if uint64(len(data)) != src.SegmentSize {
			return written, fmt.Errorf("WAL segment %s on the primary is %d bytes, want %d", name, len(data), src.SegmentSize)
		}
		if err := writeFileDurably(final, data, uid, gid); err != nil {
			return written, fmt.Errorf("install WAL segment %s: %w", name, err)
		}
		written++
	}
	return written, nil
}

// wholeReadMax is the largest segment read in one call: pg_read_binary_file returns at most
// 1 GB - 1 byte, so larger segments (initdb --wal-segsize=1024) are read in pieces, which needs
// EXECUTE on pg_read_binary_file(text, bigint, bigint, boolean).
const wholeReadMax = 256 << 20

// read reads a segment of the primary: whole, or in pieces for large segments.
func (s WALSource) read(ctx context.Context, path string) ([]byte, bool, error) {
	if s.SegmentSize <= wholeReadMax {
		return readPrimaryFile(ctx, s.Conn, path)
	}
	data := make([]byte, 0, s.SegmentSize)
	for off := uint64(0); off < s.SegmentSize; off += wholeReadMax {
		var piece []byte
		err := s.Conn.QueryRow(ctx, "SELECT pg_read_binary_file($1, $2, $3, true)", path, int64(off), int64(wholeReadMax)).Scan(&piece)
		if err != nil {
			return nil, false, err
		}
		if piece == nil {
			return nil, true, nil // missing_ok: the file is not there
		}
		data = append(data, piece...)
	}
	return data, false, nil
}
