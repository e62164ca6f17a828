package sync

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/topology"
)

// secondSidecar starts a second standby of the fixture's primary, streaming through physical
// slot slot, and an engine beside it configured as the fixture's.
func (f *fixture) secondSidecar(slot string) (*integration.Node, *Engine) {
	f.t.Helper()
	n, err := f.pair.AddStandby(f.ctx, slot)
	f.must(err)
	cfg := f.cfg
	cfg.StandbyDSN, cfg.StateDir = n.DSN("postgres"), f.t.TempDir()
	cfg.Statefile.DataDir, cfg.Statefile.Restarter = n.DataDir, nodeRestarter{n}
	eng, err := New(cfg)
	f.must(err)
	f.t.Cleanup(eng.Close)
	return n, eng
}

// holds names the catalog holds on the primary.
func (f *fixture) holds() []string {
	f.t.Helper()
	conn, err := f.pair.Primary.Connect(f.ctx, "postgres")
	f.must(err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(f.ctx, "SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE $1 ORDER BY 1", method.HoldPrefix+"%")
	f.must(err)
	var names []string
	for rows.Next() {
		var s string
		f.must(rows.Scan(&s))
		names = append(names, s)
	}
	f.must(rows.Err())
	return names
}

// untilReadyOn runs passes of eng, the consumer of slot confirming on the primary, until its
// copy is READY.
func (f *fixture) untilReadyOn(eng *Engine, slot string) {
	f.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		f.logRunningXacts()
		f.consume(f.pair.Primary, slot)
		rep, err := eng.RunOnce(f.ctx)
		f.must(err)
		for _, s := range rep.Slots {
			if s.Name == slot && s.Verdict.Ready {
				return
			}
			if s.Name == slot && time.Now().After(deadline) {
				f.t.Fatalf("slot %s never became ready: %s", slot, s.Verdict.Detail)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestStatefileTwoStandbysHold: two standbys, each with its sidecar, copy one new slot at once,
// while a column is dropped and the catalogs vacuumed on the primary. Each sidecar holds the
// slot's catalog rows under its own name (before, both used one name: the second hold failed,
// and its copy's rows were kept by nothing once the first sidecar released its own); both
// copies become READY, and the second standby, promoted, gives the consumer every change.
func TestStatefileTwoStandbysHold(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodStatefile, integration.Options{})
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "ALTER TABLE t ADD COLUMN c text"))
		s2, eng2 := f.secondSidecar("slotsync_standby2")
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		want := f.insert(2)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.pass() // the first sidecar copies cdc, and holds its rows
		_, err := eng2.RunOnce(f.ctx)
		f.must(err)
		both := []string{method.HoldName(integration.PhysicalSlot, "cdc"), method.HoldName("slotsync_standby2", "cdc")}
		if got := f.holds(); len(got) != 2 || !(got[0] == both[0] && got[1] == both[1] || got[0] == both[1] && got[1] == both[0]) {
			t.Fatalf("catalog holds on the primary: %v, want both sidecars' %v", got, both)
		}
		f.must(p.ExecDB(f.ctx, "app", "ALTER TABLE t DROP COLUMN c"))
		want = append(want, f.insert(1)...)
		f.logRunningXacts()
		f.consume(p, "cdc")
		f.must(p.ExecDB(f.ctx, "app", "VACUUM pg_class, pg_attribute, pg_type"))
		f.untilReadyOn(f.eng, "cdc")
		f.untilReadyOn(eng2, "cdc")
		if got := f.holds(); len(got) != 0 {
			t.Fatalf("catalog holds left once both copies are READY: %v", got)
		}
		// The second standby, promoted: the consumer resumes from its copy.
		after := f.insert(2)
		lsn, err := f.pair.CurrentLSN(f.ctx)
		f.must(err)
		f.must(waitReplayedOn(f, s2, lsncheck.LSN(lsn)))
		f.must(s2.Exec(f.ctx, "SELECT pg_promote(true, 60)"))
		got := f.consume(s2, "cdc")
		if !equalInts(got, after) && !equalInts(got, append(append([]int{}, want...), after...)) {
			t.Fatalf("after promoting the second standby the consumer got %v, want %v (and at most %v again)", got, after, want)
		}
	})
}

