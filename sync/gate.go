package sync

import (
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/topology"
)

// judge builds the per-slot report with each slot's readiness verdict; applied says whether the
// pass carried out its actions (results), or only planned them (check, status).
func (e *Engine) judge(obs Observation, standbySlots map[string]topology.Slot, actions []Action, results []result, applied bool) []SlotReport {
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
			sr.ExactCopy = copyTraits(e.traits, ent).Exact && !e.traits.Exact // beside the method's own copies
		}
		ps, onPrimary := obs.Primary.Slots[a.Slot]
		cp, hasCopy := standbySlots[a.Slot]
		if hasCopy {
			pos := cp.Position
			sr.Copy = &pos
			sr.CopyWALStatus = cp.WALStatus
			sr.CopyRetainedWALBytes = retained(obs.Standby.Info.WALEnd(), cp.RestartLSN)
		}
		if onPrimary {
			sr.PrimaryWALStatus = ps.WALStatus
			sr.PrimaryRetainedWALBytes = retained(obs.Primary.Info.WALEnd(), ps.RestartLSN)
		}
		if onPrimary && !ps.Temporary && a.Code != CodeUnselected && a.Code != CodeLeftAloneDropped {
			pos := ps.Position
			sr.Primary = &pos
			sr.Gate = true
			ent := e.journal.Slots[a.Slot]
			t := copyTraits(e.traits, ent) // by the rules of the method that made the copy
			needsSnapshot := t.NeedsSnapshot || ownAdvancedCopy(t, ent, cp, e.cfg.StateDir != "")
			var scratchAt lsncheck.LSN
			if ent != nil {
				scratchAt = ent.ScratchAt
			}
			// In the standby's pg_wal, and kept past the next checkpoint, as the promoted standby
			// will count it, its WAL reaching what the primary has written.
			walHeld := cp.WALAvailable() && obs.Standby.Info.HoldsWALFrom(cp.RestartLSN) &&
				obs.Standby.Info.KeepsSlotWAL(cp.RestartLSN, max(obs.Standby.Info.WALEnd(), obs.Primary.Info.WALEnd()))
			sr.Verdict = lsncheck.Readiness(lsncheck.ReadinessInput{
				Primary: ps.Seen(), PrimaryInvalidated: ps.Invalidated,
				CopyExists: hasCopy, Copy: cp.Seen(), CopyInvalidated: cp.Invalidated,
				CopyTemporary: cp.Temporary, CopySynced: cp.Synced, RequireSynced: ps.Failover, CopySyncSkip: cp.SyncSkip(),
				CopyWALAvailable: walHeld,
				CopyNotOurs:      a.Code == CodeNotOurs && e.cfg.StateDir != "",
				// The plan makes the copy again (a slot made again on the primary, its WAL gone,
				// beyond a fork): until that is done, the copy standing is the one replaced (rule 2).
				CopyRemade:        remade(a, results[i], applied),
				OtherSynchronizer: e.otherWriter(obs.Standby.Info, a),
				// A state-file copy advanced on the standby (its WAL read from restart_lsn on).
				CopyAdvancedHere: t.ProvesWAL && ent != nil && ent.WALVerified,
				StandbyWALEnd:    obs.Standby.Info.WALEnd(), PrimarySent: ps.SentLSN,
				RequireHorizon:        t.NeedsHorizon,
				InvalidatesOnConflict: obs.Standby.Info.Major() >= 16,
				StandbyHorizon:        obs.Physical.CatalogHorizon(),
				WALVerified:           ent != nil && ent.WALVerified,
				RequireSnapshot:       needsSnapshot,
				CopySnapshot:          cp.Snapshot == topology.SnapshotPresent || scratchAt != 0 && scratchAt == cp.RestartLSN,
				CopySnapshotUnknown:   cp.Snapshot == topology.SnapshotUnknown,
				OwnDecoding:           t.OwnDecoding,
				HorizonSeenAt:         horizonSeenAt(e.journal, a.Slot, ent, cp),
				StandbyReplay:         obs.Standby.Info.ReplayLSN,
				Exact:                 e.cfg.Exact,
				DecodeError:           decodeError(ent),
				TwoPhaseAtUnsynced:    ps.Failover && ps.TwoPhase && obs.Primary.Info.Major() == 17,
				TwoPhasePending:       twoPhasePending(ent, ps),
			})
			sr.requireSynced, sr.copyTwoPhase, sr.primaryTwoPhase = ps.Failover, cp.TwoPhase, ps.TwoPhase
			sr.ServerSyncSkip, sr.ServerSyncSkips = cp.SyncSkipReason, cp.SyncSkipCount
			// A state-file copy on 16+ whose catalog_xmin the primary slot holds rests on that slot,
			// not on the feedback.
			primaryKeeps := obs.Standby.Info.Major() >= 16 && lsncheck.PrimarySlotKeeps(cp.CatalogXmin, ps.CatalogXmin)
			sr.catalogByFeedback = hasCopy && (t.NeedsHorizon && !primaryKeeps || t.OwnDecoding && lsncheck.XIDPrecedes(cp.CatalogXmin, ps.CatalogXmin))
			sr.needsSnapshot, sr.scratchAt = needsSnapshot, scratchAt
		}
		out = append(out, sr)
	}
	return out
}

// ownAdvancedCopy says whether a copy is one slotsync made by the standby's own decoding (sql,
// or the native method's own), or may be (no journal): once advanced, decoding restarts from the
// snapshot it serialized at the copy's restart_lsn, which a promoted standby without it rebuilds
// from running-xacts records, skipping what commits before it is consistent again (rule 4). A
// copy the server syncs is the server's: its sync looks for that snapshot itself before it
// moves restart_lsn.
// With a journal, a copy without an entry is not slotsync's (copy_not_ours).
func ownAdvancedCopy(t method.Traits, ent *Entry, cp topology.Slot, journal bool) bool {
	if !t.OwnDecoding || cp.Synced {
		return false
	}
	if ent == nil {
		return !journal // where the copy was made is not known: it needs its snapshot wherever it is
	}
	return namesMethod(ent) // t is the traits of the method that made it: sql or native
}

// remade says why the plan makes a's copy again when the pass has not done so ("" otherwise):
// check and status only plan; the daemon's own pass may have failed or be waiting.
func remade(a Action, r result, applied bool) string {
	if a.Kind != KindRecreate || applied && r.done() {
		return ""
	}
	return string(a.Code)
}
