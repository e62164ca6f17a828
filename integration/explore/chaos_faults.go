package explore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	stdsync "sync"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/drill"
	"github.com/slotsync/slotsync/lsncheck"
	slotsync "github.com/slotsync/slotsync/sync"
	"github.com/slotsync/slotsync/sync/method"
)

// skippedError: a fault the iteration could not apply (its pair or its history does not allow
// it); the iteration reports it as skipped, not applied.
type skippedError struct{ why string }

func (e skippedError) Error() string { return "skipped: " + e.why }

func skipped(why string) error { return skippedError{why} }

// apply carries out one fault.
func (wd *world) apply(ctx context.Context, s Step) error {
	p := wd.pair
	switch s.Fault {
	case FaultSidecarKill:
		wd.side.kill()
	case FaultSidecarPause:
		// slotsync stalls (SIGSTOP: a stop-the-world pause, a starved CPU) while the gate,
		// a process of its own, is asked: its answer must not rest on slotsync keeping up.
		wd.side.signal(syscall.SIGSTOP)
		wd.lasting.hold("slotsync paused", s.For, func() { wd.side.signal(syscall.SIGCONT) })
	case FaultPrimaryRoute:
		wd.proxy.Blackhole()
		wd.lasting.hold("route cut", s.For, wd.proxy.Restore)
	case FaultWALReceiver:
		return wd.cutReceiver(ctx)
	case FaultStandbyRestart:
		return wd.restartStandby(ctx)
	case FaultSenderStalled:
		// The primary's walsender to the standby stalls (a starved primary, a network that holds
		// the standby's packets): the consumers, served by their own walsenders, get ahead of the
		// standby, and what it was not sent is lost with a kill of the primary. (Stopping the
		// standby's receiver instead leaves the WAL sent in its socket, read once it goes on.)
		if _, err := wd.stallSender(ctx); err != nil {
			return err
		}
		wd.lasting.hold("walsender stalled", s.For, func() {
			if pid := wd.stalled.Swap(0); pid != 0 { // the one stalled last, if a kill of the primary did not take it
				_ = syscall.Kill(int(pid), syscall.SIGCONT)
			}
		})
	case FaultStandbyCutOff:
		return wd.repointStandby(ctx, s.For, "")
	case FaultCascade:
		return wd.cascade(ctx, s.For)
	case FaultAddressMoved:
		return wd.moveAddress(ctx, s)
	case FaultStandbyKill:
		return wd.killStandby(ctx)
	case FaultConsumerReconnect:
		if s.Away {
			wd.stopFeed(wd.feedOf(s.Slot)) // it comes back after the promotion only
			return nil
		}
		select {
		case wd.feeds[wd.feedOf(s.Slot)].next <- struct{}{}:
		default:
		}
	case FaultSlotRecreated:
		return wd.recreate(ctx, s.Slot, s.Away)
	case FaultOtherPlugin:
		wd.switchPlugin(s.Slot)
		return wd.recreate(ctx, s.Slot, s.Away)
	case FaultSlotBehind:
		return wd.recreateBehind(ctx, s.Slot, s.Away, false)
	case FaultOlderAdvanced:
		return wd.advanceOlder(ctx, s.Slot)
	case FaultCopyDropped:
		// Another tool or an operator drops the copy on the standby (16+: a logical slot on a
		// standby can be dropped there; not while slotsync advances it).
		if wd.method == "native" {
			return skipped("the server's synced copies cannot be dropped on the standby (\"being synchronized from the primary server\")")
		}
		on, err := wd.standbyOf(s)
		if err != nil {
			return err
		}
		err = on.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", s.Slot)
		if standbyRestarting(err) {
			return skipped("the standby is restarting (a state-file copy being installed)")
		}
		return err
	case FaultSlotDropped:
		return wd.whileIdle(ctx, s.Slot, true, func() error { return wd.dropSlot(ctx, s.Slot) })
	case FaultTwoPhase:
		return wd.twoPhaseWhilePrepared(ctx, s)
	case FaultSwitchover:
		return wd.switchoverAndBack(ctx)
	case FaultLongTransaction:
		go wd.longTransaction(ctx, s.For)
	case FaultCatalogVacuum:
		for _, sql := range []string{"ALTER TABLE events ADD COLUMN chaos_tmp int", "ALTER TABLE events DROP COLUMN chaos_tmp",
			"VACUUM pg_attribute", "VACUUM pg_class"} {
			if err := p.Primary.ExecDB(ctx, drill.DB, sql); err != nil {
				return err
			}
		}
	case FaultPrimaryRestart:
		return wd.restartPrimary(ctx)
	default:
		return wd.applyWritten(ctx, s)
	}
	return nil
}

// restartPrimary kills the primary -9 and starts it again (FaultPrimaryRestart). A server that
// comes back on another address (a backend that gives a container a new host port at each
// start) is followed by the primary's address (the proxy), as a Service follows its pod.
func (wd *world) restartPrimary(ctx context.Context) error {
	before, err := wd.pair.Primary.Addr(ctx)
	if err != nil {
		return err
	}
	if err := wd.killPrimary(ctx); err != nil {
		return err
	}
	if err := wd.pair.Primary.Start(ctx); err != nil {
		return err
	}
	after, err := wd.pair.Primary.Addr(ctx)
	if err != nil {
		return err
	}
	if wd.proxy.Retarget(before, after) {
		wd.log.Info("the primary's address follows it to its new port", "from", before, "to", after)
	}
	return nil
}

// moveAddress moves the primary's address for s.For, as an HA manager moves a VIP or a Service
// before promoting: slotsync and the gate, which reach the primary through it, reach the
// standby itself, or the second standby (s.Second), a server in recovery either way.
func (wd *world) moveAddress(ctx context.Context, s Step) error {
	to, err := wd.standbyOf(s)
	if err != nil {
		return err
	}
	addr, err := to.Addr(ctx)
	if err != nil {
		return err
	}
	back, err := wd.pair.Primary.Addr(ctx)
	if err != nil {
		return err
	}
	if s.Slot != "" {
		go wd.flapAddress(ctx, s, addr, back)
		return nil
	}
	wd.proxy.Redirect(addr)
	time.AfterFunc(s.For, func() { wd.proxy.Redirect(back) })
	return nil
}

