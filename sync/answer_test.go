package sync

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/slotsync/slotsync/lsncheck"
)

// TestAnswerSummary: the summary keeps every slot that is not READY and counts the others
// (operators review round 4, finding 18: at a thousand slots the full answer was 1.15 MB, printed
// into Patroni's log at every promotion).
func TestAnswerSummary(t *testing.T) {
	rep := &Report{Role: RoleStandby, Slots: []SlotReport{{Name: "late", Gate: true}}}
	for i := 0; i < 1000; i++ {
		rep.Slots = append(rep.Slots, SlotReport{Name: "ok", Gate: true, Verdict: lsncheck.Verdict{Ready: true}})
	}
	a := AnswerOf(rep, nil)
	s := a.Summary()
	if len(s.Slots) != 1 || s.Slots[0].Name != "late" || s.SlotsReady != 1000 || s.Ready || len(s.NotReady) != 1 || len(a.Slots) != 1001 {
		t.Fatalf("summary: %d slots, %d ready left out, ready %v; the answer it came from keeps %d", len(s.Slots), s.SlotsReady, s.Ready, len(a.Slots))
	}
	if e := AnswerOf(nil, errors.New("x")).Summary(); e.Error == "" || e.ExitCode != ExitCannotTell {
		t.Fatalf("an error's summary: %+v", e)
	}
}

// TestRedeliveryOf: a READY copy behind its consumer may deliver again what lies between the
// copy's confirmed_flush and the consumer's; a copy NOT READY has no window; judged without the
// primary, the consumer may have confirmed more since (at least).
func TestRedeliveryOf(t *testing.T) {
	pos := func(confirmed lsncheck.LSN) *lsncheck.Position {
		return &lsncheck.Position{RestartLSN: 0x1000000, ConfirmedFlush: confirmed}
	}
	ready := SlotReport{Name: "cdc", Gate: true, Primary: pos(0x3002000), Copy: pos(0x3000000), Verdict: lsncheck.Verdict{Ready: true}}
	if w, ok := RedeliveryOf(ready, false); !ok || w != (Redelivery{Slot: "cdc", From: 0x3000000, To: 0x3002000, Bytes: 0x2000}) {
		t.Errorf("READY, behind its consumer: %+v %v", w, ok)
	}
	if w, ok := RedeliveryOf(ready, true); !ok || !w.AtLeast || w.Bytes != 0x2000 {
		t.Errorf("without the primary: %+v %v", w, ok)
	}
	notReady := ready
	notReady.Verdict.Ready = false
	if _, ok := RedeliveryOf(notReady, false); ok {
		t.Error("a copy NOT READY has a redelivery window")
	}
	noCopy := ready
	noCopy.Copy = nil
	if _, ok := RedeliveryOf(noCopy, false); ok {
		t.Error("a slot without a copy has a redelivery window")
	}
}

// TestRedeliveryJSON: the window's LSNs are printed as PostgreSQL writes them, as docs/CLI.md
// shows (they were printed as numbers), and read back.
func TestRedeliveryJSON(t *testing.T) {
	w := Redelivery{Slot: "orders", From: 0x3000000, To: 0x3002000, Bytes: 8192, AtLeast: true}
	b, err := json.Marshal(w)
	if err != nil || string(b) != `{"slot":"orders","from":"0/3000000","to":"0/3002000","bytes":8192,"at_least":true}` {
		t.Fatalf("%s %v", b, err)
	}
	var back Redelivery
	if err := json.Unmarshal(b, &back); err != nil || back != w {
		t.Fatalf("read back: %+v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"slot":"x","from":"nope","to":"0/1"}`), &back); err == nil {
		t.Fatal("a window that is not an LSN read without an error")
	}
}
