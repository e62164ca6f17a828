package sync

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method/sqlslot"
	"github.com/slotsync/slotsync/sync/method/statefile"
	"github.com/slotsync/slotsync/topology"
)

// fuzzWords reads a fuzzer's bytes as little-endian 32-bit words, 0 once they run out.
type fuzzWords struct{ data []byte }

func (w *fuzzWords) next() uint32 {
	if len(w.data) < 4 {
		return 0
	}
	v := binary.LittleEndian.Uint32(w.data)
	w.data = w.data[4:]
	return v
}

// more reports whether a whole word is left.
func (w *fuzzWords) more() bool { return len(w.data) >= 4 }

// fuzzInput builds a plan input from bytes: a few slot names, each maybe on the primary, on the
// standby, in the journal, with random positions, flags and identities.
func fuzzInput(data []byte) PlanInput {
	in := newScenario().in
	words := &fuzzWords{data}
	next := words.next
	in.Standby.Info.ReplayLSN = lsncheck.LSN(next())
	if next()%5 == 0 {
		in.Traits = sqlslot.NativeTraits()
	}
	in.Native = NativeConfig{SetFailover: next()%2 == 0, DropStale: next()%2 == 0}
	if next()%4 == 0 {
		in.Traits = statefile.Traits()
	}
	in.AdvanceStep = int64(next() % 2048) // 0: unbounded
	in.DropLeftAlone = next()%3 == 0
	in.Now = time.Unix(1000, 0)
	in.Failing, in.Copies, in.MaxCopies = map[string]Backoff{}, map[string]int{}, int(next()%3)
	plugins := []string{"pgoutput", "test_decoding"}
	for i := 0; i < 4 && words.more(); i++ {
		name := fmt.Sprintf("s%d", i)
		bits := next()
		id := lsncheck.Identity{Name: name, Database: "app", Plugin: plugins[bits>>8&1], TwoPhase: bits>>9&1 == 1}
		pos := func() lsncheck.Position {
			return lsncheck.Position{RestartLSN: lsncheck.LSN(next() % 4096), ConfirmedFlush: lsncheck.LSN(next() % 4096), CatalogXmin: lsncheck.XID(next() % 64)}
		}
		if bits&1 == 1 {
			s := topology.Slot{Identity: id, Position: pos(), Active: bits&8 == 8, Failover: bits>>10&1 == 1, Invalidated: bits>>11&1 == 1, Temporary: bits>>12&1 == 1}
			in.Primary.Slots[name] = s
		}
		if bits&2 == 2 {
			cid := id
			if bits>>13&1 == 1 {
				cid.Plugin = "other"
			}
			in.Standby.Slots[name] = topology.Slot{Identity: cid, Position: pos(), Active: bits&16 == 16, Synced: bits>>14&1 == 1}
		}
		if bits&4 == 4 {
			in.Journal.Slots[name] = &Entry{Incarnation: "01", Identity: id, Primary: pos()}
		}
		if bits>>15&1 == 1 {
			in.Failing[name] = Backoff{Count: 1, LastErr: "boom", RetryAt: in.Now.Add(time.Duration(int64(bits>>16&3)-1) * time.Second)}
		}
		in.Copies[name] = int(bits >> 18 & 3)
	}
	return in
}

// FuzzPlan checks the planner's safety on random snapshots and journals: it never advances a
// copy backwards or past the replay LSN, never drops or advances an active copy, and never
// drops a copy it does not own unless the stale-slot opt-in allows exactly that.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30})
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		for _, a := range Plan(in) {
			if a.Code == "" {
				t.Fatalf("an action without a reason code: %+v", a)
			}
			// Lesson 3: a slot in backoff is not worked on before its time.
			if f, ok := in.Failing[a.Slot]; ok && in.Now.Before(f.RetryAt) && a.Changes() {
				t.Fatalf("a slot in backoff until %s changed at %s: %+v", f.RetryAt, in.Now, a)
			}
			// Lesson 1: no state-file copy beyond MaxCopies.
			if in.Traits.BatchesCreates && in.MaxCopies > 0 && in.Copies[a.Slot] >= in.MaxCopies && (a.Kind == KindCreate || a.Kind == KindRecreate) {
				t.Fatalf("copied again after %d copies (max %d): %+v", in.Copies[a.Slot], in.MaxCopies, a)
			}
			cp, hasCopy := in.Standby.Slots[a.Slot]
			_, owned := in.Journal.Slots[a.Slot]
			ps := in.Primary.Slots[a.Slot]
			switch a.Kind {
			case KindAdvance:
				if !hasCopy || cp.Active {
					t.Fatalf("advance without an idle copy: %+v", a)
				}
				if a.Target < cp.ConfirmedFlush || a.Target > in.Standby.Info.ReplayLSN || a.Target > ps.ConfirmedFlush && a.Target != cp.ConfirmedFlush {
					t.Fatalf("advance to %s: copy %s, replay %s, consumer %s", a.Target, cp.ConfirmedFlush, in.Standby.Info.ReplayLSN, ps.ConfirmedFlush)
				}
				if in.AdvanceStep > 0 && lsncheck.Bytes(a.Target, cp.ConfirmedFlush) > in.AdvanceStep {
					t.Fatalf("advance by %d bytes, step %d", lsncheck.Bytes(a.Target, cp.ConfirmedFlush), in.AdvanceStep)
				}
			case KindDrop, KindRecreate:
				if !hasCopy || cp.Active {
					t.Fatalf("%s of a copy that is absent or active: %+v", a.Kind, a)
				}
				if a.Code == CodeLeftAloneDropped && !in.DropLeftAlone {
					t.Fatalf("a left-alone copy dropped without the opt-in: %+v", a)
				}
				staleOptIn := a.Kind == KindDrop && in.Native.DropStale && ps.Failover && !cp.Synced
				if !owned && !staleOptIn {
					t.Fatalf("%s of a copy slotsync does not own: %+v", a.Kind, a)
				}
			case KindCreate:
				if hasCopy {
					t.Fatalf("create over an existing copy: %+v", a)
				}
			case KindSetFailover:
				if ps.Active || !in.Traits.ServerSyncs || !in.Native.SetFailover {
					t.Fatalf("set failover without the opt-in or on an active slot: %+v", a)
				}
			}
		}
	})
}
