package sync

import (
	"errors"
	"testing"

	"github.com/slotsync/slotsync/topology"
)

// TestJudgeUpstream: only the standby's own primary, demoted, is a primary gone at once.
func TestJudgeUpstream(t *testing.T) {
	standby := topology.NodeInfo{SystemID: "1", StartedAt: "s", InRecovery: true, ReceiverStatus: "streaming", HistoryTimeline: 2}
	demoted := topology.NodeInfo{SystemID: "1", StartedAt: "d", InRecovery: true, HistoryTimeline: 2, CanReadAllSettings: true}
	with := func(f func(*UpstreamFacts)) UpstreamFacts {
		u := UpstreamFacts{Standby: standby, Reached: demoted, StandbyStreamsFromIt: true}
		f(&u)
		return u
	}
	stop := func(err error) bool { return Classify(err) == Stop }
	gone := func(err error) bool {
		return errors.Is(err, ErrPrimaryInRecovery) && !errors.Is(err, ErrUpstreamPending)
	}
	pending := func(err error) bool {
		return errors.Is(err, ErrUpstreamPending) && errors.Is(err, ErrPrimaryInRecovery) && !livePrimarySeen(standby, err)
	}
	cases := []struct {
		name  string
		facts UpstreamFacts
		want  func(error) bool
	}{
		{"demoted, the standby streams from it", with(func(*UpstreamFacts) {}), gone},
		{"demoted, the standby does not stream", with(func(u *UpstreamFacts) { u.Standby.ReceiverStatus, u.StandbyStreamsFromIt = "", false }),
			gone},
		{"demoted, following the standby", with(func(u *UpstreamFacts) { u.Reached.ReceiverStatus, u.ItStreamsFromStandby = "streaming", true }),
			gone},
		{"demoted, following the standby, its upstream configured", with(func(u *UpstreamFacts) {
			u.Reached.ReceiverStatus, u.ItStreamsFromStandby, u.Reached.PrimaryConninfo = "streaming", true, "host=standby"
		}), gone},
		{"demoted, its primary_conninfo unreadable", with(func(u *UpstreamFacts) { u.Reached.CanReadAllSettings = false }), pending},
		{"another cluster", with(func(u *UpstreamFacts) { u.Reached.SystemID = "2" }), stop},
		{"the standby itself", with(func(u *UpstreamFacts) { u.Reached = standby }), stop},
		{"it streams from another server", with(func(u *UpstreamFacts) { u.Reached.ReceiverStatus = "streaming" }),
			func(err error) bool { return errors.Is(err, ErrPrimaryAlive) }},
		{"it is on a newer timeline", with(func(u *UpstreamFacts) { u.Reached.HistoryTimeline = 3 }),
			func(err error) bool { return errors.Is(err, ErrPrimaryAlive) }},
		{"the standby streams from another server", with(func(u *UpstreamFacts) { u.StandbyStreamsFromIt = false }),
			func(err error) bool { return errors.Is(err, errUpstreamUnproven) && livePrimarySeen(standby, err) }},
		{"what it receives cannot be seen", with(func(u *UpstreamFacts) { u.Reached.ReceiverStatus = "unknown" }),
			func(err error) bool { return errors.Is(err, errUpstreamUnproven) }},
	}
	// Correctness review 5, finding C: an upstream configured, and no WAL receiver streaming at
	// this instant, is not proven to follow no one, whatever the receiver's state.
	for _, status := range []string{"", "starting", "waiting", "restarting", "stopping"} {
		cases = append(cases, struct {
			name  string
			facts UpstreamFacts
			want  func(error) bool
		}{"upstream configured, receiver " + status, with(func(u *UpstreamFacts) { u.Reached.ReceiverStatus, u.Reached.PrimaryConninfo = status, "host=c" }), pending})
	}
	for _, c := range cases {
		if err := JudgeUpstream(c.facts); !c.want(err) {
			t.Errorf("%s: got %v", c.name, err)
		}
	}
}
