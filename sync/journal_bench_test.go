package sync

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slotsync/slotsync/lsncheck"
)

// BenchmarkLoadJournal: reading the journal of 1000 slots, each with its entry and its gate
// record, as check does first (docs/BENCHMARKS.md).
func BenchmarkLoadJournal(b *testing.B) {
	dir := b.TempDir()
	j := &Journal{Version: journalVersion, SystemID: "7300000000000000000", Slots: map[string]*Entry{},
		Gate: &GateRecord{ObservedAt: time.Now(), Slots: map[string]GateSlot{}}}
	for i := range 1000 {
		name := fmt.Sprintf("s%04d", i)
		pos := lsncheck.Position{RestartLSN: lsncheck.LSN(0x16B374D848 + i*64), ConfirmedFlush: lsncheck.LSN(0x16B374D9A0 + i*64), CatalogXmin: lsncheck.XID(9000 + i)}
		id := lsncheck.Identity{Name: name, Database: "app", Plugin: "pgoutput"}
		j.Slots[name] = &Entry{Incarnation: fmt.Sprintf("%016x", i*7919), Identity: id, FirstSeen: pos, Primary: pos, Method: "sql",
			CreatedAt: time.Now(), UpdatedAt: time.Now(), Timeline: 1}
		j.Gate.Slots[name] = GateSlot{Identity: id, Ready: true, Detail: "the copy trails the consumer by 344 bytes", Primary: pos, Copy: pos, SnapshotNeeded: true}
	}
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, JournalFile), data, 0o600); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := LoadJournal(dir, true); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(data))/1024, "journal-KiB")
}
