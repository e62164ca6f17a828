package explore

import (
	"time"

	"github.com/slotsync/slotsync/lsncheck"
)

// Mutant is one safety check of the gate switched off in a failpoint build of slotsync
// (SLOTSYNC_MUTANT=Name, internal/failpoint.Mutant): the fault explorer's mutation matrix runs
// each and must catch the gate lying (a READY while loss, or a problem) within Seeds seeds.
type Mutant struct {
	Name string
	// Majors: the majors whose copying method reaches the check (nil: every one).
	Majors []int
	// Why: what switching it off lets through.
	Why string
	// Plans: the written plans (MatrixPlans) whose failover that check decides, run first.
	Plans []string
}

// mutantPlans are the written plans that put each check's window at the cutover.
var mutantPlans = map[string][]string{
	"readiness:missing":                    {"hook-slot-made-again", "copy-dropped-then-kill"},
	"readiness:identity_mismatch":          {"hook-other-plugin"},
	"readiness:copy_being_made":            {"slot-made-again-then-switchover"},
	"without:copy_being_made":              {"copy-being-made-then-kill"},
	"readiness:copy_positions_unknown":     {"hook-copy-held-in-creation"},
	"readiness:copy_invalidated":           {"hook-copies-idle-invalidated", "hook-copies-invalidated", "hook-copies-wal-removed"},
	"readiness:copy_wal_missing":           {"hook-copy-wal-beyond-limit"},
	"readiness:copy_not_ours":              {"hook-journal-lost"},
	"readiness:copy_cannot_decode":         {"hook-standby-wal-cleaned", "hook-exact-copy-wal-damaged"},
	"readiness:copy_wal_unverified":        {"hook-copy-wal-unread-replay-held"},
	"wal-files-unchecked":                  {"hook-standby-wal-cleaned-consumers-away"},
	"wal-holes-unchecked":                  {"hook-standby-wal-hole-consumers-away"},
	"without:copy_wal_missing":             {"copy-wal-beyond-limit-then-kill", "hook-copy-wal-beyond-limit"},
	"readiness:temporary":                  {"hook-synced-copy-temporary"},
	"without:temporary":                    {"hook-synced-copy-temporary"},
	"readiness:copy_confirmed_flush_ahead": {"hook-fresh-slot-consumer-away", "hook-slot-behind"},
	"readiness:copy_restart_lsn_ahead":     {"hook-slot-behind"},
	"readiness:copy_catalog_xmin_ahead":    {"hook-slot-behind"},
	"readiness:consumer_ahead_of_standby":  {"hook-sender-stalled"},
	"readiness:copy_catalog_unprotected":   {"hook-remade-copy-hold-lost", "hook-catalog-vacuum", "hook-slot-made-again"},
	"without:missing":                      {"copy-dropped-then-kill"},
	"without:consumer_ahead_of_standby":    {"receiver-cut-then-kill"},
	"without:record_standby_cut_off":       {"receiver-cut-then-kill"},
	"copy-ahead-allowance-4k":              {"hook-fresh-slot-consumer-away", "hook-slot-behind"},
	"copy-ahead-allowance-64k":             {"hook-fresh-slot-consumer-away", "hook-slot-behind"},
	"consumer-ahead-slack-4k":              {"hook-sender-stalled-little-ahead", "hook-sender-stalled"},
	"consumer-ahead-confirmed-only":        {"hook-sender-stalled-lazy-consumers", "hook-sender-stalled"},
	"primary-gone-after-1ms":               {"hook-route-and-standby-cut", "hook-route-and-receiver-cut", "route-and-standby-cut-then-kill"},
	"record-outlived":                      {"hook-slot-behind"},
	"seen-unchecked":                       {"route-cut-slot-behind-then-stop"},
	"upstream-unchecked":                   {"hook-address-moved-early", "hook-address-moved-slot-behind"},
	"catalog-hold-off":                     {"catalog-moves-before-feedback", "hook-remade-copy-hold-lost", "hook-catalog-vacuum"},
	"horizon-remade":                       {"hook-remade-copy-hold-lost", "hook-slot-made-again"},
	"horizon-gap":                          {"hook-copies-invalidated", "copies-vacuumed-then-kill", "hook-physical-slot-gap"},
	"feedback-stopped":                     {"hook-physical-slot-gap"},
	"without:copy_catalog_unprotected":     {"copies-vacuumed-then-kill"},
	"without:copy_invalidated":             {"copies-vacuumed-then-kill"},
	"without:identity_mismatch":            {"slot-behind-then-demote"},
	"without:slot_not_observed":            {"slot-made-again-unobserved-then-demote"},
	"without:copy_confirmed_flush_ahead":   {"slot-copied-back-same-positions-then-demote"},
	"redelivery-window-late":               {"hook-copies-frozen"},
	"watch-unbound":                        {"address-flaps-to-sibling"},
	"copy-traits-in-force":                 {"hook-exact-copy-for-away-consumer", "hook-exact-copy-wal-damaged"},
	"readiness:copy_behind_consumer":       {"hook-exact-copies-behind"},
	"readiness:two_phase_at_not_synced":    {"hook-two-phase-on-while-prepared"},
	"readiness:copy_snapshot_missing":      {"hook-copy-snapshot-removed"},
	"without:copy_snapshot_missing":        {"hook-copy-snapshot-removed"},
	"readiness:not_synced":                 {"switchover-stale-copies"},
	"without:not_synced":                   {"switchover-stale-copies"},
	"readiness:two_phase_prepared_pending": {"hook-copy-made-while-prepared"},
	"without:copy_behind_consumer":         {"exact-copies-behind-then-kill"},
	"without:record_of_another_timeline":   {"sibling-promoted-then-kill"},
	"wal-timeline-unread":                  {"sibling-promoted-then-kill"},
}

// reasonMutants: every NOT READY reason of the gate with the primary (lsncheck.Readiness) and
// without it (JudgeWithoutPrimary) dropped in turn.
var reasonMutants = []lsncheck.Reason{
	lsncheck.ReasonMissing, lsncheck.ReasonIdentityMismatch, lsncheck.ReasonPrimaryUnknown, lsncheck.ReasonPrimaryInvalidated,
	lsncheck.ReasonCopyUnknown, lsncheck.ReasonCopyInvalidated, lsncheck.ReasonCopyWALMissing, lsncheck.ReasonCopyConfirmedAhead,
	lsncheck.ReasonCopyRestartAhead, lsncheck.ReasonCopyCatalogXminAhead, lsncheck.ReasonNotSynced, lsncheck.ReasonTemporary,
	lsncheck.ReasonConsumerAheadOfStandby, lsncheck.ReasonCopyBehind, lsncheck.ReasonCopyWALUnverified, lsncheck.ReasonCatalogUnprotected,
	lsncheck.ReasonCopySnapshotMissing, lsncheck.ReasonCopySnapshotUnknown, lsncheck.ReasonTwoPhaseNotSynced, lsncheck.ReasonTwoPhasePreparing,
	lsncheck.ReasonCopyCannotDecode, lsncheck.ReasonCopyNotOurs, lsncheck.ReasonOtherSynchronizer, lsncheck.ReasonCopyBeingMade,
}

