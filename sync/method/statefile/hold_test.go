package statefile

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/topology"
)

// TestCatalogHoldRelease: a hold goes when the standby's feedback covers its copy, when its copy
// is neither there nor pending (the install failed), or after maxHold (its own timer, whether
// passes run or not); it stays otherwise.
func TestCatalogHoldRelease(t *testing.T) {
	h := newCatalogHold(hclog.NewNullLogger(), 10*time.Millisecond)
	for _, name := range []string{"covered", "uncovered", "nofeedback", "failed", "queued"} {
		h.held[name] = &holding{temp: method.HoldName("standby", name), database: "app"}
	}
	old := &holding{temp: method.HoldName("standby", "old"), database: "app"}
	h.mu.Lock()
	h.held["old"] = old
	old.timer = time.AfterFunc(h.maxHold, func() { h.expire("old", old) })
	h.mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); slices.Contains(h.Held(), "old"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the hold outlived maxHold")
		}
	}
	copyAt := func(xmin lsncheck.XID) topology.Slot {
		var s topology.Slot
		s.CatalogXmin = xmin
		return s
	}
	copies := map[string]topology.Slot{
		"covered": copyAt(700), "uncovered": copyAt(690), "nofeedback": copyAt(0), "old": copyAt(690),
	}
	h.Release(context.Background(), 695, copies, func(name string) bool { return name == "queued" })
	got := h.Held()
	want := []string{"nofeedback", "queued", "uncovered"}
	if len(got) != len(want) {
		t.Fatalf("held %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("held %v, want %v", got, want)
		}
	}
	// No feedback at all from the standby covers nothing.
	h.Release(context.Background(), 0, map[string]topology.Slot{"uncovered": copyAt(900)}, func(string) bool { return true })
	if len(h.Held()) != 3 {
		t.Fatalf("without feedback: held %v", h.Held())
	}
	long := "a_slot_name_of_sixty_three_characters_aaaaaaaaaaaaaaaaaaaaaaaaa"
	if n := method.HoldName(long, long); len(n) > 63 {
		t.Fatalf("hold name %q is too long", n)
	}
	// Two standbys copying one slot hold it under two names.
	if method.HoldName("standby_a", "cdc") == method.HoldName("standby_b", "cdc") {
		t.Fatal("two standbys' holds of one slot share a name")
	}
}
