package lsncheck

import "testing"

func TestSegmentName(t *testing.T) {
	for _, c := range []struct {
		tli  uint32
		lsn  LSN
		size uint64
		want string
	}{
		{1, 0x1000000, 16 << 20, "000000010000000000000001"},
		{1, 0x1FFFFFF, 16 << 20, "000000010000000000000001"},
		{1, 0x102000000, 16 << 20, "000000010000000100000002"},
		{3, 0x5A000000, 64 << 20, "000000030000000000000016"},
		{1, 0x2_80000000, 1 << 30, "000000010000000200000002"},
	} {
		got := SegmentName(c.tli, c.lsn, c.size)
		if got != c.want {
			t.Errorf("SegmentName(%d, %s, %d) = %s, want %s", c.tli, c.lsn, c.size, got, c.want)
		}
		// And back: where that file begins.
		if start, err := SegmentStart(got, c.size); err != nil || start != c.lsn-c.lsn%LSN(c.size) {
			t.Errorf("SegmentStart(%s, %d) = %s, %v; want %s", got, c.size, start, err, c.lsn-c.lsn%LSN(c.size))
		}
	}
}

func TestSegmentStart(t *testing.T) {
	cases := []struct {
		name     string
		file     string
		segBytes uint64
		want     LSN
		bad      bool
	}{
		{"none", "", 16 << 20, 0, false},
		{"with its timeline", "000000010000000000000003", 16 << 20, 0x3000000, false},
		{"without", "0000000100000005", 16 << 20, 0x1_05000000, false},
		{"1 GB segments", "0000000200000002", 1 << 30, 0x2_80000000, false},
		{"the log's last segment", "00000000000000FF", 16 << 20, 0xFF000000, false},
		{"a segment past the log's end", "0000000000000100", 16 << 20, 0, true},
		{"not hex", "00000000000000ZZ", 16 << 20, 0, true},
		{"too short", "0003", 16 << 20, 0, true},
		{"segment size unknown", "0000000000000003", 0, 0, true},
	}
	for _, c := range cases {
		got, err := SegmentStart(c.file, c.segBytes)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("%s: SegmentStart(%q, %d) = %s, %v; want %s, error %v", c.name, c.file, c.segBytes, got, err, c.want, c.bad)
		}
	}
}
