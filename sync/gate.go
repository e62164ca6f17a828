package sync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/slotsync/slotsync/internal/failpoint"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/topology"
)

// GateRecord is the last judgement made with the primary reachable: what the gate answers
// from when the primary is gone (docs/RULES.md rule 8). The daemon keeps it in the journal.
type GateRecord struct {
	ObservedAt time.Time `json:"observed_at"`
	Method     string    `json:"method"`
	// SynchronizedStandby: the primary's synchronized_standby_slots lists this standby's
	// physical slot (17+), so no consumer can be ahead of this standby.
	SynchronizedStandby bool                `json:"synchronized_standby"`
	Slots               map[string]GateSlot `json:"slots"`
	// Timeline and StandbyWALEnd: the standby's history timeline and newest WAL when the record
	// was made. The record belongs to that era of the node: another timeline is not judged.
	Timeline      int          `json:"timeline,omitempty"`
	StandbyWALEnd lsncheck.LSN `json:"standby_wal_end,omitempty"`
	// StandbyCutOff: the standby did not stream from its primary at ObservedAt, while the
	// primary answered: what the primary took afterwards may never reach this standby.
	StandbyCutOff bool `json:"standby_cut_off,omitempty"`
	// HeldBackUntil: the latest moment the primary's synchronized_standby_slots may still list
	// this standby (rule 10): when the record was made while the standby was cut off, its entry
	// may be taken out --standby-gone-after after its physical slot lost its walsender, by any
	// node's sidecar. A slot's HeldBack is not honoured past it. Zero: no limit recorded.
	HeldBackUntil time.Time `json:"held_back_until,omitzero"`
	// Unselected names the primary's logical slots the selection left out (Report.Unselected):
	// a selection that matched none of them is no READY without the primary either.
	Unselected []string `json:"unselected,omitempty"`
	// RenewBy: the latest moment the daemon that wrote the record was to write the next one
	// (ObservedAt, GateRecordInterval and two passes). A standby that replayed commits of the
	// primary from well after it shows a primary that lived on unobserved: slots may have changed
	// then that the record does not know (rule 8). Zero in records of older versions.
	RenewBy time.Time `json:"renew_by,omitzero"`
}

// GateSlot is one gated slot as last judged with the primary.
type GateSlot struct {
	Identity lsncheck.Identity `json:"identity"`
	Ready    bool              `json:"ready"`
	Reasons  []lsncheck.Reason `json:"reasons,omitempty"`
	Detail   string            `json:"detail"`
	Primary  lsncheck.Position `json:"primary"`
	Copy     lsncheck.Position `json:"copy"`
	// ConsumerAheadBytes is what rule 5 last saw: how far the consumer was beyond the standby.
	ConsumerAheadBytes int64 `json:"consumer_ahead_bytes"`
	RequireSynced      bool  `json:"require_synced,omitempty"`
	// HeldBack: no consumer of this slot could be ahead of the standby: it is a failover slot
	// and the primary's synchronized_standby_slots lists this standby (17+), so its walsender
	// waits for the standby.
	HeldBack bool `json:"held_back,omitempty"`
	// CopyTwoPhase: the copy's two_phase when recorded (Identity is the primary slot's). Nil in
	// records of older versions, whose Identity.TwoPhase was the copy's.
	CopyTwoPhase *bool `json:"copy_two_phase,omitempty"`
}

// WithoutPrimary says that a report was judged without the primary, from what and how old.
type WithoutPrimary struct {
	// Why the primary could not be asked.
	Why string `json:"why"`
	// ObservedAt: the last observation made with the primary; AgeSeconds: how old it was.
	ObservedAt time.Time `json:"observed_at"`
	AgeSeconds float64   `json:"age_seconds"`
	// SynchronizedStandby: consumers could not get ahead of this standby (17+,
	// synchronized_standby_slots lists it).
	SynchronizedStandby bool `json:"synchronized_standby"`
	// Meaning is what the verdict does and does not promise, for people.
	Meaning string `json:"meaning"`
}

// The gate: judge gives each slot's verdict with the primary (lsncheck.Readiness, rules 4 and
// 5); JudgeWithoutPrimary gives it from the standby and the last GateRecord when the primary
// cannot be asked (rule 8).

