package sync

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/slotsync/slotsync/internal/atomicfile"
	"github.com/slotsync/slotsync/internal/failpoint"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// JournalFile is the journal's name inside the state directory.
const JournalFile = "journal.json"

const journalVersion = 1

// Journal records the standby copies slotsync made, so that recreations (rule 2) and drops
// (rule 3) are exact across restarts. It is written atomically.
type Journal struct {
	Version  int    `json:"version"`
	SystemID string `json:"system_identifier"`
	// PrimaryStartedAt is the primary's pg_postmaster_start_time() at the last pass.
	PrimaryStartedAt string `json:"primary_started_at,omitempty"`
	// StandbyReloadedAt is the standby's last configuration reload since its start, as the
	// last pass saw it (topology.NodeInfo.ReloadedAt; zero: none). A later one voids the
	// horizon_seen_at marks (horizonGap, rule 4).
	StandbyReloadedAt time.Time         `json:"standby_reloaded_at,omitzero"`
	Slots             map[string]*Entry `json:"slots"`
	// Gate is the last judgement made with the primary reachable (rule 8).
	Gate *GateRecord `json:"gate,omitempty"`
	// OwnSlotsAt: when the node's own slots were last recorded while it was the primary (rule 9).
	OwnSlotsAt time.Time `json:"own_slots_at,omitempty"`
	// StandbyLostPrimaryAt: the last time the daemon saw the standby stream from its primary,
	// written when it saw the streaming stop (cleared when it resumes): how long the standby has
	// been without its primary, for a gate judging without it (rule 8, --primary-gone-after).
	StandbyLostPrimaryAt time.Time `json:"standby_lost_primary_at,omitzero"`
	// ServerCopies: for each copy the server's own slot sync keeps (synced=true, 17+; slotsync
	// has no entry for it), the primary's WAL position at the first observation where the
	// standby's physical slot held its catalog rows, as HorizonSeenAt is for slotsync's copies
	// (rule 4). Forgotten when the copy is not seen, or no longer the server's.
	ServerCopies map[string]lsncheck.LSN `json:"server_copies_horizon_seen_at,omitempty"`
}

