package sync

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
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

// Code is the machine-readable reason for an action; its values are stable (JSON, metrics).
type Code string

// The reasons for actions, one per decision of the planner.
const (
	CodeNewSlot             Code = "new_slot"                  // create: the standby has never had it
	CodeCopyMissing         Code = "copy_missing"              // create: slotsync's copy is gone
	CodeConsumerMoved       Code = "consumer_moved"            // advance to the consumer's confirmed_flush
	CodeVerifyWAL           Code = "verify_copy_wal"           // advance in place: prove the copy's WAL is there
	CodeUpToDate            Code = "up_to_date"                // none
	CodeStandbyLagging      Code = "standby_lagging"           // none: replay is behind the consumer
	CodeCopyAhead           Code = "copy_ahead_of_consumer"    // none: waiting for the consumer
	CodeRecreatedOnPrimary  Code = "recreated_on_primary"      // recreate: another incarnation (rule 2)
	CodeCopyIdentityDiffers Code = "copy_identity_differs"     // recreate: database, plugin or two_phase
	CodeCopyInvalidated     Code = "copy_invalidated"          // recreate
	CodeCopyWALGone         Code = "copy_wal_gone"             // recreate (state file): its WAL is gone
	CodeDroppedOnPrimary    Code = "dropped_on_primary"        // drop (rule 3)
	CodeGoneFromBoth        Code = "gone_from_both"            // forget
	CodeNowServerSynced     Code = "now_server_synced"         // forget: the server's sync keeps it
	CodeNotTheCopy          Code = "standby_slot_not_the_copy" // forget: the standby slot is another slot
	CodeCopyInUse           Code = "copy_in_use"               // skip: in use on the standby
	CodeNotOurs             Code = "copy_not_made_by_slotsync" // skip: never touched (lesson 4)
	CodeAdopted             Code = "adopted"                   // recreate: --adopt-copies, a copy with no journal entry
	CodePrimaryTemporary    Code = "primary_temporary"         // skip
	CodePrimaryInvalidated  Code = "primary_invalidated"       // skip: the consumer must resnapshot
	CodePrimaryUnknown      Code = "primary_positions_unknown" // skip: still being created
	CodeServerSynced        Code = "copy_kept_by_server_sync"  // skip (synced=true)
	CodeFailoverKept        Code = "failover_kept_by_server"   // none (17+)
	CodeFailoverWaiting     Code = "failover_waiting_for_server"
	CodeOwnCopyForServer    Code = "drop_own_copy_for_server_sync" // drop: failover=true now
	CodeStaleDropped        Code = "stale_slot_dropped"            // drop (--drop-stale)
	CodeStaleBlocksSync     Code = "stale_slot_blocks_server_sync" // skip: a human drops it
	CodeSetFailover         Code = "set_failover"                  // set_failover (--set-failover)
	CodeSetFailoverInUse    Code = "set_failover_slot_in_use"      // skip
	CodeBackoff             Code = "retry_backoff"                 // skip: failed, retried later (lesson 3)
	CodeGaveUp              Code = "gave_up_repeated_copies"       // skip: copied too often (lesson 1)
	CodeWaitStreaming       Code = "waiting_for_standby_streaming" // none: no state-file copy before it streams
	CodeUnselected          Code = "copy_not_selected"             // skip: slotsync's copy of a slot no longer selected
	CodeLeftAloneDropped    Code = "left_alone_copy_dropped"       // drop (--drop-left-alone)
	CodeCatchingUp          Code = "catching_up"                   // advance by at most AdvanceStep
	CodeBeyondFork          Code = "copy_beyond_fork"              // recreate: the copy is of an abandoned timeline
	CodeTwoPhaseWaits       Code = "two_phase_change_waits"        // none: two_phase turned on while transactions are prepared
	CodeCatalogLapsed       Code = "catalog_hold_lapsed"           // recreate (state file): its catalog rows were unprotected
	CodeOtherSynchronizer   Code = "other_synchronizer"            // skip: another tool on the standby syncs slots
	CodeExactForAway        Code = "exact_copy_for_away_consumer"  // recreate (state file): its consumer is away (--exact-copy-after)
)