// standbyOf is the standby a step acts on: the pair's, or the second standby (Step.Second),
// skipped when there is none.
func (wd *world) standbyOf(s Step) (*integration.Node, error) {
	if !s.Second {
		return wd.pair.Standby, nil
	}
	if wd.secondNode == nil {
		return nil, skipped("no second standby")
	}
	return wd.secondNode, nil
}

// Flapping (FaultAddressMoved with a Slot): the address reaches the other server for flapAway,
// then the primary for flapBack (long enough for a full pass there), again and again.
const (
	flapAway = 600 * time.Millisecond
	flapBack = 900 * time.Millisecond
	// flapHold: after the last flap the address stays on the other server this long, across
	// the cutover that follows at once.
	flapHold = 3 * time.Second
)

// flapAddress moves the address back and forth (a VIP that flaps) until the standby's copy of
// s.Slot stands past its primary slot's confirmed_flush (a copy moved to a position only the
// other server's slot has) or s.For has passed; then it leaves the address on the other server
// and ends the live phase at once: the primary dies while the window is open (an explorer's
// search for the moment; the gate as built sees the same flapping and the same end).
func (wd *world) flapAddress(ctx context.Context, s Step, to, back string) {
	until := time.Now().Add(s.For)
	for {
		wd.proxy.Redirect(to)
		if !sleepUntil(ctx, time.Now().Add(flapAway)) {
			return
		}
		if wd.copyPastPrimary(ctx, s.Slot) || time.Now().After(until) {
			break
		}
		wd.proxy.Redirect(back)
		if !sleepUntil(ctx, time.Now().Add(flapBack)) {
			return
		}
	}
	wd.log.Info("address flapping ends on the other server", "slot", s.Slot)
	time.AfterFunc(flapHold, func() { wd.proxy.Redirect(back) })
	wd.endLive()
}

// copyPastPrimary says whether the standby's copy of slot stands past the primary slot's
// confirmed_flush (each read on its server directly, not through the proxy).
func (wd *world) copyPastPrimary(ctx context.Context, slot string) bool {
	const q = "SELECT coalesce((SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1), '0/0')"
	var onCopy, onPrimary string
	if wd.pair.Standby.QueryRow(ctx, q, []any{slot}, &onCopy) != nil || wd.pair.Primary.QueryRow(ctx, q, []any{slot}, &onPrimary) != nil {
		return false
	}
	c, err1 := pglogrepl.ParseLSN(onCopy)
	p, err2 := pglogrepl.ParseLSN(onPrimary)
	return err1 == nil && err2 == nil && c > p
}

// restartStandby stops and starts the standby; a restart slotsync's state-file method is making
// at the same moment makes pg_ctl fail, which is fine as long as the standby comes back.
func (wd *world) restartStandby(ctx context.Context) error {
	err := wd.pair.Standby.Restart(ctx)
	if err == nil {
		return nil
	}
	wd.log.Info("standby restart failed; waiting for the standby", "error", err)
	if up := wd.standbyUp(ctx); up != nil {
		return fmt.Errorf("%v; then: %v", err, up)
	}
	return nil
}

// killStandby kills the standby -9 and starts it again as a service manager would: a start that
// fails is tried again every second for 20 s (a process of the old server still holding its
// shared memory: "pre-existing shared memory block is still in use", seen in CI), and the
// standby must then be back in recovery.
func (wd *world) killStandby(ctx context.Context) error {
	if err := wd.pair.Standby.Kill(ctx); err != nil {
		if strings.Contains(err.Error(), "not running") {
			return skipped("the standby is not running (a state-file restart under way)")
		}
		return err
	}
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if err = wd.pair.Standby.Start(ctx); err == nil {
			return nil
		}
		wd.log.Info("standby start after kill -9 failed; trying again", "error", err)
		// A process of the killed server still attached to its shared memory (seen under load:
		// the start refused for minutes) is killed as a host's reboot would have.
		integration.KillShmHolders(err)
		if rec, qerr := wd.pair.Standby.InRecovery(ctx); qerr == nil && rec {
			return nil // another start brought it back
		}
		if !sleepUntil(ctx, time.Now().Add(time.Second)) {
			return ctx.Err()
		}
	}
	if up := wd.standbyUp(ctx); up != nil {
		return fmt.Errorf("%v; then: %v", err, up)
	}
	return nil
}

func (wd *world) feedOf(slot string) int {
	for i, f := range wd.feeds {
		if f.c.Slot == slot {
			return i
		}
	}
	return 0
}

// recreate drops a slot and makes it again with the same name and plugin: a new incarnation,
// ahead of the copy on the standby. Its consumer starts over from the new slot, owed only what
// is written after it (writes wait while the slot is made).
func (wd *world) recreate(ctx context.Context, slot string, away bool) error {
	f := wd.feeds[wd.feedOf(slot)]
	return wd.whileIdle(ctx, slot, away, func() error {
		// Dropped already (FaultSlotDropped): made again only.
		if err := wd.dropSlot(ctx, slot); err != nil {
			return err
		}
		err := wd.w.Held(func(next int, open map[int]bool) error {
			if err := wd.pair.Primary.ExecDB(ctx, drill.DB, "SELECT pg_create_logical_replication_slot($1, $2)", slot, f.c.Plugin); err != nil {
				return err
			}
			f.c.RestartedAfter(next, open)
			return nil
		})
		if err != nil {
			return err
		}
		return wd.setFailover(ctx, slot)
	})
}

// setFailover gives an idle slot failover=true when slotsync runs the native method, as an
// operator of failover slots does for every slot they make (the drill's slots are made
// without it).
func (wd *world) setFailover(ctx context.Context, slot string) error {
	if wd.method != "native" {
		return nil
	}
	conn, err := pgconn.Connect(ctx, wd.pair.Primary.ReplicationDSN(drill.DB, true))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, fmt.Sprintf("ALTER_REPLICATION_SLOT %s ( FAILOVER true )", slot)).ReadAll()
	return err
}

