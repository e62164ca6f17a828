package lsncheck

import (
	"fmt"
	"strings"

	"github.com/slotsync/slotsync/internal/failpoint"
)

// Reason is a machine-readable cause of a NOT READY verdict.
type Reason string

// Reasons a standby copy is not ready (docs/RULES.md rules 4 and 5). Their values are part of the
// JSON output and must not change.
const (
	ReasonMissing                Reason = "missing"                   // no copy on the standby
	ReasonIdentityMismatch       Reason = "identity_mismatch"         // copy has another plugin, database or two_phase
	ReasonPrimaryUnknown         Reason = "primary_positions_unknown" // primary slot still being created
	ReasonPrimaryInvalidated     Reason = "primary_invalidated"       // the consumer has lost its slot already
	ReasonCopyUnknown            Reason = "copy_positions_unknown"    // copy still being created
	ReasonCopyInvalidated        Reason = "copy_invalidated"
	ReasonCopyWALMissing         Reason = "copy_wal_missing" // WAL from the copy's restart_lsn is gone
	ReasonCopyConfirmedAhead     Reason = "copy_confirmed_flush_ahead"
	ReasonCopyRestartAhead       Reason = "copy_restart_lsn_ahead"
	ReasonCopyCatalogXminAhead   Reason = "copy_catalog_xmin_ahead"
	ReasonNotSynced              Reason = "not_synced" // native method: synced = false
	ReasonTemporary              Reason = "temporary"  // native method: the copy would vanish on promotion
	ReasonConsumerAheadOfStandby Reason = "consumer_ahead_of_standby"
	// ReasonCopyBehind (only when Exact is asked, for a planned switchover): the copy is behind
	// its consumer's confirmed position, so a promotion now would redeliver changes.
	ReasonCopyBehind Reason = "copy_behind_consumer"
	// State-file method (11-15): the server does not check these itself.
	ReasonCopyWALUnverified  Reason = "copy_wal_unverified"      // no read of the WAL from restart_lsn has succeeded yet
	ReasonCatalogUnprotected Reason = "copy_catalog_unprotected" // the primary does not keep the catalog rows the copy needs
	// ReasonCopySnapshotMissing: the standby has no serialized decoding snapshot at the copy's
	// restart_lsn, so decoding there would rebuild one and skip a transaction open across it.
	ReasonCopySnapshotMissing Reason = "copy_snapshot_missing"
	// ReasonCopySnapshotUnknown: the role may not look for that snapshot on the standby.
	ReasonCopySnapshotUnknown Reason = "copy_snapshot_unknown"
	// ReasonCopyBeingMade: with the primary, slotsync's plan makes the copy standing again (rule
	// 2); without it (rule 8), the copy was being made (again) when the record was written. Also without the primary: the copy was made after the record;
	// the record is of another timeline than the standby's.
	ReasonCopyBeingMade Reason = "copy_being_made"
	ReasonNotInRecord   Reason = "not_in_record"
	// ReasonNotObserved: without the primary, a demoted primary has this slot, which slotsync
	// never observed with the primary (rule 8).
	ReasonNotObserved         Reason = "slot_not_observed"
	ReasonRecordOtherTimeline Reason = "record_of_another_timeline"
	// ReasonRecordStandbyCutOff: the record was made while the standby did not stream from a
	// primary that answered (rule 8).
	ReasonRecordStandbyCutOff Reason = "record_standby_cut_off"
	// two_phase: on 17 the server's sync of a failover slot does not carry two_phase_at; a copy
	// of the standby's own decoding has its own two_phase_at, so transactions prepared before it
	// and still pending, or not yet confirmed past, are sent again as PREPARE after a promotion.
	ReasonTwoPhaseNotSynced Reason = "two_phase_at_not_synced"
	ReasonTwoPhasePreparing Reason = "two_phase_prepared_pending"
	// ReasonCopyCannotDecode: the copy's last advance failed with a decoding error.
	ReasonCopyCannotDecode Reason = "copy_cannot_decode"
	// ReasonCopyNotOurs: slotsync did not make this copy (its journal has no entry for it: lost,
	// corrupt, or another tool's slot), so it neither advances nor vouches for it.
	ReasonCopyNotOurs Reason = "copy_not_ours"
	// ReasonOtherSynchronizer: another tool loaded on the standby (pg_failover_slots) syncs the
	// slots: slotsync neither writes nor vouches for copies that tool may change under it.
	ReasonOtherSynchronizer Reason = "other_synchronizer"
)

