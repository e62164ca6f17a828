package explore

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/slotsync/slotsync/integration/drill"
)

// Fault is one thing the chaos drill does to the pair, its consumers or slotsync during a live
// phase.
type Fault string

// The faults outside slotsync, and slotsync's own crashes.
const (
	FaultSidecarKill       Fault = "slotsync_killed"             // kill -9 of slotsync, restarted as a service manager would
	FaultSidecarPause      Fault = "slotsync_paused"             // slotsync stopped (SIGSTOP) for a while, then continued
	FaultFailpoint         Fault = "slotsync_crash_at_step"      // slotsync crashes at a named step (a build with failpoints)
	FaultPrimaryRoute      Fault = "primary_route_blackholed"    // slotsync's route to the primary is silent (the standby's is not)
	FaultWALReceiver       Fault = "wal_receiver_cut"            // the standby's walsender on the primary is terminated
	FaultStandbyRestart    Fault = "standby_restart"             // the standby is stopped and started
	FaultConsumerReconnect Fault = "consumer_reconnect"          // a consumer disconnects and resumes from its offset
	FaultSlotRecreated     Fault = "slot_recreated"              // a slot dropped and made again with its name (ahead)
	FaultSlotBehind        Fault = "slot_recreated_behind"       // a slot dropped and copied again from an older one (pg_copy_logical_replication_slot)
	FaultSlotDropped       Fault = "slot_dropped"                // a slot dropped, its consumer away until a FaultSlotRecreated makes it again
	FaultCopyDropped       Fault = "copy_dropped_on_standby"     // a slot's copy dropped on the standby by someone else
	FaultOtherPlugin       Fault = "slot_recreated_other_plugin" // a slot made again with the other plugin, its consumer speaking that one
	FaultStandbyKill       Fault = "standby_killed"              // kill -9 of the standby, then started again
	FaultAddressMoved      Fault = "primary_address_moved_early" // the primary's address (a VIP, a Service) reaches the standby for a while (flaps: a Slot)
	FaultSenderStalled     Fault = "wal_sender_stalled"          // the primary's walsender to the standby stopped (SIGSTOP) for a while: the standby falls behind
	FaultStandbyCutOff     Fault = "standby_cut_off"             // the standby's primary_conninfo emptied for a while: it does not stream, the primary lives on
	FaultCascade           Fault = "standby_cascaded"            // the standby re-pointed to stream from the second standby for a while (a cascade)
	FaultTwoPhase          Fault = "two_phase_on_while_prepared" // a transaction prepared, then (18+) the slot's two_phase turned on
	FaultLongTransaction   Fault = "long_transaction"            // a transaction open for seconds, across copies being made
	FaultCatalogVacuum     Fault = "catalog_vacuumed"            // a column added and dropped, the catalogs vacuumed
	FaultPrimaryRestart    Fault = "primary_crash_restart"       // kill -9 of the primary, then started again
	FaultSwitchover        Fault = "switchover_and_back"         // a switchover once the gate says READY, and a switch back (local pairs)
)

