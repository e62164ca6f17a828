package explore

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestLastingHolds: a fault held for 20 ms and another of the same kind held for 300 ms from
// just after end once, after the longer, by the first one's end; another kind is held apart.
func TestLastingHolds(t *testing.T) {
	var l lasting
	var first, second, other atomic.Int32
	l.hold("route cut", 20*time.Millisecond, func() { first.Add(1) })
	l.hold("route cut", 300*time.Millisecond, func() { second.Add(1) })
	l.hold("slotsync paused", 20*time.Millisecond, func() { other.Add(1) })
	time.Sleep(150 * time.Millisecond)
	if first.Load() != 0 || second.Load() != 0 {
		t.Fatalf("ended after 150 ms though held for 300 ms (first %d, second %d)", first.Load(), second.Load())
	}
	if other.Load() != 1 {
		t.Fatalf("a fault of another kind, held 20 ms, ended %d times after 150 ms", other.Load())
	}
	for deadline := time.Now().Add(5 * time.Second); first.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if first.Load() != 1 || second.Load() != 0 {
		t.Fatalf("ends run: the first holder's %d times, the second's %d (want 1 and 0)", first.Load(), second.Load())
	}
	l.hold("route cut", 10*time.Millisecond, func() { second.Add(1) })
	for deadline := time.Now().Add(5 * time.Second); second.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if second.Load() != 1 {
		t.Fatal("a hold after the last one ended did not end by its own end")
	}
}
