package sync

import (
	"context"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration/pgtest"
)

// TestWatchAdvancesBetweenPasses: with full passes a minute apart, the watch moves a copy after
// its consumer within moments; it never moves it past the standby's replay position, and it
// leaves a slot whose restart_lsn went back (another incarnation) to the next full pass.
func TestWatchAdvancesBetweenPasses(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 17, 18, 19}, func(t *testing.T, major int) {
		f := newFixture(t, major)
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('older', 'test_decoding')"))
		f.insert(2)
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.pass()
		f.insert(2)
		f.untilReady("cdc", func() { f.consume(f.pair.Primary, "cdc") })
		f.eng.Close()
		f.cfg.Interval, f.cfg.WatchInterval = time.Minute, 20*time.Millisecond
		f.startEngine()
		ctx, cancel := context.WithCancel(f.ctx)
		done := make(chan error, 1)
		go func() { done <- f.eng.Run(ctx, nil) }()
		defer func() { cancel(); <-done }()
		copyAt := func() (ps, cp int64) {
			p, _ := f.slotOn(f.pair.Primary, "cdc")
			c, _ := f.slotOn(f.pair.Standby, "cdc")
			return int64(p.ConfirmedFlush), int64(c.ConfirmedFlush)
		}
		// The first pass runs at once; then only the watch, for a minute.
		time.Sleep(300 * time.Millisecond)
		f.insert(3)
		f.consume(f.pair.Primary, "cdc")
		f.must(f.pair.WaitCaughtUp(f.ctx))
		pgtest.WaitFor(t, "the watch to move the copy to the consumer", time.Minute, func() bool { ps, cp := copyAt(); return cp == ps })

		// Replay paused: the consumer moves on, the copy stops at the replay position.
		f.must(f.pair.PauseReplay(f.ctx))
		replay, err := f.pair.ReplayLSN(f.ctx)
		f.must(err)
		f.insert(3)
		f.consume(f.pair.Primary, "cdc")
		time.Sleep(500 * time.Millisecond)
		if _, cp := copyAt(); cp > int64(replay) {
			t.Fatalf("the watch moved the copy to %x, past the replay position %s", cp, replay)
		}
		f.must(f.pair.ResumeReplay(f.ctx))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		pgtest.WaitFor(t, "the watch to catch up after replay resumed", time.Minute, func() bool { ps, cp := copyAt(); return cp == ps })

		// Another incarnation under the same name, its restart_lsn back where 'older' is: the
		// watch does not touch the copy; only a full pass would (a minute away).
		_, before := copyAt()
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_drop_replication_slot('cdc')"))
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_copy_logical_replication_slot('older', 'cdc')"))
		f.insert(3)
		f.consume(f.pair.Primary, "cdc")
		f.must(f.pair.WaitCaughtUp(f.ctx))
		time.Sleep(500 * time.Millisecond)
		if _, cp := copyAt(); cp != before {
			t.Fatalf("the watch moved the copy of another incarnation from %x to %x", before, cp)
		}
		cancel()
		<-done
		done <- nil // for the deferred wait
		if f.eng.watching.advances == 0 {
			t.Fatal("no advance was made by the watch")
		}
	})
}