// judge builds the per-slot report with each slot's readiness verdict.
func (e *Engine) judge(snap Observation, standbySlots map[string]topology.Slot, actions []Action, results []result) []SlotReport {
	var out []SlotReport
	for i, a := range actions {
		sr := SlotReport{Name: a.Slot, Database: a.Identity.Database, Plugin: a.Identity.Plugin, Action: a.Kind, Code: a.Code, Reason: a.Reason,
			LeftAlone: a.LeftAlone && a.Kind != KindDrop}
		if r := results[i]; r.Waiting != "" {
			sr.Reason = r.Waiting // waiting, not failing
		} else if err := r.Err; err != nil {
			sr.Error, sr.ErrorClass = err.Error(), Classify(err).String()
		}
		if ent := e.journal.Slots[a.Slot]; ent != nil {
			sr.Incarnation = ent.Incarnation
		}
		ps, onPrimary := snap.Primary.Slots[a.Slot]
		cp, hasCopy := standbySlots[a.Slot]
		if hasCopy {
			pos := cp.Position
			sr.Copy = &pos
			sr.CopyWALStatus = cp.WALStatus
			sr.CopyRetainedWALBytes = retained(snap.Standby.Info.WALEnd(), cp.RestartLSN)
		}
		if onPrimary {
			sr.PrimaryWALStatus = ps.WALStatus
			sr.PrimaryRetainedWALBytes = retained(snap.Primary.Info.WALEnd(), ps.RestartLSN)
		}
		if onPrimary && !ps.Temporary && a.Code != CodeUnselected && a.Code != CodeLeftAloneDropped {
			pos := ps.Position
			sr.Primary = &pos
			sr.Gate = true
			ent := e.journal.Slots[a.Slot]
			sr.Verdict = lsncheck.Readiness(lsncheck.ReadinessInput{
				Primary: ps.Seen(), PrimaryInvalidated: ps.Invalidated,
				CopyExists: hasCopy, Copy: cp.Seen(), CopyInvalidated: cp.Invalidated, CopyWALAvailable: cp.WALAvailable(),
				CopyTemporary: cp.Temporary, CopySynced: cp.Synced, RequireSynced: ps.Failover,
				CopyNotOurs: a.Code == CodeNotOurs && e.cfg.StateDir != "",
				// A state-file copy advanced on the standby (its WAL read from restart_lsn on).
				CopyAdvancedHere: e.traits.NeedsSnapshot && ent != nil && ent.WALVerified,
				StandbyWALEnd:    snap.Standby.Info.WALEnd(), PrimarySent: ps.SentLSN,
				RequireHorizon:  e.traits.NeedsHorizon,
				StandbyHorizon:  snap.Physical.CatalogHorizon(),
				WALVerified:     ent != nil && ent.WALVerified,
				RequireSnapshot: e.traits.NeedsSnapshot,
				CopySnapshot: cp.Snapshot == topology.SnapshotPresent ||
					(ent != nil && ent.ScratchAt != 0 && ent.ScratchAt == cp.RestartLSN),
				CopySnapshotUnknown: cp.Snapshot == topology.SnapshotUnknown,
				OwnDecoding:         e.traits.OwnDecoding,
				HorizonSeenAt:       horizonSeenAt(ent),
				StandbyReplay:       snap.Standby.Info.ReplayLSN,
				Exact:               e.cfg.Exact,
				DecodeError:         decodeError(ent),
				TwoPhaseAtUnsynced:  ps.Failover && ps.TwoPhase && snap.Primary.Info.Major() == 17,
				TwoPhasePending:     twoPhasePending(ent, ps),
			})
			sr.requireSynced, sr.copyTwoPhase, sr.primaryTwoPhase = ps.Failover, cp.TwoPhase, ps.TwoPhase
		}
		out = append(out, sr)
	}
	return out
}

// horizonSeenAt is when the entry's copy was first seen held by the standby's physical slot.
func horizonSeenAt(ent *Entry) lsncheck.LSN {
	if ent == nil {
		return 0
	}
	return ent.HorizonSeenAt
}

// horizonSeen records, for each copy of the standby's own decoding, the first observation
// where the standby's physical slot held its catalog rows (rule 4). It is pure: it returns the
// journal to keep (written with the next journal write) and whether anything changed. Copies made
// in this pass (made) are not judged on it: the pass observed the standby before they existed.
func horizonSeen(j *Journal, snap Observation, copies map[string]topology.Slot, made map[string]bool) (*Journal, bool) {
	return markHorizon(j, snap, copies, made, func(string, topology.Slot) bool { return true })
}

// horizonKept records, for each state-file copy, the first observation where the standby's
// physical slot held its catalog rows while the primary still kept them (catalogKept): rows a
// VACUUM removed before the standby's feedback covered the copy are not brought back by that
// feedback, which the primary accepts even when it moves the slot's horizon back (rule 4). The
// copies are the observation's, loaded before the physical slot and the primary's slots were
// read (observe.go lists them in that order): from then on every feedback of the standby
// carries the copy's catalog_xmin. Copies made or made again in this pass (made) are not judged
// on it: its observation is of the copy they replace, whose catalog hold proves nothing of
// theirs. It is pure: it returns the journal and whether it changed.
func horizonKept(j *Journal, snap Observation, made map[string]bool) (*Journal, bool) {
	return markHorizon(j, snap, snap.Standby.Slots, made, func(name string, cp topology.Slot) bool {
		return catalogKept(snap.Primary.Slots, snap.Standby.Info.PrimarySlotName, name, cp.CatalogXmin)
	})
}

