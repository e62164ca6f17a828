package sync

import (
	"strings"
	"testing"
	"time"

	"github.com/slotsync/slotsync/topology"
)

func TestPlanStandbySlots(t *testing.T) {
	live := func(n string) topology.SyncedStandbySlot {
		return topology.SyncedStandbySlot{Name: n, Exists: true, Active: true}
	}
	idle := func(n string, d time.Duration) topology.SyncedStandbySlot {
		return topology.SyncedStandbySlot{Name: n, Exists: true, InactiveFor: d}
	}
	cases := []struct {
		name string
		in   StandbySlotsInput
		next string // what the setting becomes (when ok)
		ok   bool
		why  string
	}{
		{"own slot added once it streams", StandbySlotsInput{Own: "sb", OwnStreaming: true}, "sb", true, "sb added"},
		{"own slot not added while it does not stream", StandbySlotsInput{Own: "sb"}, "", false, ""},
		{"another standby kept, own appended", StandbySlotsInput{Setting: "other", Listed: []topology.SyncedStandbySlot{live("other")}, Own: "sb", OwnStreaming: true}, "other,sb", true, "sb added"},
		{"already listed", StandbySlotsInput{Setting: "sb", Listed: []topology.SyncedStandbySlot{live("sb")}, Own: "sb", OwnStreaming: true}, "", false, ""},
		{"a missing slot taken out", StandbySlotsInput{Setting: "gone, sb", Listed: []topology.SyncedStandbySlot{{Name: "gone"}, live("sb")}, Own: "sb", OwnStreaming: true}, "sb", true, "gone taken out: no such physical slot"},
		{"a standby idle past the bound taken out", StandbySlotsInput{Setting: "old,sb", Listed: []topology.SyncedStandbySlot{idle("old", 6*time.Minute), live("sb")}, GoneAfter: 5 * time.Minute}, "sb", true, "old taken out: no standby has streamed through it for 6m0s"},
		{"a standby idle within the bound kept", StandbySlotsInput{Setting: "old", Listed: []topology.SyncedStandbySlot{idle("old", time.Minute)}, GoneAfter: 5 * time.Minute}, "", false, ""},
		{"own slot idle past the bound taken out (beside a standby that no longer streams)", StandbySlotsInput{Setting: "sb", Listed: []topology.SyncedStandbySlot{idle("sb", 6*time.Minute)}, Own: "sb", GoneAfter: 5 * time.Minute}, "", true, "sb taken out"},
		{"beside a promoted node: an inherited entry for a slot it lacks", StandbySlotsInput{Setting: "sb", Listed: []topology.SyncedStandbySlot{{Name: "sb"}}, GoneAfter: 5 * time.Minute}, "", true, "sb taken out: no such physical slot"},
		{"* is the operator's", StandbySlotsInput{Setting: "*", Own: "sb", OwnStreaming: true}, "", false, ""},
		{"a name PostgreSQL would refuse is not written", StandbySlotsInput{Own: "sb'; DROP", OwnStreaming: true}, "", false, ""},
	}
	for _, c := range cases {
		ch, ok := PlanStandbySlots(c.in)
		if ok != c.ok || ok && strings.Join(ch.Next, ",") != c.next || !strings.Contains(strings.Join(ch.Why, "; "), c.why) {
			t.Errorf("%s: %+v %v, want %q %v (%s)", c.name, ch, ok, c.next, c.ok, c.why)
		}
	}
}

func TestStandbySlotsSQL(t *testing.T) {
	if s, err := StandbySlotsSQL([]string{"a", "b_2"}); err != nil || s != "ALTER SYSTEM SET synchronized_standby_slots = 'a,b_2'" {
		t.Fatalf("%q %v", s, err)
	}
	if s, _ := StandbySlotsSQL(nil); s != "ALTER SYSTEM RESET synchronized_standby_slots" {
		t.Fatal(s)
	}
	if _, err := StandbySlotsSQL([]string{"x'; SELECT 1; --"}); err == nil {
		t.Fatal("a name that is not a slot name was written into SQL")
	}
}