// ReadinessInput is everything the readiness verdict looks at for one slot.
type ReadinessInput struct {
	Primary            Seen
	PrimaryInvalidated bool

	CopyExists       bool
	Copy             Seen
	CopyInvalidated  bool
	CopyWALAvailable bool // the standby still has the WAL from the copy's restart_lsn, in its pg_wal
	CopyTemporary    bool
	CopySynced       bool
	RequireSynced    bool // native method (PG17+): only a server-synced copy counts
	// CopySyncSkip (19+): why the server's slot sync last skipped the copy, in words ("" if it
	// did not): said beside not_synced and copy_temporary, so the operator sees the server's cause.
	CopySyncSkip string
	// CopyNotOurs: the copy is not one slotsync made (no journal entry) nor the server's own.
	CopyNotOurs bool
	// OtherSynchronizer says who else writes this slot's copy: another tool loaded on the
	// standby that syncs slots, or changes someone made under slotsync ("" if none).
	OtherSynchronizer string
	// CopyRemade says why slotsync's plan makes the copy again ("" if it does not, or has done
	// so): the copy standing is replaced at its next pass (the earlier slot's copy of a slot made
	// again on the primary, a copy whose WAL is gone, one beyond a fork), and where the new copy
	// lands is known only once it is made (rule 2).
	CopyRemade string
	// CopyAdvancedHere: a state-file copy the standby's own decoding has advanced since it was
	// installed (its restart_lsn and catalog_xmin are then the standby's decoding's).
	CopyAdvancedHere bool

	// RequireHorizon (state-file method): the primary must keep, through the standby's physical
	// slot, the catalog rows the copy needs: StandbyHorizon (the physical slot's oldest xmin or
	// catalog_xmin) set and not newer than the copy's catalog_xmin. WALVerified: a read of the
	// WAL from the copy's restart_lsn has succeeded on the standby.
	RequireHorizon bool
	StandbyHorizon XID
	WALVerified    bool
	// InvalidatesOnConflict (16+): the standby invalidates a logical slot whose catalog rows it
	// replays the removal of (rows_removed), so a state-file copy whose catalog_xmin the primary
	// slot itself holds on the primary needs no feedback: the rows stay while the primary slot
	// holds them, and a copy that loses them after its consumer moves on is invalidated, not
	// silently broken (PrimarySlotKeeps; docs/RULES.md rule 4).
	InvalidatesOnConflict bool
	// RequireSnapshot (rule 4): the standby must decode consistently from the copy's restart_lsn
	// (state-file copies; copies of the standby's own decoding that slotsync made).
	// CopySnapshot: it has the serialized snapshot there, or decoding from there rebuilds the
	// same one from scratch (a state-file copy where the primary had none either; an own copy
	// still at the restart_lsn it was made at). CopySnapshotUnknown: the role may not look.
	RequireSnapshot     bool
	CopySnapshot        bool
	CopySnapshotUnknown bool

	// OwnDecoding: the copy was made by the standby's own decoding (sql; native's own copies).
	// It is consistent from its own consistent point C_c, which is behind its confirmed_flush:
	// with confirmed_flush ≤ the consumer's, every transaction committing after the consumer's
	// position started after the copy's decoder reached FULL, so it is decoded whole; the order
	// of the copy's restart_lsn against the primary's says nothing (docs/RULES.md rule 4). What
	// it needs is its catalog rows kept: the primary slot keeps them while its catalog_xmin is
	// not newer than the copy's; otherwise the standby's physical slot must have been seen
	// holding them (its horizon not newer than the copy's catalog_xmin) at a primary LSN,
	// HorizonSeenAt, that StandbyReplay has since passed, the copy still valid. Without it
	// (state-file copies), the copy carries the primary's positions and must not be ahead of them,
	// and RequireHorizon asks HorizonSeenAt too: the first observation where the standby's
	// horizon covered the copy while the primary slot or the copy's catalog hold still kept its
	// rows (0: never seen, and then the rows may be gone).
	OwnDecoding   bool
	HorizonSeenAt LSN
	StandbyReplay LSN

	// Exact: the copy must stand exactly at the consumer's confirmed position (no redelivery),
	// as a planned switchover with writes stopped can require.
	Exact bool

	// PrimarySent is how far the walsender streaming the primary slot has read (sent_lsn, 0 when
	// unknown): the consumer may hold changes up to the larger of it and confirmed_flush (rule 5).
	PrimarySent LSN

	// TwoPhaseAtUnsynced: a failover slot with two_phase on 17, whose server sync lacks
	// two_phase_at. TwoPhaseSettled (two_phase copies of the standby's own decoding): the
	// transactions prepared on the primary when the copy was made are all resolved, and the
	// consumer has confirmed past where that was first seen; TwoPhasePending says they are not.
	TwoPhaseAtUnsynced bool
	TwoPhasePending    bool

	// DecodeError: the copy's last advance failed with a decoding error ("" when it did not).
	DecodeError string

	// StandbyWALEnd is the newest WAL the standby holds (the larger of its flush and replay
	// positions): what a promotion right now would keep.
	StandbyWALEnd LSN
}

