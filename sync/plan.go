package sync

import (
	"fmt"
	"sort"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// Kind is what a pass does to one slot.
type Kind string

// The kinds of action. Only Create, Advance, Recreate, Drop and Forget change anything.
const (
	KindCreate   Kind = "create"   // make the standby copy
	KindAdvance  Kind = "advance"  // move the copy forward to Target
	KindRecreate Kind = "recreate" // drop the copy of an old incarnation and make a new one
	KindDrop     Kind = "drop"     // the slot is gone from the primary: drop the copy slotsync made
	KindForget   Kind = "forget"   // remove a journal entry; the standby is not touched
	KindNone     Kind = "none"     // nothing to do (up to date, or waiting: see Reason)
	KindSkip     Kind = "skip"     // left alone on purpose: see Reason
	// KindSetFailover sets failover=true on the primary slot (native method, opt-in).
	KindSetFailover Kind = "set_failover"
)

// Action is one planned step for one slot, with the reason it is right.
type Action struct {
	Kind   Kind
	Slot   string
	Reason string
	// Primary is the primary slot as observed (zero for Drop and Forget).
	Primary topology.Slot
	// Identity is the slot's identity: the primary's, or the journal's when the primary lost it.
	Identity lsncheck.Identity
	// Target is where Advance moves the copy.
	Target lsncheck.LSN
	// CopyDatabase is the database of the standby copy that Recreate drops.
	CopyDatabase string
	// Rebase: record the primary slot's position as the new reference for rule 2 (its
	// confirmed_flush went back in a crash of the primary).
	Rebase bool
}

// Changes reports whether the action changes the standby or the journal.
func (a Action) Changes() bool {
	switch a.Kind {
	case KindCreate, KindAdvance, KindRecreate, KindDrop, KindForget, KindSetFailover:
		return true
	}
	return false
}

// PlanInput is what the planner decides from: one complete observation of both nodes, the
// journal, the selection and the method in force.
type PlanInput struct {
	Primary, Standby NodeState
	Journal          *Journal
	Select           Selection
	Method           topology.Method
	// Recopy names owned copies to make again, with the reason (the state-file method learns
	// from a failed advance that the copy's WAL is gone).
	Recopy map[string]string
	// Native holds the opt-in actions for the server's own slot sync (17+).
	Native NativeConfig
	// PrimaryRestarted: the primary restarted since the journal last saw it, so a slot's
	// confirmed_flush may have gone back to its last checkpointed value.
	PrimaryRestarted bool
}

// NodeState is one node as observed in a pass.
type NodeState struct {
	Info  topology.NodeInfo
	Slots map[string]topology.Slot
}

// Plan decides, for every selected slot, what this pass does (DESIGN §2 rules 1–3). It is pure:
// the same input always gives the same actions, in slot-name order.
func Plan(in PlanInput) []Action {
	var actions []Action
	replay := in.Standby.Info.ReplayLSN

	for _, name := range sortedKeys(in.Primary.Slots) {
		ps := in.Primary.Slots[name]
		if !in.Select.Matches(name, ps.Database, ps.Plugin) {
			continue
		}
		cp, hasCopy := in.Standby.Slots[name]
		entry, owned := in.Journal.Slots[name]
		act := func(kind Kind, format string, args ...any) {
			actions = append(actions, Action{Kind: kind, Slot: name, Primary: ps, Identity: ps.Identity, Reason: fmt.Sprintf(format, args...)})
		}
		switch {
		case ps.Temporary:
			act(KindSkip, "temporary on the primary: it ends with its session and cannot survive a failover")
		case ps.Failover:
			actions = append(actions, planFailoverSlot(in, name, ps, cp, hasCopy, owned))
		case in.Method == topology.MethodNative && in.Native.SetFailover && ps.Active:
			act(KindSkip, "failover=false and in use (pid %d): failover=true is set only while the slot is idle", ps.ActivePID)
		case in.Method == topology.MethodNative && in.Native.SetFailover:
			act(KindSetFailover, "failover=false: setting failover=true so the server's slot sync keeps it (--set-failover)")
		case ps.Invalidated:
			act(KindSkip, "invalidated on the primary (%s): its consumer must resnapshot; the standby copy is left as it is", ps.InvalidationReason)
		case !ps.Known():
			act(KindSkip, "the primary slot has no positions yet (still being created)")
		case hasCopy && cp.Synced:
			act(KindSkip, "the standby copy is kept by the server's own slot sync (synced=true)")
		case hasCopy && !owned:
			act(KindSkip, "the standby has a slot of this name that slotsync did not create: it is never touched; drop it on the standby if it is a stale copy")
		case !hasCopy && owned:
			act(KindCreate, "the standby copy slotsync made is missing: creating it again")
		case !hasCopy:
			act(KindCreate, "new slot on the primary")
		default:
			actions = append(actions, planExisting(in, name, ps, cp, entry, replay))
		}
	}

	// Copies slotsync made whose primary slot is gone (rule 3): the observation that shows
	// them missing is complete, or there would be no plan.
	for _, name := range sortedKeys(in.Journal.Slots) {
		if _, onPrimary := in.Primary.Slots[name]; onPrimary {
			continue
		}
		entry := in.Journal.Slots[name]
		if !in.Select.Matches(name, entry.Identity.Database, entry.Identity.Plugin) {
			continue
		}
		a := Action{Slot: name, Identity: entry.Identity}
		cp, hasCopy := in.Standby.Slots[name]
		switch {
		case !hasCopy:
			a.Kind, a.Reason = KindForget, "gone from both nodes"
		case cp.Active:
			a.Kind, a.Reason = KindSkip, fmt.Sprintf("dropped on the primary, but the copy is in use on the standby (pid %d): left alone", cp.ActivePID)
		case cp.Synced:
			a.Kind, a.Reason = KindForget, "the copy is now kept by the server's own slot sync"
		case cp.Identity != entry.Identity:
			a.Kind, a.Reason = KindForget, "the standby slot of this name is not the copy slotsync made: not dropping it"
		default:
			a.Kind, a.Reason = KindDrop, "dropped on the primary"
		}
		actions = append(actions, a)
	}
	return actions
}

// planFailoverSlot decides for a failover=true slot (17+): the server's slot sync keeps its
// copy; slotsync only clears what blocks it. A same-name slot with synced=false on the standby
// makes the server's worker stop syncing altogether (lesson 6).
func planFailoverSlot(in PlanInput, name string, ps, cp topology.Slot, hasCopy, owned bool) Action {
	a := Action{Slot: name, Primary: ps, Identity: ps.Identity}
	switch {
	case hasCopy && !cp.Synced && owned && !cp.Active:
		a.Kind, a.Identity = KindDrop, cp.Identity
		a.Reason = "failover=true now: dropping slotsync's own copy so the server's slot sync can make its own"
	case hasCopy && !cp.Synced && in.Native.DropStale && !cp.Active:
		a.Kind, a.Identity = KindDrop, cp.Identity
		a.Reason = "a same-name slot with synced=false blocks the server's slot sync: dropping it (--drop-stale)"
	case hasCopy && !cp.Synced && cp.Active:
		a.Kind = KindSkip
		a.Reason = fmt.Sprintf("a same-name slot with synced=false, in use (pid %d), blocks the server's slot sync of every slot: stop its user and drop it", cp.ActivePID)
	case hasCopy && !cp.Synced:
		a.Kind = KindSkip
		a.Reason = "a same-name slot with synced=false blocks the server's slot sync of every slot: drop it on the standby (SELECT pg_drop_replication_slot('" + name + "')), or run with --drop-stale"
	case hasCopy:
		a.Kind, a.Reason = KindNone, "failover=true: kept by the server's slot sync"
	default:
		a.Kind, a.Reason = KindNone, "failover=true: waiting for the server's slot sync to create the copy"
	}
	return a
}

// planExisting decides for a slot that has a copy slotsync made.
func planExisting(in PlanInput, name string, ps, cp topology.Slot, entry *Entry, replay lsncheck.LSN) Action {
	a := Action{Slot: name, Primary: ps, Identity: ps.Identity, CopyDatabase: cp.Database}
	// A copy in use on the standby is never dropped or moved, whatever else is true of it.
	if cp.Active {
		a.Kind, a.Reason = KindSkip, fmt.Sprintf("the copy is in use on the standby (pid %d)", cp.ActivePID)
		return a
	}
	// Rule 2: compare with what the copy was synced from, not with the copy itself (a fresh
	// copy is legitimately ahead of the primary).
	prev := lsncheck.Seen{Identity: entry.Identity, Position: entry.Primary}
	if ch, why := lsncheck.CompareIncarnation(prev, ps.Seen()); ch == lsncheck.NewIncarnation {
		if !(in.PrimaryRestarted && lsncheck.OnlyConfirmedRegressed(prev, ps.Seen())) {
			a.Kind, a.Reason = KindRecreate, "recreated on the primary: "+why
			return a
		}
		// The primary restarted and only confirmed_flush went back: the same slot after a
		// crash. The copy stays as it is (never backwards) until the consumer confirms again.
		a.Rebase = true
	}
	if cp.Identity != ps.Identity {
		a.Kind, a.Reason = KindRecreate, fmt.Sprintf("the copy (database %q, plugin %q, two_phase %v) differs from the primary slot",
			cp.Database, cp.Plugin, cp.TwoPhase)
		return a
	}
	if cp.Invalidated {
		a.Kind, a.Reason = KindRecreate, fmt.Sprintf("the copy is invalidated (%s)", cp.InvalidationReason)
		return a
	}
	if why, ok := in.Recopy[name]; ok {
		a.Kind, a.Reason = KindRecreate, why
		return a
	}
	// Rule 1: never backwards, never past what the standby has replayed.
	target := lsncheck.MinLSN(ps.ConfirmedFlush, replay)
	switch {
	case in.Method == topology.MethodStatefile && !entry.WALVerified && target <= cp.ConfirmedFlush && cp.ConfirmedFlush <= replay:
		// An installed state file says nothing of the WAL behind it: read it once (an advance
		// to where the copy already is decodes from restart_lsn) before calling it READY.
		a.Kind, a.Target = KindAdvance, cp.ConfirmedFlush
		a.Reason = "reading the copy's WAL once to prove the standby still has it"
	case target > cp.ConfirmedFlush:
		a.Kind, a.Target = KindAdvance, target
		a.Reason = fmt.Sprintf("consumer confirmed %s; advancing the copy from %s to %s", ps.ConfirmedFlush, cp.ConfirmedFlush, target)
	case ps.ConfirmedFlush > cp.ConfirmedFlush:
		a.Kind = KindNone
		a.Reason = fmt.Sprintf("standby lagging: replayed %s, the copy is at %s, the consumer at %s", replay, cp.ConfirmedFlush, ps.ConfirmedFlush)
	case ps.ConfirmedFlush < cp.ConfirmedFlush:
		a.Kind = KindNone
		a.Reason = fmt.Sprintf("the copy (%s) is ahead of the consumer (%s): waiting for the consumer to confirm past it", cp.ConfirmedFlush, ps.ConfirmedFlush)
	default:
		a.Kind, a.Reason = KindNone, "up to date"
	}
	if a.Rebase {
		a.Reason = "the primary restarted and the slot's confirmed_flush went back to its last checkpoint (same slot): " + a.Reason
	}
	return a
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