// markHorizon sets HorizonSeenAt, at the primary's WAL position, for each journal entry whose
// copy the standby's horizon covers now, where kept also holds, but for the copies made in this
// pass (made).
func markHorizon(j *Journal, snap Observation, copies map[string]topology.Slot, made map[string]bool, kept func(string, topology.Slot) bool) (*Journal, bool) {
	horizon := snap.Physical.CatalogHorizon()
	if horizon == 0 || snap.Primary.Info.CurrentLSN == 0 {
		return j, false
	}
	var next *Journal
	for name, ent := range j.Slots {
		cp, ok := copies[name]
		if !ok || made[name] && !failpoint.Mutant("horizon-remade") || ent.HorizonSeenAt != 0 || cp.CatalogXmin == 0 || lsncheck.XIDPrecedes(cp.CatalogXmin, horizon) || !kept(name, cp) {
			continue
		}
		if next == nil {
			next = j.clone()
		}
		next.Slots[name].HorizonSeenAt = snap.Primary.Info.CurrentLSN
	}
	if next == nil {
		return j, false
	}
	return next, true
}

// catalogKept says whether the primary kept, when its slots were read, the catalog rows from
// xmin on for the copy of slot name: the primary slot's catalog_xmin (which only moves forward)
// is not newer, or the catalog hold this standby's sidecar took for it (a copy of the primary
// slot, never advanced) is not. No other slot proves it: one made or copied later may carry a
// horizon that the standby's feedback moved back after the rows were gone.
func catalogKept(primary map[string]topology.Slot, standbySlot, name string, xmin lsncheck.XID) bool {
	kept := func(s topology.Slot, ok bool) bool {
		return ok && !s.Invalidated && s.CatalogXmin != 0 && !lsncheck.XIDPrecedes(xmin, s.CatalogXmin)
	}
	ps, ok := primary[name]
	if kept(ps, ok && !ps.Temporary) {
		return true
	}
	hold, ok := primary[method.HoldName(standbySlot, name)]
	return kept(hold, ok && hold.Temporary)
}

// twoPhasePending says whether a two_phase copy of the standby's own decoding still waits for
// the transactions prepared when it was made to be resolved and confirmed past (rule 4).
func twoPhasePending(ent *Entry, ps topology.Slot) bool {
	return ent != nil && ent.TwoPhaseFrom != 0 && (ent.TwoPhaseSettledAt == 0 || ps.ConfirmedFlush < ent.TwoPhaseSettledAt)
}

// madeNow names the slots whose copy this pass makes (their observation predates the copy).
func madeNow(actions []Action) map[string]bool {
	out := map[string]bool{}
	for _, a := range actions {
		if a.Kind == KindCreate || a.Kind == KindRecreate {
			out[a.Slot] = true
		}
	}
	return out
}

// twoPhaseSeen follows, for each two_phase copy of the standby's own decoding, the primary's
// prepared transactions in its database from the first observation after the copy was made,
// until none of those is pending; it records where that was first seen (rule 4). Copies made
// in this pass wait for the next observation. It is pure.
func twoPhaseSeen(j *Journal, snap Observation, skip map[string]bool) (*Journal, bool) {
	var next *Journal
	for name, ent := range j.Slots {
		if ent.TwoPhaseFrom == 0 || ent.TwoPhaseSettledAt != 0 || skip[name] || snap.Primary.Info.CurrentLSN < ent.TwoPhaseFrom {
			continue
		}
		now := snap.Prepared[ent.Identity.Database]
		var pending []lsncheck.XID
		for _, x := range ent.TwoPhasePending {
			if slices.Contains(now, x) {
				pending = append(pending, x)
			}
		}
		if !ent.TwoPhaseSeen {
			pending = slices.Clone(now)
		}
		if next == nil {
			next = j.clone()
		}
		e := next.Slots[name]
		e.TwoPhaseSeen, e.TwoPhasePending = true, pending
		if len(pending) == 0 {
			e.TwoPhaseSettledAt = snap.Primary.Info.CurrentLSN
		}
	}
	if next == nil {
		return j, false
	}
	return next, true
}

// decodeError is the entry's last decoding error ("" for none, or no entry).
func decodeError(ent *Entry) string {
	if ent == nil {
		return ""
	}
	return ent.DecodeError
}

// newGateRecord builds the record from a pass judged with the primary.
func newGateRecord(at time.Time, method topology.Method, synced bool, standby topology.NodeInfo, slots []SlotReport) *GateRecord {
	r := &GateRecord{ObservedAt: at.UTC(), Method: string(method), SynchronizedStandby: synced, Slots: map[string]GateSlot{},
		Timeline: standby.HistoryTimeline, StandbyWALEnd: standby.WALEnd(), StandbyCutOff: standby.ReceiverStatus != "streaming"}
	for _, s := range slots {
		if !s.Gate || s.Primary == nil {
			continue
		}
		gs := GateSlot{Identity: lsncheck.Identity{Name: s.Name, Database: s.Database, Plugin: s.Plugin},
			Ready: s.Verdict.Ready, Reasons: s.Verdict.Reasons, Detail: s.Verdict.Detail, Primary: *s.Primary,
			ConsumerAheadBytes: s.Verdict.ConsumerAheadBytes, RequireSynced: s.requireSynced, HeldBack: synced && s.requireSynced}
		if s.Copy != nil {
			gs.Copy = *s.Copy
			gs.Identity.TwoPhase = s.primaryTwoPhase
			copyTwoPhase := s.copyTwoPhase
			gs.CopyTwoPhase = &copyTwoPhase
		}
		r.Slots[s.Name] = gs
	}
	return r
}