// withoutMutants: the reasons JudgeWithoutPrimary gives of its own.
var withoutMutants = []lsncheck.Reason{
	lsncheck.ReasonMissing, lsncheck.ReasonIdentityMismatch, lsncheck.ReasonCopyInvalidated, lsncheck.ReasonCopyWALMissing,
	lsncheck.ReasonTemporary, lsncheck.ReasonRecordOtherTimeline, lsncheck.ReasonRecordStandbyCutOff, lsncheck.ReasonConsumerAheadOfStandby,
	lsncheck.ReasonCopyBehind, lsncheck.ReasonNotSynced, lsncheck.ReasonOtherSynchronizer, lsncheck.ReasonCatalogUnprotected,
	lsncheck.ReasonCopySnapshotMissing, lsncheck.ReasonCopyConfirmedAhead, lsncheck.ReasonNotObserved,
}

// Mutants is the mutation matrix: each reason dropped with and without the primary, and the
// checks that are not a reason.
func Mutants() []Mutant {
	var out []Mutant
	for _, r := range reasonMutants {
		out = append(out, Mutant{Name: "readiness:" + string(r), Why: "the gate with the primary never says " + string(r)})
	}
	for _, r := range withoutMutants {
		m := Mutant{Name: "without:" + string(r), Why: "the gate without the primary never says " + string(r)}
		if r == lsncheck.ReasonCopyConfirmedAhead {
			m.Majors = []int{17, 18, 19} // said of a demoted primary's slot only where its shutdown saves confirmed_flush
		}
		out = append(out, m)
	}
	out = append(
		out,
		Mutant{Name: "primary-gone-after-1ms", Why: "the gate judges without the primary as soon as it cannot be reached (--primary-gone-after 1ms)"},
		Mutant{Name: "copy-ahead-allowance-4k", Why: "rule 4 lets a copy stand up to 4 kB ahead of its primary slot's confirmed_flush"},
		Mutant{Name: "copy-ahead-allowance-64k", Why: "rule 4 lets a copy stand up to 64 kB ahead of its primary slot's confirmed_flush"},
		Mutant{Name: "consumer-ahead-slack-4k", Why: "rule 5 lets a consumer hold up to 4 kB more than the standby received"},
		Mutant{Name: "consumer-ahead-confirmed-only", Why: "rule 5 counts what the consumer confirmed, not what its walsender sent it"},
		Mutant{Name: "catalog-hold-off", Majors: []int{12, 13, 14, 15}, Why: "no catalog hold for a state-file copy"},
		Mutant{Name: "upstream-unchecked", Why: "any server in recovery taken for the primary is a primary gone at once (an earlier correctness review, finding 1)"},
		Mutant{
			Name: "upstream-pending-unchecked",
			Why:  "a server in recovery with an upstream configured and no WAL receiver streaming is the demoted primary at once (correctness review 5, finding C)",
		},
		Mutant{
			Name:   "watch-unbound",
			Majors: []int{16, 17, 18, 19},
			Why:    "the watch moves copies from whatever server the link reaches, and outlives failed passes (finding 2)",
		},
		Mutant{
			Name: "record-outlived",
			Why:  "without the primary, a record the primary outlived unobserved (slotsync stalled) is judged from (the explorer's hook-slot-behind finding)",
		},
		Mutant{
			Name: "seen-unchecked",
			Why: "without the primary, the note of slotsync's last pass is not read: the primary's last seconds unobserved " +
				"within the record's renewal (the short run's seed 730869993)",
		},
		Mutant{Name: "horizon-remade", Majors: []int{11, 12, 13, 14, 15}, Why: "a copy made again is marked from the copy it replaces (finding 3)"},
		Mutant{
			Name:   "horizon-gap",
			Majors: []int{11, 12, 13, 14, 15},
			Why: "a copy's horizon_seen_at outlives a gap in the standby's feedback (a reload of the standby, a restart of the primary): " +
				"the explorer's finding 12",
		},
		Mutant{
			Name:   "feedback-stopped",
			Majors: []int{11, 12, 13, 14, 15},
			Why: "a pass that fails on the standby's feedback stopped (its physical slot gone, hot_standby_feedback off) voids no mark " +
				"of rule 4: a mark outlives a gap with no reload",
		},
		Mutant{Name: "redelivery-window-late", Why: "the redelivery window of a READY copy begins at its consumer's position: nothing said to come again"},
		Mutant{
			Name:   "copy-traits-in-force",
			Majors: []int{16, 17, 18, 19},
			Why: "an exact copy beside the sql method's own (--exact-copy-after) is judged, planned and marked by the sql method's rules, " +
				"not the state-file ones its journal entry names",
		},
		Mutant{
			Name: "wal-files-unchecked",
			Why: "the gate takes a copy's wal_status for its WAL, though WAL removed from the standby's pg_wal behind the server's back " +
				"leaves it reserved",
		},
		Mutant{
			Name: "wal-holes-unchecked",
			Why: "the gate reads only the oldest file of the standby's pg_wal: a file missing after a copy's restart_lsn, " +
				"between files still there, leaves its wal_status reserved",
		},
		Mutant{
			Name:   "wal-timeline-unread",
			Majors: []int{16, 17, 18, 19},
			Why: "the standby's timeline without a WAL receiver is its last restartpoint's, not that of the WAL files it received: " +
				"a standby that followed a promoted sibling, which died, is taken for one still on the record's timeline",
		},
		Mutant{
			Name: "without:copy_being_made",
			Why:  "the record written ahead of an action keeps the verdicts of the copies about to be made again (rule 8's write-ahead)",
		},
	)
	for i := range out {
		out[i].Plans = mutantPlans[out[i].Name]
	}
	return out
}

