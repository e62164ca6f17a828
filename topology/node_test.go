package topology

import (
	"slices"
	"testing"
	"time"

	"github.com/slotsync/slotsync/lsncheck"
)

// TestStreamsLive: a receiver that has heard nothing from its primary for wal_receiver_timeout
// (a minute when that is 0) says nothing of the primary (correctness review round 4, finding 6:
// a silently dead connection kept a hook blocked on primary_alive).
func TestStreamsLive(t *testing.T) {
	cases := []struct {
		status          string
		silent, timeout time.Duration
		want            bool
	}{
		{"streaming", time.Second, time.Minute, true},
		{"streaming", 61 * time.Second, time.Minute, false},
		{"streaming", 10 * time.Second, 5 * time.Second, false},
		{"streaming", 59 * time.Second, 0, true},
		{"streaming", 2 * time.Minute, 0, false},
		{"", 0, time.Minute, false},
	}
	for _, c := range cases {
		n := NodeInfo{InRecovery: true, ReceiverStatus: c.status, ReceiverSilentFor: c.silent, ReceiverTimeout: c.timeout}
		if got := n.StreamsLive(); got != c.want {
			t.Errorf("%+v: StreamsLive %v, want %v", c, got, c.want)
		}
	}
}

// TestKeepsSlotWAL: a copy's WAL counts as kept only within what a checkpoint of the promoted
// standby keeps for slots (KeepLogSeg, xlog.c): max_slot_wal_keep_size, or wal_keep_size if
// larger, in whole segments behind the end of WAL.
func TestKeepsSlotWAL(t *testing.T) {
	const seg = 16 << 20
	lsn := func(segment, offset uint64) lsncheck.LSN { return lsncheck.LSN(segment*seg + offset) }
	cases := []struct {
		name         string
		limit, keep  int64
		restart, end lsncheck.LSN
		segmentBytes uint64
		want         bool
	}{
		{"no limit", -1, 0, lsn(1, 0), lsn(900, 0), seg, true},
		{"a limit under one segment, same segment", 1, 0, lsn(3, 10), lsn(3, 900), seg, true},
		{"a limit under one segment, one behind", 1, 0, lsn(2, 900), lsn(3, 10), seg, false},
		{"two segments kept, two behind", 32, 0, lsn(1, 0), lsn(3, 1), seg, true},
		{"two segments kept, three behind", 32, 0, lsn(1, 0), lsn(4, 1), seg, false},
		{"wal_keep_size larger keeps it", 16, 64, lsn(1, 0), lsn(5, 0), seg, true},
		{"wal_keep_size larger, past it too", 16, 64, lsn(1, 0), lsn(6, 0), seg, false},
		{"a limit not a whole segment rounds down", 31, 0, lsn(1, 0), lsn(3, 0), seg, false},
		{"1 GB segments", 1024, 0, lsncheck.LSN(1 << 30), lsncheck.LSN(2<<30 + 5), 1 << 30, true},
		{"restart ahead of the end", 1, 0, lsn(5, 0), lsn(4, 0), seg, true},
		{"no restart_lsn", 1, 0, 0, lsn(4, 0), seg, true},
		{"segment size unknown", 1, 0, lsn(1, 0), lsn(4, 0), 0, true},
	}
	for _, c := range cases {
		n := NodeInfo{InRecovery: true, MaxSlotWALKeepMB: c.limit, WALKeepMB: c.keep, WALSegmentBytes: c.segmentBytes}
		if got := n.KeepsSlotWAL(c.restart, c.end); got != c.want {
			t.Errorf("%s: KeepsSlotWAL = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestHoldsWALFrom(t *testing.T) {
	n := NodeInfo{OldestWAL: 0x3000000, WALGaps: []WALGap{{From: 0x5000000, To: 0x7000000}}}
	for _, c := range []struct {
		restart lsncheck.LSN
		want    bool
	}{{0x2FFFFFF, false}, {0x3000000, false}, {0x4FFFFFF, false}, {0x6000028, false}, {0x7000000, true}, {0x7000028, true}, {0, true}} {
		if got := n.HoldsWALFrom(c.restart); got != c.want {
			t.Errorf("HoldsWALFrom(%s) with the oldest file at %s and %v missing = %v, want %v", c.restart, n.OldestWAL, n.WALGaps, got, c.want)
		}
	}
	if got := (NodeInfo{OldestWAL: 0x3000000}).HoldsWALFrom(0x3000028); !got {
		t.Error("HoldsWALFrom at the oldest file, no gap: false, want true")
	}
	if !(NodeInfo{}).HoldsWALFrom(0x100) {
		t.Error("HoldsWALFrom with pg_wal not read: false, want true (unknown is no claim)")
	}
}

func TestWALFiles(t *testing.T) {
	const mb16 = 16 << 20
	for _, c := range []struct {
		name     string
		segments []string
		segBytes uint64
		oldest   lsncheck.LSN
		gaps     []WALGap
		bad      bool
	}{
		{"none", nil, mb16, 0, nil, false},
		{"one", []string{"000000000000000A"}, mb16, 0xA000000, nil, false},
		{"contiguous", []string{"0000000000000003", "0000000000000004", "0000000000000005"}, mb16, 0x3000000, nil, false},
		{"one missing", []string{"0000000000000003", "0000000000000005"}, mb16, 0x3000000, []WALGap{{0x4000000, 0x5000000}}, false},
		{"two gaps", []string{"0000000000000003", "0000000000000006", "0000000000000007", "0000000000000009"}, mb16, 0x3000000,
			[]WALGap{{0x4000000, 0x6000000}, {0x8000000, 0x9000000}}, false},
		{"across a log id", []string{"00000000000000FF", "0000000100000000"}, mb16, 0xFF000000, nil, false},
		{"1 GB segments, one missing", []string{"0000000000000001", "0000000000000003"}, 1 << 30, 0x40000000, []WALGap{{0x80000000, 0xC0000000}}, false},
		{"not a name", []string{"00000000000000ZZ"}, mb16, 0, nil, true},
	} {
		oldest, gaps, err := WALFiles(c.segments, c.segBytes)
		if (err != nil) != c.bad || oldest != c.oldest || !slices.Equal(gaps, c.gaps) {
			t.Errorf("%s: WALFiles = %s, %v, %v; want %s, %v, error %v", c.name, oldest, gaps, err, c.oldest, c.gaps, c.bad)
		}
	}
}

func TestWALTimeline(t *testing.T) {
	for _, c := range []struct {
		name  string
		names []string
		want  int
	}{
		{"none", nil, 0},
		{"one timeline", []string{"000000010000000000000003", "000000010000000000000004"}, 1},
		{"a switch", []string{"000000010000000000000003", "000000020000000000000003", "000000020000000000000004"}, 2},
		{"the newest file of an older timeline", []string{"0000000A0000000000000003", "000000030000000000000009"}, 10},
		{"not a name", []string{"ZZZZZZZZ0000000000000003", "000000020000000000000003"}, 2},
	} {
		if got := WALTimeline(c.names); got != c.want {
			t.Errorf("%s: WALTimeline = %d, want %d", c.name, got, c.want)
		}
	}
}
