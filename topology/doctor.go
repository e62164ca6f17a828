package topology

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Check is one prerequisite as `doctor` reports it.
type Check struct {
	Name     string `json:"name"`
	Node     string `json:"node"`
	OK       bool   `json:"ok"`
	Severity string `json:"severity"` // "error" stops slotsync; "warning" does not
	Problem  string `json:"problem,omitempty"`
	Fix      string `json:"fix,omitempty"`
}

// doctorChecks is every prerequisite doctor reports, in order, with where it applies; checks of
// another method are left out.
var doctorChecks = []struct {
	name, node, severity string
	only                 Method // "" for every method
}{
	{"primary_role", "primary", "error", ""},
	{"standby_role", "standby", "error", ""},
	{"system_identifier", "pair", "error", ""},
	{"major_version", "pair", "error", ""},
	{"wal_level", "primary", "error", ""},
	{"wal_level", "standby", "error", ""},
	{"primary_slot_name", "standby", "error", ""},
	{"physical_slot", "primary", "error", ""},
	{"physical_slot_active", "primary", "warning", ""},
	{"wal_receiver", "standby", "warning", ""},
	{"wal_files", "standby", "warning", ""},
	{"hot_standby_feedback", "standby", "error", ""},
	{"privileges", "standby", "error", ""},
	{"standby_snapshot", "primary", "warning", MethodSQL},
	{"minor_version", "standby", "error", MethodSQL},
	{"max_replication_slots", "standby", "error", ""},
	{"sync_replication_slots", "standby", "error", MethodNative},
	{"primary_conninfo_dbname", "standby", "error", MethodNative},
	{"synchronized_standby_slots", "primary", "warning", MethodNative},
	{"server_sync_skips", "standby", "warning", MethodNative},
	{"state_files", "primary", "error", MethodStatefile},
	{"checkpoint", "primary", "warning", MethodStatefile},
	{"decoding_snapshots", "standby", "error", MethodStatefile},
	{"method", "pair", "error", ""},
	{"ha_manager", "standby", "warning", ""},
	{"idle_replication_slot_timeout", "standby", "warning", ""},
	{"max_slot_wal_keep_size", "standby", "warning", ""},
	{"selection", "primary", "error", ""},
	{"other_synchronizer", "standby", "error", ""},
	{"read_all_stats", "standby", "error", ""},
	{"read_all_stats", "primary", "error", ""},
}

// DoctorInput is what doctor checks: both nodes, the standby's physical slot on the primary, the
// method and how slotsync would run it, and the slots.
type DoctorInput struct {
	Primary, Standby NodeInfo
	Physical         PhysicalSlot
	Method           Method
	// Drive: slotsync calls pg_sync_replication_slots() itself (--native-drive), so the native
	// method does not need sync_replication_slots on.
	Drive bool
	// PrimarySlots: how many logical slots slotsync would copy; StandbySlots: the standby's own;
	// Unselected: the primary's logical slots the selection leaves out; Synced: the entries of
	// the primary's synchronized_standby_slots.
	PrimarySlots, StandbySlots int
	Unselected                 []string
	Synced                     []SyncedStandbySlot
	// StandbySlotList: the standby's logical slots, for the server's slot sync skips (19+).
	StandbySlotList map[string]Slot
	// ExactCopies: the sql or native method makes exact copies for away consumers
	// (--exact-copy-after), which are state-file copies: the state-file method's checks apply.
	ExactCopies bool
}

// SyncSkipProblem names the standby's synced slots whose last sync the server skipped (19+:
// slotsync_skip_reason), each with why, or nil.
func SyncSkipProblem(slots map[string]Slot) *Problem {
	var skipped []string
	for name, s := range slots {
		if skip := s.SyncSkip(); skip != "" {
			skipped = append(skipped, name+": "+skip)
		}
	}
	if len(skipped) == 0 {
		return nil
	}
	slices.Sort(skipped)
	return &Problem{Check: "server_sync_skips", Node: "standby",
		Issue: "the server's slot sync skipped " + strings.Join(skipped, "; "),
		Fix: "usually it catches up once the primary slot's consumer moves on (wal_or_rows_removed, no_consistent_snapshot) or the standby " +
			"flushes the WAL (wal_not_flushed); an invalidated copy (slot_invalidated) is dropped and made again by the server: check stays NOT READY until then"}
}

