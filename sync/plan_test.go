package sync

import (
	"strings"
	"testing"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/sync/method/sqlslot"
	"github.com/slotsync/slotsync/topology"
)

// scenario builds plan inputs: a primary and a standby (replayed up to 0/9000000) and a journal.
type scenario struct {
	in PlanInput
}

func newScenario() *scenario {
	return &scenario{in: PlanInput{
		Primary: NodeState{Info: topology.NodeInfo{VersionNum: 160004}, Slots: map[string]topology.Slot{}},
		Standby: NodeState{Info: topology.NodeInfo{VersionNum: 160004, InRecovery: true, ReplayLSN: 0x9000000, ReceiverStatus: "streaming"}, Slots: map[string]topology.Slot{}},
		Journal: &Journal{Version: journalVersion, Slots: map[string]*Entry{}},
		Traits:  sqlslot.SQLTraits(),
	}}
}

var idA = lsncheck.Identity{Name: "a", Database: "app", Plugin: "pgoutput"}

func slot(id lsncheck.Identity, restart, confirmed lsncheck.LSN, xmin lsncheck.XID) topology.Slot {
	return topology.Slot{Identity: id, Position: lsncheck.Position{RestartLSN: restart, ConfirmedFlush: confirmed, CatalogXmin: xmin}, WALStatus: "reserved"}
}

func (s *scenario) primary(sl topology.Slot) *scenario { s.in.Primary.Slots[sl.Name] = sl; return s }
func (s *scenario) standby(sl topology.Slot) *scenario { s.in.Standby.Slots[sl.Name] = sl; return s }

// owned records that slotsync made the copy, synced from the primary at pos.
func (s *scenario) owned(id lsncheck.Identity, pos lsncheck.Position) *scenario {
	s.in.Journal.Slots[id.Name] = &Entry{Incarnation: "00000000000000aa", Identity: id, FirstSeen: pos, Primary: pos}
	return s
}

func (s *scenario) only(t *testing.T) Action {
	t.Helper()
	acts := Plan(s.in)
	if len(acts) != 1 {
		t.Fatalf("want one action, got %+v", acts)
	}
	return acts[0]
}

func expect(t *testing.T, a Action, kind Kind, code Code) {
	t.Helper()
	if a.Kind != kind || a.Code != code {
		t.Fatalf("got %s/%s (%s), want %s/%s", a.Kind, a.Code, a.Reason, kind, code)
	}
}

func TestPlanScenarios(t *testing.T) {
	pos := lsncheck.Position{RestartLSN: 0x1000000, ConfirmedFlush: 0x2000000, CatalogXmin: 700}

	t.Run("new slot on the primary is created", func(t *testing.T) {
		// No copy and no journal entry: the standby has never had this slot.
		a := newScenario().primary(slot(idA, 0x1000000, 0x2000000, 700)).only(t)
		expect(t, a, KindCreate, CodeNewSlot)
	})

	t.Run("consumer moved on: advance to its confirmed_flush", func(t *testing.T) {
		// The copy trails the consumer and the standby has replayed past the consumer.
		a := newScenario().primary(slot(idA, 0x1800000, 0x3000000, 710)).standby(slot(idA, 0x1000000, 0x2000000, 700)).owned(idA, pos).only(t)
		expect(t, a, KindAdvance, CodeConsumerMoved)
		if a.Target != 0x3000000 {
			t.Fatalf("target %s, want the consumer's 0/3000000", a.Target)
		}
	})

	t.Run("far behind: catch up in bounded steps", func(t *testing.T) {
		// A copy 16 MiB behind with a 4 MiB step moves 4 MiB this pass; within a step, all of it.
		s := newScenario().primary(slot(idA, 0x1800000, 0x3000000, 710)).standby(slot(idA, 0x1000000, 0x2000000, 700)).owned(idA, pos)
		s.in.AdvanceStep = 4 << 20
		a := s.only(t)
		expect(t, a, KindAdvance, CodeCatchingUp)
		if a.Target != 0x2400000 {
			t.Fatalf("target %s, want one step to 0/2400000", a.Target)
		}
		s.in.AdvanceStep = 16 << 20
		expect(t, s.only(t), KindAdvance, CodeConsumerMoved)
	})

	t.Run("standby lagging: advance only to the replay LSN", func(t *testing.T) {
		// Rule 1: the copy may not pass the WAL the standby has replayed.
		s := newScenario().primary(slot(idA, 0x1800000, 0xA000000, 710)).standby(slot(idA, 0x1000000, 0x2000000, 700)).owned(idA, pos)
		a := s.only(t)
		expect(t, a, KindAdvance, CodeConsumerMoved)
		if a.Target != 0x9000000 {
			t.Fatalf("target %s, want the replay LSN 0/9000000", a.Target)
		}
		// Replay behind the copy: nothing at all, never backwards.
		s.in.Standby.Info.ReplayLSN = 0x1F00000
		expect(t, s.only(t), KindNone, CodeStandbyLagging)
	})

	t.Run("copy ahead of the consumer: no-op", func(t *testing.T) {
		// A fresh copy starts ahead of the primary (remote behind): moving it back is impossible
		// and unneeded; it stays as it is until the consumer confirms past it.
		a := newScenario().primary(slot(idA, 0x1000000, 0x2000000, 700)).standby(slot(idA, 0x2100000, 0x2100000, 720)).owned(idA, pos).only(t)
		expect(t, a, KindNone, CodeCopyAhead)
	})

	t.Run("up to date", func(t *testing.T) {
		a := newScenario().primary(slot(idA, 0x1000000, 0x2000000, 700)).standby(slot(idA, 0x1000000, 0x2000000, 700)).owned(idA, pos).only(t)
		expect(t, a, KindNone, CodeUpToDate)
	})
}