// beingMade returns a copy of the record in which each named slot is NOT READY: its copy is
// about to be made (again). It is written ahead of the action (recordIntents), so a crash
// between the action and the next record never leaves a READY for a copy that is not the one
// judged (rule 8). Nil stays nil.
func (r *GateRecord) beingMade(names []string) *GateRecord {
	if r == nil {
		return nil
	}
	c := *r
	c.Slots = make(map[string]GateSlot, len(r.Slots))
	for name, gs := range r.Slots {
		c.Slots[name] = gs
	}
	for _, name := range names {
		gs, ok := c.Slots[name]
		if !ok {
			continue // not in the record: judged NOT READY without the primary anyway
		}
		gs.Ready, gs.Reasons = false, []lsncheck.Reason{lsncheck.ReasonCopyBeingMade}
		gs.Detail = "the copy was being made again when the record was written"
		c.Slots[name] = gs
	}
	return &c
}

// sameVerdicts reports whether two records say the same thing of the same slots (positions
// and time aside): a change is written at once, the rest on the record's own rhythm.
func (r *GateRecord) sameVerdicts(o *GateRecord) bool {
	if r == nil || o == nil || len(r.Slots) != len(o.Slots) || r.SynchronizedStandby != o.SynchronizedStandby || r.Timeline != o.Timeline {
		return false
	}
	for name, a := range r.Slots {
		b, ok := o.Slots[name]
		if !ok || a.Ready != b.Ready || a.Identity != b.Identity || fmt.Sprint(a.Reasons) != fmt.Sprint(b.Reasons) || a.exact() != b.exact() {
			return false
		}
	}
	return true
}

// exact reports whether the copy stood exactly at its consumer's position: a planned
// switchover waits for that, so a change of it is written at once.
func (g GateSlot) exact() bool { return g.Copy.ConfirmedFlush >= g.Primary.ConfirmedFlush }

// JudgeWithoutPrimary judges every slot of the record from the standby alone (rule 8): a copy
// READY then is READY now if it is still there, the same slot, valid, not moved back and its
// WAL still on the standby; a copy NOT READY then stays NOT READY. It is pure.
// With exact, a copy is READY only if it stood exactly at its consumer's position then.
// demotedEnd is the end of a demoted primary's WAL (0 when the primary was not found demoted):
// its consumers may have received up to there, so the standby must hold it.
func JudgeWithoutPrimary(rec *GateRecord, standby NodeState, sel Selection, exact bool, demotedEnd lsncheck.LSN) []SlotReport {
	var out []SlotReport
	for _, name := range sortedKeys(rec.Slots) {
		gs := rec.Slots[name]
		if !sel.Matches(name, gs.Identity.Database, gs.Identity.Plugin) {
			continue
		}
		primary := gs.Primary
		sr := SlotReport{Name: name, Database: gs.Identity.Database, Plugin: gs.Identity.Plugin, Action: KindNone,
			Reason: "judged without the primary", Gate: true, Primary: &primary}
		v := lsncheck.Verdict{Ready: gs.Ready, Reasons: gs.Reasons, Detail: gs.Detail, ConsumerAheadBytes: gs.ConsumerAheadBytes}
		cp, hasCopy := standby.Slots[name]
		if hasCopy {
			pos := cp.Position
			sr.Copy = &pos
			sr.CopyWALStatus = cp.WALStatus
			sr.CopyRetainedWALBytes = retained(standby.Info.WALEnd(), cp.RestartLSN)
			if gs.Copy.ConfirmedFlush != 0 && gs.Primary.ConfirmedFlush >= cp.ConfirmedFlush {
				v.SyncLagBytes = lsncheck.Bytes(gs.Primary.ConfirmedFlush, cp.ConfirmedFlush)
			}
		}
		notReady := func(r lsncheck.Reason, detail string) {
			if failpoint.Mutant("without:" + string(r)) {
				return // a mutant of the fault explorer's matrix (test builds only)
			}
			v.Ready, v.Reasons, v.Detail = false, []lsncheck.Reason{r}, detail
		}
		switch {
		case !gs.Ready:
			v.Detail = "not ready at the last observation with the primary: " + gs.Detail
		case !hasCopy:
			notReady(lsncheck.ReasonMissing, "the copy is gone from the standby since the last observation")
		case cp.Database != gs.Identity.Database || cp.Plugin != gs.Identity.Plugin || cp.TwoPhase != gs.Identity.TwoPhase ||
			gs.CopyTwoPhase != nil && cp.TwoPhase != *gs.CopyTwoPhase:
			notReady(lsncheck.ReasonIdentityMismatch, fmt.Sprintf("the standby slot of this name (database %q, plugin %q, two_phase %v) is not the copy last judged",
				cp.Database, cp.Plugin, cp.TwoPhase))
		case cp.Invalidated:
			notReady(lsncheck.ReasonCopyInvalidated, "the copy has been invalidated since the last observation")
		case !cp.WALAvailable():
			notReady(lsncheck.ReasonCopyWALMissing, "the standby no longer has the WAL from the copy's restart_lsn")
		case cp.Temporary:
			notReady(lsncheck.ReasonTemporary, "the copy is temporary")
		case otherTimeline(rec.Timeline, standby.Info):
			notReady(lsncheck.ReasonRecordOtherTimeline, fmt.Sprintf("the record was made on timeline %d; the standby is on timeline %d now",
				rec.Timeline, standby.Info.HistoryTimeline))
		case rec.StandbyCutOff && !gs.HeldBack:
			notReady(lsncheck.ReasonRecordStandbyCutOff, "when the primary was last observed, this standby was not streaming from it: "+
				"what the primary took afterwards, which its consumers may have received, is not on this standby")
		case standby.Info.WALEnd() < demotedEnd:
			notReady(lsncheck.ReasonConsumerAheadOfStandby, fmt.Sprintf("the demoted primary has WAL up to %s; the standby up to %s only: "+
				"its consumers may have received the %d bytes in between", demotedEnd, standby.Info.WALEnd(), lsncheck.Bytes(demotedEnd, standby.Info.WALEnd())))
			v.ConsumerAheadBytes = lsncheck.Bytes(demotedEnd, standby.Info.WALEnd())
		case standby.Info.WALEnd() < gs.Primary.ConfirmedFlush:
			notReady(lsncheck.ReasonConsumerAheadOfStandby, fmt.Sprintf("the consumer had confirmed %s; the standby has WAL up to %s only",
				gs.Primary.ConfirmedFlush, standby.Info.WALEnd()))
		case exact && gs.Copy.ConfirmedFlush < gs.Primary.ConfirmedFlush:
			notReady(lsncheck.ReasonCopyBehind, fmt.Sprintf("exact: at the last observation the copy (%s) was behind its consumer (%s)",
				gs.Copy.ConfirmedFlush, gs.Primary.ConfirmedFlush))
		case gs.RequireSynced && !cp.Synced:
			notReady(lsncheck.ReasonNotSynced, "the copy is no longer kept by the server's slot sync")
		case cp.ConfirmedFlush < gs.Copy.ConfirmedFlush:
			notReady(lsncheck.ReasonIdentityMismatch, fmt.Sprintf("the copy went back from %s to %s since the last observation: it is another slot",
				gs.Copy.ConfirmedFlush, cp.ConfirmedFlush))
		default:
			v.Detail = "ready at the last observation with the primary, and the copy is still there, valid, with its WAL"
			if gs.HeldBack {
				v.Detail += "; no consumer could be ahead of the standby (a failover slot, and synchronized_standby_slots lists this standby)"
			}
		}
		sr.Verdict = v
		out = append(out, sr)
	}
	return out
}