// Action is one planned step for one slot, with the reason it is right.
type Action struct {
	Kind Kind
	Code Code
	Slot string
	// Reason says the same as Code, for people, with the positions behind it.
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
	// LeftAlone: a copy slotsync made and no longer syncs (reported with what it holds).
	LeftAlone bool
	// Exact: Create or Recreate makes the copy from the primary's state files beside a method
	// whose own copies come from the standby's decoding (--exact-copy-after).
	Exact bool
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
	// Traits are the rules of the method in force (which copies it batches, what READY needs).
	Traits method.Traits
	// Recopy names owned copies to make again, with the reason (the state-file method learns
	// from a failed advance that the copy's WAL is gone).
	Recopy map[string]string
	// Native holds the opt-in actions for the server's own slot sync (17+).
	Native NativeConfig
	// AdvanceStep bounds one advance (0: unbounded): a copy further behind catches up in steps.
	AdvanceStep int64
	// DropLeftAlone drops the copies slotsync made and no longer syncs (their primary slot is
	// invalidated, or they are no longer selected) instead of leaving them to pin the
	// standby's WAL and catalog rows. Slots slotsync did not make are never dropped.
	DropLeftAlone bool
	// AdoptCopies makes again, as slotsync's own, the idle standby copies with no journal entry
	// whose database and plugin are their primary slot's (a journal lost or corrupt).
	AdoptCopies bool
	// Prepared are the primary's prepared transactions by database (read when a slot has
	// two_phase).
	Prepared map[string][]lsncheck.XID
	// History is the primary's timeline history (timeline → where it ended), read when a journal
	// entry was synced on another timeline than the primary's now; empty when it could not be
	// read (such copies are then made again); nil when not needed.
	History map[int]lsncheck.LSN
	// PrimaryRestarted: the primary restarted since the journal last saw it (or runs a minor on
	// which a consumer's reconnect can take restart_lsn back: lsncheck.RestartLSNMayRegress), so a slot's
	// restart_lsn may have gone back on older minors (rule 2).
	PrimaryRestarted bool
	// Failing holds the slots whose last action failed, and when they may be tried again; Now
	// is the time of this pass (lesson 3: a failing slot waits, the others go on).
	Failing map[string]Backoff
	Now     time.Time
	// Copies counts the state-file copies made of each slot that did not become READY;
	// MaxCopies is how many are made before giving up (lesson 1: no restart loops).
	Copies    map[string]int
	MaxCopies int
	// ExactCopyAfter (0: never; set only where the method in force's own copies come from the
	// standby's decoding): a copy of the standby's own decoding still ahead of its consumer this
	// long after it was made, the consumer not connected, is replaced by an exact copy
	// (Action.Exact); a state-file copy made so stays one when it is made again.
	ExactCopyAfter time.Duration
}

// traitsOf gives the rules of the copy the entry records (copyTraits).
func (in PlanInput) traitsOf(entry *Entry) method.Traits { return copyTraits(in.Traits, entry) }

// batched says whether the action's copy is made at the batched standby restart of a pass.
func (in PlanInput) batched(a Action) bool {
	return (a.Kind == KindCreate || a.Kind == KindRecreate) && (in.Traits.BatchesCreates || a.Exact)
}

// Backoff is a slot whose actions failed Count times in a row, the last with LastErr; it is
// not worked on before RetryAt.
type Backoff struct {
	Count   int
	LastErr string
	RetryAt time.Time
}

// NodeState is one node as observed in a pass.
type NodeState struct {
	Info  topology.NodeInfo
	Slots map[string]topology.Slot
}

// Plan decides, for every selected slot, what this pass does (docs/RULES.md rules 1–3). It is pure:
// the same input always gives the same actions, in slot-name order.
func Plan(in PlanInput) []Action {
	actions := plan(in)
	for i := range actions {
		actions[i] = restrain(in, actions[i])
	}
	return actions
}