// Doctor checks every prerequisite and returns one Check per item, each failed one with its fix.
func Doctor(in DoctorInput) []Check {
	primary, standby, method := in.Primary, in.Standby, in.Method
	var probs []Problem
	if p := SelectionProblem(in.PrimarySlots, in.Unselected); p != nil {
		probs = append(probs, *p)
	}
	if p := OtherSynchronizerProblem(standby); p != nil {
		probs = append(probs, *p)
	}
	if method == MethodNative {
		probs = append(probs, NativeWarnings(primary, standby, in.Synced)...)
		if p := SyncSkipProblem(in.StandbySlotList); p != nil {
			probs = append(probs, *p)
		}
	}
	if err := verify(primary, standby, in.Physical, method, in.Drive); err != nil {
		if pe := (*PrereqError)(nil); errors.As(err, &pe) {
			probs = append(probs, pe.Problems...)
		} else {
			probs = append(probs, Problem{Check: "standby_role", Node: "standby", Issue: err.Error(),
				Fix: "run doctor against a standby; after a promotion slotsync has nothing to sync"})
		}
	}
	probs = append(probs, Warnings(primary, standby, in.Physical)...)
	if (method == MethodSQL || method == MethodNative && in.Drive) && standby.Major() >= 16 && !primary.CanLogStandbySnapshot {
		probs = append(probs, Problem{Check: "standby_snapshot", Node: "primary",
			Issue: "the role may not call pg_log_standby_snapshot(): each new copy waits up to 15 s for the primary's next running-xacts record",
			Fix:   "GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO <slotsync role>"})
	}
	if need := in.PrimarySlots + in.StandbySlots + 1; standby.MaxReplicationSlots < need {
		probs = append(probs, Problem{Check: "max_replication_slots", Node: "standby",
			Issue: fmt.Sprintf(
				"max_replication_slots is %d: %d logical slots on the primary and %d on the standby leave no room",
				standby.MaxReplicationSlots,
				in.PrimarySlots,
				in.StandbySlots,
			),
			Fix: fmt.Sprintf("ALTER SYSTEM SET max_replication_slots = %d; then restart the standby", max(need*2, 10))})
	}
	stateFiles := method == MethodStatefile || in.ExactCopies
	if stateFiles && !primary.CanReadStateFiles {
		probs = append(probs, Problem{Check: "state_files", Node: "primary",
			Issue: "the role may not call pg_read_binary_file(text): slot state files cannot be read",
			Fix:   "GRANT EXECUTE ON FUNCTION pg_read_binary_file(text) TO <slotsync role>"})
	}
	if standby.InRecovery && !standby.CanStatFiles && !standby.CanListSnapshots {
		fix := "GRANT EXECUTE ON FUNCTION pg_stat_file(text, boolean) TO <slotsync role> (on the primary; the standby replays it)"
		if standby.Major() >= 15 {
			fix = "GRANT pg_monitor TO <slotsync role>, or " + strings.TrimPrefix(fix, "GRANT ")
		}
		probs = append(probs, Problem{Check: "decoding_snapshots", Node: "standby",
			Issue: "the role may call neither pg_ls_logicalsnapdir() nor pg_stat_file(text, boolean): slotsync cannot see whether a copy's decoding snapshot is " +
				"on the standby, so every copy it has advanced (every state-file copy) stays NOT READY",
			Fix: fix})
	}
	if stateFiles && !primary.CanCheckpoint {
		fix := "GRANT pg_checkpoint TO <slotsync role>"
		if primary.Major() < 15 {
			fix = "run slotsync with --no-checkpoint (CHECKPOINT needs a superuser before 15); copies are then as of the last checkpoint"
		}
		probs = append(probs, Problem{Check: "checkpoint", Node: "primary",
			Issue: "the role may not run CHECKPOINT before reading slot state", Fix: fix})
	}
	probs = append(probs, copyLimitProblems(primary, standby)...)
	if !standby.CanReadAllStats {
		probs = append(probs, Problem{Check: "read_all_stats", Node: "standby",
			Issue: "the role may not see the standby's WAL receiver: without the primary (every unplanned failover) the gate cannot tell whether a primary is alive, " +
				"and answers CANNOT TELL",
			Fix: "GRANT pg_read_all_stats TO <slotsync role> (on the primary; the standby replays it)"})
	}
	if !primary.CanReadAllStats && primary.VersionNum != 0 {
		probs = append(probs, Problem{Check: "read_all_stats", Node: "primary",
			Issue: "the role may not see what the walsenders sent to consumers: rule 5 then counts only what they confirmed, and a consumer holding more than the " +
				"standby goes unseen",
			Fix: "GRANT pg_read_all_stats TO <slotsync role>"})
	}
	if standby.ManagedByPatroni {
		probs = append(probs, Problem{Check: "ha_manager", Node: "standby",
			Issue: "Patroni manages this node: unless its DCS configuration has ignore_slots for logical slots, Patroni drops every copy slotsync makes on a replica " +
				"(\"Dropped unknown replication slot\"), and it promotes without asking slotsync's gate",
			Fix: "patronictl edit-config: ignore_slots: [{type: logical}]; postgresql.pre_promote: the hook in examples/patroni (with SLOTSYNC_STANDBY and " +
				"SLOTSYNC_STATE_DIR in Patroni's environment)"})
	}

	var out []Check
	for _, d := range doctorChecks {
		if d.only != "" && d.only != method && !(d.only == MethodSQL && method == MethodNative) && !(d.only == MethodStatefile && stateFiles) {
			continue
		}
		c := Check{Name: d.name, Node: d.node, OK: true, Severity: d.severity}
		for _, p := range probs {
			if p.Check == d.name && p.Node == d.node {
				c.OK, c.Problem, c.Fix = false, p.Issue, p.Fix
				break
			}
		}
		out = append(out, c)
	}
	return out
}