// MatrixPlans are plans written for the rules the drawn plans seldom reach at the cutover: each
// puts the failover right where a rule decides (the mutation matrix runs them before drawn
// seeds; drill --plan replays them).
func MatrixPlans() []Plan {
	ms := time.Millisecond
	plans := []Plan{
		// A slot made again just before a clean stop, the writes going on: its copy is missing,
		// being made, or ahead of its consumer when the gate is asked.
		{Name: "fresh-slot-at-cutover", Live: 3000 * ms, Freeze: true, Steps: []Step{{At: 2950 * ms, Fault: FaultSlotRecreated, Slot: "drill_pgoutput"}}},
		{Name: "fresh-slot-before-cutover", Live: 3000 * ms, Freeze: true, Steps: []Step{{At: 2700 * ms, Fault: FaultSlotRecreated, Slot: "drill_test_decoding"}}},
		// The standby's WAL receiver cut just before a kill -9, the writes going on: consumers
		// hold what the standby never received.
		{Name: "receiver-cut-then-kill", Live: 4000 * ms, Kill: true, Steps: []Step{{At: 3200 * ms, Fault: FaultWALReceiver}}},
		// The primary crashes and restarts while slotsync's route to it is cut: the gate must
		// not judge without a primary that is alive again.
		{Name: "primary-restart-route-cut", Live: 5000 * ms, Kill: true, Steps: []Step{
			{At: 1500 * ms, Fault: FaultPrimaryRoute, For: 4000 * ms}, {At: 2000 * ms, Fault: FaultPrimaryRestart}}},
		// A slot made again, its consumer away, while slotsync is paused; the gate asked before
		// slotsync's next pass, then slotsync continued and the primary stopped cleanly 5 s later,
		// as an operator who asks, then switches over: slotsync's pass makes the copy again where
		// the standby's decoding is, ahead of the away consumer, before the promotion. The copy
		// the gate saw was the earlier slot's, behind the new one (rule 2, copy_being_made with
		// the primary: a long run's finding, its window held open). On 11-15 the
		// state-file copy made again is exact: nothing is lost.
		{Name: "slot-made-again-then-switchover", Live: 3000 * ms, Linger: 5000 * ms, Steps: []Step{
			{At: 1500 * ms, Fault: FaultSidecarPause, For: 30 * time.Second},
			{At: 2000 * ms, Fault: FaultSlotRecreated, Slot: "drill_pgoutput", Away: true}}},
		// A slot copied again from an older one, its consumer away, behind its copy; slotsync's
		// next pass writes its record (the copy about to be made again) and stalls before its
		// actions, as a process stalled there would; the primary killed -9 meanwhile, within
		// the note of slotsync's last pass (the kill 1.5 s after the fault made the answer
		// CANNOT TELL once each pass left a note: the primary outlived that pass). The copy
		// standing is the earlier slot's, ahead of the away consumer: without the primary, only
		// the record's write-ahead mark tells the gate it is being replaced (rule 8).
		{Name: "copy-being-made-then-kill", Live: 3200 * ms, Kill: true, Failpoint: "journal.remake-intended@1", Stall: 15 * time.Second,
			Steps: []Step{{At: 2500 * ms, Fault: FaultSlotBehind, Slot: "drill_pgoutput", Away: true}}},
		// A slot copied again from an older one just before the cutover (rule 2).
		{Name: "slot-behind-at-cutover", Live: 3500 * ms, Freeze: true, Steps: []Step{{At: 3000 * ms, Fault: FaultSlotBehind, Slot: "drill_pgoutput"}}},
		// A copy dropped on the standby by someone else, slotsync paused from just before (its
		// record still fresh), then a kill -9: the gate with and without the primary must see
		// the copy gone (rule 1; rule 8: "still present").
		{Name: "copy-dropped-then-kill", Live: 3000 * ms, Kill: true, Steps: []Step{
			{At: 2500 * ms, Fault: FaultSidecarPause, For: 3000 * ms}, {At: 3000 * ms, Fault: FaultCopyDropped, Slot: "drill_pgoutput"}}},
		// The hook's timing: the gate asked again at once until READY, the primary killed -9 the
		// moment it says so, the writes going on. Each puts a rule's window at the question:
		// slotsync paused (SIGSTOP) just before the last fault, for longer than the hook waits
		// at most, so nothing mends the copies before the gate is asked.
		// A slot dropped (slotsync drops its copy), then made again: no copy (rule 1).
		hookPlan("hook-slot-made-again", []Step{{At: 1500 * ms, Fault: FaultSlotDropped, Slot: "drill_pgoutput"}},
			Step{Fault: FaultSlotRecreated, Slot: "drill_pgoutput"}),
		// A slot made again, its consumer away: slotsync's new copy is ahead of it (rule 4).
		hookPlan("hook-fresh-slot-consumer-away", []Step{{At: 1000 * ms, Fault: FaultSlotRecreated, Slot: "drill_pgoutput", Away: true}}),
		// The same, the sidecar with --exact-copy-after 3s (16+): the own copy, ahead of the away
		// consumer, is replaced by an exact copy at one standby restart (the drill's stop and
		// start commands) long before the hook's question; READY, and the consumer returning to
		// the promoted standby gets every change (issue #34, item 1).
		{Name: "hook-exact-copy-for-away-consumer", Live: 10000 * ms, Hook: true, Kill: true, ExactCopyAfter: 3 * time.Second, Steps: []Step{
			{At: 1000 * ms, Fault: FaultSlotRecreated, Slot: "drill_pgoutput", Away: true},
			{At: 9800 * ms, Fault: FaultSidecarPause, For: HookBound + 5*time.Second}}},
		// The same at a bound users set, --exact-copy-after 30s (past the standby's first
		// feedback, whose physical slot then holds newer catalog rows than the away consumer's),
		// the writes paused 3 s before a clean stop 55 s in: a quiet window, in which the gate
		// must say READY (liveness), and the consumer returning to the promoted standby gets every
		// change.
		{Name: "exact-copy-at-30s-then-stop", Live: 55000 * ms, Quiesce: 3000 * ms, ExactCopyAfter: 30 * time.Second, Steps: []Step{
			{At: 1000 * ms, Fault: FaultSlotRecreated, Slot: "drill_pgoutput", Away: true}}},
		// The standby's max_slot_wal_keep_size set to 1 MB, a consumer away, slotsync paused,
		// then three WAL segments switched: both copies are behind them, beyond the limit, with
		// no restartpoint yet (the standby's wal_status still "reserved"); the promotion's
		// checkpoint, done before the consumers resume, invalidates them (rule 4, its WAL).
		withPromotionCheckpoint(hookPlan("hook-copy-wal-beyond-limit", []Step{
			{At: 500 * ms, Fault: FaultSlotWALLimit}, {At: 1000 * ms, Fault: FaultConsumerReconnect, Slot: "drill_pgoutput", Away: true}},
			Step{Fault: FaultWALSwitched})),
		// The same, then a restartpoint of the standby: it invalidates both copies (WAL removed)
		// while the primary's slots keep their WAL. copy_positions_unknown stands beside
		// copy_invalidated there: PostgreSQL clears the restart_lsn of a slot it invalidates for
		// removed WAL.
		hookPlan("hook-copies-wal-removed", []Step{
			{At: 500 * ms, Fault: FaultSlotWALLimit}, {At: 1000 * ms, Fault: FaultConsumerReconnect, Slot: "drill_pgoutput", Away: true}},
			Step{Fault: FaultWALSwitched}, Step{Fault: FaultRestartpoint}),
		// slotsync's journal lost while it is paused, the consumers confirming on: the copies
		// slotsync made are no longer known as its own (copy_not_ours) and stand where they
		// were; slotsync runs on without --adopt-copies.
		hookPlan("hook-journal-lost", nil, Step{Fault: FaultJournalLost}),
		// The gate asked with --exact, as before a planned switchover, while the consumers go on
		// confirming and slotsync is paused (hookPlan): every copy stands behind its consumer, so
		// a READY would let the consumer resuming from its slot receive again what it had
		// confirmed (copy_behind_consumer).
		withGateExact(hookPlan("hook-exact-copies-behind", nil)),
		// The same asked once the primary is killed: the standby's replay paused, the consumers
		// confirm past it and no copy can follow; the live phase outlasts the record's rhythm
		// (GateRecordInterval, 5 s), so slotsync's last record shows the consumers well past
		// their copies; the writes pause a second before the kill, and the standby has replayed
		// nothing since, so the gate judges from that record; replay resumes at the promotion.
		withGateExact(Plan{Name: "exact-copies-behind-then-kill", Live: 7000 * ms, Kill: true, Quiesce: 1000 * ms, Steps: []Step{
			{At: 1000 * ms, Fault: FaultReplayPaused, For: time.Minute}}}),
		// The same, asked as a kill follows at once (no hook): the gate without the primary
		// judges from a record made before the segments were switched, with no commit since.
		{Name: "copy-wal-beyond-limit-then-kill", Live: 3000 * ms, Kill: true, PromotionCheckpoint: true, Steps: []Step{
			{At: 500 * ms, Fault: FaultSlotWALLimit}, {At: 1000 * ms, Fault: FaultConsumerReconnect, Slot: "drill_pgoutput", Away: true},
			{At: 2800 * ms, Fault: FaultSidecarPause, For: HookBound + 5*time.Second}, {At: 3000 * ms, Fault: FaultWALSwitched}}},
		// A slot copied again from one made before any write, its consumer away: it will start
		// over, far behind the copy (rule 2).
		hookPlan("hook-slot-behind", nil, Step{Fault: FaultSlotBehind, Slot: "drill_pgoutput", Away: true}),
		// A slot made again with the other plugin (its consumer now speaks that one): the copy
		// of the slot before would not decode for it (rule 2's identity).
		hookPlan("hook-other-plugin", nil, Step{Fault: FaultOtherPlugin, Slot: "drill_pgoutput"}),
		// The primary's walsender to the standby stalled 2 s before the question, for 4 s: the
		// consumers get ahead of the standby (rule 5). (A walsender cut reconnects within
		// milliseconds.)
		hookPlan("hook-sender-stalled", []Step{{At: 1000 * ms, Fault: FaultSenderStalled, For: 4000 * ms}}),
		// slotsync paused, then the standby cut off from a primary that lives on (its
		// primary_conninfo emptied), then slotsync's route to it cut: the gate may judge without
		// the primary only once the standby has not streamed for --primary-gone-after (rule 8).
		{Name: "hook-route-and-standby-cut", Live: 3000 * ms, Hook: true, Kill: true, Steps: []Step{
			{At: 2000 * ms, Fault: FaultSidecarPause, For: HookBound + 5*time.Second},
			{At: 2300 * ms, Fault: FaultStandbyCutOff, For: HookBound + 10*time.Second},
			{At: 3000 * ms, Fault: FaultPrimaryRoute, For: HookBound + 10*time.Second}}},
		// The same asked once, not by a hook: the writes pause half a second before the
		// question, the primary killed after it. A hook that waits out its bound asks again 15 s
		// after the standby last streamed, where a READY judged without the primary no longer
		// promises that no consumer is ahead (the oracle's --primary-gone-after): asked at
		// once, it still does.
		{Name: "route-and-standby-cut-then-kill", Live: 3000 * ms, Quiesce: 500 * ms, Kill: true, Steps: []Step{
			{At: 2000 * ms, Fault: FaultSidecarPause, For: 30 * time.Second},
			{At: 2300 * ms, Fault: FaultStandbyCutOff, For: 30 * time.Second},
			{At: 2900 * ms, Fault: FaultPrimaryRoute, For: 30 * time.Second}}},
		// slotsync's route to a live primary cut, and the standby's receiver with it: the gate
		// must not judge without a primary that only its own route lost (rule 8).
		hookPlan("hook-route-and-receiver-cut", nil, Step{Fault: FaultPrimaryRoute, For: 4000 * ms}, Step{Fault: FaultWALReceiver}),
		// The primary's address (a VIP) moved to the candidate before the promotion, the
		// standby's walsender stalled 2 s before: the gate reaches the standby itself, in
		// recovery, while the primary lives and its consumers get ahead (rule 8, finding 1).
		hookPlan(
			"hook-address-moved-early",
			[]Step{{At: 1000 * ms, Fault: FaultSenderStalled, For: 4000 * ms}},
			Step{Fault: FaultAddressMoved, For: HookBound + 5*time.Second},
		),
		// The same address moved early, just after a slot was copied again behind its copy (its
		// consumer away): the record, fresh, says READY; only the primary knows the slot went
		// back, and it is alive.
		hookPlan("hook-address-moved-slot-behind", nil, Step{Fault: FaultSlotBehind, Slot: "drill_pgoutput", Away: true},
			Step{Fault: FaultAddressMoved, For: HookBound + 5*time.Second}),
		// Nothing but slotsync paused at the question, the consumers confirming on: the copies
		// stand behind them, and the pg_recvlogical-like consumer, resuming from its slot's
		// position, gets that stretch again: the redelivery window the answer gave (#34).
		hookPlan("hook-copies-frozen", nil),
		// Three nodes: a consumer away, the second standby's copy of its slot dropped (its
		// sidecar makes it again, ahead of the consumer), then the primary's address flapping to
		// the second standby (a VIP that flaps), until the standby's copy stands past its
		// consumer or 20 s have passed; the primary is killed at once, the address still there:
		// slotsync's passes fail there, and the gate judges without the primary from a record
		// still fresh (rule 7 binds the watch to the primary the last pass verified, finding 2).
		// The steps leave the standby's copies seconds to be READY first (the timings were set
		// while the standby still started streaming late beside a second standby, since fixed);
		// the live phase ends with the flapping.
		{Name: "address-flaps-to-sibling", Live: 35000 * ms, Kill: true, SecondStandby: true, Steps: []Step{
			{At: 6500 * ms, Fault: FaultConsumerReconnect, Slot: "drill_pgoutput", Away: true},
			{At: 7000 * ms, Fault: FaultCopyDropped, Slot: "drill_pgoutput", Second: true},
			{At: 10000 * ms, Fault: FaultAddressMoved, Slot: "drill_pgoutput", Second: true, For: 20000 * ms}}},
		// Three nodes failing over twice (Plan.Sibling): the second standby promoted while the
		// primary lives on and takes writes, the primary killed after a segment switch its
		// consumers confirmed past, the standby following the second one onto its timeline and
		// the second one killed: slotsync's record, of the first timeline, says the copies are
		// READY, and the second one's transactions lie before the consumers' offsets (rule 8).
		{Name: "sibling-promoted-then-kill", Live: 8000 * ms, Kill: true, SecondStandby: true, Sibling: true},
		// A slot made again, then at once a transaction kept open: on 16+ the new copy's
		// creation on the standby waits for it to end, its positions unknown meanwhile (rule 4).
		// (Opened before, it would hold the primary slot's own creation instead.)
		hookPlan("hook-copy-held-in-creation", []Step{{At: 1500 * ms, Fault: FaultSlotRecreated, Slot: "drill_test_decoding"},
			{At: 1500 * ms, Fault: FaultLongTransaction, For: HookBound + 10*time.Second}}),
		// A catalog vacuum on the primary with the copies frozen (rules 3 and 4).
		hookPlan("hook-catalog-vacuum", nil, Step{Fault: FaultCatalogVacuum}),
		// A slot copied again from its older slot (12+), its consumer away long enough for
		// slotsync to see the slot go back, then reading on from there while the primary writes
		// a running-xacts record every 100 ms: the primary slot's catalog_xmin moves on before
		// the standby's feedback can cover the new state-file copy, so only the copy's catalog
		// hold lets it be proven protected (rule 4); then a quiet window, in which the gate must
		// say READY (liveness).
		{Name: "catalog-moves-before-feedback", Live: 15000 * ms, Quiesce: 3000 * ms, Steps: []Step{
			{At: 1000 * ms, Fault: FaultRunningXacts, For: 8000 * ms},
			{At: 4000 * ms, Fault: FaultSlotBehind, Slot: "drill_test_decoding", Away: true},
			{At: 4300 * ms, Fault: FaultConsumerBack, Slot: "drill_test_decoding"}}},
		// The standby's copies invalidated (16+, rows_removed) while slotsync is paused: the
		// standby's hot_standby_feedback off for a while, the events table's catalog row
		// changed, and once every slot on the primary has passed the change, the catalogs
		// vacuumed; the standby, replaying it, invalidates its copies, which stood behind their
		// consumers; the feedback on again before the question (rule 4, "still valid"). On
		// 11-15, where the standby invalidates nothing, the gate as built says READY to it and
		// the consumer resuming from its copy gets nothing more (docs/RELIABILITY.md, finding 12).
		{Name: "hook-copies-invalidated", Live: 12000 * ms, Hook: true, Kill: true, Steps: []Step{
			{At: 2000 * ms, Fault: FaultSidecarPause, For: HookBound + 20*time.Second},
			{At: 2100 * ms, Fault: FaultFeedbackOff, For: 7000 * ms},
			{At: 2200 * ms, Fault: FaultCatalogVacuum},
			{At: 2300 * ms, Fault: FaultCatalogPruned, For: 5000 * ms}}},
		// The same gap in the standby's feedback, then a kill -9 within the record's renewal:
		// the gate without the primary judges from a record made before the reload (rule 4's
		// horizonGap without the primary, 11-15; on 16+ the standby invalidates the copies
		// after the record, rule 8's copy_invalidated).
		// The writes stop a quarter second after slotsync's pause, before the catalogs are
		// pruned: the primary then commits nothing past the note of slotsync's last pass (rule
		// 8), so the gate judges from the record, while the consumers stand past the copies by
		// those changes and the catalog change.
		{Name: "copies-vacuumed-then-kill", Live: 7000 * ms, Kill: true, Steps: []Step{
			{At: 2000 * ms, Fault: FaultSidecarPause, For: 30 * time.Second},
			{At: 2100 * ms, Fault: FaultFeedbackOff, For: 4000 * ms},
			{At: 2200 * ms, Fault: FaultCatalogVacuum},
			{At: 2250 * ms, Fault: FaultWritesPaused, For: 30 * time.Second},
			{At: 2300 * ms, Fault: FaultCatalogPruned, For: 3000 * ms}}},
		// The standby's copies invalidated while the primary's slots keep everything (rule 8,
		// "valid", 18+): a consumer away, slotsync paused, the standby's
		// idle_replication_slot_timeout set to 1 s by a restart and a restartpoint
		// (FaultCopiesIdle); the away consumer, back on the promoted server, finds its slot
		// invalidated. Rule 4 holds these copies too (copy_catalog_unprotected): an invalidated
		// copy leaves the standby's feedback, and an own-decoding copy trails the primary slot's
		// catalog_xmin (docs/RELIABILITY.md), so readiness:copy_invalidated is not
		// killed here.
		{Name: "hook-copies-idle-invalidated", Live: 10000 * ms, Hook: true, Kill: true, Steps: []Step{
			{At: 1000 * ms, Fault: FaultConsumerReconnect, Slot: "drill_pgoutput", Away: true},
			{At: 3000 * ms, Fault: FaultSidecarPause, For: HookBound + 20*time.Second},
			{At: 3100 * ms, Fault: FaultCopiesIdle}}},
		// The same gap in the standby's feedback with no reload: its physical slot dropped on
		// the primary while slotsync runs (its passes fail on the missing slot), the catalogs
		// vacuumed past the copies, slotsync paused, the slot made again: the standby's first
		// report gives the new slot the copies' old horizon back, so the live coverage check
		// passes; only the marks the failed passes voided stand between the gate and READY
		// (rule 4's feedbackStopped, 11-15; 16+ invalidate the copies).
		{Name: "hook-physical-slot-gap", Live: 12000 * ms, Hook: true, Kill: true, Steps: []Step{
			{At: 2000 * ms, Fault: FaultPhysicalSlotGap, For: 5000 * ms},
			{At: 2200 * ms, Fault: FaultCatalogVacuum},
			{At: 2300 * ms, Fault: FaultCatalogPruned, For: 4000 * ms},
			{At: 5000 * ms, Fault: FaultSidecarPause, For: HookBound + 20*time.Second}}},
		// A re-made copy whose catalog hold fails (rule 4; the correctness review's finding 3,
		// 12+): before slotsync starts, a row written to another table and that table's catalog
		// row changed, the drill's slots moved past the change (Plan.OlderOutside: the older
		// slots made before, kept out of slotsync's selection, still need the row as it was),
		// so the copies and the standby's horizon are past it. At 5 s the pg_recvlogical-like
		// slot copied again from its older slot, its consumer away: slotsync makes its copy
		// again, behind the standby's horizon, which PostgreSQL never moves back, and holds its
		// rows on the primary. Then slotsync paused, the hold's session ended, the older slots
		// dropped, the consumer back, reading from the old position and confirming, and once
		// every slot on the primary has passed the change, the catalogs vacuumed: nothing kept
		// the rows the copy needs. Last, hot_standby_feedback turned off and on again: the
		// primary takes the standby's next horizon, the copy's, so the standby's feedback now
		// covers the copy, after the rows are gone. The consumer resumes from the copy's
		// position on the promoted standby, and decoding the row written before the change
		// needs them (11-15: it gets nothing more).
		{Name: "hook-remade-copy-hold-lost", Live: 18000 * ms, Hook: true, Kill: true, OlderOutside: true, Steps: []Step{
			{At: 5000 * ms, Fault: FaultSlotBehind, Slot: "drill_test_decoding", Away: true},
			{At: 8000 * ms, Fault: FaultSidecarPause, For: HookBound + 15*time.Second},
			{At: 8100 * ms, Fault: FaultHoldLost},
			{At: 8200 * ms, Fault: FaultOlderSlotsDropped},
			{At: 8300 * ms, Fault: FaultConsumerBack, Slot: "drill_test_decoding"},
			{At: 8400 * ms, Fault: FaultCatalogPruned, For: 8000 * ms},
			{At: 15000 * ms, Fault: FaultFeedbackReset, For: 2000 * ms}}},
	}
	return append(append(append(append(append(plans, decodingPlans()...), walFilePlans()...), nativePlans()...), recordPlans()...), rule5Plans()...)
}