// restrain holds back what must not be tried now: a slot in failure backoff, and a batched copy
// (a standby restart) while the standby does not stream or once made MaxCopies times without
// becoming READY.
func restrain(in PlanInput, a Action) Action {
	if f, ok := in.Failing[a.Slot]; ok && a.Changes() && in.Now.Before(f.RetryAt) {
		a.Kind, a.Code = KindSkip, CodeBackoff
		a.Reason = fmt.Sprintf("retrying after %s: last attempt failed (%d in a row): %s",
			f.RetryAt.Sub(in.Now).Round(time.Second), f.Count, f.LastErr)
		return a
	}
	if in.batched(a) && in.Standby.Info.NotStreaming() {
		// A standby that is starting, rewound or being re-pointed (an HA manager rejoining it) is
		// not restarted for copies: the restart would race its manager, and the copy's catalog
		// rows are protected only through the standby's feedback while it streams.
		a.Kind, a.Code = KindNone, CodeWaitStreaming
		a.Reason = "the standby is not streaming from its primary yet: a copy is installed once it streams (" + a.Reason + ")"
		return a
	}
	if in.batched(a) && in.MaxCopies > 0 && in.Copies[a.Slot] >= in.MaxCopies {
		a.Kind, a.Code = KindSkip, CodeGaveUp
		a.Reason = fmt.Sprintf("gave up after %d copies that did not become READY (last reason to copy: %s); fix the cause and restart slotsync",
			in.Copies[a.Slot], a.Reason)
	}
	return a
}

func plan(in PlanInput) []Action {
	var actions []Action
	replay := in.Standby.Info.ReplayLSN

	other := in.Standby.Info.OtherSynchronizer()
	for _, name := range sortedKeys(in.Primary.Slots) {
		ps := in.Primary.Slots[name]
		if ps.Temporary && strings.HasPrefix(name, method.HoldPrefix) {
			continue // slotsync's own catalog holds (method.HoldPrefix) are not consumers' slots
		}
		if why := leftToOther(in, name, ps, other); why != "" {
			actions = append(actions, Action{Kind: KindSkip, Code: CodeOtherSynchronizer, Slot: name, Primary: ps, Identity: ps.Identity, Reason: why})
			continue
		}
		cp, hasCopy := in.Standby.Slots[name]
		entry, owned := in.Journal.Slots[name]
		if !in.Select.Matches(name, ps.Database, ps.Plugin) {
			if owned && hasCopy && !cp.Synced {
				actions = append(actions, leftAlone(in, name, cp, CodeUnselected, "no longer selected (--slots, --databases, --plugins)"))
			}
			continue
		}
		act := func(kind Kind, code Code, format string, args ...any) {
			actions = append(actions, Action{Kind: kind, Code: code, Slot: name, Primary: ps, Identity: ps.Identity, Reason: fmt.Sprintf(format, args...)})
		}
		switch {
		case ps.Temporary:
			act(KindSkip, CodePrimaryTemporary, "temporary on the primary: it ends with its session and cannot survive a failover")
		case ps.Failover:
			actions = append(actions, planFailoverSlot(in, name, ps, cp, hasCopy, owned))
		case in.Traits.ServerSyncs && in.Native.SetFailover && ps.Active:
			act(KindSkip, CodeSetFailoverInUse, "failover=false and in use (pid %d): failover=true is set only while the slot is idle", ps.ActivePID)
		case in.Traits.ServerSyncs && in.Native.SetFailover:
			act(KindSetFailover, CodeSetFailover, "failover=false: setting failover=true so the server's slot sync keeps it (--set-failover)")
		case ps.Invalidated && owned && hasCopy && !cp.Synced:
			a := leftAlone(in, name, cp, CodePrimaryInvalidated, fmt.Sprintf("invalidated on the primary (%s): its consumer must resnapshot", ps.InvalidationReason))
			a.Primary = ps
			actions = append(actions, a)
		case ps.Invalidated:
			act(
				KindSkip,
				CodePrimaryInvalidated,
				"invalidated on the primary (%s): its consumer must resnapshot; the standby copy is left as it is",
				ps.InvalidationReason,
			)
		case !ps.Known():
			act(KindSkip, CodePrimaryUnknown, "the primary slot has no positions yet (still being created)")
		case hasCopy && cp.Synced:
			act(KindSkip, CodeServerSynced, "the standby copy is kept by the server's own slot sync (synced=true)")
		case hasCopy && !owned && in.AdoptCopies && cp.Database == ps.Database && cp.Plugin == ps.Plugin && !cp.Active:
			act(
				KindRecreate,
				CodeAdopted,
				"a copy of this slot that slotsync has no record of (its journal was lost or corrupt): making it again as slotsync's own (--adopt-copies)",
			)
		case hasCopy && !owned:
			act(
				KindSkip,
				CodeNotOurs,
				"the standby has a slot of this name that slotsync did not create: it is never touched; drop it on the standby if it is a stale copy",
			)
		case !hasCopy && owned:
			act(KindCreate, CodeCopyMissing, "the standby copy slotsync made is missing: creating it again")
		case !hasCopy:
			act(KindCreate, CodeNewSlot, "new slot on the primary")
		default:
			actions = append(actions, planExisting(in, name, ps, cp, entry, replay))
		}
		if last := &actions[len(actions)-1]; owned && (last.Kind == KindCreate || last.Kind == KindRecreate) && staysExact(in, entry, ps) {
			last.Exact = true
		}
	}

	return append(actions, planGone(in, other)...)
}