// Faults of written plans only (never drawn, MatrixPlans): the steps of a re-made copy whose
// catalog hold fails ("hook-remade-copy-hold-lost"), of a busy primary before a quiet window
// ("catalog-moves-before-feedback"), of copies invalidated on the standby
// ("hook-copies-invalidated", "hook-copies-idle-invalidated"), and of the standby's physical slot
// made again ("hook-physical-slot-gap"), of a copy's WAL beyond the standby's limit
// ("hook-copy-wal-beyond-limit", "hook-copies-wal-removed"), of a journal lost
// ("hook-journal-lost"), of copies behind their consumers ("exact-copies-behind-then-kill"), of a
// copy's decoding snapshot removed ("hook-copy-snapshot-removed").
const (
	FaultHoldLost          Fault = "catalog_hold_lost"   // the sessions of slotsync's catalog holds on the primary terminated (their temporary slots go)
	FaultOlderSlotsDropped Fault = "older_slots_dropped" // the older slots FaultSlotBehind copies from dropped on the primary
	FaultConsumerBack      Fault = "consumer_back"       // a consumer away comes back to the primary and reads from its slot
	// running-xacts records until every slot's catalog_xmin has passed the last catalog change,
	// then the catalogs vacuumed
	FaultCatalogPruned Fault = "catalog_pruned"
	// hot_standby_feedback turned off on the standby and on again: the primary takes its next
	// horizon, older or not
	FaultFeedbackReset Fault = "standby_feedback_reset"
	// a CHECKPOINT every 100 ms for a while (a busy primary): each writes a running-xacts record,
	// and every slot's catalog_xmin moves on as soon as its consumer confirms past one
	FaultRunningXacts Fault = "running_xacts_logged"
	// hot_standby_feedback turned off on the standby for a while (the primary clears the
	// standby's horizon), then on again
	FaultFeedbackOff Fault = "standby_feedback_off"
	// the standby's physical slot dropped on the primary (a cleanup that took it for an orphan)
	// and made again after a while: no reload, and the standby's first report gives the new
	// slot its horizon from none
	FaultPhysicalSlotGap Fault = "physical_slot_dropped"
	// the standby's idle_replication_slot_timeout set to 1 s (18+), a restartpoint once the
	// copies were idle longer (slotsync paused before), the setting reset: the standby
	// invalidates its idle copies (idle_timeout) while the primary's slots stay valid
	FaultCopiesIdle Fault = "copies_idle_timeout"
	// the standby's max_slot_wal_keep_size set to 1 MB (a reload), as a configuration applied
	// to every node sets it
	FaultSlotWALLimit Fault = "standby_slot_wal_limited"
	// three WAL segments switched on the primary (integration.Pair.SwitchSegments: each a
	// segment written into, a CHECKPOINT first where nothing was): a copy left behind them is
	// beyond a 1 MB max_slot_wal_keep_size, though no restartpoint has invalidated it yet
	FaultWALSwitched Fault = "wal_segments_switched"
	// a checkpoint on the primary, replayed, then one on the standby: a restartpoint, which
	// removes the WAL no slot of the standby keeps and invalidates the copies beyond its
	// max_slot_wal_keep_size
	FaultRestartpoint Fault = "standby_restartpoint"
	// slotsync's journal lost (its state directory's journal.json removed while slotsync is
	// stopped, then slotsync killed -9 and started again by its supervisor): its copies are no
	// longer known as its own
	FaultJournalLost Fault = "journal_lost"
	// the standby's replay paused (pg_wal_replay_pause()) for a while, then resumed: it goes on
	// receiving WAL, its consumers confirm beyond what it replayed, and no copy can be moved past
	// its replay
	FaultReplayPaused Fault = "standby_replay_paused"
	// the standby's replay paused (pg_wal_replay_pause()) once, after its next restart
	// (slotsync's, which loads a state-file copy), it replayed the WAL it had, then the primary's
	// walsender to it, stalled before (FaultSenderStalled), let go: the WAL it missed while
	// stalled is received and not replayed, its WAL receiver streaming and its feedback going
	// on, and no pass can read a copy made ahead of its replay; replay resumed after For, or at
	// the promotion (local pairs; skipped when the standby does not start again and replay its
	// WAL within 20 s, or does not stream within 15 s with its replay paused)
	FaultReplayHeldAtRestart Fault = "standby_replay_held_at_restart"
	// the drill's writes paused for a while, the consumers and slotsync going on: a quiet
	// primary, on which the server's sync persists new copies
	FaultWritesPaused Fault = "writes_paused"
	// the consumers confirm what they receive only every For from then on, as connectors that
	// commit their offsets every few seconds do: each holds changes it was sent and has not
	// confirmed (written plans; drawn from draw 14 at a standby's cut: confirmLateAtCut)
	FaultConsumersConfirmLate Fault = "consumers_confirm_late"
	// the standby's serialized decoding snapshots (pg_logical/snapshots) removed by someone else,
	// as a cleanup that takes them for disposable would: decoding from a copy's restart_lsn then
	// builds its snapshot again from running-xacts records (local pairs)
	FaultSnapshotsRemoved Fault = "standby_snapshots_removed"
	// a restartpoint of the standby, then every WAL file in its pg_wal before that restartpoint's
	// redo segment removed, as pg_archivecleanup aimed at pg_wal by a misconfigured
	// archive_cleanup_command removes them (local pairs): the WAL its copies need from their
	// restart_lsn is gone, while their wal_status, which counts only what the server removed,
	// still says reserved
	FaultStandbyWALCleaned Fault = "standby_wal_cleaned"
	// one WAL file removed from the middle of the standby's pg_wal, after the oldest restart_lsn
	// of its logical slots and before its replay position (a careless rm, a disk error; local
	// pairs): the oldest file stays, and decoding from the copies stops at the hole
	FaultStandbyWALHole Fault = "standby_wal_hole"
	// one WAL file of the standby's pg_wal overwritten with zeros (a file damaged on disk; local
	// pairs), the first after the restart_lsn of the step's slot on the primary and before the
	// standby's replay position: the standby replayed it already and reads it no more; decoding
	// from a restart_lsn before it stops there, and a copy whose WAL slotsync read before and
	// never reads again hides it (the gate reads a copy's WAL, it does not scan it: written
	// plans keep every consumer whose copy stands before it reading, or its copy made after it)
	FaultStandbyWALDamaged Fault = "standby_wal_damaged"
	// the older slot FaultSlotBehind copies from advanced on the primary to its current position
	// (pg_replication_slot_advance: its backlog skipped; a transaction open keeps its
	// restart_lsn back), then the slot dropped and copied again from it, as FaultSlotBehind: its
	// consumer is owed only what commits after the advance
	FaultSlotBehindSkipped Fault = "slot_recreated_behind_skipped"
	// FaultSlotBehindSkipped with the other plugin (pg_copy_logical_replication_slot's plugin
	// argument), its consumer speaking that one: the copy is made again for its identity,
	// whatever its positions say
	FaultSlotBehindOtherPlugin Fault = "slot_recreated_behind_other_plugin"
	// FaultSlotCopiedAside replaces the older copy FaultSlotBehind copies back from by a copy of
	// the slot as it is now: with a transaction open across (FaultLongTransaction) the two share
	// restart_lsn and catalog_xmin, and a slot copied back later differs from the one slotsync
	// judged by its confirmed_flush alone.
	FaultSlotCopiedAside Fault = "slot_copied_aside"
	// the older slot FaultSlotBehind copies from advanced on the primary to its current position
	// (pg_replication_slot_advance; a transaction open keeps its restart_lsn back), the slot
	// itself left as it is: the next FaultSlotBehind of that slot copies it back from there,
	// behind its copy by only what was written and synced in between (rule 4 alone decides), its
	// consumer owed only what commits after the advance
	FaultOlderAdvanced Fault = "older_slot_advanced"
)