// otherTimeline says whether the standby is known to be on another timeline than the record's
// (recorded): the one its WAL receiver receives, or a higher one in its history. Without a
// receiver the history's timeline is its last restartpoint's, which may lag a recent switch: a
// lower value is no evidence (a standby's timeline only grows).
func otherTimeline(recorded int, standby topology.NodeInfo) bool {
	if recorded == 0 {
		return false
	}
	return standby.Timeline != 0 && standby.Timeline != recorded || standby.HistoryTimeline > recorded
}

// withoutPrimaryMeaning says what a verdict without the primary promises.
func withoutPrimaryMeaning(age time.Duration, synced bool, major int) string {
	s := fmt.Sprintf("judged from the standby and the last observation of the primary, %s old: consumers may have confirmed more since; "+
		"after a promotion they get again at most what they received in that time (redelivery, never loss) unless a consumer was ahead of this standby. "+
		"Slots created on the primary since then are unknown here. ",
		age.Round(time.Millisecond))
	switch {
	case synced:
		return s + "The primary's synchronized_standby_slots lists this standby: consumers of failover slots could not be ahead of it (each slot says whether it is one); consumers of the others could."
	case major >= 17:
		return s + "The primary's synchronized_standby_slots does not list this standby: a consumer could have been a few bytes ahead of it (set it to prevent that)."
	}
	return s + "Before PostgreSQL 17 nothing keeps consumers behind this standby: one could have been a few bytes ahead of it (see consumer_ahead_bytes of the last observation)."
}

// ErrPrimaryInRecovery: the server slotsync takes for the primary (the standby's
// primary_conninfo, or --primary) answers in recovery and is the standby's demoted primary (a
// switchover, before the HA manager re-points the standby): of this cluster, not the standby
// itself, receiving WAL from no one but the standby (JudgeUpstream). It takes no writes, so the
// primary is gone as far as the gate is concerned (rule 8), and the standby streaming from it
// does not make a primary alive.
var ErrPrimaryInRecovery = errors.New("the server taken for the primary (--primary, or the standby's primary_conninfo) is in recovery: " +
	"the standby's primary, demoted (as in a switchover): it takes no writes")

// primaryGone reports an observation that failed only because the primary could not be asked
// (unreachable, shutting down, in recovery, or unknown while an HA manager re-points the
// standby).
func primaryGone(err error) bool {
	var ne *NodeError
	return errors.As(err, &ne) && ne.Node == "primary" && Classify(err) == Retry
}

