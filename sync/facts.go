package sync

import (
	"fmt"
	"slices"

	"github.com/slotsync/slotsync/internal/failpoint"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/topology"
)

// horizonSeenAt is when the copy of slot name was first seen held by the standby's physical
// slot: its entry's mark, or for a copy the server's slot sync keeps (no entry), the journal's.
func horizonSeenAt(j *Journal, name string, ent *Entry, cp topology.Slot) lsncheck.LSN {
	switch {
	case ent != nil:
		return ent.HorizonSeenAt
	case cp.Synced:
		return j.ServerCopies[name]
	}
	return 0
}

// covers says whether the standby's physical slot, holding catalog rows from xid horizon on,
// holds the copy's: both known, the horizon not newer than the copy's catalog_xmin.
func covers(horizon lsncheck.XID, cp topology.Slot) bool {
	return horizon != 0 && cp.CatalogXmin != 0 && !lsncheck.XIDPrecedes(cp.CatalogXmin, horizon)
}

// serverHorizonSeen does for the copies the server's slot sync keeps (synced=true, no journal
// entry) what horizonSeen does for slotsync's: it marks the first observation where the
// standby's physical slot held a copy's catalog rows, at the primary's WAL position, and forgets
// the marks of copies not seen in it or no longer the server's (rule 4). A copy the server
// makes again under the same name keeps the mark: it says the standby's physical slot has kept
// every row from its horizon on since then, and the new copy, which that horizon still covers
// (else horizonGap voids the mark), was made from the standby's own reservation, missing only
// rows that a VACUUM replayed after its making would have invalidated it for. It is pure: it
// returns the journal and whether it changed.
func serverHorizonSeen(j *Journal, obs Observation) (*Journal, bool) {
	next := j
	own := func() {
		if next == j {
			next = j.clone()
		}
		if next.ServerCopies == nil {
			next.ServerCopies = map[string]lsncheck.LSN{}
		}
	}
	for name := range j.ServerCopies {
		if cp, ok := obs.Standby.Slots[name]; !ok || !cp.Synced || j.Slots[name] != nil {
			own()
			delete(next.ServerCopies, name)
		}
	}
	horizon := obs.Physical.CatalogHorizon()
	if horizon == 0 || obs.Primary.Info.CurrentLSN == 0 {
		return next, next != j
	}
	for name, cp := range obs.Standby.Slots {
		if !cp.Synced || j.Slots[name] != nil || next.ServerCopies[name] != 0 || !covers(horizon, cp) {
			continue
		}
		own()
		next.ServerCopies[name] = obs.Primary.Info.CurrentLSN
	}
	return next, next != j
}