// applyWritten carries out the faults of written plans only (never drawn).
func (wd *world) applyWritten(ctx context.Context, s Step) error {
	switch s.Fault {
	case FaultHoldLost:
		return wd.endHolds(ctx)
	case FaultOlderSlotsDropped:
		return wd.pair.Primary.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE $1 AND NOT active",
			"%"+behind(""))
	case FaultConsumerBack:
		i := wd.feedOf(s.Slot)
		if wd.feeds[i].cancel != nil {
			return skipped("the consumer is not away")
		}
		wd.startFeed(ctx, i, wd.pair.Primary)
	case FaultCatalogPruned:
		return wd.pruneCatalog(ctx, s.For)
	case FaultFeedbackReset:
		return wd.resetFeedback(ctx, s.For)
	case FaultRunningXacts:
		go wd.logRunningXacts(ctx, s.For)
	case FaultPhysicalSlotGap:
		if err := wd.pair.DropPhysicalSlot(ctx); err != nil {
			return err
		}
		time.AfterFunc(s.For, func() {
			if err := wd.pair.CreatePhysicalSlot(context.Background()); err != nil {
				wd.log.Warn("the standby's physical slot made again", "error", err)
			}
		})
	case FaultCopiesIdle:
		return wd.copiesIdle(ctx)
	case FaultSlotWALLimit:
		if err := wd.pair.Standby.Exec(ctx, "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'"); err != nil {
			return err
		}
		return wd.pair.Standby.Exec(ctx, "SELECT pg_reload_conf()")
	case FaultJournalLost:
		wd.side.signal(syscall.SIGSTOP)
		if err := os.Remove(filepath.Join(wd.stateDir, slotsync.JournalFile)); err != nil {
			return err
		}
		wd.side.kill() // the supervisor starts it again, with no journal
	case FaultRestartpoint:
		return wd.pair.Restartpoint(ctx)
	case FaultWALSwitched:
		return wd.pair.SwitchSegments(ctx, 3)
	case FaultWritesPaused:
		wd.w.PauseFor(s.For)
	case FaultConsumersConfirmLate:
		for _, f := range wd.feeds {
			f.c.ConfirmEvery(s.For)
		}
	case FaultSnapshotsRemoved:
		return wd.removeSnapshots()
	case FaultStandbyWALCleaned:
		return wd.cleanStandbyWAL(ctx)
	case FaultStandbyWALHole:
		return wd.holeStandbyWAL(ctx)
	case FaultStandbyWALDamaged:
		return wd.damageStandbyWAL(ctx, s.Slot)
	case FaultSlotBehindSkipped:
		return wd.recreateBehind(ctx, s.Slot, s.Away, true)
	case FaultSlotCopiedAside:
		if wd.pair.Major < 12 {
			return skipped("no pg_copy_logical_replication_slot before 12")
		}
		if err := wd.pair.Primary.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", behind(s.Slot)); err != nil {
			return err
		}
		return wd.pair.Primary.ExecDB(ctx, drill.DB, "SELECT pg_copy_logical_replication_slot($1, $2)", s.Slot, behind(s.Slot))
	case FaultSlotBehindOtherPlugin:
		wd.switchPlugin(s.Slot)
		return wd.recreateBehind(ctx, s.Slot, s.Away, true)
	case FaultReplayPaused:
		if err := wd.pair.Standby.Exec(ctx, "SELECT pg_wal_replay_pause()"); err != nil {
			return err
		}
		time.AfterFunc(s.For, wd.resumeReplay)
	case FaultReplayHeldAtRestart:
		return wd.holdReplayAtRestart(ctx, s.For)
	case FaultFeedbackOff:
		if err := wd.pair.SetStandbyFeedback(ctx, false); err != nil {
			return err
		}
		time.AfterFunc(s.For, func() {
			if err := wd.pair.SetStandbyFeedback(context.Background(), true); err != nil {
				wd.log.Warn("hot_standby_feedback back on", "error", err)
			}
		})
	}
	return nil
}

// holdReplayAtRestart is FaultReplayHeldAtRestart: it waits (20 s at most) for the standby to
// start again and to replay the WAL it had (its WAL receiver starts only once it has), pauses
// its replay, then lets the stalled walsender go (it finds its standby gone and ends, and the
// standby's WAL receiver streams through the slot it held). Paused before its restart, the
// standby would replay at its start whatever it had received; paused while it replays its own
// pg_wal, it never starts its WAL receiver: when the standby does not stream within 15 s, its
// replay is resumed and the fault is reported skipped.
func (wd *world) holdReplayAtRestart(ctx context.Context, d time.Duration) error {
	if wd.pair.Dir == "" {
		return skipped("the standby's restarts are seen on a local pair only")
	}
	var before string
	if err := wd.pair.Standby.QueryRow(ctx, "SELECT pg_postmaster_start_time()::text", nil, &before); err != nil {
		return err
	}
	had, err := standbyWALEnd(ctx, wd.pair.Standby)
	if err != nil {
		return err
	}
	release := func() {
		if pid := wd.stalled.Swap(0); pid != 0 {
			_ = syscall.Kill(int(pid), syscall.SIGCONT)
		}
	}
	defer release()
	if err := wd.replayedOwnWAL(ctx, before, had); err != nil {
		return err
	}
	if err := wd.pair.Standby.Exec(ctx, "SELECT pg_wal_replay_pause()"); err != nil {
		return err
	}
	release()
	streams := integration.Poll(ctx, 15*time.Second, "the standby to stream with its replay paused", func(ctx context.Context) (bool, error) {
		var n int
		err := wd.pair.Standby.QueryRow(ctx, "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'", nil, &n)
		return n == 1, err
	})
	if streams != nil {
		wd.resumeReplay()
		return skipped("the standby did not stream within 15 s with its replay paused: resumed")
	}
	time.AfterFunc(d, wd.resumeReplay)
	return nil
}

// resumeReplay resumes the standby's replay a fault paused (FaultReplayPaused,
// FaultReplayHeldAtRestart) if it still is, and logs what kept it from doing so.
func (wd *world) resumeReplay() {
	if err := wd.pair.Standby.Exec(context.Background(), resumeReplaySQL); err != nil {
		wd.log.Warn("the standby's replay resumed", "error", err)
	}
}