// planGone decides for the copies slotsync made whose primary slot is gone (rule 3): the
// observation that shows them missing is complete, or there would be no plan.
func planGone(in PlanInput, other string) []Action {
	var actions []Action
	for _, name := range sortedKeys(in.Journal.Slots) {
		if _, onPrimary := in.Primary.Slots[name]; onPrimary || other != "" {
			continue
		}
		entry := in.Journal.Slots[name]
		cp, hasCopy := in.Standby.Slots[name]
		if !in.Select.Matches(name, entry.Identity.Database, entry.Identity.Plugin) {
			if hasCopy && !cp.Synced && cp.Identity == entry.Identity {
				actions = append(actions, leftAlone(in, name, cp, CodeUnselected, "no longer selected (--slots, --databases, --plugins), and gone from the primary"))
			}
			continue
		}
		a := Action{Slot: name, Identity: entry.Identity}
		switch {
		case !hasCopy:
			a.Kind, a.Code, a.Reason = KindForget, CodeGoneFromBoth, "gone from both nodes"
		case cp.Active:
			a.Kind, a.Code, a.Reason = KindSkip, CodeCopyInUse, fmt.Sprintf(
				"dropped on the primary, but the copy is in use on the standby (pid %d): left alone",
				cp.ActivePID,
			)
		case cp.Synced:
			a.Kind, a.Code, a.Reason = KindForget, CodeNowServerSynced, "the copy is now kept by the server's own slot sync"
		case cp.Identity != entry.Identity:
			a.Kind, a.Code, a.Reason = KindForget, CodeNotTheCopy, "the standby slot of this name is not the copy slotsync made: not dropping it"
		default:
			a.Kind, a.Code, a.Reason = KindDrop, CodeDroppedOnPrimary, "dropped on the primary"
		}
		actions = append(actions, a)
	}
	return actions
}

// staysExact says whether a state-file copy made beside the method's own copies
// (--exact-copy-after) is made again as one: while its consumer is not connected. A connected
// consumer is served by a copy of the standby's own decoding, which it confirms past.
func staysExact(in PlanInput, entry *Entry, ps topology.Slot) bool {
	return in.ExactCopyAfter > 0 && in.traitsOf(entry).Exact && !ps.Active
}

// exactForAway says why a copy of the standby's own decoding, ahead of its consumer, is
// replaced by an exact copy now ("" while it is not): its consumer is not connected, and the copy
// was made ExactCopyAfter ago or more (it has stood ahead of the consumer since: a copy is never
// moved past its consumer). wait says when it would be, for the reason of a copy that waits.
func exactForAway(in PlanInput, ps, cp topology.Slot, entry *Entry) (why, wait string) {
	if in.ExactCopyAfter <= 0 || !in.traitsOf(entry).OwnDecoding {
		return "", ""
	}
	if ps.Active {
		return "", "; its consumer is connected (pid " + fmt.Sprint(ps.ActivePID) + "): the copy is not replaced by an exact one while it is"
	}
	since := in.Now.Sub(entry.CreatedAt)
	if since < in.ExactCopyAfter {
		return "", fmt.Sprintf("; an exact copy replaces it in %s if its consumer stays away (--exact-copy-after %s)",
			(in.ExactCopyAfter - since).Round(time.Second), in.ExactCopyAfter)
	}
	return fmt.Sprintf("the copy (%s) has stood ahead of its consumer (%s), which is not connected, for %s (--exact-copy-after %s): replacing it by an "+
		"exact copy of the primary slot (state file, decoding snapshot, WAL, catalog rows), READY without its consumer",
		cp.ConfirmedFlush, ps.ConfirmedFlush, since.Round(time.Second), in.ExactCopyAfter), ""
}