// faultsOutside are drawn for every run; FaultFailpoint only with a build that has failpoints.
var faultsOutside = []Fault{FaultSidecarKill, FaultPrimaryRoute, FaultWALReceiver, FaultStandbyRestart,
	FaultConsumerReconnect, FaultSlotRecreated, FaultSlotBehind, FaultTwoPhase, FaultLongTransaction, FaultCatalogVacuum,
	FaultPrimaryRestart, FaultSwitchover, FaultSidecarPause, FaultStandbyKill, FaultCopyDropped, FaultSenderStalled, FaultCascade}

// ChaosConf are the settings the chaos drill's pairs need for every fault: prepared transactions
// (without them FaultTwoPhase prepares nothing).
var ChaosConf = []string{"max_prepared_transactions = 10"}

// FailpointSteps are the steps a failpoint can crash slotsync at (internal/failpoint).
var FailpointSteps = []string{"engine.intents-written", "engine.actions-done", "engine.gate-record", "journal.save",
	"sql.before-create", "sql.after-create", "sql.before-advance", "sql.after-advance", "sql.before-drop",
	"sql.after-drop", "sql.replace-dropped", "watch.after-advance", "statefile.standby-stopped",
	"statefile.copies-installed", "statefile.wal-installed", "statefile.before-start", "hold.taken", "hold.release"}

// WrittenFailpoints are failpoints only written plans arm (never drawn, so the draw stays as it
// was): a pass that makes a copy again, or an exact copy, between its record and its actions; a
// state-file copy between the read of its state file and of its decoding snapshot.
var WrittenFailpoints = []string{"journal.remake-intended", "journal.exact-intended", "statefile.state-read"}

// Step is one fault at a moment of the live phase.
type Step struct {
	At    time.Duration `yaml:"at"` // from the start of the live phase
	Fault Fault         `yaml:"fault"`
	Slot  string        `yaml:"slot"` // the slot or consumer it concerns, if any
	For   time.Duration `yaml:"for"`  // how long it lasts (a blackhole, a long transaction)
	// Away: the slot's consumer stays away from this fault to the promotion (a consumer down
	// for maintenance, or one that runs nightly).
	Away bool `json:"away,omitempty" yaml:"away"`
	// Second: the fault acts on the second standby (Plan.SecondStandby) instead of the standby:
	// its copy dropped (FaultCopyDropped), the primary's address moved to it (FaultAddressMoved).
	Second bool `json:"second,omitempty" yaml:"second"`
}

