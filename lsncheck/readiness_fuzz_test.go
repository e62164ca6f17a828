package lsncheck

import (
	"encoding/binary"
	"testing"
)

// FuzzReadiness: whatever the input, a copy is never READY while its confirmed_flush is ahead of
// the consumer's (a promotion would skip changes the consumer never confirmed), nor while the
// consumer holds changes beyond the standby's WAL (rule 5), nor missing, invalidated, of another
// identity, or without its WAL.
func FuzzReadiness(f *testing.F) {
	f.Add([]byte{0x10, 0, 0, 0, 0x20, 0, 0, 0, 0x10, 0, 0, 0, 0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 7})
	f.Add([]byte{0x10, 0, 0, 0, 0x20, 0, 0, 0, 0x10, 0, 0, 0, 0x21, 0, 0, 0, 0xff, 0, 0, 0, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() uint32 {
			if len(data) < 4 {
				return 0
			}
			v := binary.LittleEndian.Uint32(data)
			data = data[4:]
			return v
		}
		id := Identity{Name: "s", Database: "app", Plugin: "pgoutput"}
		in := ReadinessInput{
			Primary: Seen{Identity: id, Position: Position{RestartLSN: LSN(next()), ConfirmedFlush: LSN(next()), CatalogXmin: XID(next() % 2000)}},
			Copy:    Seen{Identity: id, Position: Position{RestartLSN: LSN(next()), ConfirmedFlush: LSN(next()), CatalogXmin: XID(next() % 2000)}},
		}
		in.StandbyWALEnd = LSN(next())
		in.PrimarySent = LSN(next() % 3 * uint32(in.Primary.ConfirmedFlush) / 2)
		in.StandbyHorizon = XID(next() % 2000)
		bits := next()
		flag := func(i uint) bool { return bits&(1<<i) != 0 }
		in.PrimaryInvalidated, in.CopyExists, in.CopyInvalidated, in.CopyWALAvailable = flag(0), !flag(1), flag(2), !flag(3)
		in.CopyTemporary, in.CopySynced, in.RequireSynced, in.RequireHorizon = flag(4), flag(5), flag(6), flag(7)
		in.WALVerified, in.RequireSnapshot, in.CopySnapshot, in.CopySnapshotUnknown = flag(8), flag(9), flag(10), flag(11)
		in.OwnDecoding, in.Exact = flag(12), flag(13)
		in.HorizonSeenAt, in.StandbyReplay = LSN(next()), LSN(next())
		if flag(14) {
			in.Copy.Plugin = "test_decoding"
		}
		if flag(15) {
			in.Copy.TwoPhase = true
		}
		v := Readiness(in)
		if !v.Ready {
			if len(v.Reasons) == 0 {
				t.Fatalf("NOT READY without a reason: %+v -> %+v", in, v)
			}
			return
		}
		switch {
		case in.Copy.ConfirmedFlush > in.Primary.ConfirmedFlush:
			t.Fatalf("READY with the copy (%s) ahead of its consumer (%s): %+v", in.Copy.ConfirmedFlush, in.Primary.ConfirmedFlush, in)
		case max(in.Primary.ConfirmedFlush, in.PrimarySent) > in.StandbyWALEnd:
			t.Fatalf("READY with the consumer beyond the standby's WAL: %+v", in)
		case !in.CopyExists || in.CopyInvalidated || !in.CopyWALAvailable || in.PrimaryInvalidated || in.CopyTemporary:
			t.Fatalf("READY with a copy that cannot serve: %+v", in)
		case in.Copy.Identity != in.Primary.Identity:
			t.Fatalf("READY with another identity: %+v", in)
		case in.RequireSynced && !in.CopySynced:
			t.Fatalf("READY without the server's sync: %+v", in)
		case in.Exact && in.Copy.ConfirmedFlush != in.Primary.ConfirmedFlush:
			t.Fatalf("READY (exact) with the copy not at its consumer: %+v", in)
		case in.RequireSnapshot && !in.CopySnapshot:
			t.Fatalf("READY without the decoding snapshot: %+v", in)
		case in.RequireHorizon && !in.WALVerified:
			t.Fatalf("READY with unverified WAL: %+v", in)
		case in.OwnDecoding && XIDPrecedes(in.Copy.CatalogXmin, in.Primary.CatalogXmin) && in.Copy.CatalogXmin != 0 &&
			(in.HorizonSeenAt == 0 || in.StandbyReplay < in.HorizonSeenAt):
			t.Fatalf("READY with the copy's catalog rows unprotected: %+v", in)
		case !in.OwnDecoding && in.Copy.RestartLSN > in.Primary.RestartLSN && in.Primary.RestartLSN != 0:
			t.Fatalf("READY with an installed copy's restart_lsn ahead of the primary's: %+v", in)
		}
	})
}

// TestUnknownStandbyWALEndIsNotReady (found by FuzzReadiness): with the standby's WAL end
// unknown, rule 5 cannot be checked, and the copy was judged READY; unsure is NOT READY.
func TestUnknownStandbyWALEndIsNotReady(t *testing.T) {
	id := Identity{Name: "s", Database: "app", Plugin: "pgoutput"}
	at := Position{RestartLSN: 0x1000, ConfirmedFlush: 0x2000, CatalogXmin: 700}
	v := Readiness(ReadinessInput{Primary: Seen{id, at}, CopyExists: true, Copy: Seen{id, at}, CopyWALAvailable: true})
	if v.Ready || !v.Has(ReasonConsumerAheadOfStandby) {
		t.Fatalf("standby WAL end unknown: %+v", v)
	}
}