// leftToOther says why a selected slot is left to another writer ("" when it is not): never
// fight another synchronizer over a slot (docs/CLI.md, "One synchronizer per slot"): one loaded
// on the standby (other), or someone who changed the copy under slotsync more than once
// (writers.go).
func leftToOther(in PlanInput, name string, ps topology.Slot, other string) string {
	if !in.Select.Matches(name, ps.Database, ps.Plugin) {
		return ""
	}
	if other != "" {
		return other + " is loaded on the standby and syncs slots too: left to it (use one tool)"
	}
	if ent, ok := in.Journal.Slots[name]; ok && ent.OtherWriter != "" {
		return ent.OtherWriter + ": left alone until the daemon is restarted (use one tool)"
	}
	return ""
}

// leftAlone decides for a copy slotsync made and no longer syncs: reported with what it holds
// (report.go), and dropped only with DropLeftAlone and while nobody reads it on the standby.
func leftAlone(in PlanInput, name string, cp topology.Slot, code Code, why string) Action {
	a := Action{Slot: name, Identity: cp.Identity, CopyDatabase: cp.Database, LeftAlone: true}
	switch {
	case in.DropLeftAlone && !cp.Active:
		a.Kind, a.Code = KindDrop, CodeLeftAloneDropped
		a.Reason = why + ": dropping slotsync's copy, which would pin the standby's WAL and catalog rows for nothing (--drop-left-alone)"
	default:
		a.Kind, a.Code = KindSkip, code
		a.Reason = why + ": slotsync's copy is left as it is and still holds WAL and catalog rows on the standby; drop it, or run with --drop-left-alone"
	}
	return a
}

// planFailoverSlot decides for a failover=true slot (17+): the server's slot sync keeps its
// copy; slotsync only clears what blocks it. A same-name slot with synced=false on the standby
// makes the server's worker stop syncing altogether (docs/RULES.md, lesson 6).
func planFailoverSlot(in PlanInput, name string, ps, cp topology.Slot, hasCopy, owned bool) Action {
	a := Action{Slot: name, Primary: ps, Identity: ps.Identity}
	switch {
	case hasCopy && !cp.Synced && owned && !cp.Active:
		a.Kind, a.Code, a.Identity = KindDrop, CodeOwnCopyForServer, cp.Identity
		a.Reason = "failover=true now: dropping slotsync's own copy so the server's slot sync can make its own"
	case hasCopy && !cp.Synced && in.Native.DropStale && !cp.Active:
		a.Kind, a.Code, a.Identity = KindDrop, CodeStaleDropped, cp.Identity
		a.Reason = "a same-name slot with synced=false blocks the server's slot sync: dropping it (--drop-stale)"
	case hasCopy && !cp.Synced && cp.Active:
		a.Kind, a.Code = KindSkip, CodeStaleBlocksSync
		a.Reason = fmt.Sprintf(
			"a same-name slot with synced=false, in use (pid %d), blocks the server's slot sync of every slot: stop its user and drop it",
			cp.ActivePID,
		)
	case hasCopy && !cp.Synced:
		a.Kind, a.Code = KindSkip, CodeStaleBlocksSync
		a.Reason = "a same-name slot with synced=false blocks the server's slot sync of every slot: drop it on the standby (SELECT " +
			"pg_drop_replication_slot('" + name + "')), or run with --drop-stale"
	case hasCopy:
		a.Kind, a.Code, a.Reason = KindNone, CodeFailoverKept, "failover=true: kept by the server's slot sync"
	default:
		a.Kind, a.Code, a.Reason = KindNone, CodeFailoverWaiting, "failover=true: waiting for the server's slot sync to create the copy"
	}
	return a
}

