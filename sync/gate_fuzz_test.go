package sync

import (
	"fmt"
	"testing"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// FuzzJudgeWithoutPrimary: whatever the record and the standby's slots, the gate without the
// primary never turns a NOT READY of the record into READY, never says READY for a copy that is
// gone, invalidated, temporary, without its WAL or moved back since the record, and judges only
// the slots of the record.
func FuzzJudgeWithoutPrimary(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0x20, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 0x20, 0, 0, 0, 0x10, 0, 0, 0, 0xff, 0, 0, 0, 3, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		words := &fuzzWords{data}
		next := words.next
		rec := &GateRecord{Slots: map[string]GateSlot{}, SynchronizedStandby: next()%2 == 0}
		standby := NodeState{Info: topology.NodeInfo{InRecovery: true, ReplayLSN: 0x9000000}, Slots: map[string]topology.Slot{}}
		for i := 0; i < 3 && words.more(); i++ {
			name := fmt.Sprintf("s%d", i)
			bits := next()
			flag := func(b uint) bool { return bits&(1<<b) != 0 }
			id := lsncheck.Identity{Name: name, Database: "app", Plugin: "pgoutput"}
			gs := GateSlot{Identity: id, Ready: flag(0), RequireSynced: flag(1),
				Primary: lsncheck.Position{RestartLSN: 0x100, ConfirmedFlush: lsncheck.LSN(next()), CatalogXmin: 700},
				Copy:    lsncheck.Position{RestartLSN: 0x100, ConfirmedFlush: lsncheck.LSN(next()), CatalogXmin: 700}}
			if !gs.Ready {
				gs.Reasons = []lsncheck.Reason{lsncheck.ReasonCopyConfirmedAhead}
			}
			rec.Slots[name] = gs
			if flag(2) {
				continue // the copy is gone
			}
			cp := topology.Slot{Identity: id, Position: gs.Copy, WALStatus: "reserved"}
			cp.ConfirmedFlush = lsncheck.LSN(next())
			cp.Invalidated, cp.Temporary, cp.Synced = flag(3), flag(4), flag(5)
			if flag(6) {
				cp.WALStatus = "lost"
			}
			if flag(7) {
				cp.Plugin = "test_decoding"
			}
			if flag(8) {
				cp.TwoPhase = true
			}
			standby.Slots[name] = cp
		}
		for _, sr := range JudgeWithoutPrimary(rec, standby, Selection{}, next()%2 == 0, Demoted{}) {
			gs, ok := rec.Slots[sr.Name]
			if !ok {
				t.Fatalf("judged a slot the record does not have: %+v", sr)
			}
			if !sr.Verdict.Ready {
				continue
			}
			cp, has := standby.Slots[sr.Name]
			switch {
			case !gs.Ready:
				t.Fatalf("NOT READY in the record, READY without the primary: %+v -> %+v", gs, sr.Verdict)
			case !has || cp.Invalidated || cp.Temporary || !cp.WALAvailable():
				t.Fatalf("READY for a copy that cannot serve: %+v, copy %+v", sr.Verdict, cp)
			case cp.Identity != gs.Identity:
				t.Fatalf("READY for another slot: record %+v, copy %+v", gs.Identity, cp.Identity)
			case cp.ConfirmedFlush < gs.Copy.ConfirmedFlush:
				t.Fatalf("READY for a copy that went back since the record: %+v, copy %+v", gs, cp)
			case gs.RequireSynced && !cp.Synced:
				t.Fatalf("READY for a copy no longer kept by the server's sync: %+v", cp)
			}
		}
	})
}
