package sync

import (
	"context"
	"time"
)

// Role is what the local node (the one the standby DSN names) is right now.
type Role string

// The roles.
const (
	RoleStandby Role = "standby"
	RolePrimary Role = "primary"
)

// noteRole logs a change of the local node's role, once.
func (e *Engine) noteRole(r Role) {
	if e.logged.role == r {
		return
	}
	if (e.logged.role != "" || r == RolePrimary) && !e.cfg.ReadOnly {
		// Read-only commands (check, status) say it in their answer; only the daemon logs it.
		switch r {
		case RolePrimary:
			e.log.Warn("this node is the primary now (not in recovery): syncing nothing until it is a standby again; its slots are recorded as slotsync's to manage")
		case RoleStandby:
			e.log.Info("this node is a standby: syncing slots from its primary")
		}
	}
	e.logged.role = r
}

// asPrimary is a pass on a node that is the primary (rule 9): nothing is synced; applying
// passes record the node's own logical slots in the journal, so that when the node is a
// standby again its slots (copies promoted with it, or a demoted primary's own, now stale)
// are managed like any other copy: never moved back, recreated when the new primary's slot
// is another incarnation, never judged READY while stale.
func (e *Engine) asPrimary(ctx context.Context, rep Report, obs Observation, apply bool) (Report, error) {
	e.noteRole(RolePrimary)
	rep.Role = RolePrimary
	rep.Major = obs.Standby.Info.Major()
	rep.Standby = summarize(obs.Standby.Info)
	if err := e.checkJournalCluster(obs.Standby.Info.SystemID); err != nil {
		return rep, err
	}
	if apply && e.cfg.Native.ManageStandbySlots && rep.Major >= 17 {
		e.manageStandbySlots(ctx, false, StandbySlotsInput{Setting: obs.Standby.Info.SynchronizedStandbySlots,
			Listed: obs.OwnStandbySlots, GoneAfter: e.cfg.Native.StandbyGoneAfter})
	}
	if apply {
		next, changed := ownSlots(e.journal, obs.Standby, e.cfg.Select, e.now().UTC(), e.cfg.GateRecordInterval)
		if next.Gate != nil || !next.StandbyLostPrimaryAt.IsZero() {
			// The gate record, and when the standby lost its primary, belong to the node's era
			// as a standby: a primary has nothing to judge, and a record kept through it would
			// judge stale slots after a demotion (rule 8).
			next.Gate, next.StandbyLostPrimaryAt, changed = nil, time.Time{}, true
		}
		if changed {
			if err := e.commit(next, nil, "the node's own slots (it is the primary)"); err != nil {
				return rep, err
			}
		}
	}
	rep.Duration = e.now().Sub(rep.Started)
	return rep, nil
}

// ownSlots records a primary node's own logical slots in (a copy of) the journal: each selected,
// persistent slot becomes an entry whose reference position is the slot's own, and entries of
// slots gone from the node are removed. It reports whether the journal changed; a change of
// positions alone is written at most every interval. It reads nothing from the nodes, but a new
// entry draws a random incarnation ID (a slot whose ID cannot be drawn is recorded next time).
func ownSlots(j *Journal, node NodeState, sel Selection, now time.Time, interval time.Duration) (*Journal, bool) {
	next := j.clone()
	structural := false
	positions := false
	for name, s := range node.Slots {
		if s.Temporary || !s.Known() || !sel.Matches(name, s.Database, s.Plugin) {
			continue
		}
		ent := next.Slots[name]
		if ent == nil || ent.Identity != s.Identity {
			id, err := NewIncarnationID()
			if err != nil {
				continue
			}
			next.Slots[name] = &Entry{Incarnation: id, Identity: s.Identity, FirstSeen: s.Position, Primary: s.Position,
				Method: "own", CreatedAt: now, UpdatedAt: now, Timeline: node.Info.Timeline}
			structural = true
			continue
		}
		if ent.Primary != s.Position || ent.Timeline != node.Info.Timeline {
			e := *ent
			e.Primary, e.UpdatedAt, e.Timeline = s.Position, now, node.Info.Timeline
			next.Slots[name] = &e
			positions = true
		}
	}
	for name, ent := range next.Slots {
		if _, ok := node.Slots[name]; !ok && sel.Matches(name, ent.Identity.Database, ent.Identity.Plugin) {
			delete(next.Slots, name)
			structural = true
		}
	}
	if !structural && !(positions && now.Sub(j.OwnSlotsAt) >= interval) {
		return j, false
	}
	next.OwnSlotsAt = now
	return next, true
}