// TestPlanIncarnations: a slot made again on the primary (rule 2), or only moved back.
func TestPlanIncarnations(t *testing.T) {
	pos := lsncheck.Position{RestartLSN: 0x1000000, ConfirmedFlush: 0x2000000, CatalogXmin: 700}

	t.Run("confirmed_flush back while restart_lsn moved on: same slot", func(t *testing.T) {
		// The consumer's slot was at 0/2000000 and now confirms 0/1900000 (an older position
		// confirmed again): only restart_lsn or catalog_xmin going back proves another slot
		// (rule 2). The copy is kept, NOT READY while it is ahead of the consumer (rule 4).
		a := newScenario().primary(slot(idA, 0x1900000, 0x1900000, 705)).standby(slot(idA, 0x1000000, 0x2000000, 700)).owned(idA, pos).only(t)
		expect(t, a, KindNone, CodeCopyAhead)
	})

	t.Run("recreated on the primary but the copy is in use: left alone", func(t *testing.T) {
		// Dropping a copy someone reads on the standby would break them; it waits until idle.
		cp := slot(idA, 0x1000000, 0x2000000, 700)
		cp.Active, cp.ActivePID = true, 99
		a := newScenario().primary(slot(idA, 0x1900000, 0x1900000, 705)).standby(cp).owned(idA, pos).only(t)
		expect(t, a, KindSkip, CodeCopyInUse)
	})

	t.Run("confirmed_flush went back in a crash of the primary: same slot", func(t *testing.T) {
		// confirmed_flush is saved at checkpoints only; restart_lsn and catalog_xmin at once.
		// A confirmed_flush-only regression is the same slot (a crash, or a consumer confirming
		// an older position again), with or without a restart of the primary: the copy is
		// neither recreated nor moved back, and the new position becomes the reference.
		s := newScenario().primary(slot(idA, 0x1000000, 0x1F00000, 700)).standby(slot(idA, 0x1000000, 0x2000000, 700)).owned(idA, pos)
		s.in.PrimaryRestarted = true
		a := s.only(t)
		expect(t, a, KindNone, CodeCopyAhead)
		if !a.Rebase {
			t.Fatal("the regressed position must become the reference")
		}
		s.in.PrimaryRestarted = false
		if a := s.only(t); a.Kind != KindNone || !a.Rebase {
			t.Fatalf("without a restart of the primary: %+v", a)
		}
	})

	t.Run("restart_lsn went back at a restart of the primary: same slot on older minors", func(t *testing.T) {
		s := newScenario().primary(slot(idA, 0x0F00000, 0x1F00000, 700)).standby(slot(idA, 0x1000000, 0x2000000, 700)).owned(idA, pos)
		s.in.PrimaryRestarted = true
		if a := s.only(t); a.Kind == KindRecreate || !a.Rebase {
			t.Fatalf("after a restart: %+v", a)
		}
		// Without a restart, restart_lsn going back is a recreation.
		s.in.PrimaryRestarted = false
		expect(t, s.only(t), KindRecreate, CodeRecreatedOnPrimary)
	})

	t.Run("recreated by pg_copy_logical_replication_slot", func(t *testing.T) {
		// Copied from an older slot: restart_lsn and catalog_xmin older than before.
		a := newScenario().primary(slot(idA, 0x0800000, 0x2000000, 600)).standby(slot(idA, 0x1000000, 0x2000000, 700)).owned(idA, pos).only(t)
		expect(t, a, KindRecreate, CodeRecreatedOnPrimary)
	})

	t.Run("fresh copy ahead is not a recreation", func(t *testing.T) {
		// The copy is ahead of the primary, but the primary slot moved forward from what the copy
		// was synced from: same incarnation (rule 2 compares with the journal, not the copy).
		a := newScenario().primary(slot(idA, 0x1000000, 0x2000100, 700)).standby(slot(idA, 0x2100000, 0x2100000, 720)).owned(idA, pos).only(t)
		expect(t, a, KindNone, CodeCopyAhead)
	})

	t.Run("plugin changed", func(t *testing.T) {
		idB := idA
		idB.Plugin = "test_decoding"
		a := newScenario().primary(slot(idB, 0x1000000, 0x2000000, 700)).standby(slot(idA, 0x1000000, 0x2000000, 700)).owned(idA, pos).only(t)
		expect(t, a, KindRecreate, CodeRecreatedOnPrimary)
	})
}