// planExisting decides for a slot that has a copy slotsync made.
func planExisting(in PlanInput, name string, ps, cp topology.Slot, entry *Entry, replay lsncheck.LSN) Action {
	a := Action{Slot: name, Primary: ps, Identity: ps.Identity, CopyDatabase: cp.Database}
	// A copy in use on the standby is never dropped or moved, whatever else is true of it.
	if cp.Active {
		a.Kind, a.Code, a.Reason = KindSkip, CodeCopyInUse, fmt.Sprintf("the copy is in use on the standby (pid %d)", cp.ActivePID)
		return a
	}
	// two_phase turned on while transactions are prepared: a new copy would wait for them, and
	// there would be no copy meanwhile. The copy stays (NOT READY, another identity) until then:
	// kept or made now, it would send again, whole, each of them its consumer holds prepared
	// (rule 4, two_phase; TestTwoPhaseTurnedOnPrepareReceived).
	if in.traitsOf(entry).OwnDecoding && ps.TwoPhase && !cp.TwoPhase && cp.Database == ps.Database && cp.Plugin == ps.Plugin && len(in.Prepared[ps.Database]) > 0 {
		a.Kind, a.Code = KindNone, CodeTwoPhaseWaits
		a.Reason = fmt.Sprintf(
			"two_phase was turned on while %d transaction(s) are prepared in database %q: the copy is made again once they are resolved (a new copy would wait for "+
				"them, and there would be no copy meanwhile)",
			len(in.Prepared[ps.Database]),
			ps.Database,
		)
		return a
	}
	// Rule 2 beyond a fork: a copy synced on a timeline the primary's history has left, with
	// positions past where it ended, holds a history the primary does not have.
	if why, beyond := beyondFork(in, entry, cp); beyond {
		a.Kind, a.Code, a.Reason = KindRecreate, CodeBeyondFork, why
		return a
	}
	// Rule 2: compare with what the copy was synced from, not with the copy itself (a fresh
	// copy is legitimately ahead of the primary).
	prev := lsncheck.Seen{Identity: entry.Identity, Position: entry.Primary}
	var rebased string
	if ch, why := lsncheck.CompareIncarnation(prev, ps.Seen()); ch == lsncheck.NewIncarnation {
		if !lsncheck.SameSlotRegression(prev, ps.Seen(), in.PrimaryRestarted) {
			a.Kind, a.Code, a.Reason = KindRecreate, CodeRecreatedOnPrimary, "recreated on the primary: "+why
			return a
		}
		// confirmed_flush went back alone (or, after a primary restart, restart_lsn): the same
		// slot. The copy stays as it is (never backwards) until the consumer confirms again;
		// rule 4 keeps the gate honest meanwhile.
		a.Rebase, rebased = true, why
	}
	if cp.Identity != ps.Identity {
		a.Kind, a.Code, a.Reason = KindRecreate, CodeCopyIdentityDiffers, fmt.Sprintf("the copy (database %q, plugin %q, two_phase %v) differs from the primary slot",
			cp.Database, cp.Plugin, cp.TwoPhase)
		return a
	}
	if cp.Invalidated {
		a.Kind, a.Code, a.Reason = KindRecreate, CodeCopyInvalidated, fmt.Sprintf("the copy is invalidated (%s)", cp.InvalidationReason)
		return a
	}
	if why, ok := in.Recopy[name]; ok {
		a.Kind, a.Code, a.Reason = KindRecreate, CodeCopyWALGone, why
		return a
	}
	if why, lapsed := catalogLapsed(in, name, ps, cp, entry); lapsed {
		a.Kind, a.Code, a.Reason = KindRecreate, CodeCatalogLapsed, why
		return a
	}
	// Rule 1: never backwards, never past what the standby has replayed.
	if replay == 0 {
		// Rule 1 bounds every advance by the replay position; an unknown one bounds nothing.
		a.Kind, a.Code = KindNone, CodeStandbyLagging
		a.Reason = "the standby's replay position is unknown (nothing replayed since it started): nothing is advanced"
		return a
	}
	target := lsncheck.MinLSN(ps.ConfirmedFlush, replay)
	to, catchUp := advanceTo(ps.ConfirmedFlush, replay, cp.ConfirmedFlush, in.AdvanceStep)
	switch {
	case in.traitsOf(entry).ProvesWAL && !entry.WALVerified && to == 0 && cp.ConfirmedFlush <= replay:
		// An installed state file says nothing of the WAL behind it: read it once (an advance
		// to where the copy already is decodes from restart_lsn) before calling it READY.
		a.Kind, a.Code, a.Target = KindAdvance, CodeVerifyWAL, cp.ConfirmedFlush
		a.Reason = "reading the copy's WAL once to prove the standby still has it"
	case catchUp:
		a.Kind, a.Code, a.Target = KindAdvance, CodeCatchingUp, to
		a.Reason = fmt.Sprintf("catching up: the copy (%s) is %d bytes behind %s; advancing it by %d bytes this pass",
			cp.ConfirmedFlush, lsncheck.Bytes(target, cp.ConfirmedFlush), target, in.AdvanceStep)
	case to != 0:
		a.Kind, a.Code, a.Target = KindAdvance, CodeConsumerMoved, to
		a.Reason = fmt.Sprintf("consumer confirmed %s; advancing the copy from %s to %s", ps.ConfirmedFlush, cp.ConfirmedFlush, target)
	case ps.ConfirmedFlush > cp.ConfirmedFlush:
		a.Kind, a.Code = KindNone, CodeStandbyLagging
		a.Reason = fmt.Sprintf("standby lagging: replayed %s, the copy is at %s, the consumer at %s", replay, cp.ConfirmedFlush, ps.ConfirmedFlush)
	case ps.ConfirmedFlush < cp.ConfirmedFlush:
		why, wait := exactForAway(in, ps, cp, entry)
		if why != "" {
			a.Kind, a.Code, a.Reason, a.Exact = KindRecreate, CodeExactForAway, why, true
			break
		}
		a.Kind, a.Code = KindNone, CodeCopyAhead
		a.Reason = fmt.Sprintf("the copy (%s) is ahead of the consumer (%s): waiting for the consumer to confirm past it%s",
			cp.ConfirmedFlush, ps.ConfirmedFlush, wait)
	default:
		a.Kind, a.Code, a.Reason = KindNone, CodeUpToDate, "up to date"
	}
	if a.Rebase {
		a.Reason = "the primary slot's position went back without a new incarnation (same slot: " + rebased + "): " + a.Reason
	}
	return a
}