// judgeWithoutPrimary answers for a pass whose primary is gone, from the standby and the
// journal's gate record (rule 8). Inspect returns the verdict (unless Strict); a pass that would
// apply still fails (nothing was changed) but carries the verdict for /promotion-ready.
func (e *Engine) judgeWithoutPrimary(ctx context.Context, rep Report, snap Observation, perr error, apply bool) (Report, error) {
	rec := e.journal.Gate
	switch {
	case errors.Is(perr, ErrPrimaryAlive):
		return rep, perr // a server in recovery that follows a live primary (JudgeUpstream)
	case e.cfg.Strict && !apply:
		return rep, fmt.Errorf("%w (strict: the gate does not judge without the primary)", perr)
	case rec == nil:
		return rep, fmt.Errorf("%w; no earlier observation of the primary is recorded in the state directory (give check the daemon's --state-dir)", perr)
	}
	if err := e.checkJournalCluster(snap.Standby.Info.SystemID); err != nil {
		return rep, err
	}
	if err := cannotTell(snap.Standby.Info, perr, rec, e.now(), e.cfg.MaxRecordAge); err != nil {
		return rep, fmt.Errorf("%w: %w", perr, err)
	}
	snap, err := e.primaryLost(ctx, snap, perr, apply)
	if err != nil {
		return rep, fmt.Errorf("%w: %w", perr, err)
	}
	age := e.now().Sub(rec.ObservedAt)
	rep.Role = RoleStandby
	rep.Major = snap.Standby.Info.Major()
	rep.Method = topology.Method(rec.Method)
	rep.Standby = summarize(snap.Standby.Info)
	rep.Slots = JudgeWithoutPrimary(rec.heldBackAt(e.now()), snap.Standby, e.cfg.Select, e.cfg.Exact, snap.DemotedWALEnd)
	unknown := notInRecord(rec, e.journal, snap.Standby, e.cfg.Select)
	rep.Slots = append(rep.Slots, unknown...)
	rep.Selected, rep.Unselected = len(rec.Slots), rec.Unselected
	rep.WithoutPrimary = &WithoutPrimary{Why: perr.Error(), ObservedAt: rec.ObservedAt, AgeSeconds: age.Seconds(),
		SynchronizedStandby: rec.SynchronizedStandby, Meaning: withoutPrimaryMeaning(age, rec.SynchronizedStandby, rep.Major)}
	if !e.withoutPrimary {
		e.log.Warn("the primary cannot be asked: the gate judges without it, from the standby and the last observation of the primary",
			"why", perr.Error(), "observed_at", rec.ObservedAt.Format(time.RFC3339), "age_seconds", age.Seconds(), "ready", rep.Ready(),
			"synchronized_standby", rec.SynchronizedStandby)
		e.withoutPrimary = true
	}
	rep.Duration = e.now().Sub(rep.Started)
	if apply {
		return rep, perr
	}
	return rep, nil
}

// ErrCannotTell: without the primary, the gate cannot judge at all (rule 8).
var ErrCannotTell = errors.New("CANNOT TELL")

// ErrPrimaryAlive is the CANNOT TELL of a primary that is alive: the standby still streams from
// it, and only slotsync cannot reach it. Whatever a hook's policy, promoting now would split the
// cluster (it wraps ErrCannotTell).
var ErrPrimaryAlive error = primaryAlive{}

// primaryAlive is a CANNOT TELL that shows a primary alive: why says how it was seen (the
// standby streaming from it by default; a server in recovery following another, upstream.go).
type primaryAlive struct{ why string }

func (p primaryAlive) Error() string {
	if p.why != "" {
		return p.why
	}
	return "CANNOT TELL: the standby still streams from its primary, which is alive (only slotsync cannot reach it): " +
		"do not promote; fix slotsync's route or credentials to the primary"
}

func (primaryAlive) Unwrap() error { return ErrCannotTell }

// Is makes every primaryAlive, whatever its why, ErrPrimaryAlive.
func (primaryAlive) Is(target error) bool {
	_, ok := target.(primaryAlive)
	return ok
}

// cannotTell says why the gate cannot judge without the primary: the standby still streams
// from it (the primary is alive, only unreachable from here: promoting now would split the
// cluster, and its consumers may get ahead of this standby), the record is older than maxAge
// (slots made since are unknown to it), or the primary lived on unobserved past the record's
// renewal (slots changed then are unknown to it).
func cannotTell(standby topology.NodeInfo, perr error, rec *GateRecord, now time.Time, maxAge time.Duration) error {
	age := now.Sub(rec.ObservedAt)
	lastCommit := now.Add(-standby.ReplayedCommitAge)
	switch {
	case livePrimarySeen(standby, perr):
		return ErrPrimaryAlive
	case standby.ReceiverStatus == "unknown":
		return fmt.Errorf("%w: the role may not see whether the standby still streams from its primary (GRANT pg_read_all_stats, or pg_monitor, TO the slotsync role)", ErrCannotTell)
	case maxAge > 0 && age > maxAge:
		return fmt.Errorf("%w: the last observation of the primary is %s old, past --max-record-age %s: slots made since are unknown to it",
			ErrCannotTell, age.Round(time.Second), maxAge)
	case !rec.RenewBy.IsZero() && standby.ReplayedCommitAge >= 0 && lastCommit.After(rec.RenewBy.Add(RecordLagMargin)) && !failpoint.Mutant("record-outlived"):
		return fmt.Errorf("%w: the standby replayed a transaction the primary committed at %s, %s after slotsync's last observation of it (%s, "+
			"due to be renewed by %s): slotsync did not observe the primary's last moments (stalled, restarting, or its route to the primary cut), "+
			"so slots dropped, made again or moved back then are unknown to the gate; see slotsync's log for why its passes stopped",
			ErrCannotTell, lastCommit.UTC().Format("15:04:05.000"), lastCommit.Sub(rec.ObservedAt).Round(100*time.Millisecond),
			rec.ObservedAt.UTC().Format("15:04:05.000"), rec.RenewBy.UTC().Format("15:04:05.000"))
	}
	return nil
}

