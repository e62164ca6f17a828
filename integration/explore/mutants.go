package explore

import (
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

// mutantPlans are the written plans (plans/*.yaml) that put each check's window at the cutover,
// in the order the matrix runs them.
var mutantPlans = map[string][]string{
	"readiness:missing":                    {"copy-dropped-then-kill", "hook-slot-made-again"},
	"readiness:identity_mismatch":          {"hook-other-plugin"},
	"readiness:copy_being_made":            {"slot-made-again-then-switchover"},
	"without:copy_being_made":              {"copy-being-made-then-kill"},
	"readiness:copy_positions_unknown":     {"hook-copy-held-in-creation"},
	"readiness:copy_invalidated":           {"hook-copies-wal-removed", "hook-copies-invalidated", "hook-copies-idle-invalidated"},
	"readiness:copy_wal_missing":           {"hook-copy-wal-beyond-limit"},
	"readiness:copy_not_ours":              {"hook-journal-lost"},
	"readiness:copy_cannot_decode":         {"hook-standby-wal-cleaned", "hook-exact-copy-wal-damaged"},
	"readiness:copy_wal_unverified":        {"hook-copy-wal-unread-replay-held"},
	"wal-files-unchecked":                  {"hook-standby-wal-cleaned-consumers-away"},
	"wal-holes-unchecked":                  {"hook-standby-wal-hole-consumers-away"},
	"without:copy_wal_missing":             {"hook-copy-wal-beyond-limit", "copy-wal-beyond-limit-then-kill"},
	"readiness:temporary":                  {"hook-synced-copy-temporary"},
	"without:temporary":                    {"hook-synced-copy-temporary"},
	"readiness:copy_confirmed_flush_ahead": {"hook-fresh-slot-consumer-away", "hook-slot-behind"},
	"readiness:copy_restart_lsn_ahead":     {"hook-slot-behind"},
	"readiness:copy_catalog_xmin_ahead":    {"hook-slot-behind"},
	"readiness:consumer_ahead_of_standby":  {"hook-sender-stalled"},
	"readiness:copy_catalog_unprotected":   {"hook-slot-made-again", "hook-catalog-vacuum", "hook-remade-copy-hold-lost"},
	"without:missing":                      {"copy-dropped-then-kill"},
	"without:consumer_ahead_of_standby":    {"standby-cut-then-demote", "receiver-cut-then-kill"},
	"without:record_standby_cut_off":       {"standby-cut-off-recorded-then-kill", "receiver-cut-then-kill"},
	"copy-ahead-allowance-4k":              {"hook-fresh-slot-consumer-away", "hook-slot-behind"},
	"copy-ahead-allowance-64k":             {"hook-fresh-slot-consumer-away", "hook-slot-behind"},
	"consumer-ahead-slack-4k":              {"hook-sender-stalled", "hook-sender-stalled-little-ahead"},
	"consumer-ahead-confirmed-only":        {"hook-sender-stalled", "hook-sender-stalled-lazy-consumers"},
	"primary-gone-after-1ms":               {"hook-route-and-standby-cut", "route-and-standby-cut-then-kill", "hook-route-and-receiver-cut"},
	"primary-gone-after-5s":                {"route-and-standby-cut-then-kill", "hook-route-and-standby-cut"},
	"seen-margin-doubled":                  {"route-cut-slot-behind-then-stop-soon", "route-cut-slot-behind-then-stop"},
	"record-margin-doubled":                {"hook-slot-behind"},
	"record-outlived":                      {"hook-slot-behind"},
	"seen-unchecked":                       {"route-cut-slot-behind-then-stop"},
	"pass-window-unbounded":                {"hook-slot-made-again"},
	"upstream-unchecked":                   {"hook-address-moved-early", "hook-address-moved-slot-behind"},
	"catalog-hold-off":                     {"hook-catalog-vacuum", "catalog-moves-before-feedback", "hook-remade-copy-hold-lost"},
	"horizon-remade":                       {"hook-slot-made-again", "hook-remade-copy-hold-lost"},
	"horizon-gap": {"hook-copies-invalidated", "copies-vacuumed-then-kill", "hook-physical-slot-gap",
		"server-copies-vacuumed-replay-paused"},
	"feedback-stopped":                     {"hook-physical-slot-gap"},
	"without:copy_catalog_unprotected":     {"copies-vacuumed-then-kill"},
	"without:copy_invalidated":             {"copies-vacuumed-then-kill"},
	"without:identity_mismatch":            {"slot-behind-then-demote"},
	"without:slot_not_observed":            {"slot-made-again-unobserved-then-demote"},
	"without:copy_confirmed_flush_ahead":   {"slot-copied-back-same-positions-then-demote"},
	"redelivery-window-late":               {"hook-copies-frozen"},
	"watch-unbound":                        {"address-flaps-to-sibling"},
	"copy-traits-in-force":                 {"hook-exact-copy-for-away-consumer", "hook-exact-copy-wal-damaged"},
	"exact-intent-early":                   {"exact-copy-decided-then-crash"},
	"for-promotion-unchecked":              {"hook-for-promotion-primary-writable"},
	"upstream-pending-unchecked":           {"demoted-to-sibling-promoted"},
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
	out = append(out, checkMutants()...)
	for i := range out {
		out[i].Plans = mutantPlans[out[i].Name]
	}
	return out
}

// checkMutants are the mutants of checks that are not a NOT READY reason: the record's and the
// note's windows, the boundaries, the holds and marks, the upstream checks, and the reviews'
// findings re-injected.
func checkMutants() []Mutant {
	return []Mutant{
		{Name: "primary-gone-after-1ms", Why: "the gate judges without the primary as soon as it cannot be reached (--primary-gone-after 1ms)"},
		{Name: "primary-gone-after-5s", Why: "the gate judges without the primary once the standby has not streamed for 5 s (half the default)"},
		{Name: "seen-margin-doubled", Why: "rule 8a's note of the last pass allows the standby 2 s of commits past its window, twice SeenLagMargin"},
		{Name: "record-margin-doubled", Why: "rule 8a's record allows the standby 10 s of commits past its renewal, twice RecordLagMargin"},
		{Name: "copy-ahead-allowance-4k", Why: "rule 4 lets a copy stand up to 4 kB ahead of its primary slot's confirmed_flush"},
		{Name: "copy-ahead-allowance-64k", Why: "rule 4 lets a copy stand up to 64 kB ahead of its primary slot's confirmed_flush"},
		{Name: "consumer-ahead-slack-4k", Why: "rule 5 lets a consumer hold up to 4 kB more than the standby received"},
		{Name: "consumer-ahead-confirmed-only", Why: "rule 5 counts what the consumer confirmed, not what its walsender sent it"},
		{Name: "catalog-hold-off", Majors: []int{12, 13, 14, 15}, Why: "no catalog hold for a state-file copy"},
		{
			Name: "pass-window-unbounded",
			Why:  "the record's and the note's windows count a pass as long as it took, a stall after its observation included (rule 8a)",
		},
		{Name: "upstream-unchecked", Why: "any server in recovery taken for the primary is a primary gone at once (an earlier correctness review, finding 1)"},
		{
			Name: "upstream-pending-unchecked",
			Why:  "a server in recovery with an upstream configured and no WAL receiver streaming is the demoted primary at once (correctness review 5, finding C)",
		},
		{
			Name:   "watch-unbound",
			Majors: []int{16, 17, 18, 19},
			Why:    "the watch moves copies from whatever server the link reaches, and outlives failed passes (finding 2)",
		},
		{
			Name: "record-outlived",
			Why:  "without the primary, a record the primary outlived unobserved (slotsync stalled) is judged from (the explorer's hook-slot-behind finding)",
		},
		{
			Name: "seen-unchecked",
			Why: "without the primary, the note of slotsync's last pass is not read: the primary's last seconds unobserved " +
				"within the record's renewal (the short run's seed 730869993)",
		},
		{Name: "horizon-remade", Majors: []int{11, 12, 13, 14, 15}, Why: "a copy made again is marked from the copy it replaces (finding 3)"},
		{
			Name:   "horizon-gap",
			Majors: []int{11, 12, 13, 14, 15, 17, 18, 19},
			Why: "a copy's horizon_seen_at, or the mark of a copy the server syncs (17+), outlives a gap in the standby's feedback " +
				"(a reload of the standby, a restart of the primary): the explorer's finding 12",
		},
		{
			Name:   "feedback-stopped",
			Majors: []int{11, 12, 13, 14, 15},
			Why: "a pass that fails on the standby's feedback stopped (its physical slot gone, hot_standby_feedback off) voids no mark " +
				"of rule 4: a mark outlives a gap with no reload",
		},
		{Name: "redelivery-window-late", Why: "the redelivery window of a READY copy begins at its consumer's position: nothing said to come again"},
		{
			Name:   "copy-traits-in-force",
			Majors: []int{16, 17, 18, 19},
			Why: "an exact copy beside the sql method's own (--exact-copy-after) is judged, planned and marked by the sql method's rules, " +
				"not the state-file ones its journal entry names",
		},
		{
			Name: "for-promotion-unchecked",
			Why:  "the gate asked for a promotion (--for-promotion) judges as any check while the old primary answers read-write (rule 8c)",
		},
		{
			Name:   "exact-intent-early",
			Majors: []int{16, 17, 18, 19},
			Why: "an exact copy's journal entry is written when it is decided, over the own copy it replaces: an own copy whose " +
				"exact copy is decided and not made is judged by the state-file rules, without its two_phase guard",
		},
		{
			Name: "wal-files-unchecked",
			Why: "the gate takes a copy's wal_status for its WAL, though WAL removed from the standby's pg_wal behind the server's back " +
				"leaves it reserved",
		},
		{
			Name: "wal-holes-unchecked",
			Why: "the gate reads only the oldest file of the standby's pg_wal: a file missing after a copy's restart_lsn, " +
				"between files still there, leaves its wal_status reserved",
		},
		{
			Name:   "wal-timeline-unread",
			Majors: []int{16, 17, 18, 19},
			Why: "the standby's timeline without a WAL receiver is its last restartpoint's, not that of the WAL files it received: " +
				"a standby that followed a promoted sibling, which died, is taken for one still on the record's timeline",
		},
		{
			Name: "without:copy_being_made",
			Why:  "the record written ahead of an action keeps the verdicts of the copies about to be made again (rule 8's write-ahead)",
		},
	}
}
