package explore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// instantFixture is a READY's two reads, and which rule (if any) it broke between them.
type instantFixture struct {
	name          string
	before, after Instant
	withPrimary   bool
	want          string
}

// instantFixtures are the rules at the instant's known lies and excused cases.
func instantFixtures() []instantFixture {
	slot := SlotAt{Plugin: "pgoutput", Database: "drill", Restart: 100, Confirmed: 200, CatalogXmin: 740}
	at := func(p, c SlotAt, end pglogrepl.LSN, receiver int) Instant {
		return Instant{At: time.Now(), Primary: map[string]SlotAt{"a": p}, Copies: map[string]SlotAt{"a": c}, StandbyWALEnd: end, ReceiverPID: receiver}
	}
	moved := func(s SlotAt, confirmed pglogrepl.LSN) SlotAt { s.Confirmed = confirmed; return s }
	demoted := func(in Instant) Instant { in.PrimaryInRecovery = true; return in }
	sent := func(s SlotAt, lsn pglogrepl.LSN, pid int) SlotAt { s.Sent, s.SenderPID = lsn, pid; return s }
	other := slot
	other.Plugin = "test_decoding"
	return []instantFixture{
		{"in step", at(slot, slot, 300, 7), at(slot, slot, 300, 7), true, ""},
		{"copy ahead throughout", at(slot, moved(slot, 250), 300, 7), at(moved(slot, 240), moved(slot, 250), 300, 7), true, "rule 4"},
		{"copy ahead at both reads, not throughout", at(slot, moved(slot, 250), 300, 7), at(moved(slot, 260), moved(slot, 270), 300, 7), true, ""},
		{"copy ahead, judged without the primary", at(slot, moved(slot, 250), 300, 0), at(slot, moved(slot, 250), 300, 0), false, "rule 4"},
		{"copy made again between the reads", at(slot, moved(slot, 250), 300, 7), at(slot, other, 300, 7), true, ""},
		{"copy ahead of a demoted primary's slot", demoted(at(slot, moved(slot, 250), 300, 7)), demoted(at(moved(slot, 240), moved(slot, 250), 300, 7)), false, ""},
		{"copy made again with the other plugin, ahead", at(slot, moved(slot, 250), 300, 7), at(moved(slot, 240), moved(other, 260), 300, 7), true, ""},
		{"primary slot made again between the reads", at(slot, moved(slot, 250), 300, 7), at(moved(slot, 100), moved(slot, 250), 300, 7), true, ""},
		{"primary slot gone after", at(slot, moved(slot, 250), 300, 7), Instant{Copies: map[string]SlotAt{"a": moved(slot, 250)}, StandbyWALEnd: 300, ReceiverPID: 7}, true, ""},
		{"consumer confirmed past the standby", at(moved(slot, 400), slot, 300, 7), at(moved(slot, 400), slot, 350, 7), true, "rule 5"},
		{"consumer past the standby, without the primary", at(moved(slot, 400), slot, 300, 7), at(moved(slot, 400), slot, 350, 7), false, ""},
		{"standby caught up by the second read", at(moved(slot, 400), slot, 300, 7), at(moved(slot, 400), slot, 400, 7), true, ""},
		{"WAL receiver restarted between the reads", at(moved(slot, 400), slot, 300, 7), at(moved(slot, 400), slot, 350, 8), true, ""},
		{"no WAL receiver at either read", at(moved(slot, 400), slot, 300, 0), at(moved(slot, 400), slot, 300, 0), true, "rule 5"},
		{"sent past a standby cut off", at(sent(slot, 400, 9), slot, 300, 0), at(sent(slot, 420, 9), slot, 300, 0), true, "rule 5"},
		{"a WAL receiver started between the reads", at(moved(slot, 400), slot, 300, 0), at(moved(slot, 400), slot, 350, 8), true, ""},
		{"a WAL receiver stopped between the reads", at(moved(slot, 400), slot, 300, 7), at(moved(slot, 400), slot, 350, 0), true, ""},
		{"no WAL receiver, the WAL end gone back", at(moved(slot, 400), slot, 300, 0), at(moved(slot, 400), slot, 200, 0), true, ""},
		{"sent past the standby by one walsender", at(sent(slot, 400, 9), slot, 300, 7), at(sent(slot, 420, 9), slot, 350, 7), true, "rule 5"},
		{"sent past the standby, walsender changed", at(sent(slot, 400, 9), slot, 300, 7), at(sent(slot, 420, 10), slot, 350, 7), true, ""},
	}
}

func TestInstantLie(t *testing.T) {
	if bad := instantWrong(instantLie); len(bad) > 0 {
		t.Error(bad)
	}
}

// instantWrong runs instantFixtures through an oracle's rules at the instant and names the
// fixtures it gets wrong.
func instantWrong(lie func(before, after Instant, slot string, withPrimary bool) string) []string {
	var bad []string
	for _, c := range instantFixtures() {
		got := lie(c.before, c.after, "a", c.withPrimary)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			bad = append(bad, fmt.Sprintf("%s: %q, want %q", c.name, got, c.want))
		}
	}
	return bad
}

