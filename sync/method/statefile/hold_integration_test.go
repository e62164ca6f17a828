package statefile

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/topology"
)

// TestHoldOnACutRoute: slotsync's route to the primary goes silent while it takes the catalog
// holds of a batch of copies, the first taken, the second's statement lost. Taking the second
// gives up within takeTimeout and ends the hold session, so neither the pass nor the first
// hold's expiry waits on it, and once the route is back the primary ends the session and the
// first hold with it. Before, the second take waited for an answer that never came: the pass
// hung, and the first hold, whose expiry waits for the take, stayed on the primary.
func TestHoldOnACutRoute(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15}, func(t *testing.T, major int) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		p := pgtest.StartPair(t, integration.Options{Major: major}).Primary
		for _, name := range []string{"cdc_a", "cdc_b"} {
			if err := p.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'test_decoding')", name); err != nil {
				t.Fatal(err)
			}
		}
		addr, err := p.Addr(ctx)
		if err != nil {
			t.Fatal(err)
		}
		proxy, err := integration.NewProxy(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer proxy.Close()
		ep, err := topology.ParseEndpoint("primary", fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable connect_timeout=2", proxy.Port()), "")
		if err != nil {
			t.Fatal(err)
		}
		h := newCatalogHold(hclog.NewNullLogger(), time.Hour)
		defer h.Close()
		slot := func(name string) topology.Slot {
			var s topology.Slot
			s.Name, s.Database, s.Plugin = name, "postgres", "test_decoding"
			return s
		}
		h.Take(ctx, ep, "standby", slot("cdc_a"), major)
		if got := holds(ctx, t, p); got != 1 {
			t.Fatalf("setup: %d holds on the primary, want 1", got)
		}
		proxy.Blackhole()
		restored := time.AfterFunc(2*time.Second, proxy.Restore)
		defer restored.Stop()
		took := make(chan time.Duration, 1)
		go func() {
			start := time.Now()
			h.Take(ctx, ep, "standby", slot("cdc_b"), major)
			took <- time.Since(start)
		}()
		select {
		case d := <-took:
			t.Logf("the second take gave up after %s", d.Round(100*time.Millisecond))
		case <-time.After(takeTimeout + 10*time.Second):
			t.Fatalf("the second take on a cut route did not give up within %s", takeTimeout+10*time.Second)
		}
		deadline := time.Now().Add(10 * time.Second)
		for holds(ctx, t, p) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("a hold stayed on the primary after its session was ended and the route came back: %v", h.Held())
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// holds counts the catalog holds on the primary.
func holds(ctx context.Context, t *testing.T, p *integration.Node) int {
	t.Helper()
	var n int
	if err := p.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'slotsync_hold_%'", nil, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHoldOfAStoppedSidecar: a slotsync that cannot run its timers (its process stopped, its
// host frozen) keeps its hold session's connection alive, and keepalives do not end it: the
// primary ends the session once it has been idle for idleBound (14+), and the holds with it.
// Before, the hold stayed for as long as slotsync was stopped (the fault explorer's seed 7104 on
// 15: slotsync paused for 30 s, a hold on the primary 29 s with a 5 s timeout).
func TestHoldOfAStoppedSidecar(t *testing.T) {
	pgtest.ForEachMajor(t, []int{15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		p := pgtest.StartPair(t, integration.Options{Major: major}).Primary
		if err := p.Exec(ctx, "SELECT pg_create_logical_replication_slot('cdc_a', 'test_decoding')"); err != nil {
			t.Fatal(err)
		}
		addr, err := p.Addr(ctx)
		if err != nil {
			t.Fatal(err)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		ep, err := topology.ParseEndpoint("primary", fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable", host, port), "")
		if err != nil {
			t.Fatal(err)
		}
		const maxHold = 2 * time.Second
		h := newCatalogHold(hclog.NewNullLogger(), maxHold)
		defer h.Close()
		var s topology.Slot
		s.Name, s.Database, s.Plugin = "cdc_a", "postgres", "test_decoding"
		h.Take(ctx, ep, "standby", s, major)
		if got := holds(ctx, t, p); got != 1 {
			t.Fatalf("setup: %d holds on the primary, want 1", got)
		}
		h.mu.Lock()
		h.held["cdc_a"].timer.Stop() // the process stopped: its timer never runs
		h.mu.Unlock()
		start := time.Now()
		for holds(ctx, t, p) != 0 {
			if time.Since(start) > idleBound(maxHold)+10*time.Second {
				t.Fatalf("the hold of a stopped slotsync stayed on the primary %s (bound %s)", time.Since(start).Round(time.Second), idleBound(maxHold))
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("the primary ended the hold session after %s (bound %s)", time.Since(start).Round(100*time.Millisecond), idleBound(maxHold))

		// At the default timeout (10 minutes) the session's bound is 11 minutes.
		d := newCatalogHold(hclog.NewNullLogger(), 0)
		defer d.Close()
		d.Take(ctx, ep, "standby", s, major)
		var got string
		if err := d.conns["postgres"].QueryRow(ctx, "SHOW idle_session_timeout").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != "11min" {
			t.Fatalf("a hold session at the default timeout has idle_session_timeout %s, want 11min", got)
		}
	})
}