// DrawVersion names how DrawPlan draws a plan from a seed: a seed replays the same plan only
// under the same version (a plan recorded in a report replays under any, from the report).
//
// 3: a third of the failovers are a hook's (Plan.Hook); slotsync paused, the standby's
// walsender stalled, the standby killed -9 and a copy dropped on the standby are drawn too; a
// slot made again may leave its consumer away.
// 4: as 3, and a third of the plans have the primary's synchronized_standby_slots list the
// standby (Plan.SyncStandbySlots, 17+).
// 5: as 4, and one failover in six that is not a hook's demotes the primary instead
// (Plan.Demote: restarted read-only, after a clean stop or a kill -9); a failpoint at a step of
// every pass is drawn at any of its first eight hits (failpointHits), across the live phase; a
// fourth of the plans add a second standby with its own sidecar (Plan.SecondStandby, 16+), from
// which the standby may be cascaded for a while (FaultCascade).
// 6: as 5 (the same seed draws the same faults), and the sidecar's settings are drawn after
// them (drawSettings): half the plans pass every second (the default --interval), a third have
// the consumers confirm every 2 to 5 s, a fourth run with --exact-copy-after 30s or 10m.
// 7: as 6 (the same seed draws the same faults and settings), and then: of the plans whose
// primary lists the standby in synchronized_standby_slots, half have slotsync list it
// (--manage-synchronized-standby-slots, rule 10) instead of the explorer; a fourth run the gate
// and the sidecar with --max-record-age 1m or 4m (the default is 2m).
// 8: as 7 (the same seed draws the same faults and settings), and then half the plans that make
// a slot again from an older one leave the older slots out of slotsync's selection
// (Plan.OlderOutside): their copies, made after writes they never decoded, stand ahead of them
// on 16 and newer, NOT READY whatever else holds, and a hook that waits for every selected slot
// never promotes on a READY; the other half keep them in, for rule 4 at the instant.
// 9: as 8 (the same seed draws the same faults and settings), and then half the plans end in the
// primary's last seconds (drawLastSeconds): faults drawn in the last 2 s of the live phase that
// last past the question, as the incident that makes an HA manager fail over does (slotsync
// stalled, its route to the primary cut, the standby cut off, its receiver cut or its walsender
// stalled, the writes stopping, a slot made again behind its copy, its consumer away): the
// windows of rules 5 and 8 then stand open at the question.
// 10: as 9 (the same seed draws the same plan), but where those last seconds stop the writes and
// cut the standby off, half have the writes stop just before the cut and resume soon after
// (resumeWrites): a record made in the pause, the standby cut off, is then outlived by writes
// the consumers get and the standby never will.
// 11: as 10 (the same seed draws the same plan), and then half the plans with those last seconds
// have them timed against slotsync's passes (timeLastSeconds): slotsync's view ends past a record
// made in a standby's cut, before the writes resume; the writes stop just after a standby's cut
// or stalled walsender; slotsync paused just before a cut, then the primary demoted; or, the
// standby not cut, slotsync's view ends past its last note's window before the primary's last
// commit, a slot made again behind its copy in between.
// 12: as 11, but a plan whose primary is demoted after the standby's cut has the standby cut off
// for 90 s, past the failover's questions, and half those plans no longer have slotsync's route
// to the primary cut in their last seconds (demoteAfterCut).
// 13: as 12 (the same seed draws the same plan), and then half the plans whose slotsync view ends
// early have the older slot advanced 100-400 ms before it ends (advanceOlderNear): the slot made
// again in the gap stands behind its copy by only what was written in between, its restart_lsn
// not gone back.
// 14: as 13 (the same seed draws the same plan), and then two in three of the plans whose writes
// stop just after the standby's cut or stalled walsender, their consumers confirming at each
// commit, have the consumers confirm only every 2-5 s from just before the cut
// (confirmLateAtCut): what they were sent past the standby is not yet confirmed at the question.
// 15: as 14 (the same seed draws the same plan), and then half the plans that advance an older
// slot have it advanced an interval and 300-600 ms before the view ends, the writes paused from
// 10-60 ms after it until past the view's end (advanceJustBehind): the copy, synced in the pause,
// stands ahead of the slot made again by a transaction or two (rule 4's boundary).
const DrawVersion = 15

