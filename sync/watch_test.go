package sync

import (
	"context"
	"errors"
	"testing"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/topology"
)

// TestWatchOnlyFromTheVerifiedPrimary: the watch between passes moves a copy only from the
// primary the last full pass verified. The correctness review's probe: a READY copy at 0/2000000
// is watched, the primary is demoted, and the server the link reaches now (in recovery, or
// another one) has a same-name slot at 0/3000000, past the consumer: the copy must not move, or
// the gate without the primary (which rejects only copies that went back) stays READY past its
// consumer.
func TestWatchOnlyFromTheVerifiedPrimary(t *testing.T) {
	verified := topology.ServerID{SystemID: "42", StartedAt: "p"}
	cases := []struct {
		name  string
		from  topology.ServerID
		moves bool
	}{
		{"the verified primary", verified, true},
		{"the primary demoted (restarted in recovery)", topology.ServerID{SystemID: "42", StartedAt: "p2", InRecovery: true}, false},
		{"the primary in recovery, same start", topology.ServerID{SystemID: "42", StartedAt: "p", InRecovery: true}, false},
		{"another server of the cluster", topology.ServerID{SystemID: "42", StartedAt: "q"}, false},
		{"another cluster", topology.ServerID{SystemID: "7", StartedAt: "p"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			app := &simMethod{}
			obs := &simObserver{watch: &WatchSample{InRecovery: true, Replay: 0x4000000, From: c.from,
				Primary: map[string]lsncheck.Position{"cdc": {RestartLSN: 0x1000000, ConfirmedFlush: 0x3000000, CatalogXmin: 700}}}}
			e := testEngine(t, obs, app)
			e.sess = []method.Session{app}
			e.mem.watched = map[string]watched{"cdc": {database: "app", copyAt: 0x2000000,
				ref: lsncheck.Seen{Identity: lsncheck.Identity{Name: "cdc", Database: "app", Plugin: "pgoutput"},
					Position: lsncheck.Position{RestartLSN: 0x1000000, ConfirmedFlush: 0x2000000, CatalogXmin: 700}}}}
			e.mem.watchFrom = verified
			e.watch(context.Background())
			if moved := len(app.calls) > 0; moved != c.moves {
				t.Fatalf("copy moved: %v, want %v (calls %v)", moved, c.moves, app.calls)
			}
			if !c.moves && e.mem.watched != nil {
				t.Fatal("the watch goes on after reading another server than the verified primary")
			}
		})
	}
}

// TestFailedPassEndsTheWatch: a pass that fails (here: the primary found demoted) ends the watch;
// only the next full pass that succeeds starts it again.
func TestFailedPassEndsTheWatch(t *testing.T) {
	obs := &simObserver{snap: twoNodeSnapshot(), err: &NodeError{Node: "primary", Err: ErrPrimaryInRecovery}}
	e := testEngine(t, obs, &simMethod{})
	e.mem.watched = map[string]watched{"cdc": {database: "app"}}
	e.mem.watchFrom = topology.ServerID{SystemID: "42", StartedAt: "p"}
	if _, err := e.RunOnce(context.Background()); !errors.Is(err, ErrPrimaryInRecovery) {
		t.Fatalf("want the pass to fail with the primary demoted, got %v", err)
	}
	if e.mem.watched != nil || e.mem.watchFrom != (topology.ServerID{}) {
		t.Fatalf("the watch outlived a failed pass: %v from %v", e.mem.watched, e.mem.watchFrom)
	}
}
