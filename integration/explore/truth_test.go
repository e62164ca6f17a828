package explore

import (
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/slotsync/slotsync/integration/drill"
)

// TestNoneAheadAt: an answer binds by the servers' word only when every drill slot was read and
// none held anything past the standby's end of WAL; a slot not read, a read that failed, or a
// consumer sent (not only confirmed) past the end does not.
func TestNoneAheadAt(t *testing.T) {
	at := time.Now()
	slots := []string{"a", "b"}
	end := pglogrepl.LSN(1000)
	truth := func(err string, s map[string]SlotTruth) Truth {
		return Truth{When: truthEnd, At: at, Slots: s, Err: err}
	}
	for _, c := range []struct {
		name  string
		truth Truth
		want  bool
	}{
		{"all behind", truth("", map[string]SlotTruth{"a": {Confirmed: 900, Sent: 1000}, "b": {Confirmed: 10}}), true},
		{"one sent past the end", truth("", map[string]SlotTruth{"a": {Confirmed: 900, Sent: 1001}, "b": {Confirmed: 10}}), false},
		{"one confirmed past the end", truth("", map[string]SlotTruth{"a": {Confirmed: 1001}, "b": {Confirmed: 10}}), false},
		{"a slot not read", truth("", map[string]SlotTruth{"a": {Confirmed: 900}}), false},
		{"the read failed", truth("primary: timeout", map[string]SlotTruth{"a": {Confirmed: 900}, "b": {Confirmed: 10}}), false},
		{"never read", Truth{}, false},
	} {
		if got := noneAheadAt(c.truth, slots, end); got != c.want {
			t.Errorf("%s: noneAheadAt %v, want %v", c.name, got, c.want)
		}
	}
}

// TestBindingByServers: the servers' word makes an answer binding only after a kill of a plan
// with no step acting from the question on, no hook and no switchover.
func TestBindingByServers(t *testing.T) {
	ok := Truth{When: truthEnd, At: time.Now(), Slots: map[string]SlotTruth{"a": {Confirmed: 5}}}
	wd := &world{feeds: []*feed{{c: drill.NewConsumer("a", "test_decoding")}}, truths: []Truth{ok}}
	base := Plan{Kill: true, Live: 10 * time.Second, Quiesce: time.Second, Steps: []Step{{At: 2 * time.Second, For: 3 * time.Second}}}
	if !wd.bindingByServers(base, 10) {
		t.Fatal("a kill after a quiet cutover, no consumer ahead: want binding")
	}
	late := base
	late.Steps = []Step{{At: 9 * time.Second, For: 3 * time.Second}}
	stop, hook := base, base
	stop.Kill, hook.Hook = false, true
	for name, p := range map[string]Plan{"a step acting at the question": late, "a clean stop": stop, "a hook": hook} {
		if wd.bindingByServers(p, 10) {
			t.Errorf("%s: binding by the servers' word", name)
		}
	}
	if wd.bindingByServers(base, 4) {
		t.Error("a consumer past the standby's end: binding by the servers' word")
	}
}

// TestTimeline: the standby's timeline says each change once: streaming or not, and the copies'
// positions, from the start of the live phase.
func TestTimeline(t *testing.T) {
	start := time.Unix(100, 0)
	r := &receiverLog{samples: []receiverSample{
		{at: start.Add(-100 * time.Millisecond), streaming: true},
		{at: start.Add(100 * time.Millisecond), streaming: true, copies: "a 0/10 0/5"},
		{at: start.Add(200 * time.Millisecond), streaming: true, copies: "a 0/10 0/5"},
		{at: start.Add(1200 * time.Millisecond), streaming: false, copies: "a 0/20 0/5"},
	}}
	want := []string{"-0.1s the standby streams", "+0.1s copies: a 0/10 0/5", "+1.2s the standby does not stream", "+1.2s copies: a 0/20 0/5"}
	if got := r.timeline(start); !slices.Equal(got, want) {
		t.Fatalf("timeline:\n%q\nwant\n%q", got, want)
	}
}

// TestAheadAfterTheLastReading (the long run of round 14, seed 20301092 on 13): a READY with the
// primary, bound by the servers' word (a kill while the writes went on, no consumer ahead at the
// last reading), then a transaction in flight committed after that reading and before the kill:
// the consumers confirmed it, the standby never got it. The answer promised only that no consumer
// was ahead when it was asked, as for a hook's: that is no lie. A consumer ahead at the question
// still is.
func TestAheadAfterTheLastReading(t *testing.T) {
	asked := time.Unix(100, 0)
	for _, c := range []struct {
		name     string
		question pglogrepl.LSN // the slot's confirmed_flush right before the question
		lie      bool
	}{
		{"went ahead after the answer", 900, false},
		{"ahead at the question", 1100, true},
	} {
		wd := &world{walEnd: 1000, byServers: true, truths: []Truth{
			{When: truthQuestion, At: asked.Add(-10 * time.Millisecond), Slots: map[string]SlotTruth{"a": {Confirmed: c.question, Sent: c.question}}},
			{When: truthEnd, At: asked.Add(100 * time.Millisecond), Slots: map[string]SlotTruth{"a": {Confirmed: 1000, Sent: 1000}}},
		}}
		j := judgeAheadAfterAnswer(wd, drill.NewConsumer("a", "test_decoding"), asked, c.question, 1200, []int{7, 8, 9})
		if j.Asked != askedWithPrimary || j.Lie != c.lie {
			t.Errorf("%s: %s: lie %v (%s), want %v", c.name, j.Asked, j.Lie, j.Why, c.lie)
		}
	}
}

