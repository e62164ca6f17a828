package topology

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Method is how a standby gets its copies (docs/ARCHITECTURE.md, "The sql method", "The
// state-file method", "The native method").
type Method string

// The methods; MethodAuto picks one from the major version.
const (
	MethodAuto      Method = "auto"
	MethodStatefile Method = "statefile"
	MethodSQL       Method = "sql"
	MethodNative    Method = "native"
)

// ParseMethod validates a method name.
func ParseMethod(s string) (Method, error) {
	switch m := Method(s); m {
	case MethodAuto, MethodStatefile, MethodSQL, MethodNative:
		return m, nil
	case "":
		return MethodAuto, nil
	}
	return "", &ConfigError{Field: "method", Problem: fmt.Sprintf("%q is unknown", s), Fix: "use auto, statefile, sql or native"}
}

// ChooseMethod resolves a requested method for the standby: auto is statefile up to 15, sql
// on 16, and on 17+ native when the standby already runs the server's slot sync
// (sync_replication_slots = on), sql otherwise. An explicit method the major cannot use is a
// configuration error.
func ChooseMethod(standby NodeInfo, requested Method) (Method, error) {
	major := standby.Major()
	switch requested {
	case MethodAuto, "":
		switch {
		case major <= 15:
			return MethodStatefile, nil
		case major >= 17 && standby.SyncReplicationSlots:
			return MethodNative, nil
		}
		return MethodSQL, nil
	case MethodSQL:
		if major < 16 {
			return "", &ConfigError{
				Field:   "method",
				Problem: fmt.Sprintf("sql needs PostgreSQL 16+ (this pair runs %d): a standby before 16 cannot create logical slots", major),
				Fix:     "use --method statefile (or auto)",
			}
		}
	case MethodNative:
		if major < 17 {
			return "", &ConfigError{Field: "method", Problem: fmt.Sprintf("native needs PostgreSQL 17+ (this pair runs %d)", major),
				Fix: "use --method auto"}
		}
	case MethodStatefile:
	default:
		return ParseMethod(string(requested))
	}
	return requested, nil
}

// Problem is one failed prerequisite, with the exact fix.
type Problem struct {
	Check string `json:"check"`
	Node  string `json:"node"` // primary, standby or pair
	Issue string `json:"problem"`
	Fix   string `json:"fix"`
}

func (p Problem) String() string { return fmt.Sprintf("%s: %s (fix: %s)", p.Node, p.Issue, p.Fix) }

// ErrPromoted means the standby has left recovery: it is a primary now, and syncing stops.
var ErrPromoted = errors.New("the standby has been promoted (not in recovery): syncing stops; slotsync never creates slots on a promoted node")

// PrereqError lists failed prerequisites that need a human; nothing was changed.
type PrereqError struct{ Problems []Problem }

func (e *PrereqError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "prerequisites not met: " + strings.Join(parts, "; ")
}

// Verify checks that primary and standby form one streaming pair slotsync may act on, for the
// chosen method (docs/RULES.md rule 7). It returns ErrPromoted when the standby is a primary now, a
// *PrereqError listing every failed check, or nil.
func Verify(primary, standby NodeInfo, phys PhysicalSlot, method Method) error {
	return verify(primary, standby, phys, method, false)
}

// verify is Verify, with drive saying whether slotsync drives the server's sync itself
// (--native-drive).
func verify(primary, standby NodeInfo, phys PhysicalSlot, method Method, drive bool) error {
	var probs []Problem
	add := func(check, node, issue, fix string) {
		probs = append(probs, Problem{Check: check, Node: node, Issue: issue, Fix: fix})
	}
	if primary.InRecovery {
		add("primary_role", "primary", "is in recovery (a standby)", "point --primary at the read-write primary")
	}
	if !standby.InRecovery {
		if !primary.InRecovery && primary.SystemID == standby.SystemID {
			return ErrPromoted
		}
		add("standby_role", "standby", "is not in recovery", "point --standby at the physical standby of this primary")
	}
	if primary.SystemID != standby.SystemID {
		add("system_identifier", "pair", fmt.Sprintf("system identifiers differ (primary %s, standby %s): not the same cluster", primary.SystemID, standby.SystemID),
			"point --primary and --standby at a primary and its own physical standby")
	}
	if primary.Major() != standby.Major() {
		add("major_version", "pair", fmt.Sprintf("majors differ (primary %d, standby %d)", primary.Major(), standby.Major()),
			"run slotsync on a pair of the same major version")
	}
	if len(probs) > 0 {
		return &PrereqError{Problems: probs}
	}
	if primary.WALLevel != "logical" {
		add("wal_level", "primary", fmt.Sprintf("wal_level is %s", primary.WALLevel),
			"ALTER SYSTEM SET wal_level = logical; then restart the primary")
	}
	if standby.PrimarySlotName == "" {
		add("primary_slot_name", "standby", "primary_slot_name is empty: the primary keeps no WAL or catalog rows for the standby's copies",
			"SELECT pg_create_physical_replication_slot('<name>') on the primary; ALTER SYSTEM SET primary_slot_name = '<name>' on the standby; SELECT pg_reload_conf()")
	} else if !phys.Exists {
		add("physical_slot", "primary", fmt.Sprintf("the standby's primary_slot_name %q does not exist on the primary", standby.PrimarySlotName),
			fmt.Sprintf("SELECT pg_create_physical_replication_slot('%s') on the primary", standby.PrimarySlotName))
	}
	// An inactive physical slot is a standby that is not streaming right now (a restart, a
	// network cut): not a configuration error. The readiness verdict shows what it costs.
	if !standby.HotStandbyFeedback {
		add("hot_standby_feedback", "standby", "hot_standby_feedback is off: the primary may remove catalog rows the standby's copies need",
			"ALTER SYSTEM SET hot_standby_feedback = on; SELECT pg_reload_conf() on the standby")
	}
	probs = append(probs, methodProblems(standby, method, drive)...)
	if len(probs) > 0 {
		return &PrereqError{Problems: probs}
	}
	return nil
}

// FeedbackProblem is the issue of err's failed prerequisite that shows the standby's feedback to
// the primary stopped: hot_standby_feedback off, no primary_slot_name, or its physical slot missing
// on the primary ("" when err is no PrereqError or none of its problems is one of those). The
// primary then keeps no catalog horizon for the standby.
func FeedbackProblem(err error) string {
	var pe *PrereqError
	if !errors.As(err, &pe) {
		return ""
	}
	for _, p := range pe.Problems {
		switch p.Check {
		case "hot_standby_feedback", "primary_slot_name", "physical_slot":
			return p.Issue
		}
	}
	return ""
}

// NotFollowingError says the standby does not stream from this primary right now (rule 7):
// another timeline, or it streams while its slot on this primary is idle. It is a state to wait
// out (a standby switching to a new primary after a failover), not a configuration to fix:
// nothing is changed until it passes.
type NotFollowingError struct{ Why string }

func (e *NotFollowingError) Error() string {
	return "the standby does not stream from this primary: " + e.Why + " (nothing is changed until it does)"
}

// CheckFollows checks that the standby streams from this primary: the timeline its WAL receiver
// receives is the primary's, and while it streams, its slot on the primary is in use. Unknown
// facts (a role that may not see the WAL receiver, a standby not streaming) prove nothing.
func CheckFollows(primary, standby NodeInfo, phys PhysicalSlot) error {
	if primary.Timeline != 0 && standby.Timeline != 0 && primary.Timeline != standby.Timeline {
		return &NotFollowingError{Why: fmt.Sprintf("it receives timeline %d, the primary writes timeline %d", standby.Timeline, primary.Timeline)}
	}
	if standby.ReceiverStatus == "streaming" && phys.Exists && !phys.Active {
		return &NotFollowingError{
			Why: fmt.Sprintf("it streams, but its slot %q on this primary is not in use: it streams from another server", standby.PrimarySlotName),
		}
	}
	return nil
}

// Version is server_version_num as people write it: 160002 is "16.2".
func Version(num int) string { return fmt.Sprintf("%d.%d", num/10000, num%10000) }

// VerifyMethod checks what the chosen method needs beyond a healthy pair; drive: slotsync calls
// pg_sync_replication_slots() itself (--native-drive), so sync_replication_slots may be off.
func VerifyMethod(standby NodeInfo, method Method, drive bool) error {
	if probs := methodProblems(standby, method, drive); len(probs) > 0 {
		return &PrereqError{Problems: probs}
	}
	return nil
}

func methodProblems(standby NodeInfo, method Method, drive bool) []Problem {
	var probs []Problem
	if method == MethodNative {
		probs = append(probs, nativeProblems(standby, drive)...)
	}
	if method == MethodSQL && standby.Major() < 16 {
		probs = append(probs, Problem{Check: "method", Node: "pair", Issue: "the sql method needs PostgreSQL 16+", Fix: "use --method statefile"})
	}
	if method == MethodSQL && standby.VersionNum >= 160000 && standby.VersionNum < 160004 {
		probs = append(probs, Problem{Check: "minor_version", Node: "standby",
			Issue: fmt.Sprintf("PostgreSQL %s can create a logical slot \"consistent\" in the middle of a transaction (fixed in 16.4): "+
				"a copy made here may give its consumer part of a transaction after a promotion", Version(standby.VersionNum)),
			Fix: "upgrade both nodes to PostgreSQL 16.4 or later (a minor update: restart with the new binaries), " +
				"or use --method statefile, which copies the primary's own slot state"})
	}
	if standby.WALLevel != "logical" {
		probs = append(probs, Problem{Check: "wal_level", Node: "standby",
			Issue: fmt.Sprintf("wal_level is %s: a standby holds logical slots only with wal_level = logical", standby.WALLevel),
			Fix:   "ALTER SYSTEM SET wal_level = logical; then restart the standby"})
	}
	if !standby.CanReplicate {
		probs = append(probs, Problem{Check: "privileges", Node: "standby",
			Issue: "the role may not create replication slots (needs REPLICATION)",
			Fix:   "ALTER ROLE <slotsync role> REPLICATION on the primary (roles replicate to the standby)"})
	}
	return probs
}

// Warnings lists conditions that do not stop slotsync but that an operator should know: the
// standby is not streaming right now, so its copies fall behind and consumers may get ahead
// of it.
func Warnings(primary, standby NodeInfo, phys PhysicalSlot) []Problem {
	var probs []Problem
	if standby.NotStreaming() {
		status := standby.ReceiverStatus
		if status == "" {
			status = "no WAL receiver"
		}
		probs = append(probs, Problem{Check: "wal_receiver", Node: "standby",
			Issue: fmt.Sprintf("not streaming from the primary (%s)", status),
			Fix:   "check primary_conninfo and the standby's log; SELECT * FROM pg_stat_wal_receiver must show status streaming"})
	}
	if standby.InRecovery && !standby.CanListWAL {
		probs = append(probs, Problem{Check: "wal_files", Node: "standby",
			Issue: "the role may not call pg_ls_waldir(): the gate cannot see WAL removed from the standby's pg_wal behind the server's back, " +
				"which a copy's wal_status does not show",
			Fix: "GRANT pg_monitor TO <slotsync role> (on the primary; the standby replays it)"})
	}
	if phys.Exists && !phys.Active {
		probs = append(probs, Problem{Check: "physical_slot_active", Node: "primary",
			Issue: fmt.Sprintf("the standby's physical slot %q is not active on this primary", standby.PrimarySlotName),
			Fix:   "check that the standby's primary_conninfo points at this primary"})
	}
	return probs
}

// nativeProblems lists what PostgreSQL 17's slot sync needs on the standby (drive: slotsync
// calls pg_sync_replication_slots() itself).
func nativeProblems(standby NodeInfo, drive bool) []Problem {
	var probs []Problem
	if !standby.SyncReplicationSlots && !drive {
		probs = append(probs, Problem{Check: "sync_replication_slots", Node: "standby",
			Issue: "sync_replication_slots is off: the server does not sync failover slots",
			Fix:   "ALTER SYSTEM SET sync_replication_slots = on; SELECT pg_reload_conf() on the standby (or run slotsync with --native-drive)"})
	}
	if !standby.HasConninfoDBName {
		probs = append(probs, Problem{Check: "primary_conninfo_dbname", Node: "standby",
			Issue: "primary_conninfo names no dbname (or slotsync may not read it): the server's slot sync cannot connect",
			Fix: "add dbname=postgres to primary_conninfo on the standby (ALTER SYSTEM SET primary_conninfo = '… dbname=postgres'; SELECT pg_reload_conf()); " +
				"slotsync needs pg_read_all_settings to read it"})
	}
	return probs
}

// SyncedStandbySlot is one entry of the primary's synchronized_standby_slots.
type SyncedStandbySlot struct {
	Name           string
	Exists, Active bool
	// InactiveFor: how long an existing slot has had no walsender (its inactive_since).
	InactiveFor time.Duration
}

// NativeWarnings checks synchronized_standby_slots on the primary (17+): when it does not list
// this standby's physical slot, consumers of failover slots can confirm changes this standby
// has not received; when it lists a slot that is missing or inactive, logical decoding of
// failover slots waits for it.
func NativeWarnings(primary, standby NodeInfo, listed []SyncedStandbySlot) []Problem {
	if primary.Major() < 17 || standby.PrimarySlotName == "" {
		return nil
	}
	var probs []Problem
	found := false
	var names []string
	for _, l := range listed {
		names = append(names, l.Name)
		if l.Name == standby.PrimarySlotName {
			found = true
		}
		if !l.Exists || !l.Active {
			state := "missing"
			if l.Exists {
				state = "inactive"
			}
			probs = append(probs, Problem{Check: "synchronized_standby_slots", Node: "primary",
				Issue: fmt.Sprintf("synchronized_standby_slots lists %q, which is %s: logical decoding of failover slots waits for it", l.Name, state),
				Fix: "remove it from synchronized_standby_slots on the primary (ALTER SYSTEM SET synchronized_standby_slots = '…'; SELECT pg_reload_conf()) or bring " +
					"that standby back"})
		}
	}
	if !found {
		list := strings.Join(append(names, standby.PrimarySlotName), ",")
		probs = append(probs, Problem{Check: "synchronized_standby_slots", Node: "primary",
			Issue: fmt.Sprintf(
				"synchronized_standby_slots does not list this standby's slot %q: consumers of failover slots can get ahead of this standby",
				standby.PrimarySlotName,
			),
			Fix: fmt.Sprintf("ALTER SYSTEM SET synchronized_standby_slots = '%s'; SELECT pg_reload_conf() on the primary, or run slotsync with "+
				"--manage-synchronized-standby-slots (17+), which keeps it; the trade-off: consumers of failover slots then wait for this standby "+
				"while it lags or is cut off, at most --standby-gone-after once it is gone (slotsync beside the primary takes it out)", list)})
	}
	return probs
}
