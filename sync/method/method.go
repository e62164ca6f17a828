// Package method is the contract between the sync engine and the ways a standby gets its slot
// copies: the traits that name which rules a method's copies answer to, the session every
// method carries actions out on, and the named optional hooks a method may add.
package method

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// Traits are the rules a method's copies answer to. The engine, the planner and the gate read
// them; none of them names a method.
type Traits struct {
	// BatchesCreates: creations and recreations are collected during a pass and carried out by
	// Flush at its end (one standby restart for all of them). Such copies are made only while
	// the standby streams, and at most MaxCopies times without becoming READY (lesson 1).
	BatchesCreates bool
	// ProvesWAL: a copy is READY only once an advance has read its WAL from restart_lsn on the
	// standby (rule 4, installed copies); a copy whose WAL turns out removed is made again.
	ProvesWAL bool
	// NeedsSnapshot: a copy is READY only with the decoding snapshot at its restart_lsn (rule 4).
	// Copies of the standby's own decoding need it too once advanced past where they were made
	// (the gate's ownAdvancedCopy decides that per copy).
	NeedsSnapshot bool
	// Exact: copies are written at their primary slot's positions (state files), not made by
	// the standby's decoding: an exact copy, which the planner may keep for an away consumer.
	Exact bool
	// NeedsHorizon: a copy is READY only once the standby's catalog horizon covers it (rule 4).
	NeedsHorizon bool
	// OwnDecoding: copies are made by the standby's own decoding, consistent from their own
	// consistent point: READY needs no restart_lsn or catalog_xmin order against the primary's,
	// only their catalog rows kept (rule 4).
	OwnDecoding bool
	// Watchable: the watch between passes may advance copies (watch.go).
	Watchable bool
	// ServerSyncs: the server syncs failover slots itself (17+); slotsync may set failover on
	// primary slots and drive the server's sync (--set-failover, --native-drive).
	ServerSyncs bool
}

// Method is a way of making and keeping standby copies.
type Method interface {
	Traits() Traits
	// Session returns a handle holding one worker's connections.
	Session() Session
}

// Session carries out actions on the standby for one worker.
type Session interface {
	Create(ctx context.Context, ps topology.Slot) error
	// Replace puts a copy of ps's new incarnation in place of the copy in database copyDB.
	Replace(ctx context.Context, ps topology.Slot, copyDB string) error
	Advance(ctx context.Context, name, database string, target lsncheck.LSN) (lsncheck.LSN, error)
	Drop(ctx context.Context, name, database string) error
	// SetFailover sets failover=true on the primary slot (17+).
	SetFailover(ctx context.Context, name, database string) error
	Close()
}

// ExactCopier makes, beside a method whose own copies come from the standby's decoding, an
// exact copy of one slot from the primary's state files (the slots the plan names: consumers
// away past --exact-copy-after). It returns ErrCollected: Flush makes the copy.
type ExactCopier interface {
	ReplaceExact(ctx context.Context, ps topology.Slot, copyDB string) error
}

// ScratchReporter says where a copy its session has just made by the standby's own decoding
// stands: its restart_lsn, from which decoding rebuilds the copy's snapshot from scratch and
// reaches the same consistent point again. While the copy's restart_lsn stays there it needs no
// serialized decoding snapshot; once advanced, it does (rule 4). 0: not known.
type ScratchReporter interface {
	ScratchAt(slot string) lsncheck.LSN
}

// Recoverer finishes, before a pass, what a crash of slotsync interrupted (a standby left
// stopped by a restart). It reports whether the standby was started (connections are stale).
type Recoverer interface {
	Recover(ctx context.Context) bool
}

// Preparer has work to do before a pass's actions, on what the pass observed.
type Preparer interface {
	Prepare(ctx context.Context, v View)
}

// StandbyChecker checks, before a pass's actions, that what the method writes to or restarts
// outside SQL is the observed standby's (the state-file method's data directory). An error
// stops slotsync before anything is written (a configuration error that names the fix).
type StandbyChecker interface {
	CheckStandby(standby topology.NodeInfo) error
}

// Flusher carries out, at the end of a pass, the creations its sessions collected
// (Traits.BatchesCreates). It returns the outcome of each collected slot and whether the
// standby was restarted.
type Flusher interface {
	Flush(ctx context.Context, v View) (map[string]Outcome, bool)
}

// Closer releases what a method holds beyond its sessions.
type Closer interface {
	Close()
}

// View is what a method's hooks see of a pass's observation.
type View struct {
	Primary topology.NodeInfo
	// Standby are the standby's logical slots.
	Standby map[string]topology.Slot
	// Horizon is the catalog horizon the standby's physical slot carries on the primary.
	Horizon lsncheck.XID
	// StandbyWALEnd is the newest WAL the standby has received (every segment before its
	// segment is complete and flushed on the primary).
	StandbyWALEnd lsncheck.LSN
	// StandbySlot is the standby's physical slot on the primary (its primary_slot_name).
	StandbySlot string
}

// Outcome is what happened to one collected copy.
type Outcome struct {
	Err error
	// Waiting: nothing failed, the copy waits (rate limit, a start slotsync does not make).
	Waiting string
	// ScratchAt: the new copy's restart_lsn, from which decoding rebuilds its snapshot from
	// scratch (the state-file method: the primary had none there either; the standby's own
	// decoding: where it made the copy); 0 when it restores one (copied with the state file).
	ScratchAt lsncheck.LSN
	// CountsAsCopy: a standby restart was spent on this copy (lesson 1: copies are counted).
	CountsAsCopy bool
}

// ErrCollected is what a batching session's Create and Replace return: the copy is made by
// Flush at the end of the pass, whose outcome replaces this one.
var ErrCollected = errors.New("staged for the standby restart at the end of this pass")

// PrimaryLink is the primary as the engine knows it now (nil when none is known).
type PrimaryLink interface {
	Endpoint() *topology.Endpoint
}

// Deps is what the engine hands a method it makes.
type Deps struct {
	Primary PrimaryLink
	Standby *topology.Endpoint
	Log     hclog.Logger
	// Restarting is set while the method restarts the standby: a stopping process waits.
	Restarting *atomic.Bool
	// StateDir is the engine's state directory (the method may keep markers there).
	StateDir string
	// StatementTimeout bounds each statement of the method's standby sessions on the server
	// side (0: none): a statement that waits for WAL on a standby whose postmaster died (a slot
	// creation waiting for a running-xacts record, killed -9 or OOM) never hears the client's
	// cancel, which goes through the postmaster, and would otherwise spin on, holding the
	// standby's shared memory so that it cannot start again.
	StatementTimeout time.Duration
}

// HoldPrefix starts the name of every slot slotsync makes on the primary for itself (the
// state-file method's catalog holds): such slots are not consumers' slots, and are never copied.
const HoldPrefix = "slotsync_hold_"

// HoldName is the name of the catalog hold that the sidecar of the standby streaming through
// physical slot standby takes for slot: HoldPrefix and a hash of both names (slot names are at
// most 63 characters). Two standbys copying one slot at once each hold it under its own name.
func HoldName(standby, slot string) string {
	h := fnv.New64a()
	h.Write([]byte(standby))
	h.Write([]byte{0})
	h.Write([]byte(slot))
	return fmt.Sprintf("%s%016x", HoldPrefix, h.Sum64())
}
