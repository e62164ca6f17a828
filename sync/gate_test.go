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
