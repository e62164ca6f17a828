package sync

import (
	"fmt"
	"time"

	"github.com/slotsync/slotsync/internal/failpoint"
	"github.com/slotsync/slotsync/lsncheck"
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
	// StandbyReloadedAt: the standby's last configuration reload since its start when the
	// record was made (zero: none). A later one may have turned its hot_standby_feedback off
	// while the primary lived: the copies whose READY rested on that feedback (CatalogByFeedback)
	// are not READY from the record (rule 4, horizonGap).
	StandbyReloadedAt time.Time `json:"standby_reloaded_at,omitzero"`
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
	// CatalogByFeedback: the copy's catalog rows were kept, as far as the record knows, only by
	// the standby's feedback, seen holding them since horizon_seen_at (rule 4): a state-file
	// copy, or a copy of the standby's own decoding behind the primary slot's catalog_xmin.
	CatalogByFeedback bool `json:"catalog_by_feedback,omitempty"`
	// SnapshotNeeded: the copy is READY only with its decoding snapshot at its restart_lsn
	// (rule 4), unless that is still ScratchAt, where the copy was made from scratch.
	SnapshotNeeded bool         `json:"snapshot_needed,omitempty"`
	ScratchAt      lsncheck.LSN `json:"scratch_at,omitempty"`
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

// newGateRecord builds the record from a pass judged with the primary.
func newGateRecord(at time.Time, method topology.Method, synced bool, standby topology.NodeInfo, slots []SlotReport) *GateRecord {
	r := &GateRecord{ObservedAt: at.UTC(), Method: string(method), SynchronizedStandby: synced, Slots: map[string]GateSlot{},
		Timeline: standby.HistoryTimeline, StandbyWALEnd: standby.WALEnd(), StandbyCutOff: standby.ReceiverStatus != "streaming",
		StandbyReloadedAt: standby.ReloadedAt}
	for _, s := range slots {
		if !s.Gate || s.Primary == nil {
			continue
		}
		gs := GateSlot{Identity: lsncheck.Identity{Name: s.Name, Database: s.Database, Plugin: s.Plugin},
			Ready: s.Verdict.Ready, Reasons: s.Verdict.Reasons, Detail: s.Verdict.Detail, Primary: *s.Primary,
			ConsumerAheadBytes: s.Verdict.ConsumerAheadBytes, RequireSynced: s.requireSynced, HeldBack: synced && s.requireSynced,
			CatalogByFeedback: s.catalogByFeedback, SnapshotNeeded: s.needsSnapshot, ScratchAt: s.scratchAt}
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
		if !ok || failpoint.Mutant("without:copy_being_made") {
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

// Demoted is what a primary found demoted (reached in recovery, rule 8) still shows: the end of
// its WAL, up to which its consumers may have received changes, and its logical slots as it
// left them (nil when it was not found demoted, or they could not be read).
type Demoted struct {
	WALEnd lsncheck.LSN
	Slots  map[string]topology.Slot
	// SlotsErr: its slots could not be read (the gate cannot tell then: rule 8).
	SlotsErr error
}

// JudgeWithoutPrimary judges every slot of the record from the standby alone (rule 8): a copy
// READY then is READY now if it is still there, the same slot, valid, not moved back and its
// WAL still on the standby; a copy NOT READY then stays NOT READY. It is pure.
// With exact, a copy is READY only if it stood exactly at its consumer's position then.
// demoted is what a demoted primary shows: the standby must hold its WAL end, a slot it
// dropped since the record is no longer judged, and each other copy is judged against its slot
// there too (onDemoted).
func JudgeWithoutPrimary(rec *GateRecord, standby NodeState, sel Selection, exact bool, demoted Demoted) []SlotReport {
	var out []SlotReport
	demotedEnd, other := demoted.WALEnd, standby.Info.OtherSynchronizer()
	for _, name := range sortedKeys(rec.Slots) {
		gs := rec.Slots[name]
		if !sel.Matches(name, gs.Identity.Database, gs.Identity.Plugin) {
			continue
		}
		cp, hasCopy := standby.Slots[name]
		against, againstWhy, dropped := onDemoted(gs, name, cp, hasCopy, standby.Info.Major(), demoted.Slots)
		if dropped {
			continue // dropped on the primary since the record: as with the primary, not judged
		}
		primary := gs.Primary
		sr := SlotReport{Name: name, Database: gs.Identity.Database, Plugin: gs.Identity.Plugin, Action: KindNone,
			Reason: "judged without the primary", Gate: true, Primary: &primary}
		v := lsncheck.Verdict{Ready: gs.Ready, Reasons: gs.Reasons, Detail: gs.Detail, ConsumerAheadBytes: gs.ConsumerAheadBytes}
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
		case other != "":
			notReady(lsncheck.ReasonOtherSynchronizer, other+" is loaded on the standby and syncs logical slots too: "+
				"slotsync does not vouch for copies another tool may have changed")
		case !hasCopy:
			notReady(lsncheck.ReasonMissing, "the copy is gone from the standby since the last observation")
		case cp.Database != gs.Identity.Database || cp.Plugin != gs.Identity.Plugin || cp.TwoPhase != gs.Identity.TwoPhase ||
			gs.CopyTwoPhase != nil && cp.TwoPhase != *gs.CopyTwoPhase:
			notReady(lsncheck.ReasonIdentityMismatch, fmt.Sprintf("the standby slot of this name (database %q, plugin %q, two_phase %v) is not the copy last judged",
				cp.Database, cp.Plugin, cp.TwoPhase))
		case against != "":
			notReady(against, againstWhy)
		case cp.Invalidated:
			notReady(lsncheck.ReasonCopyInvalidated, "the copy has been invalidated since the last observation")
		case !cp.WALAvailable():
			notReady(lsncheck.ReasonCopyWALMissing, "the standby no longer has the WAL from the copy's restart_lsn")
		case !standby.Info.HoldsWALFrom(cp.RestartLSN):
			notReady(lsncheck.ReasonCopyWALMissing, fmt.Sprintf("the standby's pg_wal no longer holds the WAL from the copy's restart_lsn %s (%s): "+
				"removed behind the server's back, though the copy's wal_status says reserved", cp.RestartLSN, standby.Info.WALLostFrom(cp.RestartLSN)))
		case !standby.Info.KeepsSlotWAL(cp.RestartLSN, standby.Info.WALEnd()):
			notReady(lsncheck.ReasonCopyWALMissing, fmt.Sprintf("the standby's max_slot_wal_keep_size (%d MB) does not cover the WAL from the copy's "+
				"restart_lsn %s, %d bytes behind its end of WAL: promoted, its first checkpoint removes that WAL and invalidates the copy",
				standby.Info.MaxSlotWALKeepMB, cp.RestartLSN, lsncheck.Bytes(standby.Info.WALEnd(), cp.RestartLSN)))
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
		case gs.SnapshotNeeded && cp.RestartLSN != gs.ScratchAt && cp.Snapshot != topology.SnapshotPresent:
			notReady(snapshotGone(cp))
		case gs.CatalogByFeedback && standby.Info.ReloadedAt.After(rec.StandbyReloadedAt):
			notReady(lsncheck.ReasonCatalogUnprotected, fmt.Sprintf("the standby's configuration was reloaded at %s, after the record: its hot_standby_feedback "+
				"may have been off while the primary lived, and a VACUUM then may have removed the copy's catalog rows", standby.Info.ReloadedAt.Format("15:04:05.000")))
		default:
			v.Detail = "ready at the last observation with the primary, and the copy is still there, valid, with its WAL"
			if gs.HeldBack {
				v.Detail += "; no consumer could be ahead of the standby (a failover slot, and synchronized_standby_slots lists this standby)"
				sr.HeldBack = true
			}
		}
		sr.Verdict = v
		out = append(out, sr)
	}
	return out
}

// snapshotGone says why a copy that needs its decoding snapshot is not READY without it (rule 4).
func snapshotGone(cp topology.Slot) (lsncheck.Reason, string) {
	if cp.Snapshot == topology.SnapshotUnknown {
		return lsncheck.ReasonCopySnapshotUnknown, fmt.Sprintf("cannot tell whether the standby still has the decoding snapshot at the copy's restart_lsn %s "+
			"(the role may call neither pg_ls_logicalsnapdir() nor pg_stat_file(text, boolean))", cp.RestartLSN)
	}
	return lsncheck.ReasonCopySnapshotMissing, fmt.Sprintf("the standby no longer has the decoding snapshot at the copy's restart_lsn %s: decoding there "+
		"would rebuild one and could skip a transaction open across it", cp.RestartLSN)
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

// onDemoted judges the record's slot against the demoted primary's slot of its name, as the
// primary's own would be judged (rules 4 and 8; slots nil: nothing to compare). dropped: it is
// gone from the demoted primary. Otherwise a reason ("": none) says why the copy is not READY
// there: the slot was made again, or copied from another, since the record (a confirmed_flush
// gone back alone, or restart_lsn after the restart a demotion is, is the same slot), or the
// copy stands ahead of the slot's confirmed_flush. The last is read on 17 and newer only, whose
// clean shutdown saves every logical slot's confirmed_flush; before 17 a slot saved last when
// its restart_lsn moved shows an older confirmed_flush than its consumer's (commit e0b2eed0).
func onDemoted(gs GateSlot, name string, cp topology.Slot, hasCopy bool, major int, slots map[string]topology.Slot) (lsncheck.Reason, string, bool) {
	if slots == nil {
		return "", "", false
	}
	ds, ok := slots[name]
	if !ok {
		return "", "", true
	}
	prev := lsncheck.Seen{Identity: gs.Identity, Position: gs.Primary}
	if ch, why := lsncheck.CompareIncarnation(prev, ds.Seen()); ch == lsncheck.NewIncarnation && !lsncheck.SameSlotRegression(prev, ds.Seen(), true) {
		return lsncheck.ReasonIdentityMismatch, "the demoted primary's slot is not the one last observed (" + why + "): it was made again since, and its " +
			"consumer may start over behind the copy", false
	}
	if hasCopy && major >= 17 && ds.ConfirmedFlush != 0 && cp.ConfirmedFlush > ds.ConfirmedFlush {
		return lsncheck.ReasonCopyConfirmedAhead, fmt.Sprintf("the copy's confirmed_flush %s is %d bytes ahead of the demoted primary's slot's %s "+
			"(saved at its shutdown): its consumer resumes from there, and the changes in between would be skipped (the slot was made again, or "+
			"copied from another, with the same restart_lsn and catalog_xmin since the last observation; or the primary crashed, and its slots "+
			"are as of its last checkpoint)", cp.ConfirmedFlush, lsncheck.Bytes(cp.ConfirmedFlush, ds.ConfirmedFlush), ds.ConfirmedFlush), false
	}
	return "", "", false
}

// demotedUnobserved reports the selected slots of a demoted primary that neither the record nor
// slotsync's journal knows (made after slotsync last observed the primary): NOT READY, for no
// copy of theirs was judged, and promoted now the standby lacks them.
func demotedUnobserved(rec *GateRecord, j *Journal, demoted Demoted, standby NodeState, sel Selection) []SlotReport {
	var out []SlotReport
	for _, name := range sortedKeys(demoted.Slots) {
		ds := demoted.Slots[name]
		_, recorded := rec.Slots[name]
		_, journaled := j.Slots[name]
		if recorded || journaled || ds.Temporary || !sel.Matches(name, ds.Database, ds.Plugin) || failpoint.Mutant("without:"+string(lsncheck.ReasonNotObserved)) {
			continue
		}
		primary := ds.Position
		sr := SlotReport{Name: name, Database: ds.Database, Plugin: ds.Plugin, Action: KindNone, Reason: "judged without the primary", Gate: true,
			Primary: &primary}
		if cp, ok := standby.Slots[name]; ok {
			pos := cp.Position
			sr.Copy = &pos
		}
		sr.Verdict = lsncheck.Verdict{Reasons: []lsncheck.Reason{lsncheck.ReasonNotObserved},
			Detail: "the demoted primary has this slot, which slotsync never observed with the primary (made after its last pass): no copy of it " +
				"was judged, and its consumer would find no slot after a promotion now (let slotsync observe it: start the old primary again " +
				"read-write, or have its consumer resnapshot after the promotion)"}
		out = append(out, sr)
	}
	return out
}

// withoutPrimaryMeaning says what a verdict without the primary promises; demoted: the primary
// was found demoted, and its slots were read and judged (onDemoted, demotedUnobserved).
func withoutPrimaryMeaning(age time.Duration, synced bool, major int, demoted bool) string {
	s := fmt.Sprintf("judged from the standby and the last observation of the primary, %s old: consumers may have confirmed more since; "+
		"after a promotion they get again at most what they received in that time (redelivery, never loss) unless a consumer was ahead of this standby. ",
		age.Round(time.Millisecond))
	switch {
	case demoted && major >= 17:
		s += "The demoted primary's slots were read: each copy was checked to be of the same slot and not ahead of its confirmed_flush there, " +
			"and a slot there that slotsync never observed is NOT READY. "
	case demoted:
		s += "The demoted primary's slots were read: each copy was checked to be of the same slot (before PostgreSQL 17 a slot's confirmed_flush " +
			"there may lag its consumer's, so it is not compared: a slot made again from a copy of itself since slotsync's last pass, with the same " +
			"restart_lsn and catalog_xmin, goes unseen), and a slot there that slotsync never observed is NOT READY. "
	default:
		s += "Slots created, or made again, on the primary since then are unknown here. "
	}
	switch {
	case synced:
		return s + "The primary's synchronized_standby_slots lists this standby: consumers of failover slots could not be ahead of it (each slot says whether it " +
			"is one); consumers of the others could."
	case major >= 17:
		return s + "The primary's synchronized_standby_slots does not list this standby: a consumer could have been a few bytes ahead of it (set it to prevent that)."
	}
	return s + "Before PostgreSQL 17 nothing keeps consumers behind this standby: one could have been a few bytes ahead of it (see consumer_ahead_bytes of the " +
		"last observation)."
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
func (e *Engine) recordGate(obs Observation, method topology.Method, slots []SlotReport) {
	if failpoint.Hit("engine.pass-observed") != nil {
		return // a failed write of the record and the note: the older ones stand
	}
	took := e.windowTook(obs)
	rec := newGateRecord(obs.Taken, method, synchronizedStandby(obs), obs.Standby.Info, slots)
	_, rec.Unselected = e.cfg.Select.Unselected(obs.Primary.Slots)
	if rec.StandbyCutOff {
		rec.HeldBackUntil = rec.ObservedAt.Add(e.cfg.Native.StandbyGoneAfter - ownSlotInactiveFor(obs))
	}
	// The next record comes with a pass within GateRecordInterval, each pass an interval plus
	// as long as a pass takes (a thousand slots, a standby restart): two of them for room.
	rec.RenewBy = rec.ObservedAt.Add(e.cfg.GateRecordInterval + 2*(e.cfg.Interval+took))
	old := e.journal.Gate
	if old == nil || !rec.sameVerdicts(old) || rec.StandbyCutOff != old.StandbyCutOff || !rec.StandbyReloadedAt.Equal(old.StandbyReloadedAt) ||
		rec.ObservedAt.Sub(old.ObservedAt) >= e.cfg.GateRecordInterval {
		// This write also carries the reference positions advances left in memory (journal.go).
		next := e.journal.clone()
		next.Gate = rec
		if e.commit(next, failpoint.Hit("engine.gate-record"), "the gate's last observation (without the primary the gate answers from an older one)") != nil {
			return // the record in force is the older one, whose note stands
		}
	}
	e.noteSeen(obs, took)
}

// windowTook is how long the pass took from its observation to its record, as the windows the
// record and the note grant the next pass count it (GateRecord.RenewBy, GateSeen.RenewBy): no
// longer than the pass before took (the first: an interval). A pass stalled between its
// observation and its writes (the process paused, the host frozen) would otherwise widen both
// windows by the stall and vouch for the primary's life while nothing observed it: a slot made
// then is unknown to a record the gate would still trust (rule 8a). Passes that are slow one
// after another (a thousand slots) keep their length.
func (e *Engine) windowTook(obs Observation) time.Duration {
	took := max(e.now().Sub(obs.Taken), 0)
	before := e.live.passTook
	e.live.passTook = took
	if failpoint.Mutant("pass-window-unbounded") {
		return took
	}
	return min(took, before)
}

// noteSeen writes the note of a pass with the primary under the record now in force (GateSeen),
// its window counting the pass as windowTook does. A failed write is logged once; the gate then
// rests on an older note.
func (e *Engine) noteSeen(obs Observation, took time.Duration) {
	seen := newGateSeen(e.journal.Gate.ObservedAt, obs.Primary.Info.Clock, e.cfg.Interval, took)
	if seen == nil || e.cfg.StateDir == "" {
		return
	}
	if err := seen.save(e.cfg.StateDir); err != nil {
		if !e.logged.seenFailing {
			e.log.Warn("could not note the pass in the state directory: without the primary the gate rests on the gate record's renewal alone",
				"error", err, "state_dir", e.cfg.StateDir)
		}
		e.logged.seenFailing = true
		return
	}
	e.logged.seenFailing = false
	e.seen = seen
}

// ownSlotInactiveFor is how long the standby's physical slot, listed in the primary's
// synchronized_standby_slots, had had no walsender (0 when active or not listed).
func ownSlotInactiveFor(obs Observation) time.Duration {
	for _, s := range obs.SyncedStandbySlots {
		if s.Name == obs.Standby.Info.PrimarySlotName && !s.Active {
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
func synchronizedStandby(obs Observation) bool {
	for _, s := range obs.SyncedStandbySlots {
		if s.Name == obs.Standby.Info.PrimarySlotName && s.Name != "" {
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

// lagMargin is margin (RecordLagMargin, SeenLagMargin), or twice it under the fault explorer's
// boundary mutant named (test builds only).
func lagMargin(margin time.Duration, mutant string) time.Duration {
	if failpoint.Mutant(mutant) {
		return 2 * margin
	}
	return margin
}
