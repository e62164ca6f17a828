package sync

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

func TestJudgeWithoutPrimary(t *testing.T) {
	idB := lsncheck.Identity{Name: "b", Database: "app", Plugin: "pgoutput"}
	copyPos := lsncheck.Position{RestartLSN: 0x1000000, ConfirmedFlush: 0x2000000, CatalogXmin: 700}
	primPos := lsncheck.Position{RestartLSN: 0x1000000, ConfirmedFlush: 0x2100000, CatalogXmin: 700}
	rec := func(ready bool) *GateRecord {
		return &GateRecord{ObservedAt: time.Unix(100, 0), Slots: map[string]GateSlot{
			"a": {Identity: idA, Ready: ready, Reasons: nil, Detail: "x", Primary: primPos, Copy: copyPos},
		}}
	}
	standby := func(mod func(*topology.Slot)) NodeState {
		s := slot(idA, copyPos.RestartLSN, copyPos.ConfirmedFlush, copyPos.CatalogXmin)
		if mod != nil {
			mod(&s)
		}
		return NodeState{Info: topology.NodeInfo{InRecovery: true, ReplayLSN: 0x9000000}, Slots: map[string]topology.Slot{"a": s}}
	}
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
		{"cut off, held back (rule 10)", heldBack(rec(true), time.Unix(400, 0)).heldBackAt(time.Unix(399, 0)), standby(nil), true, ""},
		{"cut off, held back past its entry's end", heldBack(rec(true), time.Unix(400, 0)).heldBackAt(time.Unix(400, 0)), standby(nil), false, lsncheck.ReasonRecordStandbyCutOff},
	}
	for _, c := range cases {
		var demotedEnd lsncheck.LSN
		if strings.Contains(c.name, "demoted") {
			demotedEnd = 0x9000100
		}
		got := JudgeWithoutPrimary(c.rec, c.node, Selection{}, false, demotedEnd)
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
	// Exact: the copy trailed its consumer at the last observation, so a promotion would
	// redeliver; a copy that stood at its consumer's position is READY.
	if got := JudgeWithoutPrimary(rec(true), standby(nil), Selection{}, true, 0); got[0].Verdict.Ready || got[0].Verdict.Reasons[0] != lsncheck.ReasonCopyBehind {
		t.Errorf("exact, behind: %+v", got[0].Verdict)
	}
	atConsumer := rec(true)
	gs := atConsumer.Slots["a"]
	gs.Primary = copyPos
	atConsumer.Slots["a"] = gs
	if got := JudgeWithoutPrimary(atConsumer, standby(nil), Selection{}, true, 0); !got[0].Verdict.Ready {
		t.Errorf("exact, at the consumer: %+v", got[0].Verdict)
	}
	// A slot not selected is not judged; a native copy must still be server-synced.
	r := rec(true)
	r.Slots["b"] = GateSlot{Identity: idB, Ready: true, Copy: copyPos, Primary: primPos, RequireSynced: true}
	node := standby(nil)
	node.Slots["b"] = slot(idB, copyPos.RestartLSN, copyPos.ConfirmedFlush, copyPos.CatalogXmin)
	got := JudgeWithoutPrimary(r, node, Selection{Patterns: []string{"b"}}, false, 0)
	if len(got) != 1 || got[0].Name != "b" || got[0].Verdict.Ready || got[0].Verdict.Reasons[0] != lsncheck.ReasonNotSynced {
		t.Errorf("selection and synced: %+v", got)
	}
}

func onTimeline(r *GateRecord, tli int) *GateRecord { r.Timeline = tli; return r }

func withTimeline(n NodeState, tli int) NodeState { n.Info.HistoryTimeline = tli; return n }

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

// TestOneWriterPerStateDirectory: a second writing engine on the same state directory is refused
// with who holds it; readers (check, status) are not; closing the first frees it.
func TestOneWriterPerStateDirectory(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{StandbyDSN: "host=127.0.0.1 port=1", StateDir: dir}
	first, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := New(cfg)
	var ce *topology.ConfigError
	if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("a second writer: %v", err)
	}
	if second != nil {
		t.Fatal("a second writer was made")
	}
	reader := cfg
	reader.ReadOnly = true
	r, err := New(reader)
	if err != nil {
		t.Fatalf("a reader beside the writer: %v", err)
	}
	r.Close()
	first.Close()
	again, err := New(cfg)
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	again.Close()
}

// TestTheGateJudgesWithTheDaemonsMethod: on 16 the daemon may use the state-file method; a
// read-only engine with --method auto then judges by its rules, read from the journal.
func TestTheGateJudgesWithTheDaemonsMethod(t *testing.T) {
	j := &Journal{Version: journalVersion, Slots: map[string]*Entry{}, Gate: &GateRecord{Method: string(topology.MethodStatefile)}}
	standby := topology.NodeInfo{VersionNum: 160004, InRecovery: true}
	e := newEngine(Config{ReadOnly: true, Method: topology.MethodAuto}, nil, j)
	if m, err := e.chooseMethod(standby, false); err != nil || m != topology.MethodStatefile {
		t.Fatalf("read-only engine beside a state-file daemon chose %s, %v", m, err)
	}
	e = newEngine(Config{ReadOnly: true, Method: topology.MethodAuto}, nil, &Journal{Version: journalVersion, Slots: map[string]*Entry{}})
	if m, _ := e.chooseMethod(standby, false); m != topology.MethodSQL {
		t.Fatalf("without a journal, auto on 16 is sql, got %s", m)
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

// TestMaxRecordAgeBelowStandbyGoneAfter: a record older than --standby-gone-after could claim a
// slot held back after any node's sidecar took the standby out of synchronized_standby_slots.
func TestMaxRecordAgeBelowStandbyGoneAfter(t *testing.T) {
	cfg := Config{StandbyDSN: "x", ReadOnly: true, MaxRecordAge: 5 * time.Minute, Native: NativeConfig{StandbyGoneAfter: time.Minute}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "standby-gone-after") {
		t.Fatalf("want a configuration error naming --standby-gone-after, got %v", err)
	}
	cfg.MaxRecordAge = 30 * time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}