// rule5Plans put rule 5's boundaries at a hook's cutover: consumers a little ahead of the
// standby, and consumers sent more than they confirmed.
func rule5Plans() []Plan {
	const ms = time.Millisecond
	return []Plan{
		// The stall, past the hook's bound, the consumers confirming only every 30 s from its
		// start: each holds changes it was sent and has not confirmed, past the standby, its
		// offset not (rule 5 counts what was sent, not only what was confirmed).
		hookPlan("hook-sender-stalled-lazy-consumers", []Step{
			{At: 1000 * ms, Fault: FaultConsumersConfirmLate, For: 30 * time.Second},
			{At: 1000 * ms, Fault: FaultSenderStalled, For: HookBound + 10*time.Second}}),
		// The standby's walsender stalled past the hook's bound, the writes paused 150 ms into it: the
		// consumers hold a few hundred bytes the standby never gets, a little ahead for the whole
		// cutover (rule 5's boundary: a gate with a few kB of slack says READY).
		hookPlan("hook-sender-stalled-little-ahead", []Step{
			{At: 1000 * ms, Fault: FaultSenderStalled, For: HookBound + 10*time.Second},
			{At: 1150 * ms, Fault: FaultWritesPaused, For: HookBound + 10*time.Second}}),
	}
}

// walFilePlans are the plans of WAL removed from the standby's pg_wal behind the server's back.
func walFilePlans() []Plan {
	ms := time.Millisecond
	return []Plan{
		// The standby's WAL before its last restartpoint removed from pg_wal (a misaimed
		// archive_cleanup_command) while slotsync is paused, three segments switched before, the
		// consumers confirming on: the copies' WAL from their restart_lsn is gone while their
		// wal_status says reserved; slotsync's next advance of each fails to read it (rule 4:
		// copy_cannot_decode), and the promoted standby could not serve the consumers.
		{Name: "hook-standby-wal-cleaned", Live: 7000 * ms, Hook: true, Kill: true, Steps: []Step{
			{At: 1000 * ms, Fault: FaultSidecarPause, For: 2500 * ms},
			{At: 1200 * ms, Fault: FaultWALSwitched},
			{At: 1500 * ms, Fault: FaultStandbyWALCleaned},
			{At: 6800 * ms, Fault: FaultSidecarPause, For: HookBound + 5*time.Second}}},
		// The same with the consumers away: nothing reads their copies' WAL again, and only the
		// standby's oldest WAL file tells it is gone (rule 4, its WAL; a finding: READY,
		// then every change lost, before the gate looked at pg_wal).
		walGoneConsumersAway("hook-standby-wal-cleaned-consumers-away", FaultStandbyWALCleaned),
		// The same with one WAL file removed from the middle of pg_wal instead, after the
		// copies' restart_lsn, the oldest file left: only the files between tell the copies'
		// WAL is gone (rule 4, its WAL; a finding: READY, and the consumers could not resume,
		// before the gate read more than the oldest file).
		walGoneConsumersAway("hook-standby-wal-hole-consumers-away", FaultStandbyWALHole),
		// A transaction open for 10 s (every slot's restart_lsn stays before it), three segments
		// switched, and the first WAL file after the pg_recvlogical-like slot's restart_lsn
		// damaged on the standby (zeros), both consumers reading: each copy's next advance fails
		// there (copy_cannot_decode). Then that slot copied again, its consumer away, from its
		// older slot advanced first to the current position (its backlog skipped, its
		// restart_lsn kept before the damage by the open transaction): the sidecar, with
		// --exact-copy-after 5s (16+; 13-15: the state-file method's own copy), replaces its own
		// copy, ahead of the away consumer, by an exact copy whose WAL from restart_lsn crosses
		// the damaged file and was never read on the standby (rule 4, its WAL:
		// copy_wal_unverified, then copy_cannot_decode once the read fails). The consumer
		// returning to the promoted standby cannot decode past the damaged file.
		{Name: "hook-exact-copy-wal-damaged", Live: 14000 * ms, Hook: true, Kill: true, ExactCopyAfter: 5 * time.Second, Steps: []Step{
			{At: 500 * ms, Fault: FaultLongTransaction, For: 10000 * ms},
			{At: 1000 * ms, Fault: FaultWALSwitched},
			{At: 1500 * ms, Fault: FaultStandbyWALDamaged, Slot: "drill_test_decoding"},
			{At: 2500 * ms, Fault: FaultSlotBehindSkipped, Slot: "drill_test_decoding", Away: true},
			{At: 13800 * ms, Fault: FaultSidecarPause, For: HookBound + 5*time.Second}}},
		// The same damage, then the standby's restartpoint past it, the primary's walsender to
		// the standby stalled and the slot copied again while it is (its confirmed_flush beyond
		// the standby's WAL), with the other plugin (a new identity), its consumer away: the
		// state-file copy slotsync makes is loaded at the standby's restart, whose replay is
		// paused once it replayed the WAL it had, before the walsender is let go. The standby
		// receives the WAL past the copy and its feedback covers the copy's catalog rows, but no
		// pass can read the copy's WAL (a read waits for its confirmed_flush replayed): the copy
		// is NOT READY copy_wal_unverified alone (rule 4, its WAL; slotsync --method statefile
		// on every major). Its consumer, returning to the promoted
		// standby, cannot decode past the damaged file. pgoutput's consumer reads on: its copy's
		// advances fail on the file (copy_cannot_decode).
		{Name: "hook-copy-wal-unread-replay-held", Live: 16000 * ms, Hook: true, Kill: true, Method: "statefile", Steps: []Step{
			{At: 500 * ms, Fault: FaultLongTransaction, For: 12000 * ms},
			{At: 1000 * ms, Fault: FaultWALSwitched},
			{At: 1500 * ms, Fault: FaultStandbyWALDamaged, Slot: "drill_test_decoding"},
			{At: 2500 * ms, Fault: FaultRestartpoint},
			{At: 3000 * ms, Fault: FaultSenderStalled, For: 30 * time.Second},
			{At: 3200 * ms, Fault: FaultSlotBehindOtherPlugin, Slot: "drill_test_decoding", Away: true},
			{At: 3400 * ms, Fault: FaultReplayHeldAtRestart, For: time.Minute},
			{At: 15800 * ms, Fault: FaultSidecarPause, For: HookBound + 5*time.Second}}},
	}
}