// beyondFork says whether the copy, synced on entry.Timeline, is of a history the primary's
// timeline does not contain: that timeline is not in the primary's history, or the copy's
// positions are past where it ended (a demoted primary's own slots, kept through pg_rewind).
func beyondFork(in PlanInput, entry *Entry, cp topology.Slot) (string, bool) {
	cur := in.Primary.Info.Timeline
	if entry.Timeline == 0 || cur == 0 || entry.Timeline == cur || in.History == nil {
		return "", false
	}
	end, ok := in.History[entry.Timeline]
	switch {
	case !ok:
		return fmt.Sprintf(
			"the copy was synced on timeline %d, which is not in the history of the primary's timeline %d (or the history could not be read): copying it again",
			entry.Timeline,
			cur,
		), true
	case cp.RestartLSN > end || cp.ConfirmedFlush > end:
		return fmt.Sprintf(
			"the copy (restart_lsn %s, confirmed_flush %s) is past %s, where timeline %d ended in the primary's history (timeline %d): its positions are of the "+
				"abandoned history",
			cp.RestartLSN,
			cp.ConfirmedFlush,
			end,
			entry.Timeline,
			cur,
		), true
	}
	return "", false
}

// catalogLapsed says whether a state-file copy can no longer be shown to have its catalog rows:
// the standby's feedback was never seen covering it while they were kept (HorizonSeenAt), and
// now neither the primary slot (its consumer moved on) nor the copy's catalog hold (it failed to
// take, expired, or went with a primary restart or slotsync's exit) keeps them. Rows in between
// may have been vacuumed, and no later feedback brings them back (rule 4): the copy is made again.
func catalogLapsed(in PlanInput, name string, ps, cp topology.Slot, entry *Entry) (string, bool) {
	if !in.traitsOf(entry).NeedsHorizon || entry.HorizonSeenAt != 0 || cp.CatalogXmin == 0 || ps.CatalogXmin == 0 ||
		catalogKept(in.Primary.Slots, in.Standby.Info.PrimarySlotName, name, cp.CatalogXmin) {
		return "", false
	}
	return fmt.Sprintf(
		"the copy's catalog rows (from xid %d) were not shown kept until the standby's feedback covered them: the primary slot keeps rows from xid %d and the "+
			"copy's catalog hold is gone (it expired, failed to take, or went with a restart); copying it again",
		cp.CatalogXmin,
		ps.CatalogXmin,
	), true
}

// advanceTo is rule 1's advance of a copy at copyAt, for the plan and the watch alike: toward
// the consumer's confirmed position, never past what the standby replayed, never backwards (0:
// no advance), and by at most step bytes (0: unbounded), in which case catchUp is set.
func advanceTo(confirmed, replay, copyAt lsncheck.LSN, step int64) (to lsncheck.LSN, catchUp bool) {
	target := lsncheck.MinLSN(confirmed, replay)
	switch {
	case target <= copyAt:
		return 0, false
	case step > 0 && lsncheck.Bytes(target, copyAt) > step:
		return copyAt + lsncheck.LSN(step), true
	}
	return target, false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