// Verdict says whether a standby copy can be used after a promotion without losing anything,
// and why not.
type Verdict struct {
	Ready   bool     `json:"ready"`
	Reasons []Reason `json:"reasons,omitempty"`
	Detail  string   `json:"detail"`
	// SyncLagBytes: primary confirmed_flush minus the copy's (how far the copy trails).
	SyncLagBytes int64 `json:"sync_lag_bytes"`
	// CopyAheadBytes: how far the copy's confirmed_flush is ahead of the primary's (0 if not).
	CopyAheadBytes int64 `json:"copy_ahead_bytes"`
	// ConsumerAheadBytes: how far the consumer's confirmed_flush is beyond the standby's WAL (0 if not).
	ConsumerAheadBytes int64 `json:"consumer_ahead_bytes"`
}

// Readiness judges one slot: READY only when using the standby copy after a promotion now
// loses nothing (docs/RULES.md rules 4 and 5).
func Readiness(in ReadinessInput) Verdict {
	var v Verdict
	var details []string
	add := func(r Reason, format string, args ...any) {
		if failpoint.Mutant("readiness:" + string(r)) {
			return // a mutant of the fault explorer's matrix: this reason switched off (test builds only)
		}
		v.Reasons = append(v.Reasons, r)
		details = append(details, fmt.Sprintf(format, args...))
	}

	p := in.Primary
	if in.PrimaryInvalidated {
		add(ReasonPrimaryInvalidated, "the primary slot is invalidated: its consumer must resnapshot whatever happens")
	} else if !p.Known() {
		add(ReasonPrimaryUnknown, "the primary slot has no positions yet (still being created)")
	}
	v.ConsumerAheadBytes = consumerAhead(in, add)
	if in.OtherSynchronizer != "" {
		add(ReasonOtherSynchronizer, "%s: slotsync leaves this slot alone and does not vouch for its copy (use one tool: docs/CLI.md, "+
			"\"One synchronizer per slot\")", in.OtherSynchronizer)
	}

	if !in.CopyExists {
		add(ReasonMissing, "no copy on the standby")
		return finish(v, details)
	}
	c := in.Copy
	copyReasons(in, add)
	if in.CopyInvalidated {
		add(ReasonCopyInvalidated, "the copy is invalidated")
	} else if !in.CopyWALAvailable {
		add(ReasonCopyWALMissing, "the standby no longer has, or will not keep past its next checkpoint (wal_status lost or unreserved, a WAL file gone from its "+
			"pg_wal, or beyond the standby's max_slot_wal_keep_size, which a standby's wal_status shows only once promoted), the WAL from the copy's "+
			"restart_lsn %s", c.RestartLSN)
	}
	twoPhaseReasons(in, add)
	if in.DecodeError != "" {
		add(ReasonCopyCannotDecode, "the copy's last advance failed to decode: %s", in.DecodeError)
	}
	if !c.Known() {
		add(ReasonCopyUnknown, "the copy has no positions yet")
		return finish(v, details)
	}
	if p.ConfirmedFlush != 0 {
		v.SyncLagBytes = Bytes(p.ConfirmedFlush, c.ConfirmedFlush)
		if c.ConfirmedFlush > p.ConfirmedFlush+LSN(mutantAllowance("copy-ahead-allowance")) {
			v.CopyAheadBytes = -v.SyncLagBytes
			add(ReasonCopyConfirmedAhead, "the copy's confirmed_flush %s is %d bytes ahead of the consumer's %s: changes in between would be skipped",
				c.ConfirmedFlush, v.CopyAheadBytes, p.ConfirmedFlush)
		}
		if in.Exact && c.ConfirmedFlush < p.ConfirmedFlush {
			add(ReasonCopyBehind, "exact: the copy's confirmed_flush %s is %d bytes behind the consumer's %s: a promotion now would deliver those again",
				c.ConfirmedFlush, v.SyncLagBytes, p.ConfirmedFlush)
		}
	}
	if in.OwnDecoding && !catalogProtected(in) {
		add(
			ReasonCatalogUnprotected,
			"the copy's catalog_xmin %d is older than the primary slot's %d, and the standby's physical slot has not yet been seen holding it (horizon %d) at a "+
				"position the standby has replayed",
			c.CatalogXmin,
			p.CatalogXmin,
			in.StandbyHorizon,
		)
	}
	// A state-file copy carries the primary's restart_lsn and catalog_xmin when installed; once
	// the standby's own decoding has advanced it (CopyAdvancedHere), they move by the same rules
	// as the primary slot's would, from the same WAL, and the snapshot at the new restart_lsn is
	// the standby's, checked below (RequireSnapshot): ahead of the primary's is then what an
	// own-decoding copy is, no risk (docs/RULES.md rule 4; an earlier correctness review).
	ownOrder := in.OwnDecoding || in.CopyAdvancedHere && in.RequireSnapshot && in.CopySnapshot
	if p.RestartLSN != 0 && c.RestartLSN > p.RestartLSN && !ownOrder {
		add(ReasonCopyRestartAhead, "the copy's restart_lsn %s is %d bytes ahead of the primary's %s",
			c.RestartLSN, Bytes(c.RestartLSN, p.RestartLSN), p.RestartLSN)
	}
	stateFileReasons(in, add)
	if p.CatalogXmin != 0 && XIDPrecedes(p.CatalogXmin, c.CatalogXmin) && !ownOrder {
		add(ReasonCopyCatalogXminAhead, "the copy's catalog_xmin %d is %s newer than the primary's %d",
			c.CatalogXmin, plural(XIDDistance(c.CatalogXmin, p.CatalogXmin), "transaction"), p.CatalogXmin)
	}
	return finish(v, details)
}