// TestPlanDropsAndInvalidations: slots dropped or invalidated on either side (rule 3).
func TestPlanDropsAndInvalidations(t *testing.T) {
	pos := lsncheck.Position{RestartLSN: 0x1000000, ConfirmedFlush: 0x2000000, CatalogXmin: 700}

	t.Run("dropped on the primary, copy owned: dropped", func(t *testing.T) {
		a := newScenario().standby(slot(idA, 0x1000000, 0x2000000, 700)).owned(idA, pos).only(t)
		expect(t, a, KindDrop, CodeDroppedOnPrimary)
	})

	t.Run("dropped on the primary, copy not ours: untouched", func(t *testing.T) {
		// A standby-local slot someone made on purpose (docs/RULES.md, lesson 4): no journal entry, no action.
		if acts := Plan(newScenario().standby(slot(idA, 0x1000000, 0x2000000, 700)).in); len(acts) != 0 {
			t.Fatalf("a slot slotsync did not make must not be touched: %+v", acts)
		}
	})

	t.Run("dropped on the primary, copy active: untouched", func(t *testing.T) {
		cp := slot(idA, 0x1000000, 0x2000000, 700)
		cp.Active, cp.ActivePID = true, 4242
		a := newScenario().standby(cp).owned(idA, pos).only(t)
		expect(t, a, KindSkip, CodeCopyInUse)
	})

	t.Run("dropped on the primary and gone from the standby: forgotten", func(t *testing.T) {
		a := newScenario().owned(idA, pos).only(t)
		expect(t, a, KindForget, CodeGoneFromBoth)
	})

	t.Run("same-name standby slot not made by slotsync, slot on the primary", func(t *testing.T) {
		a := newScenario().primary(slot(idA, 0x1000000, 0x2000000, 700)).standby(slot(idA, 0x1000000, 0x1000000, 690)).only(t)
		expect(t, a, KindSkip, CodeNotOurs)
	})

	t.Run("invalidated on the primary: copy left alone", func(t *testing.T) {
		ps := slot(idA, 0, 0x2000000, 700)
		ps.Invalidated, ps.InvalidationReason = true, "wal_removed"
		s := newScenario().primary(ps).standby(slot(idA, 0x1000000, 0x2000000, 700)).owned(idA, pos)
		a := s.only(t)
		expect(t, a, KindSkip, CodePrimaryInvalidated)
		if !a.LeftAlone {
			t.Fatal("an invalidated slot's copy must be reported as left alone")
		}
		// --drop-left-alone drops slotsync's copy; a copy someone reads is still left alone.
		s.in.DropLeftAlone = true
		expect(t, s.only(t), KindDrop, CodeLeftAloneDropped)
		cp := slot(idA, 0x1000000, 0x2000000, 700)
		cp.Active, cp.ActivePID = true, 7
		s2 := newScenario().primary(ps).standby(cp).owned(idA, pos)
		s2.in.DropLeftAlone = true
		expect(t, s2.only(t), KindSkip, CodePrimaryInvalidated)
		// A slot of that name slotsync did not make is never dropped.
		s3 := newScenario().primary(ps).standby(slot(idA, 0x1000000, 0x2000000, 700))
		s3.in.DropLeftAlone = true
		if a := s3.only(t); a.Kind == KindDrop || a.LeftAlone {
			t.Fatalf("a slot slotsync did not make: %+v", a)
		}
	})

	t.Run("slot still being created on the primary (NULL positions)", func(t *testing.T) {
		a := newScenario().primary(slot(idA, 0, 0, 0)).only(t)
		expect(t, a, KindSkip, CodePrimaryUnknown)
	})

	t.Run("copy invalidated on the standby: recreated", func(t *testing.T) {
		cp := slot(idA, 0x1000000, 0x2000000, 700)
		cp.Invalidated, cp.InvalidationReason = true, "conflict"
		a := newScenario().primary(slot(idA, 0x1000000, 0x2000000, 700)).standby(cp).owned(idA, pos).only(t)
		expect(t, a, KindRecreate, CodeCopyInvalidated)
	})

	t.Run("owned copy missing from the standby: created again", func(t *testing.T) {
		a := newScenario().primary(slot(idA, 0x1000000, 0x2000000, 700)).owned(idA, pos).only(t)
		expect(t, a, KindCreate, CodeCopyMissing)
	})
}