// Plan is one iteration of the chaos drill, drawn from its seed (or written by hand): what
// happens and when.
type Plan struct {
	Seed int64 `yaml:"-"`
	// Draw: the DrawVersion the plan was drawn with (0: written by hand).
	Draw int `json:"draw,omitempty" yaml:"-"`
	// Name: a plan written by hand says what it is for.
	Name string        `json:"name,omitempty" yaml:"-"`
	Live time.Duration `yaml:"live"` // the live phase before the failover
	// Failpoint arms slotsync's first process to crash at this step (name@hit), or to stall there
	// (Stall).
	Failpoint string `yaml:"failpoint"`
	// Stall: slotsync's first process sleeps this long at its failpoint instead of crashing, as
	// a process stalled between two steps; written plans only.
	Stall time.Duration `json:"stall,omitempty" yaml:"stall"`
	Steps []Step        `yaml:"steps"`
	// Quiesce: the writes stop this long before the failover (0: the failover hits them in
	// flight).
	Quiesce time.Duration `yaml:"quiesce"`
	Kill    bool          `yaml:"kill"` // the primary is killed -9 (else stopped cleanly, as in a switchover)
	// Freeze: slotsync is paused (SIGSTOP) just before the gate is asked with the primary, until
	// the promotion: the promotion then happens on exactly what the answer saw, as an HA hook
	// promoting at once would (16+: a state-file restart must not be frozen half-way).
	Freeze bool `json:"freeze,omitempty" yaml:"freeze"`
	// Hook: the cutover of an HA hook that promotes on READY: the writes and the consumers go
	// on, the gate is asked again at once until it says READY for every slot (at most
	// HookBound), and the primary is killed -9 (every process of it at once, as good as frozen)
	// the moment it does; the standby is promoted. The answer is binding: what the consumers
	// confirmed after it is theirs, not the gate's (the oracle judges a consumer ahead of the
	// standby by its offset when the gate was asked).
	Hook bool `json:"hook,omitempty" yaml:"hook"`
	// SyncStandbySlots: the primary's synchronized_standby_slots lists the standby's physical
	// slot from the start (17+; not with a switchover, which would leave the old primary's list
	// naming a slot it does not have): no consumer gets what the standby has not flushed, and
	// an answer without the primary promises that too (rule 8).
	SyncStandbySlots bool `json:"synchronized_standby_slots,omitempty" yaml:"synchronized_standby_slots"`
	// Demote: the failover starts with the primary restarted read-only, in recovery and
	// following no one, as an HA manager demotes a leader that lost its lock (after a clean stop;
	// with Kill, after a kill -9: WAL the standby lacks may stay on it, and its consumers may
	// have received it). The gate's address then reaches a server in recovery (rule 8).
	Demote bool `json:"demote,omitempty" yaml:"demote"`
	// DemoteToSibling: with Demote and SecondStandby, the primary is demoted to follow the second
	// standby (its primary_conninfo through a route that reaches nothing for a second, then the
	// second standby), which is promoted meanwhile and takes writes, as an HA manager that
	// fails over to another node does; the standby still names the primary (rule 8: a server in
	// recovery whose upstream does not stream yet is not proven to follow no one); written
	// plans only.
	DemoteToSibling bool `json:"demote_to_sibling,omitempty" yaml:"demote_to_sibling"`
	// SecondStandby: a second standby of the primary, with a sidecar of its own, as in a
	// three-node cluster (16+, not with a switchover): two sidecars copying the same slots from
	// one primary, each with its own catalog holds and record, must not disturb each other.
	SecondStandby bool `json:"second_standby,omitempty" yaml:"second_standby"`
	// Sibling: with SecondStandby, the failover goes through the second standby first: cut off
	// and promoted while the primary lives on, it takes writes; the primary is killed after a
	// last segment switch its consumers confirm past, slotsync paused just before; the standby
	// is re-pointed to follow the second one onto its new timeline, and the second one is
	// killed before the gate is asked without a primary (siblingCutover); written plans only.
	Sibling bool `json:"sibling_promoted,omitempty" yaml:"sibling_promoted"`
	// ExactCopyAfter: the sidecar runs with --exact-copy-after (16+, sql and native methods),
	// restarting the standby with the drill's commands as the state-file method does. Drawn at
	// the bounds the docs recommend (30s, 10m: an iteration runs with the flag set, the bound
	// not reached); written plans set shorter ones to reach it.
	ExactCopyAfter time.Duration `json:"exact_copy_after,omitempty" yaml:"exact_copy_after"`
	// ManageStandbySlots: with SyncStandbySlots, slotsync lists the standby in the primary's
	// synchronized_standby_slots (--manage-synchronized-standby-slots, rule 10, every sidecar of
	// the plan) once it streams, instead of the explorer listing it from the start.
	ManageStandbySlots bool `json:"manage_standby_slots,omitempty" yaml:"manage_standby_slots"`
	// MaxRecordAge: the gate's and the sidecar's --max-record-age (0: the default, 2m).
	MaxRecordAge time.Duration `json:"max_record_age,omitempty" yaml:"max_record_age"`
	// Interval: the sidecar's --interval (0: the explorer's 200ms; drawn: the default, 1s).
	Interval time.Duration `json:"interval,omitempty" yaml:"interval"`
	// ConfirmEvery: every consumer confirms what it received only every this long, from the
	// start (0: at each commit), as a connector that commits its offsets every few seconds.
	ConfirmEvery time.Duration `json:"confirm_every,omitempty" yaml:"confirm_every"`
	// OlderOutside: the older slots FaultSlotBehind copies from are left out of slotsync's
	// selection (--ignore-slots), as a backup slot kept on the primary alone would be: no copy
	// of theirs holds the standby's catalog horizon back (drawn from draw 8).
	OlderOutside bool `json:"older_slots_outside,omitempty" yaml:"older_slots_outside"`
	// ServerSync: with the native method (Method), the standby's own slot sync worker copies
	// the failover slots (sync_replication_slots = on, 17+) and slotsync does not drive it (no
	// --native-drive); written plans only.
	ServerSync bool `json:"server_sync,omitempty" yaml:"server_sync"`
	// PromotionCheckpoint: the checkpoint the promotion asks for is done before the consumers
	// resume (a CHECKPOINT on the promoted standby), as it is before a consumer away for
	// minutes returns; written plans only.
	PromotionCheckpoint bool `json:"promotion_checkpoint,omitempty" yaml:"promotion_checkpoint"`
	// GateExact: the gate is asked with --exact, as before a planned switchover: a READY then
	// promises that nothing the consumers confirmed when the gate observed comes again (every
	// copy exactly at its consumer's position); written plans only.
	GateExact bool `json:"gate_exact,omitempty" yaml:"gate_exact"`
	// ForPromotion: the gate is asked with --for-promotion, the question of a promotion hook
	// (the shipped Patroni hook's): a READY while the old primary answers read-write would make
	// two primaries (rule 8c); written plans only.
	ForPromotion bool `json:"for_promotion,omitempty" yaml:"for_promotion"`
	// Method: slotsync's --method for this plan, in place of the run's (ChaosOptions.Method),
	// for a plan written for one method (the native method's own sync); written plans only.
	Method string `json:"method,omitempty" yaml:"method"`
	// KeepStale: with the native method, a switchover rejoins the old primary with its slots,
	// as after pg_rewind, and slotsync runs without --drop-stale: those same-name slots, which
	// the server's sync will not take over, stay as they were; written plans only.
	KeepStale bool `json:"keep_stale,omitempty" yaml:"keep_stale"`
	// Linger: the primary's end comes this long after the gate's answer with the primary, slotsync
	// continued at the answer (a pause a step put on it ends there) and the writes going on, as
	// an operator who asks, then switches over a moment later; not with Hook or Freeze; written
	// plans only.
	Linger time.Duration `json:"linger,omitempty" yaml:"linger"`
}

// HookBound is how long a Hook cutover asks before it promotes on the last answer anyway.
const HookBound = 15 * time.Second