// stateFileReasons are rule 4's reasons of a state-file copy: its WAL read once on the standby,
// its catalog rows kept until the standby's feedback covered them, its decoding snapshot there.
func stateFileReasons(in ReadinessInput, add func(Reason, string, ...any)) {
	c := in.Copy
	if in.RequireHorizon {
		if !in.WALVerified && in.CopyWALAvailable && !in.CopyInvalidated {
			add(ReasonCopyWALUnverified, "the WAL from the copy's restart_lsn %s has not been read on the standby yet", c.RestartLSN)
		}
		if !in.InvalidatesOnConflict || !PrimarySlotKeeps(c.CatalogXmin, in.Primary.CatalogXmin) {
			feedbackReasons(in, add)
		}
	}
	if in.RequireSnapshot && !in.CopySnapshot {
		if in.CopySnapshotUnknown {
			add(
				ReasonCopySnapshotUnknown,
				"cannot tell whether the standby has the decoding snapshot at the copy's restart_lsn %s (GRANT pg_monitor, on 15+, or EXECUTE ON FUNCTION "+
					"pg_stat_file(text, boolean) TO the slotsync role, on the primary)",
				c.RestartLSN,
			)
		} else {
			add(ReasonCopySnapshotMissing, "the standby has no decoding snapshot at the copy's restart_lsn %s: decoding there would rebuild one and could skip a "+
				"transaction open across it", c.RestartLSN)
		}
	}
}