// waitReplayedOn waits until standby n has replayed lsn.
func waitReplayedOn(f *fixture, n *integration.Node, lsn lsncheck.LSN) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var replay lsncheck.LSN
		if err := n.QueryRow(f.ctx, "SELECT coalesce(pg_last_wal_replay_lsn(), '0/0')", nil, &replay); err != nil {
			return err
		}
		if replay >= lsn || time.Now().After(deadline) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStatefileHoldExpiresAlone: the standby is stopped by hand right after a copy is made,
// and stays down longer than the catalog hold's lifetime. The hold goes on its own timer,
// although no pass reaches the method meanwhile (before, only a successful pass released it,
// and the primary kept the slot's WAL and catalog rows for as long as the standby was down).
// Started again after its consumer moved on, the copy is NOT READY (its rows were kept by
// nothing for a while) and is made again, then READY.
func TestStatefileHoldExpiresAlone(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodStatefile, integration.Options{})
		f.eng.Close()
		// The hold must outlive the pass that takes it, standby restart included, which on a
		// loaded machine takes seconds: with a shorter lifetime it lapses inside that pass.
		const lifetime = 10 * time.Second
		f.cfg.Statefile.HoldTimeout = lifetime
		f.startEngine()
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.insert(2)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.pass()
		if len(f.holds()) != 1 {
			t.Fatalf("no catalog hold after the copy: %v", f.holds())
		}
		f.must(f.pair.Standby.Stop(f.ctx))
		// The consumer moves on meanwhile: only the hold keeps the copy's rows, until it goes.
		f.insert(3)
		f.logRunningXacts()
		f.consume(p, "cdc")
		deadline := time.Now().Add(lifetime + 17*time.Second)
		for len(f.holds()) != 0 {
			if _, err := f.eng.RunOnce(f.ctx); err == nil {
				t.Fatal("a pass succeeded with the standby down")
			}
			if time.Now().After(deadline) {
				t.Fatalf("the catalog hold outlived its lifetime (%s) by 17 s with the standby down: %v", lifetime, f.holds())
			}
			time.Sleep(500 * time.Millisecond)
		}
		var pinned bool
		f.must(p.QueryRow(f.ctx, "SELECT EXISTS (SELECT FROM pg_replication_slots WHERE temporary)", nil, &pinned))
		if pinned {
			t.Fatal("a temporary slot still pins the primary's WAL")
		}
		f.must(f.pair.Standby.Start(f.ctx))
		f.must(f.pair.WaitStreaming(f.ctx))
		f.logRunningXacts()
		f.consume(p, "cdc")
		f.must(f.pair.WaitCaughtUp(f.ctx))
		r := f.pass()["cdc"]
		if r.Code != CodeCatalogLapsed || r.Verdict.Ready {
			t.Fatalf("after the hold lapsed: %s %s %s, want the copy made again, NOT READY", r.Action, r.Code, r.Verdict.Detail)
		}
		f.untilReady("cdc", func() { f.consume(p, "cdc") })
	})
}

// untilHorizonSeen runs passes, the consumer idle, until the engine has seen the standby's
// feedback cover slot's copy while the primary kept its catalog rows (rule 4).
func (f *fixture) untilHorizonSeen(slot string) {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		f.pass()
		if ent := f.eng.journal.Slots[slot]; ent != nil && ent.HorizonSeenAt != 0 {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the standby's feedback was never seen covering the copy of %s", slot)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestStatefileRemadeCopyHoldLost (correctness review round 4, finding 3, on a real pair): a
// READY state-file copy whose primary slot is dropped and copied again from an older slot is made
// again; its catalog hold is lost right after (the hold's session ends), and the consumer moves
// the new slot on. The new copy was marked covered in the pass that made it, from the copy it
// replaced, so it turned READY on rows nothing kept; now it is never READY: its hold lapsed, it is
// made again (a new incarnation), and only that one may be READY.
func TestStatefileRemadeCopyHoldLost(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodStatefile, integration.Options{})
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('old', 'test_decoding')"))
		f.readyCopy()
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_drop_replication_slot('cdc')"))
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_copy_logical_replication_slot('old', 'cdc')"))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		remade := f.pass()["cdc"]
		if remade.Action != KindRecreate {
			t.Fatalf("the slot copied again from an older one: want its copy made again, got %+v", remade)
		}
		// The new copy's hold goes (its session ends) before the standby's feedback was seen
		// covering the copy while it was kept.
		f.must(p.Exec(f.ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name LIKE $1 AND active_pid IS NOT NULL",
			method.HoldPrefix+"%"))
		f.insert(3)
		f.logRunningXacts()
		f.consume(p, "cdc")
		f.insert(1)
		f.logRunningXacts()
		f.consume(p, "cdc")
		f.must(f.pair.WaitCaughtUp(f.ctx))
		for i := 0; i < 10; i++ {
			r := f.pass()["cdc"]
			if r.Verdict.Ready && r.Incarnation == remade.Incarnation {
				t.Fatalf("pass %d: the copy made again is READY although its catalog hold was lost before it was seen covered: %+v", i, r)
			}
			f.consume(p, "cdc")
			time.Sleep(200 * time.Millisecond)
		}
	})
}

