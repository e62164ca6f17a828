package drill

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/hashicorp/go-hclog"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
)

func TestJudge(t *testing.T) {
	truth := map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true}
	cases := []struct {
		name                  string
		durable               map[int]int
		after                 []int
		lagging               bool
		ok                    bool
		lost, repeated, ahead int
		before                int
	}{
		{"exact", map[int]int{1: 1, 2: 1}, []int{3, 4, 5}, false, true, 0, 0, 0, 0},
		{"lost in between", map[int]int{1: 1, 2: 1}, []int{4, 5}, false, false, 1, 0, 0, 0},
		{"repeated past the offset", map[int]int{1: 1, 2: 1}, []int{2, 3, 4, 5}, false, false, 0, 1, 0, 0},
		{"consumer ahead of the new primary", map[int]int{1: 1, 2: 1, 6: 1}, []int{3, 4, 5}, false, false, 0, 0, 1, 0},
		// 7: in flight when the slot was made again, committed after it (the new slot may carry it).
		{"a change the new slot may carry", map[int]int{1: 1, 2: 1, 7: 1}, []int{3, 4, 5}, false, true, 0, 0, 0, 0},
		// 2 received twice before the promotion: a consumer confirming each commit never should.
		{"twice before the promotion, confirming each commit", map[int]int{1: 1, 2: 2}, []int{3, 4, 5}, false, false, 0, 1, 0, 0},
		// A consumer confirming every few seconds gets again what it held unconfirmed when its
		// stream restarted (the primary restarted): its own redelivery, not the promotion's.
		{"twice before the promotion, confirming every few seconds", map[int]int{1: 1, 2: 2}, []int{3, 4, 5}, true, true, 0, 0, 0, 1},
		{"twice after the promotion, confirming every few seconds", map[int]int{1: 1, 2: 1}, []int{2, 3, 4, 5}, true, false, 0, 1, 0, 0},
	}
	for _, c := range cases {
		var sv SlotVerdict
		judge(&sv, truth, map[int]bool{7: true}, c.durable, c.after, c.lagging)
		if sv.OK != c.ok || len(sv.Lost) != c.lost || len(sv.Repeated) != c.repeated || len(sv.Ahead) != c.ahead || len(sv.RepeatedBefore) != c.before {
			t.Errorf("%s: %+v", c.name, sv)
		}
	}
}

