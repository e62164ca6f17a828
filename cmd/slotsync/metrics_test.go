package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/slotsync/slotsync/lsncheck"
	slotsync "github.com/slotsync/slotsync/sync"
)

// TestMetricsNodeLabelsAndSlotInfo: the node label names the server beside slotsync (local) and
// the primary it syncs from (upstream), whatever role each has; every judged or left-alone slot
// has one info series carrying its database, plugin and postgres_exporter's slot_name.
func TestMetricsNodeLabelsAndSlotInfo(t *testing.T) {
	rep := slotsync.Report{Role: slotsync.RoleStandby, Selected: 1, Slots: []slotsync.SlotReport{
		{Name: "cdc", Database: "app", Plugin: "pgoutput", Gate: true, Verdict: lsncheck.Verdict{Ready: true},
			Copy: &lsncheck.Position{}, PrimaryRetainedWALBytes: 300, CopyRetainedWALBytes: 200},
		{Name: "old", Database: "app", Plugin: "test_decoding", LeftAlone: true, Copy: &lsncheck.Position{}, CopyRetainedWALBytes: 50},
	}}
	m := newMetrics()
	m.observe(rep, nil)
	want := `
# HELP slotsync_node_up 1 when the last pass reached the node (local: the server beside slotsync; upstream: the primary it syncs from).
# TYPE slotsync_node_up gauge
slotsync_node_up{node="local"} 1
slotsync_node_up{node="upstream"} 1
# HELP slotsync_slot_info 1 for each slot slotsync judges or left alone: its database and plugin, and its name as postgres_exporter labels it (slot_name), for joins.
# TYPE slotsync_slot_info gauge
slotsync_slot_info{database="app",plugin="pgoutput",slot="cdc",slot_name="cdc"} 1
slotsync_slot_info{database="app",plugin="test_decoding",slot="old",slot_name="old"} 1
# HELP slotsync_slot_retained_wal_bytes WAL the slot holds back on each node (local: the server beside slotsync; upstream: the primary it syncs from).
# TYPE slotsync_slot_retained_wal_bytes gauge
slotsync_slot_retained_wal_bytes{database="app",node="local",plugin="pgoutput",slot="cdc"} 200
slotsync_slot_retained_wal_bytes{database="app",node="local",plugin="test_decoding",slot="old"} 50
slotsync_slot_retained_wal_bytes{database="app",node="upstream",plugin="pgoutput",slot="cdc"} 300
`
	names := []string{"slotsync_node_up", "slotsync_slot_info", "slotsync_slot_retained_wal_bytes"}
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	// The primary cannot be asked and nothing is judged: upstream is down, and no slot series
	// stays up from the older verdict.
	m.observe(slotsync.Report{Role: slotsync.RoleStandby}, &slotsync.NodeError{Node: "primary", Err: errors.New("connection refused")})
	want = `
# HELP slotsync_node_up 1 when the last pass reached the node (local: the server beside slotsync; upstream: the primary it syncs from).
# TYPE slotsync_node_up gauge
slotsync_node_up{node="local"} 1
slotsync_node_up{node="upstream"} 0
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	// The local node is the primary now: nothing is upstream of it.
	m.observe(slotsync.Report{Role: slotsync.RolePrimary}, nil)
	want = `
# HELP slotsync_node_up 1 when the last pass reached the node (local: the server beside slotsync; upstream: the primary it syncs from).
# TYPE slotsync_node_up gauge
slotsync_node_up{node="local"} 1
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}