// TestStatefileFeedbackGap (the fault explorer's finding 12, on a real pair): a READY
// state-file copy behind its consumer, marked kept by the standby's feedback long ago. The
// standby's hot_standby_feedback is turned off a while (slotsync not running), the consumer moves
// past a catalog change, the catalogs are vacuumed, the feedback is turned on again: the primary
// takes the standby's horizon from none, the same as before, and the gate beside the daemon said
// READY on rows nothing kept (on 11-15 the copy then decodes nothing more after promotion: "could
// not map filenode"). Now the reload voids the mark: NOT READY, then the daemon makes the copy
// again and the promoted consumer gets every change it had not confirmed. 16+ answer it by the
// copy's invalidation (copy_invalidated, the explorer's hook-copies-invalidated).
func TestStatefileFeedbackGap(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodStatefile, integration.Options{})
		f.feedbackGap()
		f.unprotectedThenMadeAgain("after a gap in the standby's feedback")
	})
}

// TestStatefilePhysicalSlotGap: the same loss by a gap in the standby's feedback with no reload:
// the standby's physical slot dropped on the primary (a cleanup that took it for an orphan) while
// slotsync runs, the consumer moved past a catalog change, the catalogs vacuumed, the slot made
// again: the standby's first report gives it the copy's old horizon back, and the mark set before
// the gap would say the copy's rows were kept. The pass that failed on the missing slot voided it
// (feedbackStopped): NOT READY, then the copy made again, and the promoted consumer gets every
// change it had not confirmed. With that voiding off (the mutant feedback-stopped) the gate says
// READY here.
func TestStatefilePhysicalSlotGap(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodStatefile, integration.Options{})
		f.copyKeptByFeedback()
		f.must(f.pair.DropPhysicalSlot(f.ctx))
		var pe *topology.PrereqError
		if _, err := f.eng.RunOnce(f.ctx); !errors.As(err, &pe) {
			t.Fatalf("a pass with the standby's physical slot gone: %v, want it to fail on the prerequisites", err)
		}
		f.catalogsVacuumedPastCopy()
		f.must(f.pair.CreatePhysicalSlot(f.ctx))
		f.waitFeedbackHeld(true)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.unprotectedThenMadeAgain("after the standby's physical slot was dropped and made again")
	})
}

// unprotectedThenMadeAgain checks that the gate beside the daemon (what: after which gap) says
// NOT READY copy_catalog_unprotected for "cdc", that the daemon makes the copy again until it is
// READY, and that the promoted consumer then gets every change it had not confirmed.
func (f *fixture) unprotectedThenMadeAgain(what string) {
	f.t.Helper()
	if r := reportOf(f.inspectAsCheck(), "cdc"); r.Verdict.Ready || !slices.Contains(r.Verdict.Reasons, lsncheck.ReasonCatalogUnprotected) {
		f.t.Fatalf("the gate beside the daemon %s: %v %s, want NOT READY %s", what, r.Verdict.Reasons, r.Verdict.Detail, lsncheck.ReasonCatalogUnprotected)
	}
	f.untilReady("cdc", func() { f.consume(f.pair.Primary, "cdc") })
	want := f.insert(3)
	f.must(f.pair.WaitCaughtUp(f.ctx))
	if r := f.pass()["cdc"]; !r.Verdict.Ready {
		f.t.Fatalf("the copy made again: %s", r.Verdict.Detail)
	}
	f.promoteExpect("cdc", want)
}