// TestDrill fails over a real pair with live consumers, cleanly and with kill -9, and switches
// back; every change must arrive exactly once.
func TestDrill(t *testing.T) {
	pgtest.ForEachMajor(t, nil, func(t *testing.T, major int) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		for _, kill := range []bool{false, true} {
			pair := pgtest.StartPair(t, integration.Options{Major: major})
			v, err := Run(ctx, pair, Options{Duration: 1500 * time.Millisecond, Kill: kill, Failovers: 2, StateDir: t.TempDir()})
			if err != nil {
				t.Fatalf("kill=%v: %v", kill, err)
			}
			if !v.OK || len(v.Failovers) != 2 {
				t.Fatalf("kill=%v: verdict %+v", kill, v)
			}
			for _, f := range v.Failovers {
				for _, s := range f.Slots {
					if s.Durable == 0 || s.Resumed == 0 {
						t.Fatalf("kill=%v failover %d: the drill did not exercise %s: %+v", kill, f.Number, s.Slot, s)
					}
				}
			}
			t.Logf("kill=%v: %+v", kill, v)
			if err := pair.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestSoak runs randomized drills: kill or clean, one or two failovers, a random live phase, on
// the requested majors. SLOTSYNC_SOAK_ITERATIONS sets how many (default 1; CI keeps it small,
// slotsync drill --local --mode random --iterations N runs a big one).
func TestSoak(t *testing.T) {
	n := 1
	if s := os.Getenv("SLOTSYNC_SOAK_ITERATIONS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("SLOTSYNC_SOAK_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64) // replay a printed seed
	}
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	pgtest.ForEachMajor(t, nil, func(t *testing.T, major int) {
		var tally soakTally
		defer func() { t.Logf("PostgreSQL %d: %s", major, tally) }()
		for i := 0; i < n; i++ {
			var logs strings.Builder
			opts := Options{Kill: rng.Intn(2) == 1, Failovers: 1 + rng.Intn(2),
				Duration: time.Duration(300+rng.Intn(1500)) * time.Millisecond, StateDir: t.TempDir(),
				Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})}
			pair := pgtest.StartPair(t, integration.Options{Major: major})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			v, err := Run(ctx, pair, opts)
			cancel()
			tally.add(opts, v)
			if err != nil || !v.OK {
				t.Fatalf("iteration %d (%+v): %v %+v\nslotsync log:\n%s", i, opts, err, v, logs.String())
			}
			if err := pair.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestDrillExternal drills a pair given only by DSNs and a promote command, as against servers
// slotsync did not start.
func TestDrillExternal(t *testing.T) {
	pgtest.ForEachMajor(t, []int{17}, func(t *testing.T, major int) {
		local := pgtest.StartPair(t, integration.Options{Major: major})
		pgCtl, err := integration.PgCtl(major)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		ext, err := integration.ExternalPair(ctx, local.Primary.DSN("postgres"), local.Standby.DSN("postgres"),
			pgCtl+" -D "+local.Standby.DataDir+" -w promote")
		if err != nil {
			t.Fatal(err)
		}
		if !ext.External() || ext.Major != major {
			t.Fatalf("external pair: %+v", ext)
		}
		if _, err := Run(ctx, ext, Options{Kill: true}); err == nil {
			t.Fatal("kill -9 accepted on an external pair")
		}
		v, err := Run(ctx, ext, Options{Duration: time.Second, StateDir: t.TempDir()})
		if err != nil || !v.OK {
			t.Fatalf("external drill: %v %+v", err, v)
		}
		if rec, _ := local.Standby.InRecovery(ctx); rec {
			t.Fatal("the promote command did not promote")
		}
	})
}

// soakTally counts a soak's iterations and what their consumers saw, for docs/RELIABILITY.md.
type soakTally struct {
	iterations, twice, failovers, kills, slots, lost, repeated, ahead, resumed int
}

func (s *soakTally) add(opts Options, v Verdict) {
	s.iterations++
	if opts.Failovers > 1 {
		s.twice++
	}
	for _, f := range v.Failovers {
		s.failovers++
		if f.Mode == "kill -9" {
			s.kills++
		}
		for _, sv := range f.Slots {
			s.slots++
			s.lost += len(sv.Lost)
			s.repeated += len(sv.Repeated)
			s.ahead += len(sv.Ahead)
			s.resumed += sv.Resumed
		}
	}
}

func (s soakTally) String() string {
	return fmt.Sprintf("%d iterations (%d failing over twice with a rejoin), %d failovers (%d kill -9), %d consumer resumptions: %d changes received after resuming, %d lost, %d repeated, %d ahead",
		s.iterations, s.twice, s.failovers, s.kills, s.slots, s.resumed, s.lost, s.repeated, s.ahead)
}

// TestTwoPhaseMessages: a prepared transaction's changes count at its PREPARE (at the end LSN
// pgoutput sends after a flags byte and the prepare LSN), its COMMIT PREPARED only confirms.
func TestTwoPhaseMessages(t *testing.T) {
	c := NewConsumer("s", "pgoutput")
	msg := func(kind byte, end uint64) []byte {
		b := make([]byte, 30)
		b[0] = kind
		binary.BigEndian.PutUint64(b[2:10], end-8)
		binary.BigEndian.PutUint64(b[10:18], end)
		return b
	}
	if done, ok := c.twoPhaseMessage(msg('b', 100), 1); !ok || done || !c.inTxn {
		t.Fatalf("BEGIN PREPARE: %v %v %v", done, ok, c.inTxn)
	}
	c.pending = []int{7, 8}
	if done, ok := c.twoPhaseMessage(msg('P', 200), 1); !ok || !done || c.confirmed != 200 || len(c.received) != 2 || c.received[1].end != 200 {
		t.Fatalf("PREPARE: %v %v %+v", done, ok, c.received)
	}
	if done, ok := c.twoPhaseMessage(msg('K', 300), 1); !ok || !done || c.confirmed != 300 || len(c.received) != 2 {
		t.Fatalf("COMMIT PREPARED: %v %v %+v", done, ok, c.received)
	}
	if _, ok := c.twoPhaseMessage([]byte{'I', 0}, 1); ok {
		t.Fatal("an insert taken for a two-phase message")
	}
}

// TestConsumerDropsACutTransaction: a transaction cut off by a reconnection is sent again whole;
// what the consumer had read of it is dropped, so no change counts as received twice.
func TestConsumerDropsACutTransaction(t *testing.T) {
	c := NewConsumer("s", "test_decoding")
	msg := func(text string, at uint64) pglogrepl.XLogData {
		return pglogrepl.XLogData{WALStart: pglogrepl.LSN(at), WALData: []byte(text)}
	}
	for _, m := range []string{"BEGIN 700", "table public.events: INSERT: id[integer]:229 payload[text]:'drill'"} {
		if _, err := c.handle(msg(m, 100), 1); err != nil {
			t.Fatal(err)
		}
	}
	c.restart() // the connection ended before the COMMIT
	for _, m := range []string{"BEGIN 700", "table public.events: INSERT: id[integer]:229 payload[text]:'drill'", "COMMIT 700"} {
		if _, err := c.handle(msg(m, 200), 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, d := c.SnapshotDurable(); d[229] != 1 {
		t.Fatalf("id 229 received %d times, want once", d[229])
	}
}

// TestConsumerTrace: a change in question is traced to the connection that delivered it, and
// every connection is listed with its server and start.
func TestConsumerTrace(t *testing.T) {
	c := NewConsumer("s", "test_decoding")
	c.connections = []connection{{addr: "127.0.0.1:5001", start: 0x100, phase: 1}, {addr: "127.0.0.1:5002", start: 0x200, phase: 2}}
	for _, m := range []string{"BEGIN 700", "table public.events: INSERT: id[integer]:109 payload[text]:'drill'", "COMMIT 700"} {
		if _, err := c.handle(pglogrepl.XLogData{WALStart: 0x300, WALData: []byte(m)}, 2); err != nil {
			t.Fatal(err)
		}
	}
	got := strings.Join(c.trace([]int{109, 5}), "\n")
	for _, want := range []string{"id 109: commit end 0/300, phase 2, connection 1", "connection 1: 127.0.0.1:5002 from 0/200, phase 2", "connection 0: 127.0.0.1:5001 from 0/100"} {
		if !strings.Contains(got, want) {
			t.Errorf("trace lacks %q:\n%s", want, got)
		}
	}
}

// TestConsumerConfirmsEvery: a consumer with AckEvery confirms what it received only that often,
// holding the rest due; at each commit otherwise.
func TestConsumerConfirmsEvery(t *testing.T) {
	eager := NewConsumer("a", "test_decoding")
	eager.commit(100, 1)
	eager.commit(200, 1)
	if eager.confirmed != 200 {
		t.Fatalf("eager: confirmed %s, want 0/C8", eager.confirmed)
	}
	lazy := NewConsumer("a", "test_decoding")
	lazy.AckEvery = time.Hour
	lazy.commit(100, 1) // the first confirmation is never held
	lazy.commit(200, 1)
	lazy.idleAt(300)
	if lazy.confirmed != 100 || lazy.due != 300 {
		t.Fatalf("lazy: confirmed %s, due %s; want 0/64 confirmed, 0/12C due", lazy.confirmed, lazy.due)
	}
	lazy.confirmedAt = time.Now().Add(-2 * time.Hour)
	lazy.commit(250, 1)
	if lazy.confirmed != 300 {
		t.Fatalf("lazy, its hour past: confirmed %s, want what was due (0/12C)", lazy.confirmed)
	}
}