// TestStopUnsent (the long run of round 27, seed 27001036 on 13): a clean stop after writes
// that followed the question, the standby restarting (slotsync loading a state-file copy) and so
// not streaming right before the stop: the stop could not send it what the consumers got after
// the answer. With the standby streaming, or nothing written after the question, or a kill (the
// servers' word decides there), it is not one.
func TestStopUnsent(t *testing.T) {
	down := Truth{When: truthEnd, At: time.Now(), PrimaryWAL: 23079152, Err: "standby: connect to standby: connection refused",
		Slots: map[string]SlotTruth{"drill_pgoutput": {Confirmed: 23079152, Sent: 23079152}}}
	up := down
	up.StandbyStreaming, up.StandbyReceived, up.Err = true, 23079152, ""
	primaryUnread := up
	primaryUnread.Err = "primary: timeout"
	stop, kill, hook := Plan{}, Plan{Kill: true}, Plan{Hook: true, Kill: true}
	for _, c := range []struct {
		name  string
		plan  Plan
		wrote bool
		end   Truth
		want  bool
	}{
		{"the seed's: a clean stop, writes after the question, the standby down", stop, true, down, true},
		{"the standby streaming at the stop", stop, true, up, false},
		{"the standby streaming, the primary's read failed", stop, true, primaryUnread, false},
		{"nothing written after the question", stop, false, down, false},
		{"a kill", kill, true, down, false},
		{"a hook's kill", hook, true, down, false},
	} {
		if got := stopUnsent(c.plan, c.wrote, c.end); got != c.want {
			t.Errorf("%s: stopUnsent %v, want %v", c.name, got, c.want)
		}
	}
}

// TestAheadAfterACleanStopUnsent (the same seed): the answer with the primary said READY with no
// consumer ahead (both at 23058512, the standby's end, when asked); pgoutput's consumer then got
// nine changes the standby, restarting, never received before the clean stop. The answer promised
// only that none was ahead when it was asked: no lie. Before stopUnsent the oracle called it READY
// while loss. A consumer ahead at the question still is one.
func TestAheadAfterACleanStopUnsent(t *testing.T) {
	asked := time.Unix(100, 0)
	for _, c := range []struct {
		name     string
		question pglogrepl.LSN
		lie      bool
	}{
		{"went ahead after the answer", 23058512, false},
		{"ahead at the question", 23060000, true},
	} {
		wd := &world{walEnd: 23058512, stopUnsent: true, truths: []Truth{
			{When: truthQuestion, At: asked.Add(-10 * time.Millisecond), StandbyStreaming: true, StandbyReceived: 23058512,
				Slots: map[string]SlotTruth{"drill_pgoutput": {Confirmed: c.question, Sent: c.question}}},
			{When: truthEnd, At: asked.Add(200 * time.Millisecond), Err: "standby: connect to standby: connection refused",
				Slots: map[string]SlotTruth{"drill_pgoutput": {Confirmed: 23079152, Sent: 23079152}}},
		}}
		j := judgeAheadAfterAnswer(wd, drill.NewConsumer("drill_pgoutput", "pgoutput"), asked, c.question, 23079152,
			[]int{724, 725, 726, 727, 728, 729, 730, 731, 732})
		if j.Asked != askedWithPrimary || !j.Binding || j.Lie != c.lie {
			t.Errorf("%s: %s: binding %v, lie %v (%s), want %v", c.name, j.Asked, j.Binding, j.Lie, j.Why, c.lie)
		}
	}
}

// judgeAheadAfterAnswer judges, in wd (its flags and truths set by the caller), a READY asked
// with the primary at asked for a's slot, whose consumer had confirmed question right before it
// and later past the standby's end (later), holding the changes ahead.
func judgeAheadAfterAnswer(wd *world, a *drill.Consumer, asked time.Time, question, later pglogrepl.LSN, ahead []int) Judged {
	a.NoteConfirmed(asked.Add(-time.Second), question)
	a.NoteConfirmed(asked.Add(200*time.Millisecond), later)
	wd.feeds, wd.recv = []*feed{{c: a}}, &receiverLog{}
	fv := drill.FailoverVerdict{Slots: []drill.SlotVerdict{{Slot: a.Slot, Ahead: ahead, AheadOfStandby: true}}}
	with := GateAnswer{Asked: asked, Slots: map[string]Answer{a.Slot: AnswerReady}}
	return wd.judgeAnswers(fv, with, GateAnswer{}, true)[0]
}