// TestStatefileFeedbackGapWithoutPrimary: the same gap in the standby's feedback, slotsync not
// running, then the primary killed within the record's renewal: the gate without the primary,
// from a record made before the reload, said READY; now the copy whose READY rested on the
// feedback is NOT READY.
func TestStatefileFeedbackGapWithoutPrimary(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodStatefile, integration.Options{})
		f.eng.Close()
		f.cfg.PrimaryGoneAfter = time.Second
		f.startEngine()
		f.feedbackGap()
		f.must(f.pair.Primary.Kill(f.ctx))
		f.notReadyWithoutPrimary("after a gap in the standby's feedback", lsncheck.ReasonCatalogUnprotected)
	})
}

// feedbackGap makes a READY state-file copy of "cdc" whose catalog rows only the standby's
// feedback keeps, and then, with no pass of slotsync, a gap in that feedback: turned off, the
// consumer moved past a catalog change, the catalogs vacuumed, the feedback on again.
func (f *fixture) feedbackGap() {
	f.t.Helper()
	f.copyKeptByFeedback()
	f.setFeedback(false)
	f.catalogsVacuumedPastCopy()
	f.must(f.pair.WaitCaughtUp(f.ctx))
	f.setFeedback(true)
}

// copyKeptByFeedback makes a READY state-file copy of "cdc" whose catalog rows only the
// standby's feedback keeps (seen covering it, the hold gone), the consumer idle at the copy.
func (f *fixture) copyKeptByFeedback() {
	f.t.Helper()
	f.readyCopy()
	f.untilHorizonSeen("cdc")
	for deadline := time.Now().Add(20 * time.Second); len(f.holds()) != 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			f.t.Fatalf("the catalog hold outlived the feedback's coverage: %v", f.holds())
		}
		f.pass()
	}
	f.insert(2) // the copy stays at the consumer's position, before the catalog change
	f.must(f.pair.WaitCaughtUp(f.ctx))
	if r := f.pass()["cdc"]; !r.Verdict.Ready {
		f.t.Fatalf("before the gap: %s", r.Verdict.Detail)
	}
}

// catalogsVacuumedPastCopy changes t's catalog row, moves the consumer of "cdc" past the change
// and vacuums the catalogs on the primary: the rows its copy needs go unless something keeps them.
func (f *fixture) catalogsVacuumedPastCopy() {
	f.t.Helper()
	p := f.pair.Primary
	f.must(p.ExecDB(f.ctx, "app", "ALTER TABLE t ADD COLUMN extra int"))
	f.insert(2)
	for range 2 {
		f.logRunningXacts()
		f.consume(p, "cdc")
	}
	f.vacuumCatalogs()
}

// setFeedback turns the standby's hot_standby_feedback on or off (ALTER SYSTEM and a reload)
// and waits until the primary's physical slot for it holds a catalog horizon, or none.
func (f *fixture) setFeedback(on bool) {
	f.t.Helper()
	f.must(f.pair.SetStandbyFeedback(f.ctx, on))
	f.waitFeedbackHeld(on)
}

// waitFeedbackHeld waits until the primary's physical slot for the standby holds a catalog
// horizon (held), or none.
func (f *fixture) waitFeedbackHeld(want bool) {
	f.t.Helper()
	f.must(integration.Poll(f.ctx, 20*time.Second, "the standby's feedback on the primary", func(ctx context.Context) (bool, error) {
		var held bool
		err := f.pair.Primary.QueryRow(ctx, "SELECT coalesce(bool_or(catalog_xmin IS NOT NULL), false) FROM pg_replication_slots WHERE slot_type = 'physical'",
			nil, &held)
		return held == want, err
	}))
}

// vacuumCatalogs vacuums the catalogs of the fixture's database until pg_class keeps no dead row
// (integration.Node.VacuumCatalogs).
func (f *fixture) vacuumCatalogs() {
	f.t.Helper()
	dead, err := f.pair.Primary.VacuumCatalogs(f.ctx, "app")
	f.must(err)
	if dead != 0 {
		f.t.Fatalf("pg_class kept %d dead rows after ten VACUUMs", dead)
	}
}

// reportOf is slot's report in rep (the zero report when it has none).
func reportOf(rep Report, slot string) SlotReport {
	for _, r := range rep.Slots {
		if r.Name == slot {
			return r
		}
	}
	return SlotReport{}
}