// walGoneConsumersAway is a hook's plan with both consumers away, slotsync paused, three WAL
// segments switched, then gone, the standby's WAL taken from under the copies by fault.
func walGoneConsumersAway(name string, gone Fault) Plan {
	ms := time.Millisecond
	return Plan{Name: name, Live: 7000 * ms, Hook: true, Kill: true, Steps: []Step{
		{At: 500 * ms, Fault: FaultConsumerReconnect, Slot: "drill_pgoutput", Away: true},
		{At: 500 * ms, Fault: FaultConsumerReconnect, Slot: "drill_test_decoding", Away: true},
		{At: 1000 * ms, Fault: FaultSidecarPause, For: 2500 * ms},
		{At: 1200 * ms, Fault: FaultWALSwitched},
		{At: 1500 * ms, Fault: gone},
		{At: 6800 * ms, Fault: FaultSidecarPause, For: HookBound + 5*time.Second}}}
}

// recordPlans are the written plans of the gate record's bounds without the primary (rule 8).
func recordPlans() []Plan {
	ms := time.Millisecond
	return []Plan{
		// slotsync's route to the primary cut (its passes hang on a silent connection) while the
		// standby streams on; two seconds later a slot is copied again from an older one, its
		// consumer away, behind its copy; the primary stops cleanly a second and a half after,
		// the writes going on until just before: well within the record's renewal (5 s, two
		// passes) and its margin (5 s), seconds after slotsync's last pass (the short run's
		// seed 730869993, its faults kept, the crash and the pause left out).
		// slotsync paused, then a slot copied again from an older one, its consumer away, and the
		// primary demoted (stopped cleanly, started read-only) within the note of slotsync's
		// last pass: the gate judges from the record, and only the demoted primary's slot, a new
		// incarnation, tells it the copy is not the one judged (rule 8; the long run of round
		// 8's finding, seed 20261709, whose slotsync route was cut for seconds: since each pass
		// leaves a note, that answer is CANNOT TELL).
		{Name: "slot-behind-then-demote", Live: 3400 * ms, Demote: true, Steps: []Step{
			{At: 2800 * ms, Fault: FaultSidecarPause, For: 30 * time.Second},
			{At: 3000 * ms, Fault: FaultSlotBehind, Slot: "drill_pgoutput", Away: true}}},
		// A slot dropped (slotsync drops its copy and its record forgets the slot), then, slotsync
		// paused, made again, its consumer back on it, and the primary demoted within the note of
		// slotsync's last pass: neither the record nor the journal knows the slot, only the
		// demoted primary shows it (rule 8, slot_not_observed); promoted, its consumer would find
		// no slot.
		{Name: "slot-made-again-unobserved-then-demote", Live: 3400 * ms, Demote: true, Steps: []Step{
			{At: 1000 * ms, Fault: FaultSlotDropped, Slot: "drill_pgoutput"},
			{At: 2800 * ms, Fault: FaultSidecarPause, For: 30 * time.Second},
			{At: 3000 * ms, Fault: FaultSlotRecreated, Slot: "drill_pgoutput"}}},
		// A transaction open for seconds pins every slot's restart_lsn and catalog_xmin; the
		// slot is copied aside, its consumer confirms on and slotsync advances the copy; then,
		// slotsync paused, the slot is made again from that copy (its confirmed_flush alone gone
		// back, its consumer away and starting over from there) and the primary demoted: only
		// the demoted slot's confirmed_flush (17+) shows the copy ahead of it (rule 4 against
		// the demoted primary).
		{Name: "slot-copied-back-same-positions-then-demote", Live: 6400 * ms, Demote: true, Steps: []Step{
			{At: 2000 * ms, Fault: FaultLongTransaction, For: 10 * time.Second},
			{At: 2200 * ms, Fault: FaultRunningXacts, For: 1800 * ms},
			{At: 4200 * ms, Fault: FaultSlotCopiedAside, Slot: "drill_test_decoding"},
			{At: 5800 * ms, Fault: FaultSidecarPause, For: 30 * time.Second},
			{At: 6000 * ms, Fault: FaultSlotBehind, Slot: "drill_test_decoding", Away: true}}},
		{Name: "route-cut-slot-behind-then-stop", Live: 6000 * ms, Quiesce: 600 * ms, Steps: []Step{
			{At: 2500 * ms, Fault: FaultPrimaryRoute, For: 10 * time.Second},
			{At: 4500 * ms, Fault: FaultSlotBehind, Slot: "drill_pgoutput", Away: true}}},
	}
}