// instantOfFixture is an answer with its two reads, whether rule 8a's residual covers the slot
// on the primary (Residual.unobservedRemake), and which rule, if any, the answer broke.
type instantOfFixture struct {
	name       string
	a          GateAnswer
	unobserved bool
	want       string
}

// instantOfFixtures: judged without the primary, a slot changed on the primary after slotsync's
// last observation is not held to rule 4 at the instant; nothing else is excused by it.
func instantOfFixtures() []instantOfFixture {
	slot := SlotAt{Plugin: "pgoutput", Database: "drill", Restart: 100, Confirmed: 200, CatalogXmin: 740}
	ahead := slot
	ahead.Confirmed = 250
	answer := func(without bool, other string) GateAnswer {
		read := func() *Instant {
			return &Instant{Primary: map[string]SlotAt{"a": slot}, Copies: map[string]SlotAt{"a": ahead}, StandbyWALEnd: 300, OtherWritable: other}
		}
		return GateAnswer{WithoutPrimary: without, Before: read(), After: read()}
	}
	return []instantOfFixture{
		{"copy ahead, judged without the primary", answer(true, ""), false, "rule 4"},
		{"copy ahead of a slot changed unobserved, judged without the primary", answer(true, ""), true, ""},
		{"copy ahead of a slot changed unobserved, judged with the primary", answer(false, ""), true, "rule 4"},
		{"a slot changed unobserved, another node read-write", answer(true, "127.0.0.1:5433"), true, "rule 8 at the instant"},
	}
}

func TestInstantOf(t *testing.T) {
	if bad := instantOfWrong(instantOf); len(bad) > 0 {
		t.Error(bad)
	}
}

// instantOfWrong runs instantOfFixtures through an oracle's instantOf and names the fixtures it
// gets wrong.
func instantOfWrong(lie func(a GateAnswer, slot string, unobserved bool) string) []string {
	var bad []string
	for _, c := range instantOfFixtures() {
		got := lie(c.a, "a", c.unobserved)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			bad = append(bad, fmt.Sprintf("%s: %q, want %q", c.name, got, c.want))
		}
	}
	return bad
}

func TestAssessAtTheInstant(t *testing.T) {
	broke := "rule 5 at the instant: the consumer held 0/190 before the question, past the standby's WAL end 0/12C after it"
	for _, c := range []struct {
		name string
		j    Judged
		lie  bool
		why  string
	}{
		{"READY, rule broken, no loss followed", Judged{Answer: AnswerReady, Binding: true, Asked: askedWithPrimary, Instant: broke}, true, "outcome oracle disagrees"},
		{"READY, rule broken, not binding", Judged{Answer: AnswerReady, Asked: askedWithPrimary, Instant: broke}, true, "rule 5"},
		{"READY, rule broken, loss followed", Judged{Answer: AnswerReady, Binding: true, Asked: askedWithPrimary, Instant: broke, Lost: 3}, true,
			"the outcome: READY asked with the primary, then 3 changes"},
		{"NOT READY, rule broken", Judged{Answer: AnswerNotReady, Binding: true, Instant: broke}, false, ""},
		{"READY, rules kept", Judged{Answer: AnswerReady, Binding: true}, false, ""},
	} {
		got := c.j.Assess()
		if got.Lie != c.lie || !strings.Contains(got.Why, c.why) {
			t.Errorf("%s: lie %v (%s), want %v (%s)", c.name, got.Lie, got.Why, c.lie, c.why)
		}
	}
	// An always-READY gate is caught by the rules at the instant alone.
	if !alwaysReadyCaught(Judged{Answer: AnswerNotReady, Binding: true, Instant: broke}) {
		t.Error("an always-READY gate is not caught where the rules were broken at the instant")
	}
}

// TestPromotionLie: a READY to a promotion's question is a lie when the old primary answered
// read-write at both reads, and nothing is said when a read failed or found it in recovery.
func TestPromotionLie(t *testing.T) {
	writable := Instant{At: time.Now()}
	demoted := Instant{At: time.Now(), PrimaryInRecovery: true}
	gone := Instant{At: time.Now(), PrimaryErr: "connection refused"}
	for _, c := range []struct {
		name          string
		before, after Instant
		lie           bool
	}{
		{"read-write at both reads", writable, writable, true},
		{"demoted before the question", demoted, demoted, false},
		{"demoted during the question", writable, demoted, false},
		{"gone during the question", writable, gone, false},
		{"unreachable before", gone, writable, false},
	} {
		if got := promotionLie(c.before, c.after); (got != "") != c.lie || c.lie && !strings.Contains(got, "rule 8c") {
			t.Errorf("%s: %q, want a lie: %v", c.name, got, c.lie)
		}
	}
}