// feedbackReasons are a state-file copy's catalog reasons where only the standby's feedback
// can keep its rows: the physical slot's horizon must cover the copy's catalog_xmin, and have
// been seen doing so while the rows were still kept.
func feedbackReasons(in ReadinessInput, add func(Reason, string, ...any)) {
	c := in.Copy
	switch {
	case in.StandbyHorizon == 0:
		add(
			ReasonCatalogUnprotected,
			"the standby's physical slot keeps no catalog rows on the primary, not those from the copy's catalog_xmin %d (is hot_standby_feedback on and the standby "+
				"streaming through its slot?)",
			c.CatalogXmin,
		)
	case XIDPrecedes(c.CatalogXmin, in.StandbyHorizon):
		// PostgreSQL moves a physical slot's catalog_xmin only forward (or from none:
		// walsender.c, PhysicalReplicationSlotNewXmin): feedback older than it is ignored.
		add(
			ReasonCatalogUnprotected,
			"the standby's physical slot keeps catalog rows from xid %d, newer than the copy's catalog_xmin %d, and the primary never moves it back: "+
				"the copy is covered only once its consumer moves it past xid %d (its catalog hold keeps the rows until then, for --catalog-hold-timeout; an idle "+
				"consumer's copy is made again after it)",
			in.StandbyHorizon,
			c.CatalogXmin,
			in.StandbyHorizon,
		)
	case in.HorizonSeenAt == 0:
		add(
			ReasonCatalogUnprotected,
			"the standby's feedback covers the copy's catalog_xmin %d, but was never seen doing so while the primary slot or the copy's catalog hold still kept "+
				"those rows, or not since a gap in that feedback (a reload of the standby, a restart of the primary): a VACUUM may have removed them (the copy "+
				"is made again)",
			c.CatalogXmin,
		)
	}
}

// PrimarySlotKeeps says whether the primary slot itself keeps on the primary the catalog rows a
// copy needs: its catalog_xmin, not newer than the copy's, holds the primary's catalog horizon
// (both known).
func PrimarySlotKeeps(copyXmin, primaryXmin XID) bool {
	return copyXmin != 0 && primaryXmin != 0 && !XIDPrecedes(copyXmin, primaryXmin)
}

// consumerAhead is rule 5: the consumer must not hold changes beyond the standby's WAL (an
// unknown WAL end cannot be checked: unsure is NOT READY). It returns by how much it does.
func consumerAhead(in ReadinessInput, add func(Reason, string, ...any)) int64 {
	if in.StandbyWALEnd == 0 {
		add(ReasonConsumerAheadOfStandby, "the standby's WAL end is unknown: cannot tell whether the consumer is beyond it")
		return 0
	}
	held := max(in.Primary.ConfirmedFlush, in.PrimarySent)
	if failpoint.Mutant("consumer-ahead-confirmed-only") {
		held = in.Primary.ConfirmedFlush
	}
	if held == 0 || held <= in.StandbyWALEnd+LSN(mutantAllowance("consumer-ahead-slack")) {
		return 0
	}
	ahead := Bytes(held, in.StandbyWALEnd)
	what := "confirmed"
	if held != in.Primary.ConfirmedFlush {
		what = "was sent changes up to"
	}
	add(ReasonConsumerAheadOfStandby, "the consumer %s %s, %d bytes beyond the standby's WAL end %s", what, held, ahead, in.StandbyWALEnd)
	return ahead
}

// catalogProtected says whether the catalog rows an own-decoding copy needs are kept on the
// primary: by the primary slot itself (its catalog_xmin not newer than the copy's), or by the
// standby's physical slot, seen holding them at HorizonSeenAt, which the standby has replayed.
func catalogProtected(in ReadinessInput) bool {
	p, c := in.Primary.CatalogXmin, in.Copy.CatalogXmin
	if p == 0 || c == 0 || !XIDPrecedes(c, p) {
		return true // unknown positions are reasons of their own; or the primary slot keeps them
	}
	return in.HorizonSeenAt != 0 && in.StandbyReplay >= in.HorizonSeenAt
}