// resumeReplaySQL resumes a paused replay; it does nothing to one that runs.
const resumeReplaySQL = "SELECT pg_wal_replay_resume() WHERE pg_is_wal_replay_paused()"

// replayedOwnWAL waits (20 s at most) until the standby started after before and replayed what
// it had received before (had; the last record may have come in part, so replay that stays at a
// position for 2 s counts as done).
func (wd *world) replayedOwnWAL(ctx context.Context, before string, had pglogrepl.LSN) error {
	var last string
	var since time.Time
	err := integration.Poll(ctx, 20*time.Second, "the standby to start again and replay its own WAL", func(ctx context.Context) (bool, error) {
		var at, replay string
		q := "SELECT pg_postmaster_start_time()::text, coalesce(pg_last_wal_replay_lsn()::text, '')"
		if err := wd.pair.Standby.QueryRow(ctx, q, nil, &at, &replay); err != nil || at == before || replay == "" {
			return false, nil // down, or not started again yet
		}
		if lsn, err := pglogrepl.ParseLSN(replay); err == nil && lsn >= had {
			wd.faultNote = fmt.Sprintf("replayed %s of the %s it had", replay, had)
			return true, nil
		}
		if replay != last {
			last, since = replay, time.Now()
		}
		if time.Since(since) < 2*time.Second {
			return false, nil
		}
		wd.faultNote = fmt.Sprintf("replay stood at %s for 2 s, of the %s it had", replay, had)
		return true, nil
	})
	if err != nil {
		return skipped("the standby did not start again and replay its own WAL within 20 s (no state-file copy made)")
	}
	return nil
}

// cleanStandbyWAL is FaultStandbyWALCleaned (integration.Pair.CleanStandbyWAL).
func (wd *world) cleanStandbyWAL(ctx context.Context) error {
	if wd.pair.Dir == "" {
		return skipped("the standby's files are reached on a local pair only")
	}
	removed, redo, err := wd.pair.CleanStandbyWAL(ctx)
	if err != nil {
		return err
	}
	if removed == 0 {
		return skipped("no WAL file on the standby before its restartpoint's redo " + redo)
	}
	wd.log.Info("the standby's WAL before its restartpoint removed", "redo", redo, "files", removed)
	return nil
}

// holeStandbyWAL is FaultStandbyWALHole (integration.Pair.HoleStandbyWAL), after the oldest
// restart_lsn of the standby's logical slots.
func (wd *world) holeStandbyWAL(ctx context.Context) error {
	if wd.pair.Dir == "" {
		return skipped("the standby's files are reached on a local pair only")
	}
	var oldest string
	q := "SELECT coalesce(min(restart_lsn)::text, '') FROM pg_replication_slots WHERE slot_type = 'logical'"
	if err := wd.pair.Standby.QueryRow(ctx, q, nil, &oldest); err != nil {
		return err
	}
	if oldest == "" {
		return skipped("no logical slot with a restart_lsn on the standby")
	}
	after, err := lsncheck.ParseLSN(oldest)
	if err != nil {
		return err
	}
	return wd.walFileFault(ctx, after, wd.pair.HoleStandbyWAL, "a WAL file removed from the middle of the standby's pg_wal",
		"its slots' oldest restart_lsn "+oldest)
}

// damageStandbyWAL is FaultStandbyWALDamaged (integration.Pair.DamageStandbyWAL), after slot's
// restart_lsn on the primary.
func (wd *world) damageStandbyWAL(ctx context.Context, slot string) error {
	if wd.pair.Dir == "" {
		return skipped("the standby's files are reached on a local pair only")
	}
	var restart string
	q := "SELECT coalesce(restart_lsn::text, '') FROM pg_replication_slots WHERE slot_name = $1"
	if err := wd.pair.Primary.QueryRow(ctx, q, []any{slot}, &restart); err != nil {
		return fmt.Errorf("the restart_lsn of %s on the primary: %w", slot, err)
	}
	after, err := lsncheck.ParseLSN(restart)
	if err != nil || after == 0 {
		return skipped(fmt.Sprintf("no restart_lsn of %s on the primary (%q)", slot, restart))
	}
	return wd.walFileFault(ctx, after, wd.pair.DamageStandbyWAL, "a WAL file of the standby damaged",
		fmt.Sprintf("%s's restart_lsn %s", slot, restart))
}

// walFileFault applies act to a WAL file of the standby after after (replayedWALFile) and logs
// did; with no file to act on it is skipped, since is what after is.
func (wd *world) walFileFault(ctx context.Context, after lsncheck.LSN, act func(context.Context, lsncheck.LSN) (string, error), did, since string) error {
	file, err := wd.replayedWALFile(ctx, after, act)
	if err != nil {
		return err
	}
	if file == "" {
		return skipped("no WAL file on the standby between " + since + " and its replay position")
	}
	wd.log.Info(did, "file", file, "after", after.String())
	return nil
}

// replayedWALFile applies act (integration.Pair.HoleStandbyWAL or DamageStandbyWAL) to the first
// WAL file after the one holding after that the standby has replayed, once the standby caught up
// with the primary; when no whole segment lies between yet, it switches one more
// (integration.Pair.SwitchSegments), up to three times. It returns the file acted on ("" when
// none).
func (wd *world) replayedWALFile(ctx context.Context, after lsncheck.LSN, act func(context.Context, lsncheck.LSN) (string, error)) (string, error) {
	for try := 0; ; try++ {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		caughtUp := wd.pair.WaitCaughtUp(wctx)
		cancel()
		if caughtUp != nil && ctx.Err() == nil {
			wd.log.Warn("the standby did not catch up before the WAL fault", "error", caughtUp)
		}
		file, err := act(ctx, after)
		if err != nil || file != "" || try == 3 {
			return file, err
		}
		if err := wd.pair.SwitchSegments(ctx, 1); err != nil {
			return "", err
		}
	}
}