// livePrimarySeen says whether an observation (and the error it ended with) saw the standby
// stream from a primary: its WAL receiver streams, and not from a server found in recovery (a
// demoted primary takes no writes and passes none on).
func livePrimarySeen(standby topology.NodeInfo, err error) bool {
	return errors.Is(err, ErrPrimaryAlive) || standby.StreamsLive() && !errors.Is(err, ErrPrimaryInRecovery)
}

// noteStreaming remembers when a pass last saw the standby stream from its primary. An applying
// engine also writes into the journal, once per change, when the standby stopped streaming (the
// last time it saw it stream), so that check, a process of its own, knows how long the standby
// has been without its primary.
func (e *Engine) noteStreaming(snap Observation, err error, apply bool) {
	info := snap.Standby.Info
	if info.VersionNum == 0 {
		return // the standby was not observed
	}
	streaming := livePrimarySeen(info, err)
	if streaming {
		e.lastStreaming = e.now()
	}
	if !apply || e.cfg.ReadOnly || e.journal == nil {
		return
	}
	lostAt := e.journal.StandbyLostPrimaryAt
	switch {
	case !streaming && info.InRecovery && lostAt.IsZero() && !e.lastStreaming.IsZero():
		lostAt = e.lastStreaming
	case streaming && !lostAt.IsZero():
		lostAt = time.Time{}
	default:
		return
	}
	next := e.journal.clone()
	next.StandbyLostPrimaryAt = lostAt
	_ = e.commit(next, nil, "when the standby stopped streaming from its primary")
}

// lastStreamed is when the standby last streamed from its primary, as far as this engine can
// tell: what it saw itself, else what the daemon recorded (unless a later record saw it stream),
// else nothing before this engine's first pass.
func (e *Engine) lastStreamed() time.Time {
	if !e.lastStreaming.IsZero() {
		return e.lastStreaming
	}
	if j := e.journal; j != nil && !j.StandbyLostPrimaryAt.IsZero() {
		if rec := j.Gate; rec == nil || rec.StandbyCutOff || !rec.ObservedAt.After(j.StandbyLostPrimaryAt) {
			return j.StandbyLostPrimaryAt
		}
	}
	return e.started
}

// primaryLost holds the judgement without the primary until the standby has lost it: no WAL
// receiver streaming for PrimaryGoneAfter (rule 8). A receiver between two attempts to
// reconnect (the primary restarting, a cut connection; the standby retries every
// wal_retrieve_retry_interval) says nothing of the primary, which may be alive and taking
// writes that its consumers get and this standby does not. An applying pass answers CANNOT
// TELL until then; a judgement that changes nothing (check) watches the standby until then,
// and a receiver that streams again means the primary is alive. The standby's primary seen
// demoted (perr, or a later observation; JudgeUpstream) takes no writes: no need to wait, once
// the standby holds the WAL it has (a judgement that changes nothing watches for that too). It
// returns the latest view of the standby.
func (e *Engine) primaryLost(ctx context.Context, snap Observation, perr error, apply bool) (Observation, error) {
	const every = 250 * time.Millisecond
	for i := 0; ; i++ {
		demoted := errors.Is(perr, ErrPrimaryInRecovery)
		since := e.lastStreamed()
		lost := e.now().Sub(since)
		last := apply || i > int(e.cfg.PrimaryGoneAfter/every)+4
		switch {
		case demoted && (last || snap.Standby.Info.WALEnd() >= snap.DemotedWALEnd):
			// Demoted: gone at once, once the standby holds the demoted server's WAL (past the
			// wait, the verdicts say what the standby lacks).
			return snap, nil
		case !demoted && lost >= e.cfg.PrimaryGoneAfter:
			return snap, nil
		case last:
			// The message names the moment, not the time since: a daemon logs it once.
			return snap, fmt.Errorf("%w: the standby has not streamed from its primary since %s only; the gate judges without the primary once "+
				"it has been gone for %s (--primary-gone-after): until then the standby may be reconnecting to a primary that is alive",
				ErrCannotTell, since.UTC().Format("15:04:05.0"), e.cfg.PrimaryGoneAfter)
		case i == 0 && demoted:
			e.log.Info("the primary is demoted and the standby lacks some of its WAL: watching whether it receives it before judging",
				"standby_wal_end", snap.Standby.Info.WALEnd().String(), "demoted_wal_end", snap.DemotedWALEnd.String())
		case i == 0:
			e.log.Info("the standby is not streaming from its primary: watching whether it reconnects before judging without the primary",
				"watch_seconds", (e.cfg.PrimaryGoneAfter - lost).Seconds())
		}
		if err := e.sleep(ctx, every); err != nil {
			return snap, err
		}
		octx, cancel := context.WithTimeout(ctx, e.cfg.ObserveTimeout)
		next, err := e.obs.Observe(octx)
		cancel()
		switch {
		case err == nil || livePrimarySeen(next.Standby.Info, err):
			return snap, ErrPrimaryAlive // it answers again, or the standby streams from it again
		case !primaryGone(err) || next.Standby.Info.VersionNum == 0:
			return snap, err
		}
		snap, perr = next, err
	}
}

