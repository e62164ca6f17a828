package sync

import (
	"errors"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/sync/method/sqlslot"
	"github.com/slotsync/slotsync/topology"
)

// TestRolesMove runs one engine per node with the same configuration (no --primary: each
// follows its node's primary_conninfo), as a daemon beside every node of an HA cluster would,
// through a failover (kill -9), a switch back (clean stop) and a second failover. The demoted
// node keeps its old slots, as after pg_rewind. Each time the gate opens before the promotion,
// and the consumer resumes on the new primary with exactly the changes after its position.
func TestRolesMove(t *testing.T) {
	t.Parallel() // its own pair and ports; mostly waiting: runs beside another long test
	pgtest.ForEachMajor(t, []int{15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, integration.Options{})
		f.eng.Close()
		engines := map[*integration.Node]*Engine{}
		for _, n := range []*integration.Node{f.pair.Primary, f.pair.Standby} {
			cfg := f.cfg
			cfg.PrimaryDSN, cfg.StandbyDSN, cfg.StateDir = "", n.DSN("postgres"), t.TempDir()
			cfg.Statefile.DataDir, cfg.Statefile.Restarter = n.DataDir, nodeRestarter{n}
			eng, err := New(cfg)
			f.must(err)
			t.Cleanup(eng.Close)
			engines[n] = eng
		}
		rp := rolesPair{f: f, engines: engines}
		pass, untilReady, failover := rp.pass, rp.untilReady, rp.failover

		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.consume(f.pair.Primary, "cdc")
		untilReady()
		failover(true)
		// The promoted node's engine now sees a primary: it syncs nothing and records its slots.
		oldPrimary := f.pair.Primary
		if rep, err := engines[f.pair.Standby].RunOnce(f.ctx); err != nil || rep.Role != RolePrimary || len(rep.Slots) != 0 {
			t.Fatalf("the promoted node's pass: role %q, %d slots, %v", rep.Role, len(rep.Slots), err)
		}
		f.must(f.pair.Rejoin(f.ctx, true))
		if f.pair.Standby != oldPrimary {
			t.Fatal("rejoin did not make the old primary the standby")
		}
		// The demoted node's stale slot is its engine's to manage: never READY while stale.
		if rep := pass(); rep.Ready() {
			f.must(f.pair.WaitCaughtUp(f.ctx))
			stale, _ := f.slotOn(f.pair.Standby, "cdc")
			cur, _ := f.slotOn(f.pair.Primary, "cdc")
			if stale.ConfirmedFlush > cur.ConfirmedFlush {
				t.Fatalf("a stale copy ahead of the consumer (%s > %s) was judged READY", stale.ConfirmedFlush, cur.ConfirmedFlush)
			}
		}
		untilReady()
		failover(false) // switch back
		f.must(f.pair.Rejoin(f.ctx, true))
		// Rule 8, the record's era: the rejoined node last judged with a primary before its
		// promotion; its new primary stops before any pass. The gate must not answer READY
		// from that record (its engine dropped it while the node was the primary).
		f.must(f.pair.Primary.Stop(f.ctx))
		waitNotStreaming(t, f)
		if rep, err := engines[f.pair.Standby].Inspect(f.ctx); err == nil && rep.Ready() {
			t.Fatalf("judged from the record of the node's era before its promotion: %+v, slots %+v", rep.WithoutPrimary, rep.Slots)
		}
		f.must(f.pair.Primary.Start(f.ctx))
		f.must(f.pair.WaitStreaming(f.ctx))
		untilReady()
		failover(true) // and fail over again
	})
}

// waitNotStreaming waits until the standby's WAL receiver no longer streams (its primary is
// down).
func waitNotStreaming(t *testing.T, f *fixture) {
	t.Helper()
	if !f.waitReceivers("streaming", false, 30*time.Second) {
		t.Fatal("the standby still streams from a stopped primary")
	}
}