// removeSnapshots removes the standby's serialized decoding snapshots (FaultSnapshotsRemoved).
func (wd *world) removeSnapshots() error {
	if wd.pair.Dir == "" {
		return skipped("the standby's files are reached on a local pair only")
	}
	files, err := filepath.Glob(filepath.Join(wd.pair.Standby.DataDir, "pg_logical", "snapshots", "*.snap"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return skipped("no decoding snapshot on the standby")
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	wd.log.Info("the standby's decoding snapshots removed", "files", len(files))
	return nil
}

// copiesIdle: an operator sets the standby's idle_replication_slot_timeout (18+; doctor warns of
// it) to 1 s, and the standby restarts with it (a restart, not a reload: a reload would void
// every mark of rule 4 and hold the copies by copy_catalog_unprotected too); after 2.5 s a
// restartpoint (a checkpoint on the primary, replayed, then one on the standby) invalidates every
// copy idle that long, slotsync being paused, while the primary's slots, under no such setting,
// stay valid; then the setting is reset by another restart, so that the promoted server keeps
// the slots its consumers use (FaultCopiesIdle).
func (wd *world) copiesIdle(ctx context.Context) error {
	s := wd.pair.Standby
	var has bool
	if err := s.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_settings WHERE name = 'idle_replication_slot_timeout')", nil, &has); err != nil {
		return err
	}
	if !has {
		return skipped("no idle_replication_slot_timeout before 18")
	}
	if err := s.Exec(ctx, "ALTER SYSTEM SET idle_replication_slot_timeout = '1s'"); err != nil {
		return err
	}
	if err := wd.restartStandby(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2500 * time.Millisecond):
	}
	err := wd.pair.Restartpoint(ctx)
	if e := s.Exec(ctx, "ALTER SYSTEM RESET idle_replication_slot_timeout"); err == nil {
		err = e
	}
	if e := wd.restartStandby(ctx); err == nil {
		err = e
	}
	return err
}

// endHolds: the primary ends the sessions that hold slotsync's catalog holds (a connection
// limit, an idle-session timeout, a network cut), and their temporary slots go with them.
func (wd *world) endHolds(ctx context.Context) error {
	var n int
	if err := wd.pair.Primary.QueryRow(ctx, "SELECT count(pg_terminate_backend(active_pid)) FROM pg_replication_slots WHERE temporary AND slot_name LIKE $1 "+
		"AND active_pid IS NOT NULL", []any{method.HoldPrefix + "%"}, &n); err != nil {
		return err
	}
	if n == 0 {
		return skipped("slotsync held no catalog rows on the primary")
	}
	return nil
}

// resetFeedback: an operator (or a configuration run) turns the standby's hot_standby_feedback
// off and, after half of d, on again: the walreceiver reports no horizon, the primary clears the
// physical slot's, and takes the next report's as it comes, older than before or not
// (walsender.c, PhysicalReplicationSlotNewXmin).
func (wd *world) resetFeedback(ctx context.Context, d time.Duration) error {
	for _, on := range []bool{false, true} {
		if err := wd.pair.SetStandbyFeedback(ctx, on); err != nil {
			return err
		}
		time.Sleep(d / 2)
	}
	return nil
}

// logRunningXacts runs a CHECKPOINT on the primary every 100 ms for d (FaultRunningXacts).
func (wd *world) logRunningXacts(ctx context.Context, d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		if err := wd.pair.Primary.Exec(ctx, "CHECKPOINT"); err != nil {
			wd.log.Warn("running-xacts records", "error", err)
		}
	}
}

// pruneCatalog asks the primary for running-xacts records (a CHECKPOINT each) until the
// catalog_xmin of each of its slots has passed the transaction that last changed catalogTable's
// catalog row (changeCatalogBehind; without that table, the events table's: FaultCatalogVacuum),
// or for at most within, and then vacuums the catalogs: the rows that change made dead go,
// unless a slot, a hold or the standby's feedback still needs them.
func (wd *world) pruneCatalog(ctx context.Context, within time.Duration) error {
	p := wd.pair.Primary
	deadline := time.Now().Add(within)
	var holding string
	for {
		if err := p.ExecDB(ctx, drill.DB, "CHECKPOINT"); err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond) // the consumers confirm past the record
		if err := p.QueryRowDB(ctx, drill.DB, slotsBehindChange, nil, &holding); err != nil {
			return err
		}
		if holding == "" || time.Now().After(deadline) {
			break
		}
	}
	if holding != "" {
		return errors.Join(p.ExecDB(ctx, drill.DB, "VACUUM pg_attribute"), p.ExecDB(ctx, drill.DB, "VACUUM pg_class"),
			skipped("the catalog_xmin of "+holding+" had not passed the last catalog change: the catalogs were vacuumed, its dead rows kept"))
	}
	dead, err := p.VacuumCatalogs(ctx, drill.DB)
	if err == nil && dead != 0 {
		err = skipped(fmt.Sprintf("pg_class kept %d dead rows after ten VACUUMs", dead))
	}
	return err
}

// catalogTable is the table whose catalog row changes behind the older slots (Plan.OlderOutside):
// no consumer reads its rows (the publication and the consumers' filter are the events table's),
// but decoding its one row needs the row's catalog as it was.
const catalogTable = "chaos_catalog"

// changeCatalogBehind, before slotsync starts and after the older slots were made (makeBehind):
// a row is written to a new table, then the table's catalog row changes (a column added), and
// the drill's slots are moved past both (idle, before any write of the writer's: nothing is
// owed yet), until their catalog_xmin has passed the change. The copies slotsync makes then, and
// the standby's horizon with them, are past it; the older slots and a slot copied again from one
// still need the row's catalog as it was.
func (wd *world) changeCatalogBehind(ctx context.Context) error {
	p := wd.pair.Primary
	for _, sql := range []string{"CREATE TABLE " + catalogTable + " (id int)", "INSERT INTO " + catalogTable + " VALUES (1)",
		"ALTER TABLE " + catalogTable + " ADD COLUMN extra int"} {
		if err := p.ExecDB(ctx, drill.DB, sql); err != nil {
			return err
		}
	}
	for range 3 {
		// A running-xacts record after the change, then the slots moved past it.
		if err := p.ExecDB(ctx, drill.DB, "CHECKPOINT"); err != nil {
			return err
		}
		for _, s := range drill.Slots {
			if err := p.ExecDB(ctx, drill.DB, "SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())", s.Name); err != nil {
				return err
			}
		}
	}
	var holding string
	if err := p.QueryRowDB(ctx, drill.DB, slotsBehindChange, nil, &holding); err != nil {
		return err
	}
	for _, name := range strings.Split(holding, ", ") {
		if !strings.HasSuffix(name, behind("")) {
			return fmt.Errorf("the slots behind the change are %q, not the older ones alone", holding)
		}
	}
	return wd.pair.WaitCaughtUp(ctx)
}

