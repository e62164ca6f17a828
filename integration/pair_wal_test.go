package integration

import "testing"

func TestWALSegmentName(t *testing.T) {
	cases := []struct {
		lsn      string
		segBytes int64
		want     string
	}{
		{"0/3000000", 16 << 20, "0000000000000003"},
		{"0/3FFFFFF", 16 << 20, "0000000000000003"},
		{"1/5000028", 16 << 20, "0000000100000005"},
		{"2/80000000", 1 << 30, "0000000200000002"},
	}
	for _, c := range cases {
		if got, err := WALSegmentName(c.lsn, c.segBytes); err != nil || got != c.want {
			t.Errorf("WALSegmentName(%s, %d) = %q, %v; want %q", c.lsn, c.segBytes, got, err, c.want)
		}
	}
	if _, err := WALSegmentName("0/3000000", 0); err == nil {
		t.Error("WALSegmentName with no segment size: no error")
	}
}