// nativePlans are the written plans of the native method (17+), which each names.
func nativePlans() []Plan {
	ms := time.Millisecond
	return []Plan{
		// Failover slots and the server's own sync worker (native, 17+): a slot dropped (the
		// server's sync drops its copy), then copied again from one made before any write, its
		// consumer away, slotsync running. Its catalog_xmin precedes what the standby can keep,
		// so the server makes the new copy temporary and waits for the primary slot to catch up,
		// which an away consumer never lets it do; a temporary slot is dropped at promotion
		// (rule 4).
		{Name: "hook-synced-copy-temporary", Live: 6000 * ms, Hook: true, Kill: true, ServerSync: true, Method: "native", Steps: []Step{
			{At: 1500 * ms, Fault: FaultSlotDropped, Slot: "drill_pgoutput"},
			{At: 3000 * ms, Fault: FaultSlotBehind, Slot: "drill_pgoutput", Away: true}}},
		// A switchover and back with slotsync left to keep the same-name slots a demotion
		// leaves on the old primary (no --drop-stale): the server's sync refuses to take them
		// over, so they stay where the demotion left them while the consumers move on, behind
		// them; the gate beside that node says not_synced, and the switch back waits for READY.
		// The writes pause first, so that the server persists the first copies (under writes
		// it keeps them temporary, and the first switch would wait for them).
		{Name: "switchover-stale-copies", Live: 6000 * ms, Method: "native", KeepStale: true, Steps: []Step{
			{At: 200 * ms, Fault: FaultWritesPaused, For: 4000 * ms},
			{At: 3500 * ms, Fault: FaultSwitchover}}},
	}
}

