package sync

import (
	"strings"
	"testing"
	"time"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// The positions of slot "a" in the records TestJudgeWithoutPrimary judges: its copy trails its
// consumer.
var (
	judgedCopyPos    = lsncheck.Position{RestartLSN: 0x1000000, ConfirmedFlush: 0x2000000, CatalogXmin: 700}
	judgedPrimaryPos = lsncheck.Position{RestartLSN: 0x1000000, ConfirmedFlush: 0x2100000, CatalogXmin: 700}
)

// recordOfA is a record of slot "a", READY or not.
func recordOfA(ready bool) *GateRecord {
	return &GateRecord{ObservedAt: time.Unix(100, 0), Slots: map[string]GateSlot{
		"a": {Identity: idA, Ready: ready, Reasons: nil, Detail: "x", Primary: judgedPrimaryPos, Copy: judgedCopyPos},
	}}
}

// standbyWithA is a standby holding the record's copy of slot "a", changed by mod (nil: none).
func standbyWithA(mod func(*topology.Slot)) NodeState {
	s := slot(idA, judgedCopyPos.RestartLSN, judgedCopyPos.ConfirmedFlush, judgedCopyPos.CatalogXmin)
	if mod != nil {
		mod(&s)
	}
	return NodeState{Info: topology.NodeInfo{InRecovery: true, ReplayLSN: 0x9000000}, Slots: map[string]topology.Slot{"a": s}}
}

func TestJudgeWithoutPrimary(t *testing.T) {
	rec, standby, copyPos := recordOfA, standbyWithA, judgedCopyPos
	cases := []struct {
		name   string
		rec    *GateRecord
		node   NodeState
		ready  bool
		reason lsncheck.Reason
	}{
		{"ready then, still there", rec(true), standby(nil), true, ""},
		{"ready then, advanced since", rec(true), standby(func(s *topology.Slot) { s.ConfirmedFlush = 0x2080000 }), true, ""},
		{"not ready then stays not ready", rec(false), standby(nil), false, ""},
		{"copy gone", rec(true), NodeState{Slots: map[string]topology.Slot{}}, false, lsncheck.ReasonMissing},
		{"copy invalidated", rec(true), standby(func(s *topology.Slot) { s.Invalidated = true }), false, lsncheck.ReasonCopyInvalidated},
		{"WAL lost", rec(true), standby(func(s *topology.Slot) { s.WALStatus = "lost" }), false, lsncheck.ReasonCopyWALMissing},
		{"WAL file gone from pg_wal", rec(true), func() NodeState { n := standby(nil); n.Info.OldestWAL = 0x2000000; return n }(), false, lsncheck.ReasonCopyWALMissing},
		{"a WAL file after the restart_lsn gone from pg_wal", rec(true), func() NodeState {
			n := standby(nil)
			n.Info.OldestWAL, n.Info.WALGaps = 0x1000000, []topology.WALGap{{From: 0x2000000, To: 0x3000000}}
			return n
		}(), false, lsncheck.ReasonCopyWALMissing},
		{"oldest WAL file at the restart_lsn's segment", rec(true), func() NodeState { n := standby(nil); n.Info.OldestWAL = 0x1000000; return n }(), true, ""},
		{"another plugin", rec(true), standby(func(s *topology.Slot) { s.Plugin = "wal2json" }), false, lsncheck.ReasonIdentityMismatch},
		{"moved back: another slot", rec(true), standby(func(s *topology.Slot) { s.ConfirmedFlush = 0x1800000 }), false, lsncheck.ReasonIdentityMismatch},
		{"temporary", rec(true), standby(func(s *topology.Slot) { s.Temporary = true }), false, lsncheck.ReasonTemporary},
		{"another two_phase", rec(true), standby(func(s *topology.Slot) { s.TwoPhase = true }), false, lsncheck.ReasonIdentityMismatch},
		{"being made when recorded", rec(true).beingMade([]string{"a"}), standby(nil), false, lsncheck.ReasonCopyBeingMade},
		{"another timeline", onTimeline(rec(true), 2), withTimeline(standby(nil), 3), false, lsncheck.ReasonRecordOtherTimeline},
		{"same timeline", onTimeline(rec(true), 3), withTimeline(standby(nil), 3), true, ""},
		{"a restartpoint's older timeline, no receiver (review round 4, finding 7)", onTimeline(rec(true), 3), withTimeline(standby(nil), 2), true, ""},
		{"the receiver's timeline differs", onTimeline(rec(true), 3), func() NodeState { n := withTimeline(standby(nil), 3); n.Info.Timeline = 4; return n }(), false, lsncheck.ReasonRecordOtherTimeline},
		{"standby WAL below the consumer", rec(true), func() NodeState { n := standby(nil); n.Info.ReplayLSN = 0x2000000; return n }(), false, lsncheck.ReasonConsumerAheadOfStandby},
		{"below the demoted primary's WAL end", rec(true), standby(nil), false, lsncheck.ReasonConsumerAheadOfStandby},
		{"the primary slot's two_phase is not the copy's (finding 9)", func() *GateRecord {
			r, f := rec(true), false
			gs := r.Slots["a"]
			gs.Identity.TwoPhase, gs.CopyTwoPhase = true, &f
			r.Slots["a"] = gs
			return r
		}(), standby(nil), false, lsncheck.ReasonIdentityMismatch},
		{"snapshot needed, still there", needsSnapshot(rec(true), 0), standby(func(s *topology.Slot) { s.Snapshot = topology.SnapshotPresent }), true, ""},
		{"snapshot needed, removed since", needsSnapshot(rec(true), 0), standby(func(s *topology.Slot) { s.Snapshot = topology.SnapshotAbsent }), false,
			lsncheck.ReasonCopySnapshotMissing},
		{"snapshot needed, cannot look", needsSnapshot(rec(true), 0), standby(nil), false, lsncheck.ReasonCopySnapshotUnknown},
		{"snapshot needed, none where the copy was made", needsSnapshot(rec(true), copyPos.RestartLSN),
			standby(func(s *topology.Slot) { s.Snapshot = topology.SnapshotAbsent }), true, ""},
		{"cut off, held back (rule 10)", heldBack(rec(true), time.Unix(400, 0)).heldBackAt(time.Unix(399, 0)), standby(nil), true, ""},
		{"cut off, held back past its entry's end", heldBack(rec(true), time.Unix(400, 0)).heldBackAt(time.Unix(400, 0)), standby(nil), false, lsncheck.ReasonRecordStandbyCutOff},
	}
	for _, c := range cases {
		var demotedEnd lsncheck.LSN
		if strings.Contains(c.name, "demoted") {
			demotedEnd = 0x9000100
		}
		got := JudgeWithoutPrimary(c.rec, c.node, Selection{}, false, Demoted{WALEnd: demotedEnd})
		if len(got) != 1 || got[0].Name != "a" || !got[0].Gate || got[0].Verdict.Ready != c.ready {
			t.Errorf("%s: %+v", c.name, got)
			continue
		}
		if c.reason != "" && (len(got[0].Verdict.Reasons) != 1 || got[0].Verdict.Reasons[0] != c.reason) {
			t.Errorf("%s: reasons %v, want %s", c.name, got[0].Verdict.Reasons, c.reason)
		}
		// The answer says per slot whether its consumer was held back (only a READY of a
		// held-back slot promises no consumer ahead of the standby).
		if want := c.ready && strings.Contains(c.name, "held back"); got[0].HeldBack != want {
			t.Errorf("%s: held_back %v, want %v", c.name, got[0].HeldBack, want)
		}
	}
}

// TestJudgeWithoutPrimaryExactAndSelection: with --exact, a copy that trailed its consumer at the
// last observation would redeliver, and one that stood at its consumer's position is READY; a
// slot not selected is not judged, and a native copy must still be server-synced.
func TestJudgeWithoutPrimaryExactAndSelection(t *testing.T) {
	rec, standby, copyPos := recordOfA, standbyWithA, judgedCopyPos
	if got := JudgeWithoutPrimary(rec(true), standby(nil), Selection{}, true, Demoted{}); got[0].Verdict.Ready || got[0].Verdict.Reasons[0] != lsncheck.ReasonCopyBehind {
		t.Errorf("exact, behind: %+v", got[0].Verdict)
	}
	atConsumer := rec(true)
	gs := atConsumer.Slots["a"]
	gs.Primary = copyPos
	atConsumer.Slots["a"] = gs
	if got := JudgeWithoutPrimary(atConsumer, standby(nil), Selection{}, true, Demoted{}); !got[0].Verdict.Ready {
		t.Errorf("exact, at the consumer: %+v", got[0].Verdict)
	}
	idB := lsncheck.Identity{Name: "b", Database: "app", Plugin: "pgoutput"}
	r := rec(true)
	r.Slots["b"] = GateSlot{Identity: idB, Ready: true, Copy: copyPos, Primary: judgedPrimaryPos, RequireSynced: true}
	node := standby(nil)
	node.Slots["b"] = slot(idB, copyPos.RestartLSN, copyPos.ConfirmedFlush, copyPos.CatalogXmin)
	got := JudgeWithoutPrimary(r, node, Selection{Patterns: []string{"b"}}, false, Demoted{})
	if len(got) != 1 || got[0].Name != "b" || got[0].Verdict.Ready || got[0].Verdict.Reasons[0] != lsncheck.ReasonNotSynced {
		t.Errorf("selection and synced: %+v", got)
	}
}

// needsSnapshot marks slot "a" of r as READY only with its decoding snapshot, unless its
// restart_lsn is still scratch.
func needsSnapshot(r *GateRecord, scratch lsncheck.LSN) *GateRecord {
	gs := r.Slots["a"]
	gs.SnapshotNeeded, gs.ScratchAt = true, scratch
	r.Slots["a"] = gs
	return r
}

func TestGateRecordChangesAreWrittenAtOnce(t *testing.T) {
	pos := lsncheck.Position{RestartLSN: 1, ConfirmedFlush: 2, CatalogXmin: 3}
	reports := func(ready bool, cf lsncheck.LSN) []SlotReport {
		p := pos
		p.ConfirmedFlush = cf
		return []SlotReport{{Name: "a", Database: "app", Plugin: "pgoutput", Gate: true, Primary: &p, Copy: &p, Verdict: lsncheck.Verdict{Ready: ready}},
			{Name: "tmp", Gate: false}}
	}
	a := newGateRecord(time.Unix(0, 0), topology.MethodSQL, false, topology.NodeInfo{}, reports(true, 2))
	if len(a.Slots) != 1 {
		t.Fatalf("ungated slots recorded: %+v", a.Slots)
	}
	if !a.sameVerdicts(newGateRecord(time.Unix(9, 0), topology.MethodSQL, false, topology.NodeInfo{}, reports(true, 9))) {
		t.Error("a move of positions alone is not a change of verdict")
	}
	if a.sameVerdicts(newGateRecord(time.Unix(0, 0), topology.MethodSQL, false, topology.NodeInfo{}, reports(false, 2))) {
		t.Error("READY to NOT READY must be written at once")
	}
	if a.sameVerdicts(newGateRecord(time.Unix(0, 0), topology.MethodSQL, true, topology.NodeInfo{}, reports(true, 2))) {
		t.Error("a change of synchronized_standby_slots must be written at once")
	}
}

// heldBack makes a record made while the standby was cut off, its slot held back by
// synchronized_standby_slots until until (rule 10).
func heldBack(r *GateRecord, until time.Time) *GateRecord {
	r.StandbyCutOff, r.HeldBackUntil = true, until
	for name, gs := range r.Slots {
		gs.HeldBack = true
		r.Slots[name] = gs
	}
	return r
}