// notInRecord reports the copies slotsync made that the record does not judge (made after it):
// NOT READY, since what their consumers confirmed is unknown.
func notInRecord(rec *GateRecord, j *Journal, standby NodeState, sel Selection) []SlotReport {
	var out []SlotReport
	for _, name := range sortedKeys(j.Slots) {
		ent := j.Slots[name]
		if _, judged := rec.Slots[name]; judged || !sel.Matches(name, ent.Identity.Database, ent.Identity.Plugin) {
			continue
		}
		sr := SlotReport{Name: name, Database: ent.Identity.Database, Plugin: ent.Identity.Plugin, Action: KindNone,
			Reason: "judged without the primary", Gate: true}
		if cp, ok := standby.Slots[name]; ok {
			pos := cp.Position
			sr.Copy = &pos
		}
		sr.Verdict = lsncheck.Verdict{Reasons: []lsncheck.Reason{lsncheck.ReasonNotInRecord},
			Detail: "slotsync made this copy after the last observation of the primary: what its consumer confirmed is unknown"}
		out = append(out, sr)
	}
	return out
}

// recordGate keeps the journal's gate record fresh: at once when a verdict changed or the standby
// stopped or resumed streaming, otherwise every GateRecordInterval. A failed write is logged; the gate then answers from an older record.
func (e *Engine) recordGate(snap Observation, method topology.Method, slots []SlotReport) {
	rec := newGateRecord(snap.Taken, method, synchronizedStandby(snap), snap.Standby.Info, slots)
	_, rec.Unselected = e.cfg.Select.Unselected(snap.Primary.Slots)
	if rec.StandbyCutOff {
		rec.HeldBackUntil = rec.ObservedAt.Add(e.cfg.Native.StandbyGoneAfter - ownSlotInactiveFor(snap))
	}
	rec.RenewBy = rec.ObservedAt.Add(e.cfg.GateRecordInterval + 2*e.cfg.Interval)
	old := e.journal.Gate
	if old != nil && rec.sameVerdicts(old) && rec.StandbyCutOff == old.StandbyCutOff && rec.ObservedAt.Sub(old.ObservedAt) < e.cfg.GateRecordInterval {
		return
	}
	// This write also carries the reference positions advances left in memory (journal.go).
	next := e.journal.clone()
	next.Gate = rec
	_ = e.commit(next, failpoint.Hit("engine.gate-record"), "the gate's last observation (without the primary the gate answers from an older one)")
}

// ownSlotInactiveFor is how long the standby's physical slot, listed in the primary's
// synchronized_standby_slots, had had no walsender (0 when active or not listed).
func ownSlotInactiveFor(snap Observation) time.Duration {
	for _, s := range snap.SyncedStandbySlots {
		if s.Name == snap.Standby.Info.PrimarySlotName && !s.Active {
			return s.InactiveFor
		}
	}
	return 0
}

// heldBackAt is the record as it can be trusted at now: past HeldBackUntil, the standby may have
// been taken out of synchronized_standby_slots, so no slot is held back any more (rule 10).
func (r *GateRecord) heldBackAt(now time.Time) *GateRecord {
	if r.HeldBackUntil.IsZero() || now.Before(r.HeldBackUntil) {
		return r
	}
	c := *r
	c.Slots = make(map[string]GateSlot, len(r.Slots))
	for name, gs := range r.Slots {
		gs.HeldBack = false
		c.Slots[name] = gs
	}
	return &c
}

// synchronizedStandby reports whether the primary's synchronized_standby_slots lists this
// standby's physical slot (17+).
func synchronizedStandby(snap Observation) bool {
	for _, s := range snap.SyncedStandbySlots {
		if s.Name == snap.Standby.Info.PrimarySlotName && s.Name != "" {
			return true
		}
	}
	return false
}

// RecordLagMargin: without the primary, the standby may have replayed commits this much past the
// moment the gate record was due to be renewed (GateRecord.RenewBy) before the gate cannot tell
// (rule 8): a pass that takes long, and clocks of the primary and of slotsync's host a little
// apart.
const RecordLagMargin = 5 * time.Second
