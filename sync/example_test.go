package sync_test

import (
	"fmt"

	"github.com/slotsync/slotsync/lsncheck"
	slotsync "github.com/slotsync/slotsync/sync"
	"github.com/slotsync/slotsync/topology"
)

// Plan is a pure function of one observation of both nodes and the journal: here a consumer
// moved on, and the standby copy slotsync made is advanced to the consumer's position, which
// the standby has already replayed.
func ExamplePlan() {
	id := lsncheck.Identity{Name: "cdc", Database: "app", Plugin: "pgoutput"}
	at := func(restart, confirmed lsncheck.LSN) lsncheck.Position {
		return lsncheck.Position{RestartLSN: restart, ConfirmedFlush: confirmed, CatalogXmin: 750}
	}
	in := slotsync.PlanInput{
		Primary: slotsync.NodeState{Info: topology.NodeInfo{VersionNum: 170000},
			Slots: map[string]topology.Slot{"cdc": {Identity: id, Position: at(0x1800000, 0x3000000)}}},
		Standby: slotsync.NodeState{Info: topology.NodeInfo{VersionNum: 170000, InRecovery: true, ReplayLSN: 0x4000000},
			Slots: map[string]topology.Slot{"cdc": {Identity: id, Position: at(0x1000000, 0x2000000)}}},
		Journal: &slotsync.Journal{Version: 1, Slots: map[string]*slotsync.Entry{
			"cdc": {Incarnation: "00000000000000aa", Identity: id, FirstSeen: at(0x1000000, 0x2000000), Primary: at(0x1000000, 0x2000000)},
		}},
		Traits: slotsync.TraitsOf(topology.MethodSQL),
	}
	for _, a := range slotsync.Plan(in) {
		fmt.Println(a.Slot, a.Kind, a.Code, a.Target)
	}
	// Output: cdc advance consumer_moved 0/3000000
}
