package sync

import (
	"errors"
	"fmt"

	"github.com/slotsync/slotsync/internal/failpoint"
	"github.com/slotsync/slotsync/topology"
)

// The server slotsync takes for the primary (the standby's primary_conninfo, or --primary) may
// answer in recovery. Only one such server is a primary gone at once (rule 8): this standby's
// own primary, demoted (an HA manager's switchover stops it cleanly and starts it in recovery
// before the new leader's hook asks the gate). Every other server in recovery says nothing of
// the primary, or says that one is alive elsewhere: the standby itself behind a pinned address
// (a VIP moved early), a standby of the live primary the standby was re-pointed to (a cascade),
// an old primary rewound to follow the new one while a third standby still points at it, a
// standby of another cluster.

// UpstreamFacts is what an observation knows of a server in recovery reached as the primary.
type UpstreamFacts struct {
	// Standby and Reached: both nodes as read (topology.ReadNodeInfo).
	Standby, Reached topology.NodeInfo
	// StandbyStreamsFromIt: the standby's primary_slot_name is an active physical slot on the
	// reached server (the standby's WAL receiver streams from it).
	StandbyStreamsFromIt bool
	// ItStreamsFromStandby: the reached server's primary_slot_name is an active physical slot
	// on the standby (the reached server streams from the standby, as a demoted primary that
	// follows the candidate does).
	ItStreamsFromStandby bool
}

// JudgeUpstream sorts a server in recovery reached as the primary (rule 8): ErrPrimaryInRecovery
// (the demoted primary: gone at once) only when it is of this cluster, is not the standby itself,
// the standby streams from nothing or from it, and it receives WAL from no one but this standby
// (streaming from it, or with no upstream configured: ErrUpstreamPending while one is) and is on
// no newer timeline. A server of another cluster, or the standby itself, is a
// configuration error. A server that streams from elsewhere, or is on a newer timeline, follows a
// live primary (CANNOT TELL, primary alive). Otherwise (the standby streams from another server)
// the error is a primary that cannot be asked, with the standby streaming: the gate's rules
// from before apply (CANNOT TELL while it streams; --primary-gone-after once it stops).
func JudgeUpstream(f UpstreamFacts) error {
	s, r := f.Standby, f.Reached
	switch {
	case failpoint.Mutant("upstream-unchecked"):
		return ErrPrimaryInRecovery // the fault explorer's mutant: the review's finding 1 (test builds only)
	case r.SystemID != s.SystemID:
		return &topology.PrereqError{Problems: []topology.Problem{{Check: "system_identifier", Node: "primary",
			Issue: fmt.Sprintf(
				"the server taken for the primary is in recovery and of another cluster (system identifier %s, the standby's %s)",
				r.SystemID,
				s.SystemID,
			),
			Fix: "point --primary (or the standby's primary_conninfo) at the read-write primary of the standby's own cluster"}}}
	case r.StartedAt == s.StartedAt:
		return &topology.PrereqError{Problems: []topology.Problem{{Check: "primary_is_standby", Node: "primary",
			Issue: "the server taken for the primary is the standby itself (same system identifier and start time): an address that reaches the candidate, such as a " +
				"VIP moved before the promotion",
			Fix: "point --primary at the read-write primary's own address, not at a VIP or Service that may reach the standby; or leave --primary out to follow the " +
				"standby's primary_conninfo"}}}
	case r.ReceiverStatus == "streaming" && !f.ItStreamsFromStandby:
		return primaryAlive{why: "CANNOT TELL: the server taken for the primary is in recovery and streams from another server: a primary is alive upstream of it " +
			"(do not promote; point --primary, or the standby's primary_conninfo, at the read-write primary)"}
	case r.HistoryTimeline > 0 && s.HistoryTimeline > 0 && r.HistoryTimeline > s.HistoryTimeline:
		return primaryAlive{why: fmt.Sprintf("CANNOT TELL: the server taken for the primary is in recovery on timeline %d, newer than the standby's %d: "+
			"it follows a primary promoted since (do not promote; point the standby at the new primary)", r.HistoryTimeline, s.HistoryTimeline)}
	case r.ReceiverStatus == "unknown":
		return errUpstreamUnproven
	case s.ReceiverStatus == "streaming" && !f.StandbyStreamsFromIt:
		return errUpstreamUnproven
	case !f.ItStreamsFromStandby && (r.PrimaryConninfo != "" || !r.CanReadAllSettings) && !failpoint.Mutant("upstream-pending-unchecked"):
		return ErrUpstreamPending
	}
	return ErrPrimaryInRecovery
}

// ErrUpstreamPending: the server taken for the primary is in recovery, of this cluster, and
// follows no one right now, but has an upstream configured (primary_conninfo, or one the role may
// not read): a demoted primary whose WAL receiver has not connected yet, or is between two
// attempts, may be about to follow a primary promoted elsewhere. Not proven gone: the gate looks
// again until --primary-gone-after has passed (primaryLost), then takes it for the demoted
// primary. It is an ErrPrimaryInRecovery (it takes no writes; the standby streaming from it does
// not make a primary alive).
var ErrUpstreamPending error = upstreamPending{}

type upstreamPending struct{}

func (upstreamPending) Error() string {
	return "the server taken for the primary (--primary, or the standby's primary_conninfo) is in recovery and follows no one right now, " +
		"but has an upstream configured: not yet proven to be the standby's demoted primary"
}

func (upstreamPending) Unwrap() error { return ErrPrimaryInRecovery }

// errUpstreamUnproven: the server taken for the primary is in recovery, and nothing shows it is
// the standby's demoted primary (the standby streams from another server, or what the reached
// server receives cannot be seen). A primary that cannot be asked, not one gone: the standby
// streaming means CANNOT TELL, not streaming means waiting out --primary-gone-after.
var errUpstreamUnproven = errors.New("the server taken for the primary (--primary, or the standby's primary_conninfo) is in recovery, " +
	"and is not shown to be the standby's demoted primary (the standby streams from another server, or the role may not see what it receives: " +
	"GRANT pg_read_all_stats): slotsync needs the read-write primary")
