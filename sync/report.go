package sync

import (
	"time"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// SlotReport is the outcome of one pass for one slot.
type SlotReport struct {
	Name        string `json:"name"`
	Database    string `json:"database"`
	Plugin      string `json:"plugin"`
	Action      Kind   `json:"action"`
	Code        Code   `json:"code,omitempty"`
	Reason      string `json:"reason"`
	Error       string `json:"error,omitempty"`
	ErrorClass  string `json:"error_class,omitempty"`
	Incarnation string `json:"incarnation,omitempty"`
	// LeftAlone: a copy slotsync made and no longer syncs (primary slot invalidated, or no
	// longer selected): it still holds WAL and catalog rows on the standby (--drop-left-alone).
	LeftAlone bool `json:"left_alone,omitempty"`
	// ExactCopy: the copy was made from the primary's state files beside a method whose own
	// copies come from the standby's decoding (--exact-copy-after), and is judged as such.
	ExactCopy bool               `json:"exact_copy,omitempty"`
	Primary   *lsncheck.Position `json:"primary,omitempty"`
	Copy      *lsncheck.Position `json:"copy,omitempty"`
	// WAL each side keeps for the slot: from its restart_lsn to the node's WAL end.
	PrimaryRetainedWALBytes int64  `json:"primary_retained_wal_bytes"`
	CopyRetainedWALBytes    int64  `json:"copy_retained_wal_bytes"`
	PrimaryWALStatus        string `json:"primary_wal_status,omitempty"`
	CopyWALStatus           string `json:"copy_wal_status,omitempty"`
	// Gate is false for slots the readiness gate ignores (temporary or unselected ones).
	Gate    bool             `json:"gate"`
	Verdict lsncheck.Verdict `json:"verdict"`
	// HeldBack, judged without the primary: a failover slot while the primary's
	// synchronized_standby_slots listed this standby, so its consumer could not be ahead of the
	// standby. A READY without it does not rule that out (rule 8).
	HeldBack bool `json:"held_back,omitempty"`
	// ServerSyncSkip (19+): why the server's slot sync last skipped the copy
	// (pg_replication_slots.slotsync_skip_reason), and ServerSyncSkips how often it has.
	ServerSyncSkip  string `json:"server_sync_skip,omitempty"`
	ServerSyncSkips int64  `json:"server_sync_skips,omitempty"`

	// For the gate record: the copy must stay server-synced (native), and its two_phase.
	requireSynced, copyTwoPhase, primaryTwoPhase bool
	// catalogByFeedback: the verdict rested on the standby's feedback keeping the copy's
	// catalog rows (GateSlot.CatalogByFeedback).
	catalogByFeedback bool
	// needsSnapshot: the copy needs its decoding snapshot at its restart_lsn, unless that is
	// still scratchAt, where it was made (GateSlot.SnapshotNeeded, GateSlot.ScratchAt).
	needsSnapshot bool
	scratchAt     lsncheck.LSN
}

// Report is the outcome of one pass.
type Report struct {
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Major    int           `json:"major"`
	// Role is the local node's: "standby" (slots are synced to it) or "primary" (nothing to do).
	Role Role `json:"role"`
	// WithoutPrimary is set when the primary could not be asked and the verdicts come from the
	// standby and the last observation of the primary (rule 8).
	WithoutPrimary *WithoutPrimary `json:"without_primary,omitempty"`
	Method         topology.Method `json:"method"`
	Slots          []SlotReport    `json:"slots"`
	// StandbyRestarts is how many times this pass restarted the standby (state-file method).
	StandbyRestarts int `json:"standby_restarts"`
	// Warnings are conditions that did not stop the pass but need attention.
	Warnings []topology.Problem `json:"warnings,omitempty"`
	Primary  NodeSummary        `json:"primary"`
	Standby  NodeSummary        `json:"standby"`
	// StandbyOnly lists the standby's logical slots that slotsync neither copies nor made.
	StandbyOnly []string `json:"standby_only_slots,omitempty"`
	// Selected counts the primary's logical slots the selection matches; Unselected names the
	// others (temporary slots left out of both). Without the primary: as last recorded.
	Selected   int      `json:"selected_slots"`
	Unselected []string `json:"unselected_slots,omitempty"`
	// SlotsReady: in a summary answer (Answer.Summary), how many READY slots were left out.
	SlotsReady int `json:"slots_ready_not_listed,omitempty"`
	// Journal: how the daemon's writes of its journal fare (applying passes only).
	Journal *JournalHealth `json:"journal,omitempty"`
}

// JournalHealth is what an applying engine knows of its journal writes: how many failed since it
// started, what the last failing one was for while writes keep failing, and when the gate
// record (what the gate judges from without the primary) was last written.
type JournalHealth struct {
	WriteErrors  int       `json:"write_errors"`
	Failing      string    `json:"failing,omitempty"`
	GateRecordAt time.Time `json:"gate_record_at,omitzero"`
}

// NodeSummary is a node as the report shows it.
type NodeSummary struct {
	SystemID   string `json:"system_identifier"`
	VersionNum int    `json:"server_version_num"`
	InRecovery bool   `json:"in_recovery"`
	// WALEnd: the primary's insert position, the standby's newest flushed or replayed WAL.
	WALEnd    string `json:"wal_end"`
	ReplayLSN string `json:"replay_lsn,omitempty"`
}

func summarize(n topology.NodeInfo) NodeSummary {
	s := NodeSummary{SystemID: n.SystemID, VersionNum: n.VersionNum, InRecovery: n.InRecovery, WALEnd: n.WALEnd().String()}
	if n.InRecovery {
		s.ReplayLSN = n.ReplayLSN.String()
	}
	return s
}

// standbyOnly names standby slots that are neither on the primary nor in the journal.
func standbyOnly(obs Observation, standby map[string]topology.Slot, j *Journal) []string {
	var out []string
	for _, name := range sortedKeys(standby) {
		_, onPrimary := obs.Primary.Slots[name]
		_, owned := j.Slots[name]
		if !onPrimary && !owned {
			out = append(out, name)
		}
	}
	return out
}

// NothingSelected reports a selection that matches none of the primary's logical slots while it
// has some: no slot is gated, and READY would protect nothing.
func (r Report) NothingSelected() bool {
	if len(r.Unselected) == 0 {
		return false
	}
	for _, s := range r.Slots {
		if s.Gate {
			return false
		}
	}
	return true
}

// Ready reports whether every gated slot is READY (never on a node that is the primary, nor
// when the selection matches none of the primary's slots).
func (r Report) Ready() bool {
	if r.Role == RolePrimary || r.NothingSelected() {
		return false
	}
	for _, s := range r.Slots {
		if s.Gate && !s.Verdict.Ready {
			return false
		}
	}
	return true
}

// retained is the WAL a slot holds back on a node (0 when unknown).
func retained(end, restart lsncheck.LSN) int64 {
	if restart == 0 || end < restart {
		return 0
	}
	return lsncheck.Bytes(end, restart)
}