// TestOtherPrimaryLie: a READY judged without the primary is a lie when another node of the
// cluster answered read-write at both reads (two primaries), and nothing is said otherwise.
func TestOtherPrimaryLie(t *testing.T) {
	promoted := Instant{OtherWritable: "second"}
	for _, c := range []struct {
		name          string
		before, after Instant
		lie           bool
	}{
		{"a second primary at both reads", promoted, promoted, true},
		{"promoted during the question", Instant{}, promoted, false},
		{"gone during the question", promoted, Instant{}, false},
		{"none", Instant{}, Instant{}, false},
	} {
		if got := otherPrimaryLie(c.before, c.after); (got != "") != c.lie || c.lie && !strings.Contains(got, "second answered read-write") {
			t.Errorf("%s: %q, want a lie: %v", c.name, got, c.lie)
		}
	}
}

// demotedFixture is a READY's two reads judged without the primary, and whether it broke rule 8b
// between them.
type demotedFixture struct {
	name          string
	before, after Instant
	lie           bool
}

// demotedFixtures are rule 8b at the instant's known lie and excused cases.
func demotedFixtures() []demotedFixture {
	read := func(inRecovery bool, demotedEnd, standbyEnd pglogrepl.LSN) Instant {
		return Instant{PrimaryInRecovery: inRecovery, PrimaryWALEnd: demotedEnd, StandbyWALEnd: standbyEnd}
	}
	streaming := func(in Instant) Instant { in.ReceiverPID = 7; return in }
	cut := func(in Instant) Instant { in.RouteCut = true; return in }
	return []demotedFixture{
		{"the standby short of the demoted primary's WAL", read(true, 0x5000, 0x4000), read(true, 0x5000, 0x4000), true},
		{"the standby caught up by the second read", read(true, 0x5000, 0x4000), read(true, 0x5000, 0x5000), false},
		{"the standby past it", read(true, 0x5000, 0x6000), read(true, 0x5000, 0x6000), false},
		{"demoted during the question", read(false, 0, 0x4000), read(true, 0x5000, 0x4000), false},
		{"the demoted primary's end unread", read(true, 0, 0x4000), read(true, 0x5000, 0x4000), false},
		{"the standby unread after", read(true, 0x5000, 0x4000), Instant{PrimaryInRecovery: true, PrimaryWALEnd: 0x5000, StandbyErr: "timeout"}, false},
		{"a WAL receiver started between the reads", read(true, 0x5000, 0x4000), streaming(read(true, 0x5000, 0x4000)), false},
		{"the same WAL receiver at both reads", streaming(read(true, 0x5000, 0x4000)), streaming(read(true, 0x5000, 0x4000)), true},
		{"the gate's route to the demoted primary cut", cut(read(true, 0x5000, 0x4000)), cut(read(true, 0x5000, 0x4000)), false},
		{"the route restored during the question", cut(read(true, 0x5000, 0x4000)), read(true, 0x5000, 0x4000), false},
	}
}

// demotedWrong runs demotedFixtures through an oracle's rule 8b at the instant and names the
// fixtures it gets wrong.
func demotedWrong(lie func(before, after Instant) string) []string {
	var bad []string
	for _, c := range demotedFixtures() {
		if got := lie(c.before, c.after); (got != "") != c.lie || c.lie && !strings.Contains(got, "rule 8b") {
			bad = append(bad, fmt.Sprintf("%s: %q, want a lie: %v", c.name, got, c.lie))
		}
	}
	return bad
}

// TestDemotedLie: a READY judged without the primary is a lie when the primary, in recovery at
// both reads, had WAL before the question past the standby's WAL end after it (rule 8b: its
// consumers may hold what the standby lacks), and nothing is said when the standby caught up, a
// read failed, or the primary was not in recovery at both reads.
func TestDemotedLie(t *testing.T) {
	if bad := demotedWrong(demotedLie); len(bad) > 0 {
		t.Error(bad)
	}
}

// TestDemotedPromiseNeedsTheRoute: a record judged without the primary promises no consumer
// ahead for a demoted primary read right before the question only when the gate could reach it
// (its WAL end is what rule 8b holds the standby to); with the route cut, rule 8 judges by
// --primary-gone-after and promises nothing of the kind.
func TestDemotedPromiseNeedsTheRoute(t *testing.T) {
	demoted := Instant{PrimaryInRecovery: true, PrimaryWALEnd: 0x5000}
	cut := demoted
	cut.RouteCut = true
	for _, c := range []struct {
		before *Instant
		want   bool
	}{{&demoted, true}, {&cut, false}, {nil, false}} {
		if got := factsOfRecord(GateAnswer{Before: c.before}, ConsumerHistory{}, nil, 0x1000).demoted; got != c.want {
			t.Errorf("before %+v: demoted %v, want %v", c.before, got, c.want)
		}
	}
}