// DrawPlan draws an iteration from seed: a live phase of 3 to 8 s (longer where the last seconds'
// timing needs it), one to four faults, the failover's kind, and whether the writes pause before
// it, the settings, and in half the plans the faults of the primary's last seconds, timed against
// slotsync's passes. With failpoints, slotsync's first process may also be armed to crash at a
// step.
func DrawPlan(seed int64, failpoints bool) Plan {
	p, rng, last := drawBeforeTiming(seed, failpoints)
	if !last {
		return p
	}
	switch timeLastSeconds(rng, &p) { // draw 11's, after draw 10's
	case timedViewEndsEarly:
		advanceOlderNear(rng, &p)  // draw 13's, after draw 12's
		advanceJustBehind(rng, &p) // draw 15's, after draw 14's
	case timedWritesJustAfter:
		confirmLateAtCut(rng, &p) // draw 14's, after draw 13's
	}
	return p
}

// drawBeforeTiming is the plan draw 10 drew from seed, the draw's source to go on from, and
// whether the plan ends in the primary's last seconds.
func drawBeforeTiming(seed int64, failpoints bool) (Plan, *rand.Rand, bool) {
	p, rng := drawBeforeLastSeconds(seed, failpoints)
	if rng.Intn(2) != 0 { // draw 9's, after draw 8's
		return p, rng, false
	}
	drawLastSeconds(rng, &p)
	resumeWrites(rng, &p) // draw 10's, after draw 9's
	return p, rng, true
}

// resumeWrites (draw 10): of the plans whose last seconds stop the writes and cut the standby off
// (or its receiver), half have the writes stop up to 500 ms before the cut and resume 0.5 to 2 s
// after, as clients stall while a network partitions and reconnect: a record made in that pause,
// the standby cut off, finds no consumer ahead of it yet, and the consumers then get what the
// standby never will (rule 8's record_standby_cut_off).
func resumeWrites(rng *rand.Rand, p *Plan) {
	cut := slices.IndexFunc(p.Steps, func(s Step) bool {
		return p.inLastSeconds(s) && (s.Fault == FaultStandbyCutOff || s.Fault == FaultWALReceiver)
	})
	w := slices.IndexFunc(p.Steps, func(s Step) bool { return p.inLastSeconds(s) && s.Fault == FaultWritesPaused })
	if cut < 0 || w < 0 || rng.Intn(2) != 0 {
		return
	}
	p.Steps[w].At = max(0, p.Steps[cut].At-time.Duration(rng.Intn(500))*time.Millisecond)
	p.Steps[w].For = time.Duration(500+rng.Intn(1500)) * time.Millisecond
	slices.SortStableFunc(p.Steps, func(a, b Step) int { return cmp.Compare(a.At, b.At) })
}

// drawBeforeLastSeconds is the plan draw 8 drew from seed, and the draw's source to go on from.
func drawBeforeLastSeconds(seed int64, failpoints bool) (Plan, *rand.Rand) {
	rng := rand.New(rand.NewSource(seed))
	p := Plan{Seed: seed, Draw: DrawVersion, Live: time.Duration(3000+rng.Intn(5000)) * time.Millisecond, Kill: rng.Intn(2) == 0}
	if failpoints && rng.Intn(2) == 0 {
		step := FailpointSteps[rng.Intn(len(FailpointSteps))]
		p.Failpoint = fmt.Sprintf("%s@%d", step, 1+rng.Intn(failpointHits(step)))
	}
	n := 1 + rng.Intn(4)
	for i := 0; i < n; i++ {
		s := Step{At: time.Duration(rng.Int63n(int64(p.Live))), Fault: faultsOutside[rng.Intn(len(faultsOutside))]}
		switch s.Fault {
		case FaultConsumerReconnect, FaultCopyDropped:
			s.Slot = drill.Slots[rng.Intn(len(drill.Slots))].Name
		case FaultSlotRecreated, FaultSlotBehind:
			s.Slot, s.Away = drill.Slots[rng.Intn(len(drill.Slots))].Name, rng.Intn(4) == 0
		case FaultSidecarPause, FaultSenderStalled, FaultCascade:
			s.For = time.Duration(500+rng.Intn(3500)) * time.Millisecond
		case FaultPrimaryRoute:
			s.For = time.Duration(1000+rng.Intn(5000)) * time.Millisecond
		case FaultTwoPhase:
			// test_decoding: the consumer that reads prepared transactions as text.
			s.Slot, s.For = twoPhaseSlot, time.Duration(500+rng.Intn(3000))*time.Millisecond
		case FaultLongTransaction:
			s.For = time.Duration(500+rng.Intn(3000)) * time.Millisecond
		}
		p.Steps = append(p.Steps, s)
	}
	slices.SortStableFunc(p.Steps, func(a, b Step) int { return cmp.Compare(a.At, b.At) })
	if rng.Intn(2) == 0 {
		p.Quiesce = time.Duration(200+rng.Intn(2800)) * time.Millisecond
	}
	if rng.Intn(3) == 0 {
		p.Hook, p.Kill, p.Quiesce = true, true, 0
	}
	p.SyncStandbySlots = rng.Intn(3) == 0
	p.Demote = !p.Hook && rng.Intn(6) == 0
	p.SecondStandby = rng.Intn(4) == 0
	drawSettings(rng, &p)
	return p, rng
}