// decodingPlans are the written plans about what decoding from a copy needs beyond its positions
// (rule 4): a prepared transaction's two_phase_at, the decoding snapshot at its restart_lsn.
func decodingPlans() []Plan {
	ms := time.Millisecond
	return []Plan{
		// A two_phase copy made again while a transaction is prepared (sql method, 16+): the
		// slot's two_phase on first (a transaction prepared, then resolved); the copy dropped on
		// the standby while a long transaction A is open, so slotsync's new copy waits for A
		// (its first running-xacts record), then for B, open when A ends; a transaction P begun
		// after A ended is prepared (the consumer gets it as PREPARE) before B ends, and stays
		// prepared across the cutover. The new copy's two_phase_at comes after P's PREPARE:
		// decoded from it, the COMMIT PREPARED the new primary makes brings P again, whole
		// (rule 4, two_phase).
		{Name: "hook-copy-made-while-prepared", Live: 6500 * ms, Hook: true, Kill: true, Steps: []Step{
			{At: 300 * ms, Fault: FaultTwoPhase, Slot: twoPhaseSlot, For: 200 * ms},
			{At: 1000 * ms, Fault: FaultLongTransaction, For: 2000 * ms},
			{At: 1300 * ms, Fault: FaultCopyDropped, Slot: twoPhaseSlot},
			{At: 2500 * ms, Fault: FaultLongTransaction, For: 2500 * ms},
			{At: 3800 * ms, Fault: FaultTwoPhase, Slot: twoPhaseSlot, For: time.Minute},
			{At: 6300 * ms, Fault: FaultSidecarPause, For: HookBound + 5*time.Second}}},
		// State-file copies (13-15) and their decoding snapshots: a long transaction L1 open
		// across running-xacts records, then L2 begun after them and L1 ended, more records: the
		// slots' restart_lsn (the copies' too) stays at the last snapshot serialized before L2,
		// one that lists L1 running. The pgoutput consumer away, slotsync paused, the standby's
		// snapshots removed, L2 commits after what the copies were given. Decoding from a copy
		// with no snapshot there builds one from the records, consistent only once every
		// transaction it saw running (L2) has ended: what commits before that, past the copy's
		// confirmed_flush, is skipped (rule 4). The copy's catalog_xmin, taken by the standby's
		// fast-forward advance from the oldest running xid, then stands ahead of the primary's
		// (which L2's older base snapshot holds back), and its own order is no longer proven
		// without the snapshot: copy_catalog_xmin_ahead holds the mutant too (both off: killed).
		// On 16+ with the sql method the copies are the standby's own decoding's, advanced onto
		// snapshots it serialized: rule 4 asks for them since a fix (the gate before it said
		// READY here, with the primary and without it, and the away consumer lost the same).
		{Name: "hook-copy-snapshot-removed", Live: 7000 * ms, Hook: true, Kill: true, Steps: []Step{
			{At: 1000 * ms, Fault: FaultLongTransaction, For: 1500 * ms},
			{At: 1300 * ms, Fault: FaultRunningXacts, For: 400 * ms},
			{At: 2000 * ms, Fault: FaultLongTransaction, For: 4000 * ms},
			{At: 3000 * ms, Fault: FaultRunningXacts, For: 400 * ms},
			{At: 3700 * ms, Fault: FaultConsumerReconnect, Slot: "drill_pgoutput", Away: true},
			{At: 4000 * ms, Fault: FaultSidecarPause, For: HookBound + 5*time.Second},
			{At: 4300 * ms, Fault: FaultSnapshotsRemoved}}},
		// Failover slots on 17 (native): a transaction prepared, then its consumer turns two_phase
		// on, having confirmed past the PREPARE it was not sent (the slot's two_phase_at after
		// it: the primary sends the transaction whole at COMMIT PREPARED); the cutover comes
		// before that commit, which the new primary makes. PostgreSQL 17's sync does not carry
		// two_phase_at: decoded from the copy, the commit is taken for one whose PREPARE was
		// sent, and the transaction never reaches the consumer (rule 4, two_phase). The writes
		// pause first, so that the server persists the copies: under writes, or while a
		// transaction is prepared, it keeps a new copy temporary (its primary slot's catalog_xmin
		// behind the standby's next xid).
		{Name: "hook-two-phase-on-while-prepared", Live: 12000 * ms, Hook: true, Kill: true, Method: "native", Steps: []Step{
			{At: 200 * ms, Fault: FaultWritesPaused, For: 4000 * ms},
			{At: 3500 * ms, Fault: FaultTwoPhase, Slot: twoPhaseSlot, For: time.Minute}}},
	}
}

// hookPlan is a plan of the hook's timing (Plan.Hook): three seconds of writes with the steps
// before, slotsync paused for longer than the hook asks at most, then the last steps, the end of
// the live phase, each right after the one before.
func hookPlan(name string, before []Step, last ...Step) Plan {
	live := 3000 * time.Millisecond
	p := Plan{
		Name:  name,
		Live:  live,
		Hook:  true,
		Kill:  true,
		Steps: append(before, Step{At: live - 200*time.Millisecond, Fault: FaultSidecarPause, For: HookBound + 5*time.Second}),
	}
	for _, s := range last {
		s.At = live
		p.Steps = append(p.Steps, s)
	}
	return p
}

// withPromotionCheckpoint is p with the promotion's checkpoint done before the consumers resume.
func withPromotionCheckpoint(p Plan) Plan {
	p.PromotionCheckpoint = true
	return p
}

// withGateExact is p with the gate asked with --exact (Plan.GateExact).
func withGateExact(p Plan) Plan {
	p.GateExact = true
	return p
}
