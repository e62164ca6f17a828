package topology

import (
	"strings"
	"testing"

	"github.com/slotsync/slotsync/lsncheck"
)

// TestSlotFromRow: how a row of pg_replication_slots becomes a Slot, per version, without a
// server: invalidation_reason (17+), conflicting (16) or wal_status = 'lost' (13+) mark it
// invalidated, with the reason; catalog_xmin read as bigint becomes the XID.
func TestSlotFromRow(t *testing.T) {
	base := Slot{Identity: lsncheck.Identity{Name: "cdc", Database: "app", Plugin: "pgoutput"},
		Position: lsncheck.Position{RestartLSN: 0x1000000, ConfirmedFlush: 0x2000000}, WALStatus: "reserved"}
	cases := []struct {
		name        string
		mod         func(*Slot)
		conflicting bool
		invalidated bool
		reason      string
	}{
		{"valid", nil, false, false, ""},
		{"17+: invalidation_reason", func(s *Slot) { s.InvalidationReason = "rows_removed" }, false, true, "rows_removed"},
		{"16: conflicting", nil, true, true, "conflict"},
		{"13+: wal_status lost", func(s *Slot) { s.WALStatus = "lost" }, false, true, "wal_removed"},
		{"unreserved is not yet invalidated", func(s *Slot) { s.WALStatus = "unreserved" }, false, false, ""},
		{"17+ reason wins over conflicting", func(s *Slot) { s.InvalidationReason = "wal_level_insufficient" }, true, true, "wal_level_insufficient"},
	}
	for _, c := range cases {
		r := slotRow{slot: base, xmin: 4294967295, conflicting: c.conflicting}
		if c.mod != nil {
			c.mod(&r.slot)
		}
		got := slotFromRow(r)
		if got.Invalidated != c.invalidated || got.InvalidationReason != c.reason {
			t.Errorf("%s: invalidated %v (%q), want %v (%q)", c.name, got.Invalidated, got.InvalidationReason, c.invalidated, c.reason)
		}
		if got.CatalogXmin != 4294967295 || got.ConfirmedFlush != 0x2000000 {
			t.Errorf("%s: positions %+v", c.name, got.Position)
		}
	}
}

func TestXIDFromRow(t *testing.T) {
	for _, x := range []int64{-1, 1 << 32} {
		if _, err := xidFromRow(x); err == nil {
			t.Errorf("xid %d accepted", x)
		}
	}
	if x, err := xidFromRow(700); err != nil || x != 700 {
		t.Errorf("xid 700: %v %v", x, err)
	}
}

func TestParseHistory(t *testing.T) {
	h, err := ParseHistory([]byte("1\t0/3000158\tno recovery target specified\n\n2\t0/5A00000\tbefore 2000-01-01\n# comment\n"))
	if err != nil || len(h) != 2 || h[1] != 0x3000158 || h[2] != 0x5A00000 {
		t.Fatalf("%v %v", h, err)
	}
	for _, bad := range []string{"x\t0/1\n", "1\n", "1\tnope\n"} {
		if _, err := ParseHistory([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestSyncSkipProblem: doctor names each synced slot the server's slot sync skipped (19+), with
// why in words, and says nothing when none was.
func TestSyncSkipProblem(t *testing.T) {
	if p := SyncSkipProblem(map[string]Slot{"a": {}}); p != nil {
		t.Fatalf("no skip: %+v", p)
	}
	p := SyncSkipProblem(map[string]Slot{"b": {SyncSkipReason: "wal_not_flushed", SyncSkipCount: 3}, "a": {SyncSkipReason: "wal_or_rows_removed", SyncSkipCount: 1}})
	if p == nil || p.Check != "server_sync_skips" || !strings.Contains(p.Issue, "b: wal_not_flushed, 3 times (the standby has not flushed") ||
		strings.Index(p.Issue, "a: wal_or_rows_removed") > strings.Index(p.Issue, "b: ") {
		t.Fatalf("skips: %+v", p)
	}
}
