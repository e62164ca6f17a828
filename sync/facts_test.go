package sync

import (
	"fmt"
	"testing"
	"time"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// TestHorizonGap: which marks of rule 4 an observation voids (horizonGap).
func TestHorizonGap(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 4, 0, 0, 0, time.UTC)
	journal := func() *Journal {
		return &Journal{PrimaryStartedAt: "p1", StandbyReloadedAt: t0, Slots: map[string]*Entry{
			"a": {HorizonSeenAt: 100}, "b": {HorizonSeenAt: 200}, "c": {}}}
	}
	obs := func(primaryStarted string, reloaded time.Time, horizon lsncheck.XID, bXmin lsncheck.XID) Observation {
		var o Observation
		o.Primary.Info.StartedAt = primaryStarted
		o.Standby.Info.ReloadedAt = reloaded
		o.Physical = topology.PhysicalSlot{CatalogXmin: horizon}
		o.Standby.Slots = map[string]topology.Slot{"a": {}, "b": {}, "c": {}}
		for name, x := range map[string]lsncheck.XID{"a": 700, "b": bXmin, "c": 700} {
			s := o.Standby.Slots[name]
			s.CatalogXmin = x
			o.Standby.Slots[name] = s
		}
		return o
	}
	for _, c := range []struct {
		name      string
		obs       Observation
		want      string // the marks left, a and b
		wantWhy   bool
		reloadSet time.Time
	}{
		{"nothing happened", obs("p1", t0, 700, 700), "100 200", false, t0},
		{"a standby restart alone (no reload since its start)", obs("p1", time.Time{}, 700, 700), "100 200", false, time.Time{}},
		{"a reload of the standby", obs("p1", t0.Add(time.Second), 700, 700), "0 0", true, t0.Add(time.Second)},
		{"an earlier reload, seen by a newer session", obs("p1", t0.Add(-time.Second), 700, 700), "100 200", false, t0.Add(-time.Second)},
		{"the primary restarted", obs("p2", t0, 700, 700), "0 0", true, t0},
		{"the horizon passed b's copy", obs("p1", t0, 700, 690), "100 0", true, t0},
		{"no horizon", obs("p1", t0, 0, 700), "0 0", true, t0},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := journal()
			next, why := horizonGap(j, c.obs)
			if got := fmt.Sprint(uint64(next.Slots["a"].HorizonSeenAt), " ", uint64(next.Slots["b"].HorizonSeenAt)); got != c.want {
				t.Errorf("marks left %s, want %s", got, c.want)
			}
			if (why != "") != c.wantWhy {
				t.Errorf("why %q, want one: %v", why, c.wantWhy)
			}
			if !next.StandbyReloadedAt.Equal(c.reloadSet) {
				t.Errorf("reload recorded %v, want %v", next.StandbyReloadedAt, c.reloadSet)
			}
			if j.Slots["a"].HorizonSeenAt != 100 || !j.StandbyReloadedAt.Equal(t0) {
				t.Error("the journal given was changed")
			}
		})
	}
}

// TestFeedbackStopped: a pass failing on the standby's feedback or physical slot voids every mark.
func TestFeedbackStopped(t *testing.T) {
	for check, want := range map[string]bool{"hot_standby_feedback": true, "physical_slot": true, "primary_slot_name": true, "wal_level": false} {
		err := fmt.Errorf("observe: %w", &topology.PrereqError{Problems: []topology.Problem{{Check: check, Issue: check + " is wrong"}}})
		if got := feedbackStopped(err) != ""; got != want {
			t.Errorf("%s: feedback stopped %v, want %v", check, got, want)
		}
	}
	if feedbackStopped(fmt.Errorf("connection refused")) != "" {
		t.Error("a failed connection is no stop of the feedback")
	}
	j := &Journal{Slots: map[string]*Entry{"a": {HorizonSeenAt: 100}, "b": {}}}
	next, n := voidMarks(j, func(string) bool { return true })
	if n != 1 || next.Slots["a"].HorizonSeenAt != 0 || j.Slots["a"].HorizonSeenAt != 100 {
		t.Errorf("voidMarks: %d voided, a's mark %v (given journal %v)", n, next.Slots["a"].HorizonSeenAt, j.Slots["a"].HorizonSeenAt)
	}
}

// TestServerHorizonSeen: the marks of rule 4 for the copies the server's slot sync keeps.
func TestServerHorizonSeen(t *testing.T) {
	var o Observation
	o.Primary.Info.CurrentLSN = 0x9000000
	o.Physical = topology.PhysicalSlot{CatalogXmin: 700}
	synced := func(x lsncheck.XID) topology.Slot {
		return topology.Slot{Synced: true, Position: lsncheck.Position{CatalogXmin: x}}
	}
	o.Standby.Slots = map[string]topology.Slot{
		"covered": synced(720), "newer-horizon": synced(690), "marked": synced(700),
		"ours": synced(720), "not-synced": {Position: lsncheck.Position{CatalogXmin: 720}},
	}
	j := &Journal{Slots: map[string]*Entry{"ours": {}}, ServerCopies: map[string]lsncheck.LSN{"marked": 0x100, "gone": 0x100, "ours": 0x100}}
	next, changed := serverHorizonSeen(j, o)
	if got, want := fmt.Sprint(next.ServerCopies), fmt.Sprint(map[string]lsncheck.LSN{"covered": 0x9000000, "marked": 0x100}); !changed || got != want {
		t.Errorf("marks %s (changed %v), want %s", got, changed, want)
	}
	if len(j.ServerCopies) != 3 {
		t.Error("the journal given was changed")
	}
	if again, changed := serverHorizonSeen(next, o); changed || again != next {
		t.Error("a second observation of the same changed the marks")
	}
	o.Physical.CatalogXmin = 0
	if none, _ := serverHorizonSeen(&Journal{}, o); len(none.ServerCopies) != 0 {
		t.Errorf("marked without a horizon: %v", none.ServerCopies)
	}
	void, n := voidMarks(next, func(name string) bool { return name == "covered" })
	if n != 1 || fmt.Sprint(void.ServerCopies) != fmt.Sprint(map[string]lsncheck.LSN{"marked": 0x100}) {
		t.Errorf("voided %d: %v", n, void.ServerCopies)
	}
}
