package sync

import (
	"context"
	"fmt"
	"time"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// The watch: between full passes, a cheap look at the primary slots' positions and the
// standby's replay position, every WatchInterval, advances the copies whose consumer moved.
// It never decides anything a full pass has not decided already: it only moves copies the last
// pass found idle, owned, of the same incarnation and due for an advance (or up to date), still
// under rule 1 (never backwards, never past the standby's replay position) and rule 2 (a primary
// slot whose restart_lsn or catalog_xmin went back is left to the next full pass). Everything
// else, readiness, journal writes, creations and restarts, stays on the full pass's rhythm.

// watched is a copy the watch may advance.
type watched struct {
	database string
	ref      lsncheck.Seen // the primary slot as the last full pass saw it
	copyAt   lsncheck.LSN  // the copy's confirmed_flush as far as slotsync knows
}

// WatchSample is what the watch reads: the standby's replay position and the watched primary
// slots' positions.
type WatchSample struct {
	InRecovery bool
	Replay     lsncheck.LSN
	Primary    map[string]lsncheck.Position
}

// watchable records, after an applying full pass, which copies the watch may advance.
func (e *Engine) watchable(actions []Action, results []result, after map[string]topology.Slot) {
	e.watched = map[string]watched{}
	// Not for installed copies (state file, 11-15): their readiness rests on the decoding
	// snapshot at their restart_lsn, which only the full pass looks for (ARCHITECTURE.md, the
	// watch). Not while the server's sync is driven every pass either.
	if e.cfg.WatchInterval <= 0 || !e.traits.Watchable || e.traits.ServerSyncs && e.cfg.Native.Drive {
		return
	}
	for i, a := range actions {
		cp, ok := after[a.Slot]
		ent := e.journal.Slots[a.Slot]
		switch {
		case !ok || ent == nil || cp.Active || cp.Synced || a.Primary.Failover || results[i].failed():
			continue
		case a.Kind == KindAdvance, a.Kind == KindNone && (a.Code == CodeUpToDate || a.Code == CodeStandbyLagging):
			e.watched[a.Slot] = watched{database: a.Primary.Database, ref: a.Primary.Seen(), copyAt: cp.ConfirmedFlush}
		}
	}
}

// watchUntil runs the watch until deadline (or ctx ends, then it returns false).
func (e *Engine) watchUntil(ctx context.Context, deadline time.Time) bool {
	for {
		next := time.Now().Add(e.watchEvery)
		if len(e.watched) == 0 || e.cfg.WatchInterval <= 0 || next.After(deadline) {
			next = deadline
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Until(next)):
		}
		if !next.Before(deadline) {
			return true
		}
		look := e.watch(ctx)
		// Looking keeps to a tenth of the time or less, however many slots it reads (advances,
		// work the consumer asked for, do not slow it down).
		e.watchEvery = max(e.cfg.WatchInterval, 10*look)
	}
}

// watch makes one look and the advances it calls for, and returns how long the look took. Any
// failure ends watching until the next full pass, which sorts it out.
func (e *Engine) watch(ctx context.Context) time.Duration {
	names := make([]string, 0, len(e.watched))
	for name := range e.watched {
		names = append(names, name)
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, e.cfg.ObserveTimeout)
	sample, err := e.obs.Watch(wctx, names)
	cancel()
	look := time.Since(start)
	if err != nil || !sample.InRecovery || sample.Replay == 0 || len(e.sess) == 0 {
		e.watched = nil
		return look
	}
	for _, name := range sortedKeys(e.watched) {
		w := e.watched[name]
		pos, ok := sample.Primary[name]
		if !ok {
			delete(e.watched, name)
			continue
		}
		cur := lsncheck.Seen{Identity: w.ref.Identity, Position: pos}
		if ch, _ := lsncheck.CompareIncarnation(w.ref, cur); ch == lsncheck.NewIncarnation {
			delete(e.watched, name) // maybe another slot: the next full pass decides
			continue
		}
		target := lsncheck.MinLSN(pos.ConfirmedFlush, sample.Replay)
		if target <= w.copyAt {
			continue
		}
		if lsncheck.Bytes(target, w.copyAt) > e.cfg.AdvanceStep {
			continue // a catch-up: the full pass moves it in bounded steps and reports progress
		}
		sctx, cancel := context.WithTimeout(ctx, e.cfg.SlotTimeout)
		end, err := e.sess[0].Advance(sctx, name, w.database, target)
		cancel()
		if err != nil {
			e.log.Debug("watch: advance failed; left to the next pass", "slot", name, "error", err)
			delete(e.watched, name)
			continue
		}
		w.copyAt = max(end, target)
		e.watched[name] = w
		e.watchAdvances++
	}
	return look
}

// watchQueries reads a WatchSample; the observer runs them on its connections.
const (
	watchStandbyQuery = "SELECT pg_is_in_recovery(), coalesce(pg_last_wal_replay_lsn()::text, '0/0')"
	watchPrimaryQuery = `SELECT slot_name, coalesce(restart_lsn::text, '0/0'), coalesce(confirmed_flush_lsn::text, '0/0'),
		coalesce(catalog_xmin::text, '0')::bigint FROM pg_replication_slots WHERE slot_type = 'logical' AND slot_name = ANY($1)`
)

func parseWatchRow(restart, confirmed string, xmin int64) (lsncheck.Position, error) {
	r, err := lsncheck.ParseLSN(restart)
	if err != nil {
		return lsncheck.Position{}, err
	}
	c, err := lsncheck.ParseLSN(confirmed)
	if err != nil {
		return lsncheck.Position{}, err
	}
	if xmin < 0 || xmin > 1<<32-1 {
		return lsncheck.Position{}, fmt.Errorf("catalog_xmin %d out of range", xmin)
	}
	return lsncheck.Position{RestartLSN: r, ConfirmedFlush: c, CatalogXmin: lsncheck.XID(xmin)}, nil
}