// slotsBehindChange lists the slots whose catalog_xmin has not passed the transaction that last
// changed catalogTable's catalog row, or, without that table, the events table's
// (FaultCatalogVacuum).
const slotsBehindChange = `SELECT coalesce(string_agg(slot_name, ', '), '') FROM pg_replication_slots
	WHERE catalog_xmin IS NOT NULL AND age(catalog_xmin) >= age(coalesce((SELECT xmin FROM pg_class WHERE relname = '` + catalogTable + `'),
		(SELECT xmin FROM pg_class WHERE relname = 'events')))`

// behind names the copy of a slot made when the iteration starts, to make the slot again from
// (FaultSlotBehind).
func behind(slot string) string { return slot + "_behind" }

// makeBehind copies every drill slot before anything is written, for FaultSlotBehind
// (pg_copy_logical_replication_slot: 12 and later).
func (wd *world) makeBehind(ctx context.Context) error {
	for _, s := range drill.Slots {
		if err := wd.pair.Primary.ExecDB(ctx, drill.DB, "SELECT pg_copy_logical_replication_slot($1, $2)", s.Name, behind(s.Name)); err != nil {
			return err
		}
	}
	return nil
}

// recreateBehind drops a slot and copies it again from its copy made before any write: a new
// incarnation behind the copy on the standby, as an operator restoring a slot from an older one
// would make. Its consumer starts over from there and is owed everything, or, once the older
// slot was advanced (FaultOlderAdvanced), what commits after the advance; with skip, the older
// slot is first advanced to the primary's current position (FaultSlotBehindSkipped).
func (wd *world) recreateBehind(ctx context.Context, slot string, away, skip bool) error {
	if err := wd.behindSkipped(); err != nil {
		return err
	}
	f := wd.feeds[wd.feedOf(slot)]
	return wd.whileIdle(ctx, slot, away, func() error {
		// Dropped already (FaultSlotDropped): copied again only.
		if err := wd.dropSlot(ctx, slot); err != nil {
			return err
		}
		copyBack := func(at writerAt) error {
			// The consumer's plugin (FaultSlotBehindOtherPlugin changed it): the copy takes it.
			if err := wd.pair.Primary.ExecDB(ctx, drill.DB, "SELECT pg_copy_logical_replication_slot($1, $2, false, $3)", behind(slot), slot, f.c.Plugin); err != nil {
				return err
			}
			f.c.RestartedAfter(at.next, at.open)
			return nil
		}
		var err error
		if skip {
			err = wd.advanceBehind(ctx, slot, copyBack) // no commit between the advance and the copy
		} else {
			err = copyBack(wd.olderAdvanced[slot])
		}
		if err != nil {
			return err
		}
		return wd.setFailover(ctx, slot) // a copy does not inherit failover
	})
}

// behindSkipped says why a slot cannot be made again from its older slot here (nil: it can).
func (wd *world) behindSkipped() error {
	if wd.pair.Major < 12 {
		return skipped("no pg_copy_logical_replication_slot before 12")
	}
	if wd.switched > 0 {
		// The older slot on this primary is now slotsync's copy of it, made after writes began:
		// the consumer of a slot copied from it would not be owed everything.
		return skipped("after a switchover there is no slot from before any write")
	}
	return nil
}

// advanceOlder advances slot's older slot to the primary's current position
// (FaultOlderAdvanced): the slot copied back from it later is owed what commits after.
func (wd *world) advanceOlder(ctx context.Context, slot string) error {
	if err := wd.behindSkipped(); err != nil {
		return err
	}
	return wd.advanceBehind(ctx, slot, func(writerAt) error { return nil })
}

// advanceBehind advances slot's older slot to the primary's current position, the writer held so
// that no commit falls between the advance and where the writer stood, notes where it stood
// (olderAdvanced: a slot copied back from the older one is owed what commits after), and calls
// then with it, the writer still held.
func (wd *world) advanceBehind(ctx context.Context, slot string, then func(writerAt) error) error {
	return wd.w.Held(func(next int, open map[int]bool) error {
		if err := wd.pair.Primary.ExecDB(ctx, drill.DB, "SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())", behind(slot)); err != nil {
			return err
		}
		at := writerAt{next: next, open: maps.Clone(open)}
		if wd.olderAdvanced == nil {
			wd.olderAdvanced = map[string]writerAt{}
		}
		wd.olderAdvanced[slot] = at
		return then(at)
	})
}

// switchPlugin stops slot's consumer and has it speak the drill's other output plugin from its
// next connection, for a slot about to be made again with that plugin.
func (wd *world) switchPlugin(slot string) {
	i := wd.feedOf(slot)
	wd.stopFeed(i) // before its consumer changes plugin
	c := wd.feeds[i].c
	c.Plugin = map[string]string{"pgoutput": "test_decoding", "test_decoding": "pgoutput"}[c.Plugin]
}

// whileIdle stops a slot's consumer, ends its walsender and runs op (tried again while the slot
// is still in use, up to 15 s), then starts the consumer again unless it stays away.
func (wd *world) whileIdle(ctx context.Context, slot string, away bool, op func() error) error {
	i := wd.feedOf(slot)
	wd.stopFeed(i)
	if !away {
		defer wd.startFeed(ctx, i, wd.pair.Primary)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := wd.pair.Primary.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", slot)
		if err == nil {
			err = op()
		}
		if err == nil || time.Now().After(deadline) {
			return err
		}
		wd.log.Info("a slot's change tried again while its consumer goes", "slot", slot, "error", err)
		sleepUntil(ctx, time.Now().Add(300*time.Millisecond))
	}
}

// twoPhaseSlot is the slot FaultTwoPhase turns two_phase on for: its pgoutput consumer asks for
// prepared transactions at START_REPLICATION (protocol 3, PostgreSQL 15 and later), as a
// subscription with two_phase does.
const twoPhaseSlot = "drill_pgoutput"