// lastFor is how long a fault of the primary's last seconds lasts: past the question, a hook's
// bound and the gate's --primary-gone-after.
const lastFor = 30 * time.Second

// drawLastSeconds adds the faults of the primary's last seconds to p (draw 9): each starts within
// the last 2 s of the live phase and lasts past the question. slotsync paused and its route to
// the primary cut (each in half the plans) leave the primary's last moments unobserved; the
// standby cut off (two plans in five), its receiver cut or its walsender stalled (one in five
// each; stalled only before a kill -9, which a clean stop would wait on) leave it behind what
// the consumers get; the writes stop (one in three) so that the consumers are only a little
// ahead; a slot made again behind its copy (one in four), its consumer away, is a slot the last
// record did not judge (its older slots left out of the selection in half the plans that had no
// such slot, as draw 8 leaves them).
func drawLastSeconds(rng *rand.Rand, p *Plan) {
	at := func() time.Duration { return max(0, p.Live-time.Duration(rng.Intn(2000))*time.Millisecond) }
	var steps []Step
	if rng.Intn(2) == 0 {
		steps = append(steps, Step{At: at(), Fault: FaultSidecarPause, For: lastFor})
	}
	if rng.Intn(2) == 0 {
		steps = append(steps, Step{At: at(), Fault: FaultPrimaryRoute, For: lastFor})
	}
	switch rng.Intn(5) {
	case 0, 1:
		steps = append(steps, Step{At: at(), Fault: FaultStandbyCutOff, For: lastFor})
	case 2:
		steps = append(steps, Step{At: at(), Fault: FaultWALReceiver})
	case 3:
		if p.Kill {
			steps = append(steps, Step{At: at(), Fault: FaultSenderStalled, For: lastFor})
		}
	}
	if rng.Intn(3) == 0 {
		steps = append(steps, Step{At: at(), Fault: FaultWritesPaused, For: lastFor})
	}
	if rng.Intn(4) == 0 {
		if !p.Has(FaultSlotBehind) { // draw 8's setting, for a plan that had no such slot
			p.OlderOutside = rng.Intn(2) == 0
		}
		steps = append(steps, Step{At: at(), Fault: FaultSlotBehind, Slot: drill.Slots[rng.Intn(len(drill.Slots))].Name, Away: true})
	}
	p.Steps = append(p.Steps, steps...)
	slices.SortStableFunc(p.Steps, func(a, b Step) int { return cmp.Compare(a.At, b.At) })
}

// drawSettings draws the sidecar's and the consumers' settings, after the faults (so that a seed
// draws the faults it drew before settings were drawn): the ranges the docs recommend beside the
// short ones the tests like.
func drawSettings(rng *rand.Rand, p *Plan) {
	if rng.Intn(2) == 0 {
		p.Interval = time.Second
	}
	if rng.Intn(3) == 0 {
		p.ConfirmEvery = time.Duration(2000+rng.Intn(3000)) * time.Millisecond
	}
	if rng.Intn(4) == 0 {
		p.ExactCopyAfter = []time.Duration{30 * time.Second, 10 * time.Minute}[rng.Intn(2)]
	}
	// Draw 7's, after draw 6's.
	manage := rng.Intn(2) == 0
	p.ManageStandbySlots = p.SyncStandbySlots && manage
	if rng.Intn(4) == 0 {
		p.MaxRecordAge = []time.Duration{time.Minute, 4 * time.Minute}[rng.Intn(2)]
	}
	// Draw 8's, after draw 7's.
	if p.Has(FaultSlotBehind) {
		p.OlderOutside = rng.Intn(2) == 0
	}
}

// failpointHits is how far into the live phase a failpoint at step is drawn, in hits: a step of
// every pass (the record, the journal, an advance, the watch) up to its eighth hit, across the
// live phase; a step of a rarer action (a create, a drop, a standby restart, a hold) up to its
// third.
func failpointHits(step string) int {
	switch step {
	case "engine.intents-written", "engine.actions-done", "engine.gate-record", "journal.save",
		"sql.before-advance", "sql.after-advance", "watch.after-advance":
		return 8
	}
	return 3
}

// Has says whether the plan draws fault f.
func (p Plan) Has(f Fault) bool {
	return slices.ContainsFunc(p.Steps, func(s Step) bool { return s.Fault == f })
}

// Faults names the plan's faults, in order, for tallies.
func (p Plan) Faults() []Fault {
	var out []Fault
	if p.Failpoint != "" {
		out = append(out, FaultFailpoint)
	}
	for _, s := range p.Steps {
		out = append(out, s.Fault)
	}
	return out
}

