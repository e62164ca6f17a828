package sync

import (
	"testing"

	"github.com/slotsync/slotsync/topology"
)

func onTimeline(r *GateRecord, tli int) *GateRecord { r.Timeline = tli; return r }

func withTimeline(n NodeState, tli int) NodeState { n.Info.HistoryTimeline = tli; return n }

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

// TestOwnAdvancedCopy: which copies the gate asks for the decoding snapshot at their
// restart_lsn beside the method's own traits (rule 4): copies slotsync made by the standby's
// own decoding, or any such copy when there is no journal to say where it was made.
func TestOwnAdvancedCopy(t *testing.T) {
	for _, c := range []struct {
		name    string
		inForce topology.Method
		ent     *Entry
		synced  bool
		journal bool
		want    bool
	}{
		{"a sql copy", topology.MethodSQL, &Entry{Method: string(topology.MethodSQL)}, false, true, true},
		{"a native method's own copy", topology.MethodNative, &Entry{Method: string(topology.MethodNative)}, false, true, true},
		{"a copy the server syncs", topology.MethodNative, &Entry{Method: string(topology.MethodNative)}, true, true, false},
		{"an exact copy beside the sql method", topology.MethodSQL, &Entry{Method: string(topology.MethodStatefile)}, false, true, false},
		{"a primary's own slot", topology.MethodSQL, &Entry{Method: "own"}, false, true, false},
		{"no entry, with a journal (not slotsync's)", topology.MethodSQL, nil, false, true, false},
		{"no journal: where it was made is not known", topology.MethodSQL, nil, false, false, true},
		{"no journal, the state-file method", topology.MethodStatefile, nil, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := copyTraits(TraitsOf(c.inForce), c.ent)
			if got := ownAdvancedCopy(tr, c.ent, topology.Slot{Synced: c.synced}, c.journal); got != c.want {
				t.Fatalf("ownAdvancedCopy = %v, want %v", got, c.want)
			}
		})
	}
}