// twoPhaseWhilePrepared prepares a transaction (when the server allows prepared transactions),
// then, while it is prepared, has the slot's consumer reconnect asking for two-phase decoding
// (15 and later), which turns the slot's two_phase on with its two_phase_at at the consumer's
// position, and commits the transaction s.For later. (ALTER_REPLICATION_SLOT … TWO_PHASE on 18
// is not used: PostgreSQL warns that turning two_phase on at an arbitrary point can make the
// decoder skip a transaction prepared before it, on the primary itself.) Before 15 the fault is
// the prepared transaction alone. One left prepared at the failover is committed on the new
// primary.
func (wd *world) twoPhaseWhilePrepared(ctx context.Context, s Step) error {
	var allowed int
	if err := wd.pair.Primary.QueryRow(ctx, "SELECT current_setting('max_prepared_transactions')::int", nil, &allowed); err != nil {
		return err
	}
	gid, ids := "", []int(nil)
	if allowed > 0 {
		gid, ids = fmt.Sprintf("chaos_%d", time.Now().UnixNano()), wd.w.IDs(3)
		sql := fmt.Sprintf("BEGIN; INSERT INTO events SELECT g, 'prepared' FROM unnest('{%s}'::int[]) g; PREPARE TRANSACTION '%s'",
			intList(ids), gid)
		if err := wd.pair.Primary.ExecDB(ctx, drill.DB, sql); err != nil {
			wd.w.Ended(ids)
			return err
		}
	}
	if wd.pair.Major >= 15 {
		i := wd.feedOf(s.Slot)
		if gid != "" {
			wd.untilConfirmedPastPrepare(ctx, i)
		}
		wd.stopFeed(i)
		wd.feeds[i].c.AskTwoPhase()
		wd.startFeed(ctx, i, wd.pair.Primary)
		if err := wd.untilTwoPhase(ctx, s.Slot); err != nil {
			return err
		}
	}
	if gid != "" {
		time.AfterFunc(s.For, func() { wd.commitPreparedLater(ctx, gid, ids) })
	}
	return nil
}

// commitPreparedLater commits the fault's prepared transaction on the primary, tried again (10 s
// at most) while the primary cannot take it (a crash and restart under way, FaultPrimaryRestart):
// left prepared, it would hold every logical slot made after it in creation, which waits for it
// (a long run, seed 27005098 on 17: a slot made again waited five minutes). Any
// other error ends it; one left prepared at the failover is committed on the new primary.
func (wd *world) commitPreparedLater(ctx context.Context, gid string, ids []int) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := wd.pair.Primary.ExecDB(ctx, drill.DB, "COMMIT PREPARED '"+gid+"'")
		if err == nil {
			wd.w.Ended(ids)
			return
		}
		var pg *pgconn.PgError
		if errors.As(err, &pg) && !strings.HasPrefix(pg.Code, "57") || ctx.Err() != nil || time.Now().After(deadline) {
			wd.log.Info("the prepared transaction left prepared", "gid", gid, "error", err)
			return
		}
		sleepUntil(ctx, time.Now().Add(250*time.Millisecond))
	}
}

// untilConfirmedPastPrepare waits, up to 5 s, until feed i's consumer has confirmed the WAL
// written with the PREPARE: a consumer without two_phase is not sent the PREPARE, and confirms
// past it on the next keepalive, as pg_recvlogical and subscriptions do. Turned on after that,
// the slot's two_phase_at follows the PREPARE, and the COMMIT PREPARED brings the transaction
// whole; turned on before, the reconnection is sent the PREPARE itself. The fault means the
// first: which of the two a run got was the keepalive's race with the reconnection.
// When it cannot tell or the wait runs out, the fault goes on and says so (world.faultNote).
func (wd *world) untilConfirmedPastPrepare(ctx context.Context, i int) {
	written, err := wd.pair.CurrentLSN(ctx)
	if err != nil {
		wd.faultNote = "the consumer's confirmation past the PREPARE not waited for: " + err.Error()
		return
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if wd.feeds[i].c.ConfirmedAt(time.Now()) >= written {
			return
		}
		sleepUntil(ctx, time.Now().Add(50*time.Millisecond))
	}
	wd.faultNote = fmt.Sprintf("the consumer had not confirmed past the PREPARE (%s) after 5 s: the reconnection may be sent the PREPARE itself, "+
		"and then nothing is owed whole at the commit", written)
}

// untilTwoPhase waits until the slot's two_phase is on (the consumer's reconnection may wait for
// its last walsender to end).
func (wd *world) untilTwoPhase(ctx context.Context, slot string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var on bool
		err := wd.pair.Primary.QueryRow(ctx, "SELECT two_phase FROM pg_replication_slots WHERE slot_name = $1", []any{slot}, &on)
		if err == nil && on {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("two_phase not on for %s after 10 s (%v)", slot, err)
		}
		sleepUntil(ctx, time.Now().Add(200*time.Millisecond))
	}
}

// commitPrepared commits on n the transactions FaultTwoPhase left prepared (the new primary
// holds them after a failover in their window), so the table holds what the consumers are owed.
func commitPrepared(ctx context.Context, n *integration.Node) error {
	conn, err := n.Connect(ctx, drill.DB)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'chaos\\_%'")
	if err != nil {
		return err
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, gid := range gids {
		if _, err := conn.Exec(ctx, "COMMIT PREPARED '"+gid+"'"); err != nil {
			return fmt.Errorf("commit prepared %s: %w", gid, err)
		}
	}
	return nil
}

func intList(ids []int) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return strings.Join(parts, ",")
}

// longTransaction writes in a transaction kept open for d (copies made meanwhile must wait for
// it or decode it whole).
func (wd *world) longTransaction(ctx context.Context, d time.Duration) {
	conn, err := wd.pair.Primary.Connect(ctx, drill.DB)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	ids := wd.w.IDs(3)
	defer wd.w.Ended(ids)
	if _, err := tx.Exec(ctx, "INSERT INTO events SELECT g, 'long' FROM unnest($1::int[]) g", ids); err != nil {
		return
	}
	sleepUntil(ctx, time.Now().Add(d))
	_ = tx.Commit(ctx)
}

