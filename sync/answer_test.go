package sync

import (
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
