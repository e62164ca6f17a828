package explore

import (
	"fmt"
	"testing"
	"time"

	slotsync "github.com/slotsync/slotsync/sync"
)

// residualFixture is a Residual and a READY judged without the primary from the record observed
// at record, and whether the slot's loss rests on rule 8a's residual.
type residualFixture struct {
	name     string
	r        Residual
	record   time.Time
	residual bool
}

// residualFixtures: seed 5103's shape on 17 (results 61) and the cases beside it: passes every
// second, the last observed at 0 s (its note due again by 2.035 s), the record observed at -3 s.
func residualFixtures() []residualFixture {
	t0 := time.Date(2026, 12, 6, 20, 0, 58, 0, time.UTC)
	record := t0.Add(-3 * time.Second)
	note := &slotsync.GateSeen{Record: record, PrimaryClock: t0, RenewBy: t0.Add(2035 * time.Millisecond)}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	base := func(remade, replayed time.Duration) Residual {
		return Residual{Seen: note, Remade: map[string]time.Time{"s": at(remade)}, LastReplayed: at(replayed), Interval: time.Second}
	}
	stalled := base(200*time.Millisecond, 5500*time.Millisecond)
	stalled.Seen = &slotsync.GateSeen{Record: record, PrimaryClock: t0, RenewBy: t0.Add(20 * time.Second)} // a pass stalled after its observation
	other := base(200*time.Millisecond, 500*time.Millisecond)
	other.Seen = &slotsync.GateSeen{Record: record.Add(-5 * time.Second), PrimaryClock: t0, RenewBy: t0.Add(2035 * time.Millisecond)}
	unread := base(200*time.Millisecond, 500*time.Millisecond)
	unread.LastReplayed = time.Time{}
	return []residualFixture{
		{"changed after the last observation, the standby cut off within the window", base(40*time.Millisecond, 480*time.Millisecond), record, true},
		{"changed after it, the last replayed commit at the window's end and its margin", base(time.Second, 3035*time.Millisecond), record, true},
		{"changed after it, the primary's commits replayed past the window", base(time.Second, 3100*time.Millisecond), record, false},
		{"changed before the last observation (a pass saw it)", base(-10*time.Millisecond, 480*time.Millisecond), record, false},
		{"no slot changed", Residual{Seen: note, LastReplayed: at(time.Second), Interval: time.Second}, record, false},
		{"no note", Residual{Remade: map[string]time.Time{"s": at(time.Second)}, LastReplayed: at(time.Second), Interval: time.Second}, record, false},
		{"a note of another record", other, record, false},
		{"a note whose window a stall widened, past the rules' own", stalled, record, false},
		{"the standby's last replayed commit unread", unread, record, false},
	}
}

// residualWrong names the fixtures unobserved gets wrong.
func residualWrong(unobserved func(Residual, string, time.Time) string) []string {
	var bad []string
	for _, c := range residualFixtures() {
		if got := unobserved(c.r, "s", c.record); (got != "") != c.residual {
			bad = append(bad, fmt.Sprintf("%s: %q, want the residual: %v", c.name, got, c.residual))
		}
	}
	return bad
}

// TestUnobservedRemake: a READY judged without the primary rests on rule 8a's residual only for a
// slot changed after slotsync's last observation of the primary, the note naming the record
// judged, and the standby's last replayed commit within the window the rules give (two passes of
// the interval and at most a second each, and SeenLagMargin), not the note's word when wider.
func TestUnobservedRemake(t *testing.T) {
	if bad := residualWrong(Residual.unobservedRemake); len(bad) > 0 {
		t.Error(bad)
	}
}