// waitReceivers waits up to limit until the standby has (want) or has not a WAL receiver in
// status ("" for any), and says whether it came to that.
func (f *fixture) waitReceivers(status string, want bool, limit time.Duration) bool {
	f.t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(50 * time.Millisecond) {
		var n int
		f.must(f.pair.Standby.QueryRow(f.ctx, "SELECT count(*)::int FROM pg_stat_wal_receiver WHERE $1 IN ('', status)", []any{status}, &n))
		if (n > 0) == want {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// TestNeverCreateOnAPromotedNode: a create, a drop or a replace planned while the node was a
// standby but carried out after its promotion is refused in the session that would do it:
// nothing is made on the primary, and the slot there (a consumer's now) is not dropped.
func TestNeverCreateOnAPromotedNode(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixture(t, major)
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('kept', 'test_decoding')"))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.pass() // the standby gets a copy of kept
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		ps, ok := f.slotOn(f.pair.Primary, "cdc")
		kept, ok2 := f.slotOn(f.pair.Primary, "kept")
		if !ok || !ok2 {
			t.Fatal("no slots on the primary")
		}
		f.must(f.pair.Promote(f.ctx))
		link := f.cfg.primaryLink(nil)
		_, standby, err := f.cfg.Endpoints()
		f.must(err)
		m := sqlslot.New(method.Deps{Primary: link, Standby: standby, Log: f.cfg.Logger}, sqlslot.SQLTraits())
		sess := m.Session()
		defer sess.Close()
		if err := sess.Create(f.ctx, ps); !errors.Is(err, topology.ErrPromoted) {
			t.Fatalf("create on a promoted node: %v", err)
		}
		if _, made := f.slotOn(f.pair.Standby, "cdc"); made {
			t.Fatal("a slot was created on the promoted node")
		}
		if err := sess.Replace(f.ctx, kept, "app"); !errors.Is(err, topology.ErrPromoted) {
			t.Fatalf("replace on a promoted node: %v", err)
		}
		if _, there := f.slotOn(f.pair.Standby, "kept"); !there {
			t.Fatal("replace dropped the promoted node's slot")
		}
		if err := sess.Drop(f.ctx, "kept", "app"); !errors.Is(err, topology.ErrPromoted) {
			t.Fatalf("drop on a promoted node: %v", err)
		}
		if _, there := f.slotOn(f.pair.Standby, "kept"); !there {
			t.Fatal("a slot of the promoted node was dropped")
		}
	})
}

// TestStandbyFollowsAnotherServer (rule 7): pointed at a server of the same system that its
// standby does not stream from, slotsync copies nothing from it, and retries: a clone writing
// the same timeline (the standby's slot there exists but is not in use), and a sibling promoted
// to a new timeline. Both hold a logical slot the standby would otherwise get a copy of.
func TestStandbyFollowsAnotherServer(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 17}, func(t *testing.T, major int) {
		f := newFixture(t, major)
		for _, newTimeline := range []bool{false, true} {
			twin, err := f.pair.Twin(f.ctx, newTimeline)
			f.must(err)
			f.must(f.pair.WaitStreaming(f.ctx))
			f.must(twin.Exec(f.ctx, "SELECT pg_create_physical_replication_slot($1)", integration.PhysicalSlot))
			f.must(twin.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('elsewhere', 'test_decoding')"))
			cfg := f.cfg
			cfg.PrimaryDSN, cfg.StateDir = twin.DSN("postgres"), t.TempDir()
			e, err := New(cfg)
			f.must(err)
			for i := 0; i < 3; i++ {
				_, err = e.RunOnce(f.ctx)
				var nf *topology.NotFollowingError
				if !errors.As(err, &nf) || Classify(err) != Retry {
					t.Fatalf("new timeline %v: pass %d against a server the standby does not follow: %v (%v)", newTimeline, i, err, Classify(err))
				}
				t.Logf("new timeline %v: %v", newTimeline, err)
			}
			e.Close()
			if _, ok := f.slotOn(f.pair.Standby, "elsewhere"); ok {
				t.Fatalf("new timeline %v: copied a slot from a server the standby does not follow", newTimeline)
			}
			f.must(twin.Stop(f.ctx))
		}
	})
}

