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
	if LoadGateSeen(dir) != nil || LoadGateSeen("") != nil {
		t.Fatal("a note where none was written")
	}
	if err := seen.save(dir); err != nil {
		t.Fatal(err)
	}
	got := LoadGateSeen(dir)
	if got == nil || !got.Record.Equal(seen.Record) || !got.PrimaryClock.Equal(seen.PrimaryClock) || !got.RenewBy.Equal(seen.RenewBy) {
		t.Fatalf("read back %+v, want %+v", got, seen)
	}
	if err := os.WriteFile(filepath.Join(dir, SeenFile), []byte("{"), 0o640); err != nil {
		t.Fatal(err)
	}
	if LoadGateSeen(dir) != nil {
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

// TestReadRecordAndSeen: check reading the journal, then the note, while the daemon writes a new
// record and its note between the two reads reads both again, and takes the note of the record
// it then holds; a note of the record read, or an older one, is taken at once.
func TestReadRecordAndSeen(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	journalAt := func(at time.Time) *Journal { return &Journal{Gate: &GateRecord{ObservedAt: at}} }
	noteOf := func(at time.Time) *GateSeen { return &GateSeen{Record: at, RenewBy: at.Add(time.Second)} }
	for _, c := range []struct {
		name     string
		journals []*Journal
		notes    []*GateSeen
		reads    int
		want     time.Time // the record of the note taken; zero: none
	}{
		{"the note of the record read", []*Journal{journalAt(t0)}, []*GateSeen{noteOf(t0)}, 1, t0},
		{"an older note", []*Journal{journalAt(t0.Add(time.Second))}, []*GateSeen{noteOf(t0)}, 1, t0},
		{"no note", []*Journal{journalAt(t0)}, []*GateSeen{nil}, 1, time.Time{}},
		{"a newer record written between the reads", []*Journal{journalAt(t0), journalAt(t0.Add(time.Second))},
			[]*GateSeen{noteOf(t0.Add(time.Second)), noteOf(t0.Add(time.Second))}, 2, t0.Add(time.Second)},
		{"the daemon writing each time", []*Journal{journalAt(t0), journalAt(t0.Add(time.Second)), journalAt(t0.Add(2 * time.Second))},
			[]*GateSeen{noteOf(t0.Add(time.Second)), noteOf(t0.Add(2 * time.Second)), noteOf(t0.Add(3 * time.Second))}, seenReads, t0.Add(3 * time.Second)},
	} {
		var nj, ns int
		j, s := readRecordAndSeen(func() *Journal { nj++; return c.journals[min(nj, len(c.journals))-1] },
			func() *GateSeen { ns++; return c.notes[min(ns, len(c.notes))-1] })
		var got time.Time
		if s != nil {
			got = s.Record
		}
		if nj != c.reads || ns != c.reads || !got.Equal(c.want) || j != c.journals[min(nj, len(c.journals))-1] {
			t.Errorf("%s: %d journal and %d note reads, the note of %v; want %d each, the note of %v", c.name, nj, ns, got, c.reads, c.want)
		}
	}
}
