package sync

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration/pgtest"
)

// recvlogical is a pg_recvlogical consumer writing test_decoding output to a file; it
// confirms what it wrote (--fsync-interval, --status-interval) and, without --startpos,
// starts where its slot's confirmed_flush is.
type recvlogical struct {
	cmd  *exec.Cmd
	file string
}

func startRecvlogical(t *testing.T, dsn, slot, file string) *recvlogical {
	t.Helper()
	bin := "/usr/lib/postgresql/15/bin/pg_recvlogical"
	if _, err := os.Stat(bin); err != nil {
		t.Skip("pg_recvlogical from PostgreSQL 15 is not installed (scripts/setup.sh installs it)")
	}
	cmd := exec.Command(bin, "-d", dsn, "-S", slot, "--start", "-f", file, "--fsync-interval=1", "--status-interval=1", "--no-loop")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &recvlogical{cmd: cmd, file: file}
	t.Cleanup(r.stop)
	return r
}

func (r *recvlogical) stop() {
	if r.cmd.Process != nil {
		_ = r.cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = r.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = r.cmd.Process.Kill()
		}
	}
}

// ids is every inserted row id in the consumer's output, in order, repeats included.
func (r *recvlogical) ids() []int {
	data, _ := os.ReadFile(r.file)
	var out []int
	for _, m := range insertedID.FindAllStringSubmatch(string(data), -1) {
		id, _ := strconv.Atoi(m[1])
		out = append(out, id)
	}
	return out
}

// TestPlannedSwitchoverExact: a planned switchover with zero redelivery. Writes stop, the
// consumer (pg_recvlogical without --startpos) confirms everything, the gate with Exact opens
// only once the copy stands exactly at the consumer's position; the primary shuts down cleanly;
// the gate, now without the primary, still says READY from the daemon's last observation; after
// the promotion the consumer restarts from the slot's own position and gets nothing twice and
// nothing lost.
func TestPlannedSwitchoverExact(t *testing.T) {
	t.Parallel() // its own pair and ports; mostly waiting: runs beside another long test
	pgtest.ForEachMajor(t, []int{16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixture(t, major)
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		dir := t.TempDir()
		before := startRecvlogical(t, f.pair.Primary.DSN("app"), "cdc", filepath.Join(dir, "before.out"))
		gateCfg := f.cfg
		gateCfg.ReadOnly, gateCfg.Exact = true, true
		gate, err := New(gateCfg)
		f.must(err)
		t.Cleanup(gate.Close)
		readyExact := func() (Report, bool) {
			rep, err := gate.Inspect(f.ctx)
			f.must(err)
			return rep, rep.Ready() && len(rep.Slots) == 1
		}

		// Live: rows flow, the daemon syncs; then writes stop.
		written := f.insert(20)
		deadline := time.Now().Add(90 * time.Second)
		for {
			f.logRunningXacts()
			f.must(f.pair.WaitCaughtUp(f.ctx))
			f.pass()
			if _, ok := readyExact(); ok && len(before.ids()) == len(written) {
				break
			}
			if time.Now().After(deadline) {
				rep, _ := readyExact()
				t.Fatalf("the exact gate never opened: consumer has %d of %d rows; %+v", len(before.ids()), len(written), rep.Slots)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// The exact gate holds while the copy trails the consumer by even one transaction.
		written = append(written, f.insert(1)...)
		f.must(f.pair.WaitCaughtUp(f.ctx))
		pgtest.WaitFor(t, "the consumer to confirm the last row", time.Minute, func() bool {
			s, _ := f.slotOn(f.pair.Primary, "cdc")
			cp, _ := f.slotOn(f.pair.Standby, "cdc")
			return len(before.ids()) == len(written) && s.ConfirmedFlush > cp.ConfirmedFlush
		})
		if rep, ok := readyExact(); ok {
			t.Fatalf("the exact gate opened with the copy behind its consumer: %+v", rep.Slots)
		}
		pgtest.WaitFor(t, "the daemon to catch the consumer's final confirmation", time.Minute, func() bool {
			f.pass()
			_, ok := readyExact()
			return ok
		})

		// The primary shuts down cleanly; the gate judges from the daemon's last observation.
		f.must(f.pair.Primary.Stop(f.ctx))
		before.stop()
		rep, ok := readyExact()
		if !ok || rep.WithoutPrimary == nil {
			t.Fatalf("the exact gate without the primary: %+v %+v", rep.WithoutPrimary, rep.Slots)
		}
		f.must(f.pair.Promote(f.ctx))
		after := startRecvlogical(t, f.pair.Standby.DSN("app"), "cdc", filepath.Join(dir, "after.out"))
		var more []int
		for i := 0; i < 5; i++ {
			f.must(f.pair.Standby.ExecDB(f.ctx, "app", "INSERT INTO t VALUES ($1)", f.next))
			more = append(more, f.next)
			f.next++
		}
		pgtest.WaitFor(t, "the consumer to resume on the promoted node", time.Minute, func() bool { return len(after.ids()) >= len(more) })
		after.stop()
		if got := before.ids(); !equalInts(got, written) {
			t.Fatalf("before the switchover the consumer got %v, want %v", got, written)
		}
		if got := after.ids(); !equalInts(got, more) {
			t.Fatalf("after the switchover the consumer got %v, want exactly %v: repeated or lost changes", got, more)
		}
	})
}