// copyLimitProblems are the standby's settings that invalidate copies the primary's slots keep:
// idle_replication_slot_timeout, and a max_slot_wal_keep_size below the primary's.
func copyLimitProblems(primary, standby NodeInfo) []Problem {
	var probs []Problem
	if t := standby.IdleSlotTimeout; t != "" && t != "0" {
		probs = append(probs, Problem{Check: "idle_replication_slot_timeout", Node: "standby",
			Issue: fmt.Sprintf(
				"idle_replication_slot_timeout is %s min: a copy whose consumer stays idle that long is invalidated on the standby, and a promotion then loses its slot",
				t,
			),
			Fix: "ALTER SYSTEM SET idle_replication_slot_timeout = 0 on the standby (and keep it off on the primary too, or above your longest consumer pause); then " +
				"SELECT pg_reload_conf()"})
	}
	if limit := standby.MaxSlotWALKeepMB; limit >= 0 && (primary.MaxSlotWALKeepMB < 0 || primary.MaxSlotWALKeepMB > limit) {
		onPrimary, value := "no limit", "-1"
		if primary.MaxSlotWALKeepMB >= 0 {
			onPrimary, value = fmt.Sprintf("%d MB", primary.MaxSlotWALKeepMB), fmt.Sprintf("'%dMB'", primary.MaxSlotWALKeepMB)
		}
		probs = append(probs, Problem{Check: "max_slot_wal_keep_size", Node: "standby",
			Issue: fmt.Sprintf("max_slot_wal_keep_size is %d MB on the standby (the primary: %s): a copy whose consumer is further behind is NOT READY "+
				"(copy_wal_missing) and is invalidated at the standby's next restartpoint, while the primary still keeps its slot's WAL", limit, onPrimary),
			Fix: fmt.Sprintf("ALTER SYSTEM SET max_slot_wal_keep_size = %s on the standby (the primary's); then SELECT pg_reload_conf()", value)})
	}
	return probs
}

// SelectionProblem is the problem of a selection (--slots, --databases, --plugins,
// --ignore-slots) that matches none of the primary's logical slots while it has some: the gate
// would answer READY for nothing, and the daemon would sync nothing.
func SelectionProblem(selected int, unselected []string) *Problem {
	if selected > 0 || len(unselected) == 0 {
		return nil
	}
	names := unselected
	if len(names) > 10 {
		names = append(append([]string(nil), names[:10]...), fmt.Sprintf("and %d more", len(unselected)-10))
	}
	return &Problem{Check: "selection", Node: "primary",
		Issue: fmt.Sprintf("the selection matches none of the primary's %d logical slots (%s): slotsync would sync nothing, and the gate would protect none of them",
			len(unselected), strings.Join(names, ", ")),
		Fix: "correct --slots, --databases, --plugins or --ignore-slots (SLOTSYNC_SLOTS, ...) so that they name the slots to protect"}
}

// OtherSynchronizerProblem: another tool loaded on the standby syncs logical slots from the
// primary; slotsync then leaves every slot to it (NOT READY other_synchronizer) rather than fight
// over the same slots (nil when none is seen).
func OtherSynchronizerProblem(standby NodeInfo) *Problem {
	other := standby.OtherSynchronizer()
	if other == "" {
		return nil
	}
	return &Problem{Check: "other_synchronizer", Node: "standby",
		Issue: other + " is loaded on the standby (shared_preload_libraries): it copies, advances and drops the same logical slots, " +
			"so slotsync leaves every slot to it and its gate vouches for none",
		Fix: "use one tool: remove " + other + " from shared_preload_libraries on the standby and restart it, or stop slotsync " +
			"(docs/CLI.md, \"One synchronizer per slot\")"}
}
