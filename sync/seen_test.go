package sync

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slotsync/slotsync/topology"
)

func TestGateSeen(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rec := &GateRecord{ObservedAt: at.Add(-3 * time.Second)}
	seen := newGateSeen(rec.ObservedAt, at, time.Second, 500*time.Millisecond)
	if want := at.Add(3 * time.Second); !seen.RenewBy.Equal(want) {
		t.Fatalf("renew by %s, want %s (two passes of an interval and as long as the last took)", seen.RenewBy, want)
	}
	committed := func(d time.Duration) topology.NodeInfo { return topology.NodeInfo{ReplayedCommitAt: at.Add(d)} }
	for _, c := range []struct {
		what    string
		seen    *GateSeen
		rec     *GateRecord
		standby topology.NodeInfo
		want    bool
	}{
		{"a commit within the next two passes and the margin", seen, rec, committed(4 * time.Second), false},
		{"a commit past them", seen, rec, committed(4*time.Second + time.Millisecond), true},
		{"no commit replayed", seen, rec, topology.NodeInfo{}, false},
		{"a note of another record", seen, &GateRecord{ObservedAt: at}, committed(time.Minute), false},
		{"no note", nil, rec, committed(time.Minute), false},
	} {
		if got := c.seen.outlived(c.rec, c.standby); got != c.want {
			t.Errorf("%s: outlived %v, want %v", c.what, got, c.want)
		}
	}
	if newGateSeen(at, time.Time{}, time.Second, 0) != nil {
		t.Error("a pass that did not read the primary's clock noted")
	}

	dir := t.TempDir()
	if loadGateSeen(dir) != nil || loadGateSeen("") != nil {
		t.Fatal("a note where none was written")
	}
	if err := seen.save(dir); err != nil {
		t.Fatal(err)
	}
	got := loadGateSeen(dir)
	if got == nil || !got.Record.Equal(seen.Record) || !got.PrimaryClock.Equal(seen.PrimaryClock) || !got.RenewBy.Equal(seen.RenewBy) {
		t.Fatalf("read back %+v, want %+v", got, seen)
	}
	if err := os.WriteFile(filepath.Join(dir, SeenFile), []byte("{"), 0o640); err != nil {
		t.Fatal(err)
	}
	if loadGateSeen(dir) != nil {
		t.Fatal("a torn note taken for one: the gate rests on the record alone then")
	}
}

// BenchmarkGateSeenSave is what each pass with the primary adds to write its note.
func BenchmarkGateSeenSave(b *testing.B) {
	dir := b.TempDir()
	at := time.Now()
	seen := newGateSeen(at, at, time.Second, 10*time.Millisecond)
	for b.Loop() {
		if err := seen.save(dir); err != nil {
			b.Fatal(err)
		}
	}
}