// TestCopyBeyondFork (rule 2 beyond a fork): the primary's consumer moves its slot past what an
// asynchronous standby received; the primary dies and that standby is promoted (a new timeline
// from where its WAL ended). The old primary rejoins as its standby with its old slot kept (as
// after pg_rewind), and the new primary's consumer moves past the old slot's positions, so the
// numbers say "the same slot, moved forward". The kept slot's positions are of the abandoned
// history: its sidecar makes the copy again instead of advancing it, and a promotion of the
// rejoined node gives the consumer exactly the changes after its position.
func TestCopyBeyondFork(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 17}, func(t *testing.T, major int) {
		f := newFixture(t, major)
		a, b := f.pair.Primary, f.pair.Standby
		f.readyCopy()
		// The sidecar beside the primary records its own slot (rule 9).
		cfg := f.cfg
		cfg.PrimaryDSN, cfg.StandbyDSN, cfg.StateDir = "", a.DSN("postgres"), t.TempDir()
		engA, err := New(cfg)
		f.must(err)
		t.Cleanup(engA.Close)
		if rep, err := engA.RunOnce(f.ctx); err != nil || rep.Role != RolePrimary {
			t.Fatalf("the primary's sidecar: %v %+v", err, rep)
		}
		// The standby stops receiving; the primary's consumer moves on past it; the primary dies.
		f.must(b.Exec(f.ctx, "ALTER SYSTEM SET primary_conninfo = ''"))
		f.must(b.Exec(f.ctx, "SELECT pg_reload_conf()"))
		waitNotStreaming(t, f)
		f.insert(5)
		f.logRunningXacts()
		f.consume(a, "cdc")
		f.insert(5)
		f.logRunningXacts()
		f.consume(a, "cdc")
		f.must(a.Exec(f.ctx, "CHECKPOINT"))
		if _, err := engA.RunOnce(f.ctx); err != nil {
			t.Fatal(err)
		}
		stale, _ := f.slotOn(a, "cdc")
		f.must(a.Kill(f.ctx))
		f.must(f.pair.Promote(f.ctx))
		f.must(b.Exec(f.ctx, "ALTER SYSTEM RESET primary_conninfo")) // the rejoined node copies it
		f.must(f.pair.Rejoin(f.ctx, true))
		if f.pair.Standby != a {
			t.Fatal("rejoin did not make the old primary the standby")
		}
		// The new primary's consumer moves past the kept slot's positions.
		deadline := time.Now().Add(60 * time.Second)
		for {
			f.insert(2)
			f.logRunningXacts()
			f.consume(f.pair.Primary, "cdc")
			cur, _ := f.slotOn(f.pair.Primary, "cdc")
			if cur.RestartLSN > stale.RestartLSN && cur.ConfirmedFlush > stale.ConfirmedFlush {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the new primary's slot never passed the kept one: %v, kept %v", cur.Position, stale.Position)
			}
		}
		f.must(f.pair.WaitCaughtUp(f.ctx))
		rep, err := engA.RunOnce(f.ctx)
		f.must(err)
		if len(rep.Slots) != 1 || rep.Slots[0].Code != CodeBeyondFork {
			t.Fatalf("the kept slot of the abandoned history: %+v", rep.Slots)
		}
		f.eng = engA
		f.untilReady("cdc", func() { f.consume(f.pair.Primary, "cdc") })
		rows := f.insert(3)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.pass()
		f.must(f.pair.Primary.Kill(f.ctx))
		f.must(f.pair.Promote(f.ctx))
		if got := f.consume(f.pair.Standby, "cdc"); !equalInts(got, rows) {
			t.Fatalf("after promoting the rejoined node the consumer got %v, want exactly %v", got, rows)
		}
	})
}

// rolesPair is TestRolesMove's pair with an engine beside each node, whatever its role.
type rolesPair struct {
	f       *fixture
	engines map[*integration.Node]*Engine
}

// pass runs every node's engine; it returns the report of the standby's. A node that is down
// (killed, or being rebuilt) fails its pass; nothing else may fail.
func (r rolesPair) pass() Report {
	f, t := r.f, r.f.t
	t.Helper()
	var out Report
	for n, eng := range r.engines {
		rep, err := eng.RunOnce(f.ctx)
		down := n != f.pair.Primary && n != f.pair.Standby
		if _, alive := n.InRecovery(f.ctx); alive != nil {
			down = true
		}
		if err != nil && !down {
			t.Fatalf("pass on %s: %v", n.Name, err)
		}
		if err != nil {
			continue
		}
		want := RoleStandby
		if n == f.pair.Primary {
			want = RolePrimary
		}
		if rep.Role != want {
			t.Fatalf("pass on %s: role %q, want %q", n.Name, rep.Role, want)
		}
		for _, s := range rep.Slots {
			if s.Error != "" {
				t.Fatalf("pass on %s, slot %s: %s", n.Name, s.Name, s.Error)
			}
		}
		if want == RoleStandby {
			out = rep
		}
	}
	return out
}

// untilReady runs passes, the consumer of cdc confirming, until the standby's copy is READY.
func (r rolesPair) untilReady() {
	f, t := r.f, r.f.t
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		f.insert(1)
		f.logRunningXacts()
		f.consume(f.pair.Primary, "cdc")
		f.must(f.pair.WaitCaughtUp(f.ctx))
		rep := r.pass()
		if rep.Ready() && len(rep.Slots) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the copy on %s never became ready: %+v", f.pair.Standby.Name, rep.Slots)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// failover writes rows the consumer has not read, makes sure the standby has them, takes the
// primary away (killed or stopped), promotes, and checks that the consumer gets exactly those
// rows from the promoted node.
func (r rolesPair) failover(kill bool) {
	f, t := r.f, r.f.t
	t.Helper()
	rows := f.insert(3)
	f.must(f.pair.WaitCaughtUp(f.ctx))
	r.pass()
	if kill {
		f.must(f.pair.Primary.Kill(f.ctx))
	} else {
		f.must(f.pair.Primary.Stop(f.ctx))
	}
	f.must(f.pair.Promote(f.ctx))
	if got := f.consume(f.pair.Standby, "cdc"); !equalInts(got, rows) {
		t.Fatalf("after the failover (kill=%v) the consumer got %v, want exactly %v", kill, got, rows)
	}
}
