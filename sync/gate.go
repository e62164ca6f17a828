package sync

import (
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// judge builds the per-slot report with each slot's readiness verdict.
func (e *Engine) judge(obs Observation, standbySlots map[string]topology.Slot, actions []Action, results []result) []SlotReport {
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
			sr.ExactCopy = ent.Method == string(topology.MethodStatefile) && !e.traits.NeedsSnapshot
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
			sr.Verdict = lsncheck.Readiness(lsncheck.ReadinessInput{
				Primary: ps.Seen(), PrimaryInvalidated: ps.Invalidated,
				CopyExists: hasCopy, Copy: cp.Seen(), CopyInvalidated: cp.Invalidated,
				CopyTemporary: cp.Temporary, CopySynced: cp.Synced, RequireSynced: ps.Failover,
				// Kept past the next checkpoint, as the promoted standby will count it, its WAL
				// reaching what the primary has written.
				CopyWALAvailable:  cp.WALAvailable() && obs.Standby.Info.KeepsSlotWAL(cp.RestartLSN, max(obs.Standby.Info.WALEnd(), obs.Primary.Info.WALEnd())),
				CopyNotOurs:       a.Code == CodeNotOurs && e.cfg.StateDir != "",
				OtherSynchronizer: e.otherWriter(obs.Standby.Info, a),
				// A state-file copy advanced on the standby (its WAL read from restart_lsn on).
				CopyAdvancedHere: t.NeedsSnapshot && ent != nil && ent.WALVerified,
				StandbyWALEnd:    obs.Standby.Info.WALEnd(), PrimarySent: ps.SentLSN,
				RequireHorizon:  t.NeedsHorizon,
				StandbyHorizon:  obs.Physical.CatalogHorizon(),
				WALVerified:     ent != nil && ent.WALVerified,
				RequireSnapshot: t.NeedsSnapshot,
				CopySnapshot: cp.Snapshot == topology.SnapshotPresent ||
					(ent != nil && ent.ScratchAt != 0 && ent.ScratchAt == cp.RestartLSN),
				CopySnapshotUnknown: cp.Snapshot == topology.SnapshotUnknown,
				OwnDecoding:         t.OwnDecoding,
				HorizonSeenAt:       horizonSeenAt(ent),
				StandbyReplay:       obs.Standby.Info.ReplayLSN,
				Exact:               e.cfg.Exact,
				DecodeError:         decodeError(ent),
				TwoPhaseAtUnsynced:  ps.Failover && ps.TwoPhase && obs.Primary.Info.Major() == 17,
				TwoPhasePending:     twoPhasePending(ent, ps),
			})
			sr.requireSynced, sr.copyTwoPhase, sr.primaryTwoPhase = ps.Failover, cp.TwoPhase, ps.TwoPhase
			sr.catalogByFeedback = hasCopy && (t.NeedsHorizon || t.OwnDecoding && lsncheck.XIDPrecedes(cp.CatalogXmin, ps.CatalogXmin))
		}
		out = append(out, sr)
	}
	return out
}