// TestPlanServerSlotsAndSelection: the server's own failover slots, temporary slots, and the selection.
func TestPlanServerSlotsAndSelection(t *testing.T) {
	pos := lsncheck.Position{RestartLSN: 0x1000000, ConfirmedFlush: 0x2000000, CatalogXmin: 700}

	t.Run("failover slots are the server's (17+)", func(t *testing.T) {
		ps := slot(idA, 0x1000000, 0x2000000, 700)
		ps.Failover = true
		expect(t, newScenario().primary(ps).only(t), KindNone, CodeFailoverWaiting)
		synced := slot(idA, 0x1000000, 0x2000000, 700)
		synced.Synced = true
		expect(t, newScenario().primary(ps).standby(synced).only(t), KindNone, CodeFailoverKept)
	})

	t.Run("a stale unsynced same-name slot blocks the server's sync", func(t *testing.T) {
		// Left by a demotion: reported, never dropped unless allowed (--drop-stale), never
		// while in use. slotsync's own earlier copy (the flag was set later) is its to drop.
		ps := slot(idA, 0x1000000, 0x2000000, 700)
		ps.Failover = true
		stale := slot(idA, 0x0800000, 0x0900000, 650)
		expect(t, newScenario().primary(ps).standby(stale).only(t), KindSkip, CodeStaleBlocksSync)
		s := newScenario().primary(ps).standby(stale)
		s.in.Native.DropStale = true
		expect(t, s.only(t), KindDrop, CodeStaleDropped)
		active := stale
		active.Active, active.ActivePID = true, 77
		s = newScenario().primary(ps).standby(active)
		s.in.Native.DropStale = true
		expect(t, s.only(t), KindSkip, CodeStaleBlocksSync)
		expect(t, newScenario().primary(ps).standby(stale).owned(idA, pos).only(t), KindDrop, CodeOwnCopyForServer)
	})

	t.Run("set failover, only while idle", func(t *testing.T) {
		ps := slot(idA, 0x1000000, 0x2000000, 700)
		s := newScenario().primary(ps)
		s.in.Traits, s.in.Native.SetFailover = sqlslot.NativeTraits(), true
		expect(t, s.only(t), KindSetFailover, CodeSetFailover)
		ps.Active, ps.ActivePID = true, 12
		s = newScenario().primary(ps)
		s.in.Traits, s.in.Native.SetFailover = sqlslot.NativeTraits(), true
		expect(t, s.only(t), KindSkip, CodeSetFailoverInUse)
		// Without the opt-in, a failover=false slot is copied as by the sql method.
		s = newScenario().primary(slot(idA, 0x1000000, 0x2000000, 700))
		s.in.Traits = sqlslot.NativeTraits()
		expect(t, s.only(t), KindCreate, CodeNewSlot)
	})

	t.Run("synced copies are never touched", func(t *testing.T) {
		cp := slot(idA, 0x1000000, 0x1000000, 700)
		cp.Synced = true
		a := newScenario().primary(slot(idA, 0x1000000, 0x2000000, 700)).standby(cp).only(t)
		expect(t, a, KindSkip, CodeServerSynced)
	})

	t.Run("temporary primary slots are skipped", func(t *testing.T) {
		ps := slot(idA, 0x1000000, 0x2000000, 700)
		ps.Temporary = true
		expect(t, newScenario().primary(ps).only(t), KindSkip, CodePrimaryTemporary)
		// slotsync's own catalog holds are not even listed.
		hold := ps
		hold.Name = method.HoldName("standby", "cdc")
		if got := Plan(newScenario().primary(hold).in); len(got) != 0 {
			t.Fatalf("a catalog hold was planned for: %+v", got)
		}
	})

	t.Run("selection", func(t *testing.T) {
		idB := lsncheck.Identity{Name: "debezium_b", Database: "app", Plugin: "pgoutput"}
		idC := lsncheck.Identity{Name: "debezium_c", Database: "other", Plugin: "pgoutput"}
		s := newScenario().primary(slot(idA, 1, 2, 3)).primary(slot(idB, 1, 2, 3)).primary(slot(idC, 1, 2, 3))
		s.in.Select = Selection{Patterns: []string{"debezium_*"}, Databases: []string{"app"}}
		a := s.only(t)
		if a.Slot != "debezium_b" {
			t.Fatalf("selected %s", a.Slot)
		}
		// Owned copies of slots outside the selection are not dropped either: reported as left
		// alone (on the primary or gone from it), dropped only with --drop-left-alone.
		for _, onPrimary := range []bool{false, true} {
			s = newScenario().standby(slot(idA, 1, 2, 3)).owned(idA, pos)
			if onPrimary {
				s.primary(slot(idA, 1, 2, 3))
			}
			s.in.Select = Selection{Patterns: []string{"debezium_*"}}
			a := s.only(t)
			expect(t, a, KindSkip, CodeUnselected)
			if !a.LeftAlone {
				t.Fatalf("on the primary %v: not reported as left alone: %+v", onPrimary, a)
			}
			s.in.DropLeftAlone = true
			expect(t, s.only(t), KindDrop, CodeLeftAloneDropped)
		}
		// An unselected slot without a copy of slotsync's is not mentioned at all.
		s = newScenario().primary(slot(idA, 1, 2, 3)).standby(slot(idA, 1, 2, 3))
		s.in.Select = Selection{Patterns: []string{"debezium_*"}}
		if acts := Plan(s.in); len(acts) != 0 {
			t.Fatalf("unselected slot acted on: %+v", acts)
		}
	})
}

func TestPlanIsDeterministic(t *testing.T) {
	s := newScenario()
	for _, n := range []string{"c", "a", "b"} {
		id := idA
		id.Name = n
		s.primary(slot(id, 1, 2, 3))
	}
	acts := Plan(s.in)
	if len(acts) != 3 || acts[0].Slot != "a" || acts[1].Slot != "b" || acts[2].Slot != "c" {
		t.Fatalf("actions not in name order: %+v", acts)
	}
}

func TestSelectionValidate(t *testing.T) {
	if err := (Selection{Patterns: []string{"[bad"}}).Validate(); err == nil || !strings.Contains(err.Error(), "globs") {
		t.Fatalf("malformed pattern: %v", err)
	}
}