// String is the plan in one line, enough to tell what a seed replays.
func (p Plan) String() string {
	var b strings.Builder
	if p.Name != "" {
		fmt.Fprintf(&b, "plan %s: live %s", p.Name, p.Live)
	} else {
		fmt.Fprintf(&b, "seed %d (draw %d): live %s", p.Seed, p.Draw, p.Live)
	}
	if p.Failpoint != "" && p.Stall > 0 {
		fmt.Fprintf(&b, "; slotsync stalls %s at %s", p.Stall, p.Failpoint)
	} else if p.Failpoint != "" {
		fmt.Fprintf(&b, "; slotsync crashes at %s", p.Failpoint)
	}
	for _, s := range p.Steps {
		fmt.Fprintf(&b, "; at %s %s", s.At.Round(time.Millisecond), s.Fault)
		if s.Slot != "" {
			fmt.Fprintf(&b, " %s", s.Slot)
		}
		if s.For > 0 {
			fmt.Fprintf(&b, " for %s", s.For)
		}
		if s.Away {
			b.WriteString(", its consumer away")
		}
		if s.Second {
			b.WriteString(", on the second standby")
		}
	}
	if p.Quiesce > 0 {
		fmt.Fprintf(&b, "; writes pause %s before", p.Quiesce)
	}
	if p.Freeze {
		b.WriteString("; slotsync paused from the question to the promotion")
	}
	if p.Linger > 0 {
		fmt.Fprintf(&b, "; the primary's end %s after the answer, slotsync continued", p.Linger)
	}
	switch {
	case p.SyncStandbySlots && p.ManageStandbySlots:
		b.WriteString("; slotsync lists the standby in synchronized_standby_slots")
	case p.SyncStandbySlots:
		b.WriteString("; synchronized_standby_slots lists the standby")
	}
	if p.MaxRecordAge > 0 {
		fmt.Fprintf(&b, "; records at most %s old", p.MaxRecordAge)
	}
	if p.SecondStandby {
		b.WriteString("; a second standby with its own sidecar")
	}
	if p.ExactCopyAfter > 0 {
		fmt.Fprintf(&b, "; exact copies after %s", p.ExactCopyAfter)
	}
	if p.Interval > 0 {
		fmt.Fprintf(&b, "; passes every %s", p.Interval)
	}
	if p.ConfirmEvery > 0 {
		fmt.Fprintf(&b, "; consumers confirm every %s", p.ConfirmEvery)
	}
	if p.OlderOutside {
		b.WriteString("; the older slots outside slotsync's selection")
	}
	if p.GateExact {
		b.WriteString("; the gate asked with --exact")
	}
	if p.ForPromotion {
		b.WriteString("; the gate asked with --for-promotion")
	}
	if p.Method != "" {
		fmt.Fprintf(&b, "; slotsync --method %s", p.Method)
	}
	if p.KeepStale {
		b.WriteString(" without --drop-stale")
	}
	if p.Sibling {
		b.WriteString("; failover: the second standby promoted while the primary lives on, the primary killed -9, " +
			"the standby following the second one, which is killed")
	} else if p.Hook {
		b.WriteString("; failover: kill -9 the moment the gate says READY, the writes going on")
	} else if p.DemoteToSibling {
		b.WriteString("; failover: the primary stopped and restarted read-only, following the second standby, promoted meanwhile")
	} else if p.Demote && p.Kill {
		b.WriteString("; failover: the primary killed -9 and restarted read-only")
	} else if p.Demote {
		b.WriteString("; failover: the primary stopped and restarted read-only")
	} else if p.Kill {
		b.WriteString("; failover: kill -9")
	} else {
		b.WriteString("; failover: clean stop")
	}
	return b.String()
}

// Check refuses a plan whose fields contradict each other: Linger beside Hook or Freeze, whose
// cutovers end the primary at the answer, and a Stall with no failpoint to stall at.
func (p Plan) Check() error {
	if p.Linger > 0 && (p.Hook || p.Freeze) {
		return errors.New("linger with the hook's or the freeze's cutover, which ends the primary at the answer: drop one of them")
	}
	if p.Sibling && (!p.SecondStandby || p.Hook || p.Linger > 0 || p.Demote || !p.Kill) {
		return errors.New("sibling promoted needs a second standby and a kill -9 of the primary, and is a cutover of its own: drop hook, linger and demote")
	}
	if p.DemoteToSibling && (!p.Demote || !p.SecondStandby || p.Kill || p.Hook || p.Sibling) {
		return errors.New("demote to sibling needs demote and a second standby after a clean stop: drop kill, hook and sibling")
	}
	if p.Stall > 0 && p.Failpoint == "" {
		return errors.New("stall with no failpoint to stall at: name one, or drop the stall")
	}
	return nil
}

// ReadPlans reads the plans in a file of JSON lines: each a chaos report's iteration (its
// plan_drawn) or a plan itself; or, in a .yaml file, a written plan (ReadWrittenPlan).
func ReadPlans(path string) ([]Plan, error) {
	if strings.HasSuffix(path, ".yaml") {
		p, err := ReadWrittenPlan(path)
		return []Plan{p}, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Plan
	for i, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var it struct {
			Drawn *Plan `json:"plan_drawn"`
		}
		var p Plan
		if err := json.Unmarshal([]byte(line), &it); err == nil && it.Drawn != nil {
			p = *it.Drawn
		} else if err := json.Unmarshal([]byte(line), &p); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if p.Live <= 0 {
			return nil, fmt.Errorf("line %d: no plan (no live phase)", i+1)
		}
		if err := p.Check(); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("no plan in the file")
	}
	return out, nil
}