// Entry is one slot slotsync manages.
type Entry struct {
	// Incarnation is a random 64-bit ID (hex) that changes each time the copy is recreated.
	Incarnation string            `json:"incarnation"`
	Identity    lsncheck.Identity `json:"identity"`
	// FirstSeen is the primary slot's position when this incarnation was first seen.
	FirstSeen lsncheck.Position `json:"first_seen"`
	// Primary is the primary slot's position at the last successful sync: a later observation
	// behind it proves a new incarnation.
	Primary lsncheck.Position `json:"last_primary"`
	// WALVerified (state-file method): a read of the WAL from the copy's restart_lsn has
	// succeeded on the standby since the copy was installed.
	WALVerified bool `json:"wal_verified,omitempty"`
	// HorizonSeenAt: the primary's WAL position at the first observation where the standby's
	// physical slot held the copy's catalog rows (its horizon not newer than the copy's
	// catalog_xmin); for state-file copies, only while the primary slot or the copy's catalog
	// hold still kept them too (horizonKept); 0 until then (rule 4).
	HorizonSeenAt lsncheck.LSN `json:"horizon_seen_at,omitempty"`
	// Timeline: the timeline of the primary whose slot the reference positions were seen on
	// (0: unknown, an older journal). Positions past where that timeline ended in the current
	// primary's history are of another incarnation (rule 2, beyond a fork).
	Timeline int `json:"timeline,omitempty"`
	// TwoPhase (two_phase copies of the standby's own decoding): From is the primary's WAL
	// position when the copy was planned; Pending the primary's prepared transactions in the
	// slot's database at the first observation after the copy was made; SettledAt the primary's
	// WAL position once none of them is pending any more. Such a copy is READY only once its
	// consumer has confirmed past SettledAt (rule 4: a transaction prepared before the copy's
	// two_phase_at and still pending would be sent again as PREPARE after a promotion).
	TwoPhaseFrom      lsncheck.LSN   `json:"two_phase_from,omitempty"`
	TwoPhasePending   []lsncheck.XID `json:"two_phase_pending,omitempty"`
	TwoPhaseSeen      bool           `json:"two_phase_seen,omitempty"`
	TwoPhaseSettledAt lsncheck.LSN   `json:"two_phase_settled_at,omitempty"`
	// DecodeError: the last advance of the copy failed with a decoding error (cleared by one
	// that succeeds): the copy cannot serve its consumer (rule 4).
	DecodeError string `json:"decode_error,omitempty"`
	// ScratchAt (state-file method): the copy's restart_lsn when it was installed without a
	// decoding snapshot because the primary had none there either (rule 4); 0 otherwise.
	ScratchAt lsncheck.LSN `json:"scratch_at,omitempty"`
	// OtherWriter: why slotsync leaves this copy alone: someone else changed it under slotsync
	// more than once (writers.go); cleared when the daemon starts.
	OtherWriter string    `json:"other_writer,omitempty"`
	Method      string    `json:"method"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// NewIncarnationID returns a random 64-bit ID in hex.
func NewIncarnationID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("incarnation ID: %w", err)
	}
	if binary.BigEndian.Uint64(b[:]) == 0 {
		b[7] = 1
	}
	return hex.EncodeToString(b[:]), nil
}

// LoadJournal reads the journal from dir. A missing file (or dir "") is an empty journal. A
// corrupt file is moved aside (unless readOnly) and an empty journal returned with a non-nil
// warning: slotsync then re-derives what it can and never drops a copy it cannot prove it made.
func LoadJournal(dir string, readOnly bool) (j *Journal, warning error, err error) {
	empty := &Journal{Version: journalVersion, Slots: map[string]*Entry{}}
	if dir == "" {
		return empty, nil, nil
	}
	p := filepath.Join(dir, JournalFile)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return empty, nil, nil
	}
	if st, serr := os.Stat(p); serr == nil && st.IsDir() {
		return nil, nil, &topology.ConfigError{Field: "state directory", Problem: fmt.Sprintf("%s is a directory", p),
			Fix: "remove or move that directory: slotsync keeps its journal in a file of that name"}
	}
	if errors.Is(err, fs.ErrPermission) {
		return nil, nil, &topology.ConfigError{Field: "state directory", Problem: fmt.Sprintf("%s cannot be read by this user: %v", p, err),
			Fix: "run this command as the daemon's user or as a member of the state directory's group (examples/systemd: Group=postgres, so that Patroni's hook reads " +
				"it), or give the user read access"}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read journal: %w", err)
	}
	var got Journal
	uerr := json.Unmarshal(data, &got) // once: a journal of 1000 slots takes tens of milliseconds
	if uerr == nil && got.Version > journalVersion {
		// A newer slotsync wrote it (a rollback of the binary): moving it aside would orphan
		// every copy; stop instead, changing nothing.
		return nil, nil, &topology.ConfigError{
			Field:   "state directory",
			Problem: fmt.Sprintf("%s was written by a newer slotsync (journal version %d; this one reads %d)", p, got.Version, journalVersion),
			Fix: "run the newer slotsync again; or, to use this one, move the journal aside (its copies are then NOT READY, copy_not_ours, until made again with " +
				"--adopt-copies)",
		}
	}
	if uerr != nil || got.Version != journalVersion || got.Slots == nil {
		if readOnly {
			return empty, fmt.Errorf("journal %s is unreadable: copies are shown as not made by slotsync", p), nil
		}
		aside := fmt.Sprintf("%s.corrupt-%d", p, time.Now().Unix())
		if rerr := os.Rename(p, aside); rerr != nil {
			return nil, nil, fmt.Errorf("journal %s is unreadable and cannot be moved aside: %w", p, rerr)
		}
		why := "unknown version"
		if uerr != nil {
			why = uerr.Error()
		}
		return empty, fmt.Errorf(
			"journal %s was unreadable (%s); moved to %s: standby copies made before are now treated as not ours (never dropped or advanced; NOT READY, "+
				"copy_not_ours) until slotsync makes them again (--adopt-copies) or you drop them",
			p,
			why,
			aside,
		), nil
	}
	return &got, nil, nil
}

// Save writes the journal atomically: a temp file, fsync, rename over the old one, fsync the
// directory. On error the old journal is intact.
func (j *Journal) Save(dir string) error {
	if err := failpoint.Hit("journal.save"); err != nil {
		return fmt.Errorf("write journal: %w", err)
	}
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return fmt.Errorf("encode journal: %w", err)
	}
	if err := atomicfile.Write(dir, JournalFile, append(data, '\n')); err != nil {
		return fmt.Errorf("write journal: %w", err)
	}
	return nil
}

// clone returns a deep copy, so a failed save can be rolled back.
// It copies the whole value first, so a field added later cannot be dropped (a hand-written
// list once dropped StandbyLostPrimaryAt), then what the value shares: the entries and their
// slices. A GateRecord is replaced whole, never changed in place, so it is shared.
func (j *Journal) clone() *Journal {
	c := *j
	c.Slots = make(map[string]*Entry, len(j.Slots))
	for k, v := range j.Slots {
		e := *v
		e.TwoPhasePending = append([]lsncheck.XID(nil), v.TwoPhasePending...)
		c.Slots[k] = &e
	}
	c.ServerCopies = maps.Clone(j.ServerCopies)
	return &c
}

// commit is the one way a new journal becomes the engine's: the failpoint (its Hit's error,
// evaluated by the caller so that the step keeps its name in the code; nil for none), the
// durable write, then the assignment. A failed write changes nothing in memory; it is logged
// once while writes keep failing (and once when they succeed again), and returned.
func (e *Engine) commit(next *Journal, fp error, what string) error {
	err := fp
	if err == nil {
		err = next.Save(e.cfg.StateDir)
	}
	if err != nil {
		e.writes.errors++
		if e.writes.failing == "" {
			e.log.Warn("could not write the journal: "+what, "error", err, "state_dir", e.cfg.StateDir)
		}
		e.writes.failing = what
		return err
	}
	if e.writes.failing != "" {
		e.log.Info("the journal is written again", "after", e.writes.failing)
		e.writes.failing = ""
	}
	e.journal = next
	return nil
}

func (e *Engine) checkJournalCluster(systemID string) error {
	switch e.journal.SystemID {
	case systemID:
		return nil
	case "":
		e.journal.SystemID = systemID
		return nil
	}
	return &topology.ConfigError{Field: "state directory", Problem: fmt.Sprintf("%s belongs to another cluster (system identifier %s, this pair is %s)",
		e.cfg.StateDir, e.journal.SystemID, systemID), Fix: "give each cluster its own --state-dir"}
}

// recordIntents writes, ahead of the actions, the journal entries of the copies about to be made
// and marks them being made in the gate record (rule 8). An exact copy that replaces a copy of the
// standby's own decoding (--exact-copy-after) is different: the own copy stands until the exact
// one exists, so its entry, and the rules it names (its two_phase guard), stay until then; the
// exact copy's entry is returned (exact), for recordResults to write once it is made. A decided
// exact copy not made (the restart rate limit, a failed read or restart, a crash) leaves the own
// copy under its own rules, and the plan decides it again.
func (e *Engine) recordIntents(actions []Action, timeline int, primaryLSN lsncheck.LSN) (exact map[string]*Entry, err error) {
	var changed, remakes, exacts bool
	var making []string
	next := e.journal.clone()
	for _, a := range actions {
		if a.Kind != KindCreate && a.Kind != KindRecreate {
			continue
		}
		id, err := NewIncarnationID()
		if err != nil {
			return nil, err
		}
		now := e.now().UTC()
		if old := next.Slots[a.Slot]; old != nil && a.Kind == KindCreate && old.Identity == a.Primary.Identity {
			// The copy vanished but the slot is the same incarnation: keep its ID.
			id = old.Incarnation
		}
		made := e.method
		if a.Exact {
			made = topology.MethodStatefile // an exact copy beside the method's own (--exact-copy-after)
		}
		ent := &Entry{Incarnation: id, Identity: a.Primary.Identity, FirstSeen: a.Primary.Position,
			Primary: a.Primary.Position, Method: string(made), CreatedAt: now, UpdatedAt: now, Timeline: timeline}
		if a.Primary.TwoPhase && TraitsOf(made).OwnDecoding {
			ent.TwoPhaseFrom = max(primaryLSN, 1)
		}
		if old := next.Slots[a.Slot]; a.Exact && old != nil && copyTraits(e.traits, old).OwnDecoding && !failpoint.Mutant("exact-intent-early") {
			if exact == nil {
				exact = map[string]*Entry{}
			}
			exact[a.Slot] = ent // the own copy's entry stays until the exact copy exists
		} else {
			next.Slots[a.Slot] = ent
		}
		making = append(making, a.Slot)
		changed, remakes, exacts = true, remakes || a.Kind == KindRecreate, exacts || a.Exact
	}
	if !changed {
		return nil, nil
	}
	// The gate record is written ahead too: a copy about to be made is NOT READY in it (rule 8).
	next.Gate = next.Gate.beingMade(making)
	if err := e.commit(next, nil, "the copies about to be made"); err != nil {
		return nil, fmt.Errorf("record new copies in the journal (nothing was changed): %w", err)
	}
	// A pass that makes a copy again, or an exact copy, between its record and its actions
	// (written plans of the fault explorer crash or stall it here).
	if exacts {
		_ = failpoint.Hit("journal.exact-intended")
	}
	if remakes {
		return exact, failpoint.Hit("journal.remake-intended")
	}
	return exact, nil
}

// recordResults updates the journal after the pass, in one atomic write; exact holds the entries
// of exact copies decided over own ones (recordIntents), written only for those made.
func (e *Engine) recordResults(actions []Action, results []result, primaryStartedAt string, timeline int, exact map[string]*Entry) error {
	next := e.journal.clone()
	changed := false
	if primaryStartedAt != "" && next.PrimaryStartedAt != primaryStartedAt {
		next.PrimaryStartedAt, changed = primaryStartedAt, true
	}
	for i, a := range actions {
		if a.Rebase && a.Kind != KindAdvance {
			if ent := next.Slots[a.Slot]; ent != nil {
				ent.Primary, ent.Timeline, changed = a.Primary.Position, timeline, true
			}
		}
		if ent := next.Slots[a.Slot]; ent != nil && a.Kind == KindAdvance {
			// A decoding error is kept until an advance succeeds: the gate says so meanwhile.
			msg := ""
			if err := results[i].Err; err != nil && topology.DecodeError(err) {
				msg = err.Error()
			} else if err != nil {
				msg = ent.DecodeError
			}
			if msg != ent.DecodeError {
				ent.DecodeError, changed = msg, true
			}
		}
		// A copy staged for a standby start slotsync does not make (--restart never) is as it
		// will be loaded: whether it restarts decoding from scratch is known now.
		if r := results[i]; r.Err != nil || (r.Waiting != "" && r.ScratchAt == 0) {
			continue
		}
		switch a.Kind {
		case KindAdvance:
			if ent := next.Slots[a.Slot]; ent != nil {
				// A new reference position alone is kept in memory and written with the next
				// journal write (the gate record's, within GateRecordInterval): a crash before
				// that leaves an older reference, against which the same slot's positions still
				// only went forward, so nothing is mistaken or lost. The first proof that the
				// copy's WAL is readable is written at once.
				ent.Primary, ent.UpdatedAt = a.Primary.Position, e.now().UTC()
				if ent.Timeline != timeline {
					ent.Timeline, changed = timeline, true
				}
				if !ent.WALVerified {
					ent.WALVerified, changed = true, true // the advance read the WAL from restart_lsn
				}
			}
		case KindCreate, KindRecreate:
			if ent := exact[a.Slot]; ent != nil {
				next.Slots[a.Slot], changed = ent, true // the exact copy exists now: its entry and rules
			}
			if ent := next.Slots[a.Slot]; ent != nil && ent.ScratchAt != results[i].ScratchAt {
				ent.ScratchAt, changed = results[i].ScratchAt, true
			}
		case KindDrop, KindForget:
			delete(next.Slots, a.Slot)
			changed = true
		}
	}
	if !changed {
		e.journal = next // in memory only: new reference positions, written with the next write
		return nil
	}
	return e.commit(next, nil, "the pass's results")
}

// journalHealth is how the engine's journal writes fare (Report.Journal).
func (e *Engine) journalHealth() *JournalHealth {
	h := &JournalHealth{WriteErrors: e.writes.errors, Failing: e.writes.failing}
	if e.journal != nil && e.journal.Gate != nil {
		h.GateRecordAt = e.journal.Gate.ObservedAt
	}
	return h
}