// holdWatch samples the primary's catalog holds and keeps the longest any stayed.
type holdWatch struct {
	node *integration.Node

	mu        stdsync.Mutex
	firstSeen map[string]time.Time
	longest   time.Duration
}

func (h *holdWatch) run(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for sleepUntil(ctx, time.Now().Add(500*time.Millisecond)) {
		if conn == nil {
			c, err := h.node.Connect(ctx, "postgres")
			if err != nil {
				continue
			}
			conn = c
		}
		rows, err := conn.Query(ctx, "SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE 'slotsync_hold_%'")
		if err != nil {
			conn.Close(context.Background())
			conn = nil
			continue
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err == nil {
			h.saw(names, time.Now())
		}
	}
}

func (h *holdWatch) saw(names []string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	present := map[string]bool{}
	for _, n := range names {
		present[n] = true
		if _, ok := h.firstSeen[n]; !ok {
			h.firstSeen[n] = now
		}
		h.longest = max(h.longest, now.Sub(h.firstSeen[n]))
	}
	for n := range h.firstSeen {
		if !present[n] {
			delete(h.firstSeen, n)
		}
	}
}

func (h *holdWatch) longestHold() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.longest
}

// repointStandby sets the standby's primary_conninfo to to for a while, then back: empty, a
// standby cut off from a primary that lives on (its WAL receiver stops and does not come back);
// another server's, a standby streaming from it.
func (wd *world) repointStandby(ctx context.Context, d time.Duration, to string) error {
	sb := wd.pair.Standby
	var conninfo string
	var err error
	// A state-file copy being installed restarts the standby: the fault acts once it is back.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err = sb.QueryRow(ctx, "SELECT current_setting('primary_conninfo')", nil, &conninfo)
		if !standbyRestarting(err) || time.Now().After(deadline) {
			break
		}
	}
	if standbyRestarting(err) {
		return skipped("the standby did not start again within 10 s")
	}
	if err != nil {
		return err
	}
	if conninfo == "" {
		return skipped("the standby has no primary_conninfo")
	}
	if err := setPrimaryConninfo(ctx, sb, to); err != nil {
		return err
	}
	wd.lasting.hold("primary_conninfo", d, func() {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = setPrimaryConninfo(rctx, sb, conninfo)
	})
	return nil
}

// stallSender stops (SIGSTOP) the primary's walsender to the standby, the one on its physical
// slot (a second standby streams through a slot of its own), and keeps its pid in wd.stalled:
// a kill of the primary kills it too.
func (wd *world) stallSender(ctx context.Context) (int, error) {
	var pid int
	if err := wd.pair.Primary.QueryRow(ctx, "SELECT coalesce((SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1), 0)",
		[]any{integration.PhysicalSlot}, &pid); err != nil {
		return 0, err
	}
	if pid == 0 {
		return 0, skipped("no walsender streams to the standby")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return 0, fmt.Errorf("stop the walsender %d: %w", pid, err)
	}
	wd.stalled.Store(int64(pid))
	return pid, nil
}

// cutReceiver is FaultWALReceiver: the primary's walsender on the standby's own physical slot is
// terminated (a second standby's is left alone); the standby's WAL receiver connects again.
func (wd *world) cutReceiver(ctx context.Context) error {
	var n int
	q := "SELECT count(pg_terminate_backend(active_pid)) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL"
	if err := wd.pair.Primary.QueryRow(ctx, q, []any{integration.PhysicalSlot}, &n); err != nil {
		return err
	}
	if n == 0 {
		return skipped("no walsender streams to the standby from the primary (a cascade, or the standby reconnecting)")
	}
	return nil
}

// setPrimaryConninfo sets a standby's primary_conninfo and reloads its configuration: its WAL
// receiver stops, and starts again for to unless to is empty.
func setPrimaryConninfo(ctx context.Context, n *integration.Node, to string) error {
	for _, sql := range []string{"ALTER SYSTEM SET primary_conninfo = " + pgQuote(to), "SELECT pg_reload_conf()"} {
		if err := n.Exec(ctx, sql); err != nil {
			return err
		}
	}
	return nil
}

// cascade re-points the standby to stream from the second standby for d (FaultCascade), through
// a physical slot of its name there: the primary lives on, and what it writes reaches the
// standby through the second one. slotsync's route to the primary is untouched.
func (wd *world) cascade(ctx context.Context, d time.Duration) error {
	if wd.secondNode == nil {
		return skipped("no second standby in this iteration (Plan.SecondStandby)")
	}
	addr, err := wd.secondNode.Addr(ctx)
	if err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if err := wd.secondNode.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true) WHERE NOT EXISTS "+
		"(SELECT FROM pg_replication_slots WHERE slot_name = $1)", integration.PhysicalSlot); err != nil {
		return err
	}
	to := fmt.Sprintf("host=%s port=%s user=%s dbname=postgres application_name=cascaded", host, port, integration.Superuser)
	return wd.repointStandby(ctx, d, to)
}

// pgQuote is s as an SQL string literal.
func pgQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// killPrimary kills the primary -9, a walsender it stalled first: stopped, it would not die with
// the others and, continued later, would still send the standby the WAL it held back (a primary
// whose host dies takes it along).
func (wd *world) killPrimary(ctx context.Context) error {
	if pid := wd.stalled.Swap(0); pid != 0 {
		_ = syscall.Kill(int(pid), syscall.SIGKILL)
	}
	return wd.pair.Primary.Kill(ctx)
}

// standbyRestarting says whether err is the standby refusing connections while it starts or
// stops (SQLSTATE 57P03), ending the fault's session as it stops (57P01, a state-file restart
// beginning under it), its postmaster exiting as the fault connects (connection reset), or not
// listening at all: a fault on it then has nothing to act on.
func standbyRestarting(err error) bool {
	var pgErr *pgconn.PgError
	return err != nil && (errors.As(err, &pgErr) && (pgErr.Code == "57P03" || pgErr.Code == "57P01") || strings.Contains(err.Error(), "connection refused") ||
		strings.Contains(err.Error(), "connection reset by peer") || strings.Contains(err.Error(), "the database system is starting up"))
}
