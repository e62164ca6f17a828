package sync

import (
	"testing"
	"time"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

func TestOwnSlotsWhileThePrimary(t *testing.T) {
	now := time.Unix(1000, 0)
	j := &Journal{Version: journalVersion, Slots: map[string]*Entry{
		"gone": {Incarnation: "01", Identity: lsncheck.Identity{Name: "gone", Database: "app", Plugin: "pgoutput"}},
	}}
	node := NodeState{Slots: map[string]topology.Slot{
		"a":   slot(idA, 0x100, 0x200, 5),
		"tmp": func() topology.Slot { s := slot(lsncheck.Identity{Name: "tmp"}, 1, 2, 3); s.Temporary = true; return s }(),
	}}
	next, changed := ownSlots(j, node, Selection{}, now, 5*time.Second)
	if !changed || next.Slots["a"] == nil || next.Slots["gone"] != nil || next.Slots["tmp"] != nil || next.Slots["a"].Primary.ConfirmedFlush != 0x200 {
		t.Fatalf("own slots: changed %v, %+v", changed, next.Slots)
	}
	if j.Slots["gone"] == nil {
		t.Fatal("the input journal was changed")
	}
	// Positions alone: written at most every interval.
	node.Slots["a"] = slot(idA, 0x100, 0x300, 5)
	if _, changed := ownSlots(next, node, Selection{}, now.Add(time.Second), 5*time.Second); changed {
		t.Error("a move of positions was written before the interval")
	}
	later, changed := ownSlots(next, node, Selection{}, now.Add(6*time.Second), 5*time.Second)
	if !changed || later.Slots["a"].Primary.ConfirmedFlush != 0x300 || later.Slots["a"].Incarnation != next.Slots["a"].Incarnation {
		t.Errorf("after the interval: %v %+v", changed, later.Slots["a"])
	}
}