// horizonSeen records, for each copy of the standby's own decoding, the first observation
// where the standby's physical slot held its catalog rows (rule 4). It is pure: it returns the
// journal to keep (written with the next journal write) and whether anything changed. Copies made
// in this pass (made) are not judged on it: the pass observed the standby before they existed.
func horizonSeen(j *Journal, obs Observation, copies map[string]topology.Slot, made map[string]bool, own func(*Entry) bool) (*Journal, bool) {
	return markHorizon(j, obs, copies, made, func(_ string, ent *Entry, _ topology.Slot) bool { return own(ent) })
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
func horizonKept(j *Journal, obs Observation, made map[string]bool, installed func(*Entry) bool) (*Journal, bool) {
	return markHorizon(j, obs, obs.Standby.Slots, made, func(name string, ent *Entry, cp topology.Slot) bool {
		return installed(ent) && catalogKept(obs.Primary.Slots, obs.Standby.Info.PrimarySlotName, name, cp.CatalogXmin)
	})
}

// horizonGap voids the marks of rule 4 (HorizonSeenAt) that this observation cannot show to
// have held since they were made. A mark says the standby's physical slot has kept the copy's
// catalog rows on the primary since then; the primary forgets that horizon when the standby's
// feedback stops (hot_standby_feedback turned off, which takes a reload or a restart of the
// standby) or when the primary restarts, and takes it back from none when the feedback resumes,
// so a live horizon covering the copy does not prove the rows were kept in between (a VACUUM
// then removes them, and on 11-15 nothing invalidates the copy). So every mark is void when the
// primary restarted (or is another server) or the standby's configuration was reloaded since
// the last pass; a mark is void too when the horizon no longer covers its copy. A restart of
// the standby alone keeps the horizon (the physical slot keeps it while the standby is away,
// and a standby that starts with the feedback off fails the next pass's prerequisites). It is
// pure: it returns the journal, with the reload seen recorded, and why marks were voided ("":
// none).
func horizonGap(j *Journal, obs Observation) (*Journal, string) {
	why := ""
	switch reloaded := obs.Standby.Info.ReloadedAt; {
	case j.PrimaryStartedAt != "" && obs.Primary.Info.StartedAt != "" && j.PrimaryStartedAt != obs.Primary.Info.StartedAt:
		why = "the primary restarted since the last pass (or is another server)"
	case reloaded.After(j.StandbyReloadedAt):
		why = fmt.Sprintf("the standby's configuration was reloaded at %s, after the last pass (its hot_standby_feedback may have been off)",
			reloaded.Format("15:04:05.000"))
	}
	horizon := obs.Physical.CatalogHorizon()
	next, voided := voidMarks(j, func(name string) bool {
		cp, ok := obs.Standby.Slots[name]
		return why != "" || !ok || !covers(horizon, cp)
	})
	if !obs.Standby.Info.ReloadedAt.Equal(j.StandbyReloadedAt) {
		if next == j {
			next = j.clone()
		}
		next.StandbyReloadedAt = obs.Standby.Info.ReloadedAt
	}
	switch {
	case voided == 0:
		return next, ""
	case why == "":
		why = "the standby's physical slot no longer covers their catalog_xmin"
	}
	return next, why
}

// feedbackStopped says why a pass that failed on the prerequisites shows the standby's
// feedback stopped ("": it does not; topology.FeedbackProblem): hot_standby_feedback off, or its
// physical slot gone from the primary. The primary has then forgotten the standby's horizon, and
// every mark of rule 4 is void (horizonGap), even if the feedback resumes by a restart or a slot
// made again, which horizonGap does not see.
func feedbackStopped(err error) string {
	if failpoint.Mutant("feedback-stopped") {
		return ""
	}
	return topology.FeedbackProblem(err)
}

// voidMarks returns the journal with HorizonSeenAt cleared on the entries void says, and the
// marks of the server's copies it says removed, and how many were (the journal itself when
// none was).
func voidMarks(j *Journal, void func(name string) bool) (*Journal, int) {
	next, n := j, 0
	for name, ent := range j.Slots {
		if ent.HorizonSeenAt == 0 || !void(name) || failpoint.Mutant("horizon-gap") {
			continue
		}
		if next == j {
			next = j.clone()
		}
		next.Slots[name].HorizonSeenAt = 0
		n++
	}
	for name := range j.ServerCopies {
		if !void(name) || failpoint.Mutant("horizon-gap") {
			continue
		}
		if next == j {
			next = j.clone()
		}
		delete(next.ServerCopies, name)
		n++
	}
	return next, n
}

// markHorizon sets HorizonSeenAt, at the primary's WAL position, for each journal entry whose
// copy the standby's horizon covers now, where kept also holds, but for the copies made in this
// pass (made).
func markHorizon(j *Journal, obs Observation, copies map[string]topology.Slot, made map[string]bool,
	kept func(string, *Entry, topology.Slot) bool) (*Journal, bool) {
	horizon := obs.Physical.CatalogHorizon()
	if horizon == 0 || obs.Primary.Info.CurrentLSN == 0 {
		return j, false
	}
	var next *Journal
	for name, ent := range j.Slots {
		cp, ok := copies[name]
		if !ok || made[name] && !failpoint.Mutant("horizon-remade") || ent.HorizonSeenAt != 0 || !covers(horizon, cp) || !kept(name, ent, cp) {
			continue
		}
		if next == nil {
			next = j.clone()
		}
		next.Slots[name].HorizonSeenAt = obs.Primary.Info.CurrentLSN
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
func twoPhaseSeen(j *Journal, obs Observation, skip map[string]bool) (*Journal, bool) {
	var next *Journal
	for name, ent := range j.Slots {
		if ent.TwoPhaseFrom == 0 || ent.TwoPhaseSettledAt != 0 || skip[name] || obs.Primary.Info.CurrentLSN < ent.TwoPhaseFrom {
			continue
		}
		now := obs.Prepared[ent.Identity.Database]
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
			e.TwoPhaseSettledAt = obs.Primary.Info.CurrentLSN
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

// markProtection records, after an applying pass, what rule 4 learned of each copy's catalog
// rows and prepared transactions (never for the copies the pass made: made).
func (e *Engine) markProtection(obs Observation, after map[string]topology.Slot, made map[string]bool) {
	// Each copy by the rules of the method that made it (copyTraits): exact copies beside the
	// standby's own decoding are proven kept as the state-file method's are.
	own := func(ent *Entry) bool { return copyTraits(e.traits, ent).OwnDecoding }
	installed := func(ent *Entry) bool { return copyTraits(e.traits, ent).NeedsHorizon }
	e.journal, _ = horizonSeen(e.journal, obs, after, made, own)
	e.journal, _ = twoPhaseSeen(e.journal, obs, made)
	next, seen := serverHorizonSeen(e.journal, obs)
	if next, kept := horizonKept(next, obs, made, installed); kept || seen {
		// Written at once: after a restart of slotsync the hold is gone, and a copy whose
		// proof was lost would be made again; the gate (check) judges the server's copies
		// from their marks. A failed write keeps it in memory, for the next journal write.
		if e.commit(next, nil, "that the standby now keeps a copy's catalog rows") != nil {
			e.journal = next
		}
	}
}

// noteHorizonGap voids the marks of rule 4 that this observation cannot show held since they
// were made (horizonGap): in memory for check, which judges from them next; written at once by
// the daemon, which logs it (a failed write keeps it in memory, for the next journal write).
func (e *Engine) noteHorizonGap(obs Observation, apply bool) {
	next, why := horizonGap(e.journal, obs)
	if next == e.journal {
		return
	}
	if !apply || why == "" {
		e.journal = next
		return
	}
	e.writeVoided(next, "the standby's feedback is not known to have kept the copies' catalog rows since they were last seen kept: "+
		"they are judged again (a copy no slot keeps them for is made again)", why)
}

// voidAllMarks voids every mark of rule 4 after a pass saw the standby's feedback stopped
// (feedbackStopped), written at once (kept in memory if the write fails).
func (e *Engine) voidAllMarks(why string) {
	if e.journal == nil {
		return
	}
	next, n := voidMarks(e.journal, func(string) bool { return true })
	if n == 0 {
		return
	}
	e.writeVoided(next, "the standby's feedback stopped: no copy's catalog rows are known kept by it any more (they are judged again once it is back)", why)
}

// writeVoided logs why marks of rule 4 were voided and writes the journal at once; a failed
// write keeps it in memory, for the next journal write.
func (e *Engine) writeVoided(next *Journal, msg, why string) {
	e.log.Warn(msg, "why", why)
	if e.commit(next, nil, "that copies' catalog rows are no longer known kept") != nil {
		e.journal = next
	}
}
