package drill

import (
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
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
	wd := &world{feeds: []*feed{{c: newConsumer("a", "test_decoding")}}, truths: []Truth{ok}}
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