func finish(v Verdict, details []string) Verdict {
	v.Ready = len(v.Reasons) == 0
	if v.Ready {
		v.Detail = fmt.Sprintf("ready: the copy trails the consumer by %d bytes", v.SyncLagBytes)
	} else {
		v.Detail = strings.Join(details, "; ")
	}
	return v
}

// Has reports whether the verdict carries reason r.
func (v Verdict) Has(r Reason) bool {
	for _, x := range v.Reasons {
		if x == r {
			return true
		}
	}
	return false
}

// plural is n and the noun, in the plural unless n is 1.
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// twoPhaseAtRisk says what a copy without two_phase risks when only two_phase sets it apart from
// a primary slot that has it (rule 4, two_phase): its consumer holds prepared the transactions
// it received as PREPARE since two_phase was turned on, and such a copy sends each of them again,
// whole, at its COMMIT PREPARED.
func twoPhaseAtRisk(c, p Seen) string {
	if c.Database != p.Database || c.Plugin != p.Plugin || c.TwoPhase || !p.TwoPhase {
		return ""
	}
	return ": a transaction the consumer received as PREPARE since two_phase was turned on, and still prepared, would reach it again whole at its COMMIT PREPARED"
}

// copyReasons are rule 4's reasons of a copy that is not the primary slot's, or not slotsync's
// to vouch for: not its own, another identity, being made again, not synced by the server, or
// temporary.
func copyReasons(in ReadinessInput, add func(Reason, string, ...any)) {
	c, p := in.Copy, in.Primary
	if in.CopyNotOurs {
		add(ReasonCopyNotOurs, "slotsync did not make this copy (no entry in its journal: the journal was lost or corrupt, or another tool made the slot): "+
			"slotsync neither advances nor vouches for it; run slotsync with --adopt-copies to make it again as its own, or drop it on the standby")
	}
	if c.Database != p.Database || c.Plugin != p.Plugin || c.TwoPhase != p.TwoPhase {
		add(ReasonIdentityMismatch, "the copy (database %q, plugin %q, two_phase %v) is not the primary slot (database %q, plugin %q, two_phase %v)%s",
			c.Database, c.Plugin, c.TwoPhase, p.Database, p.Plugin, p.TwoPhase, twoPhaseAtRisk(c, p))
	}
	if in.CopyRemade != "" {
		add(ReasonCopyBeingMade, "slotsync makes this copy again (%s): the copy standing is replaced at its next pass, and where the new one stands is known "+
			"once it is made", in.CopyRemade)
	}
	skip := ""
	if in.RequireSynced && in.CopySyncSkip != "" {
		skip = "; the server's slot sync skipped it: " + in.CopySyncSkip
	}
	if in.RequireSynced && !in.CopySynced {
		add(ReasonNotSynced, "the copy is not synced by the server (synced = false)%s", skip)
	}
	if in.CopyTemporary {
		add(ReasonTemporary, "the copy is temporary and would be dropped at promotion%s", skip)
	}
}

// twoPhaseReasons adds the two_phase reasons a copy may be NOT READY for.
func twoPhaseReasons(in ReadinessInput, add func(Reason, string, ...any)) {
	if in.TwoPhaseAtUnsynced {
		add(
			ReasonTwoPhaseNotSynced,
			"a failover slot with two_phase: PostgreSQL 17's slot sync does not carry two_phase_at, so prepared transactions may be sent again after a promotion (18 "+
				"syncs it)",
		)
	}
	if in.TwoPhasePending {
		add(
			ReasonTwoPhasePreparing,
			"two_phase: transactions prepared on the primary while the copy was made are not resolved and confirmed past yet; until they are, a promotion would send "+
				"them again as PREPARE",
		)
	}
}

// mutantAllowance is the slack a boundary mutant of the fault explorer's matrix gives a check
// (test builds only: name-4k or name-64k switched on), 0 otherwise.
func mutantAllowance(name string) uint64 {
	switch {
	case failpoint.Mutant(name + "-64k"):
		return 64 << 10
	case failpoint.Mutant(name + "-4k"):
		return 4 << 10
	}
	return 0
}
