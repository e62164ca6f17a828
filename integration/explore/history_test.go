package explore

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration/drill"
)

// historyOf is an iteration judged without the primary from a record observed at observed:
// its consumer had confirmed 0x1100, past the standby's WAL end 0x1000, half a second before
// (too late for the record to have read it), and then holds the changes 11 and 12 the new
// primary lacks; the standby streamed all
// along, or (cut) not around the record's moment.
func historyOf(observed time.Time, cut bool) (*History, drill.FailoverVerdict) {
	h := &History{WALEnd: 0x1000, WithBinding: false,
		With: GateAnswer{Asked: observed.Add(-time.Minute), Exit: 1, Slots: map[string]Answer{"s": AnswerNotReady}},
		Without: GateAnswer{Asked: observed.Add(5 * time.Second), Returned: observed.Add(5*time.Second + 40*time.Millisecond), Exit: 0, Ready: true,
			WithoutPrimary: true, ObservedAt: observed, Slots: map[string]Answer{"s": AnswerReady}, Output: `{"ready":true}`},
		Consumers: []ConsumerHistory{{Slot: "s", Receipts: [][2]uint64{{10, 0x0f00}, {11, 0x1080}, {12, 0x1100}},
			Confirmations: []drill.Confirmation{{At: observed.Add(-3 * time.Second), LSN: 0x0f00}, {At: observed.Add(-500 * time.Millisecond), LSN: 0x1100}}}},
	}
	for i := -20; i <= 20; i++ {
		at := observed.Add(time.Duration(i) * receiverEvery)
		h.Streaming = append(h.Streaming, StreamSample{At: at, Streaming: !cut || i < -5 || i > 5})
	}
	fv := drill.FailoverVerdict{Slots: []drill.SlotVerdict{{Slot: "s", Ahead: []int{11, 12}, AheadOfStandby: true}}}
	return h, fv
}

// TestJudgeFromAKeptHistory: what an iteration keeps is enough to judge it again whole: the same
// verdicts from the History read back from a report line as from the History itself, and the
// streaming samples and confirmations it keeps decide them (a record made while the standby did
// not stream promised no consumer ahead; one of a streaming standby left it unpromised).
func TestJudgeFromAKeptHistory(t *testing.T) {
	observed := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		cut bool
		lie bool
	}{{cut: false, lie: false}, {cut: true, lie: true}} {
		h, fv := historyOf(observed, c.cut)
		judged := judge(h, fv, nil)
		it := ChaosIteration{Number: 1, Failover: fv, Judged: judged, History: h}
		line, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		read, err := ReadIterations(bytes.NewReader(line))
		if err != nil || len(read) != 1 || read[0].History == nil {
			t.Fatalf("read back: %v, %d iterations", err, len(read))
		}
		again := judge(read[0].History, read[0].Failover, read[0].Truths)
		if !reflect.DeepEqual(again, judged) {
			t.Errorf("cut %v: judged again from the report line:\n%+v\nfrom the history:\n%+v", c.cut, again, judged)
		}
		without := judged[1]
		if without.Asked != "asked without the primary" || without.Lie != c.lie {
			t.Errorf("cut %v: %s: lie %v (%s, promised by %q), want %v", c.cut, without.Asked, without.Lie, without.Why, without.PromisedBy, c.lie)
		}
		if c.cut && !strings.Contains(without.PromisedBy, "did not stream") {
			t.Errorf("cut: promised by %q, want the record made while the standby did not stream", without.PromisedBy)
		}
	}
}

// TestRejudgeFromHistory: Rejudge judges an iteration that kept its History from it, not from
// the figures its report says: a report whose Judged called the answer no lie (as an oracle
// that excused every consumer ahead without the primary would have) is called a lie again, and
// the change named; an iteration without a History is assessed from its figures as before.
func TestRejudgeFromHistory(t *testing.T) {
	observed := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	h, fv := historyOf(observed, true)
	stale := judge(h, fv, nil)
	stale[1].Lie, stale[1].Why, stale[1].AheadPromised, stale[1].PromisedBy = false, "", false, ""
	its := []ChaosIteration{
		{Number: 1, Seed: 7, Failover: fv, Judged: stale, History: h},
		{Number: 2, Seed: 8, Judged: []Judged{{Slot: "s", Asked: askedWithPrimary, Answer: AnswerReady, Binding: true, Lost: 3}}},
	}
	changed := Rejudge(its)
	if len(changed) != 2 || !strings.Contains(changed[0], "iteration 1 (seed 7), s asked without the primary: not a lie, now a lie") ||
		!strings.Contains(changed[1], "iteration 2 (seed 8)") {
		t.Fatalf("changed: %q", changed)
	}
	if !its[0].Judged[1].Lie || !its[1].Judged[0].Lie {
		t.Errorf("judged again: %+v %+v", its[0].Judged[1], its[1].Judged[0])
	}
	if got := h.Without.Returned.Sub(h.Without.Asked); got != 40*time.Millisecond {
		t.Errorf("the answer's return kept as %v after its sending", got)
	}
}

// TestJudgeUnconsumedSlots: a slot the answer selected that no consumer reads (an older slot
// kept as a backup, FaultSlotBehind) is judged by rule 4 at the instant: READY while its copy
// stood ahead of it at both reads is a lie, though no consumer lost anything; NOT READY for it,
// or a copy not ahead, is not; a consumer's slot is not judged twice.
func TestJudgeUnconsumedSlots(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	older := SlotAt{Plugin: "pgoutput", Database: "app", Restart: 0x0f00, Confirmed: 0x1000, CatalogXmin: 700}
	ahead := older
	ahead.Confirmed = 0x18000
	read := func(copyOf SlotAt) *Instant {
		return &Instant{At: at, Primary: map[string]SlotAt{"s": older, "s_behind": older}, Copies: map[string]SlotAt{"s": older, "s_behind": copyOf},
			StandbyWALEnd: 0x20000, ReceiverPID: 9}
	}
	for _, c := range []struct {
		name   string
		answer Answer
		copyOf SlotAt
		lie    bool
	}{
		{"READY for a copy ahead", AnswerReady, ahead, true},
		{"NOT READY for a copy ahead", AnswerNotReady, ahead, false},
		{"READY for a copy at its slot", AnswerReady, older, false},
	} {
		exit := map[bool]int{true: 0, false: 1}[c.answer == AnswerReady]
		h := &History{WALEnd: 0x20000, WithBinding: true,
			With: GateAnswer{Asked: at, Exit: exit, Ready: exit == 0, Slots: map[string]Answer{"s": AnswerReady, "s_behind": c.answer},
				Before: read(c.copyOf), After: read(c.copyOf)},
			Consumers: []ConsumerHistory{{Slot: "s"}},
		}
		fv := drill.FailoverVerdict{Slots: []drill.SlotVerdict{{Slot: "s"}}}
		var got []Judged
		for _, j := range judge(h, fv, nil) {
			if j.Slot == "s_behind" {
				got = append(got, j)
			} else if j.Lie || j.Unconsumed {
				t.Errorf("%s: the consumer's slot: %+v", c.name, j)
			}
		}
		if len(got) != 1 || !got[0].Unconsumed || got[0].Lie != c.lie || got[0].Asked != askedWithPrimary {
			t.Errorf("%s: the older slot judged %+v, want one judgement, a lie: %v", c.name, got, c.lie)
			continue
		}
		if c.lie && !strings.Contains(got[0].Why, "rule 4 at the instant") {
			t.Errorf("%s: why %q", c.name, got[0].Why)
		}
	}
}
