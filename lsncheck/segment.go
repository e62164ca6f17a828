package lsncheck

import (
	"fmt"
	"strconv"
)

// SegmentName is the name of the WAL file holding lsn on timeline tli, of segSize-byte segments
// (XLogFileName, xlog_internal.h).
func SegmentName(tli uint32, lsn LSN, segSize uint64) string {
	segno := uint64(lsn) / segSize
	perID := uint64(0x100000000) / segSize
	return fmt.Sprintf("%08X%08X%08X", tli, uint32(segno/perID), uint32(segno%perID))
}

// SegmentStart is where the WAL file named name begins, read from its last 16 hex digits (log,
// then segment; the timeline before them is not read), of segSize-byte segments; 0 for "".
func SegmentStart(name string, segSize uint64) (LSN, error) {
	if name == "" {
		return 0, nil
	}
	if len(name) < 16 || segSize == 0 || segSize > 1<<30 {
		return 0, fmt.Errorf("WAL file %q of %d-byte segments: not a WAL file name", name, segSize)
	}
	log, err := strconv.ParseUint(name[len(name)-16:len(name)-8], 16, 32)
	if err != nil {
		return 0, fmt.Errorf("WAL file %q: not a WAL file name: %w", name, err)
	}
	seg, err := strconv.ParseUint(name[len(name)-8:], 16, 32)
	if err != nil || seg >= (1<<32)/segSize {
		return 0, fmt.Errorf("WAL file %q of %d-byte segments: not a WAL file name", name, segSize)
	}
	return LSN(log<<32 + seg*segSize), nil
}
