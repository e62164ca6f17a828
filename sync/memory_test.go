package sync

import (
	"errors"
	"testing"
	"time"
)

// TestMemoryTransitions: a failure backs off exponentially up to the bound and is news only
// when its error changes; a recovery says after how many failures; a READY copy stops counting
// the copies spent on it; a copy made is no longer to be made again.
func TestMemoryTransitions(t *testing.T) {
	m := newMemory()
	now := time.Unix(1000, 0)
	b1, news1 := m.failed("a", errors.New("x"), time.Second, 5*time.Second, now)
	b2, news2 := m.failed("a", errors.New("x"), time.Second, 5*time.Second, now)
	b3, news3 := m.failed("a", errors.New("y"), time.Second, 5*time.Second, now)
	if b1 != 2*time.Second || b2 != 4*time.Second || b3 != 5*time.Second || !news1 || news2 || !news3 {
		t.Fatalf("backoffs %s %s %s, news %v %v %v", b1, b2, b3, news1, news2, news3)
	}
	if m.failures["a"].retryAt != now.Add(5*time.Second) {
		t.Fatalf("retry at %s", m.failures["a"].retryAt)
	}
	if n, was := m.recovered("a"); !was || n != 3 {
		t.Fatalf("recovered after %d (%v), want 3", n, was)
	}
	if _, was := m.recovered("a"); was {
		t.Fatal("recovered twice")
	}
	m.copySpent("b")
	m.copySpent("b")
	if m.copies["b"] != 2 {
		t.Fatalf("copies %d", m.copies["b"])
	}
	m.copyReady("b")
	if _, ok := m.copies["b"]; ok {
		t.Fatal("a READY copy still counts its copies")
	}
	m.copyWALGone("c")
	if m.recopy["c"] == "" {
		t.Fatal("a copy whose WAL is gone is not to be made again")
	}
	m.copyMade("c")
	if _, ok := m.recopy["c"]; ok {
		t.Fatal("a copy made is still to be made again")
	}
}
