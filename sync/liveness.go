package sync

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slotsync/slotsync/internal/failpoint"
	"github.com/slotsync/slotsync/topology"
)

// ErrPrimaryInRecovery: the server slotsync takes for the primary (the standby's
// primary_conninfo, or --primary) answers in recovery and is the standby's demoted primary (a
// switchover, before the HA manager re-points the standby): of this cluster, not the standby
// itself, receiving WAL from no one but the standby (JudgeUpstream). It takes no writes, so the
// primary is gone as far as the gate is concerned (rule 8), and the standby streaming from it
// does not make a primary alive.
var ErrPrimaryInRecovery = errors.New("the server taken for the primary (--primary, or the standby's primary_conninfo) is in recovery: " +
	"the standby's primary, demoted (as in a switchover): it takes no writes")

// primaryGone reports an observation that failed only because the primary could not be asked
// (unreachable, shutting down, in recovery, or unknown while an HA manager re-points the
// standby).
func primaryGone(err error) bool {
	var ne *NodeError
	return errors.As(err, &ne) && ne.Node == "primary" && Classify(err) == Retry
}

// judgeWithoutPrimary answers for a pass whose primary is gone, from the standby and the
// journal's gate record (rule 8). Inspect returns the verdict (unless Strict); a pass that would
// apply still fails (nothing was changed) but carries the verdict for /promotion-ready.
func (e *Engine) judgeWithoutPrimary(ctx context.Context, rep Report, obs Observation, perr error, apply bool) (Report, error) {
	rec := e.journal.Gate
	switch {
	case errors.Is(perr, ErrPrimaryAlive):
		return rep, perr // a server in recovery that follows a live primary (JudgeUpstream)
	case e.cfg.Strict && !apply:
		return rep, fmt.Errorf("%w: %w (strict: the gate does not judge without the primary)", perr, ErrCannotTell)
	case rec == nil:
		return rep, fmt.Errorf("%w: %w: no earlier observation of the primary is recorded in the state directory (give check the daemon's --state-dir)",
			perr, ErrCannotTell)
	}
	if err := e.checkJournalCluster(obs.Standby.Info.SystemID); err != nil {
		return rep, err
	}
	if err := cannotTell(obs.Standby.Info, perr, rec, e.seen, e.now(), e.cfg.MaxRecordAge); err != nil {
		return rep, fmt.Errorf("%w: %w", perr, err)
	}
	obs, err := e.primaryLost(ctx, obs, perr, apply)
	if err != nil {
		return rep, fmt.Errorf("%w: %w", perr, err)
	}
	demoted := errors.Is(perr, ErrPrimaryInRecovery)
	if demoted && obs.Demoted.SlotsErr != nil {
		return rep, fmt.Errorf("%w: %w: the demoted primary's slots could not be read (%v): a slot made again or made there since slotsync's last "+
			"pass would go unseen; ask again", perr, ErrCannotTell, obs.Demoted.SlotsErr)
	}
	age := e.now().Sub(rec.ObservedAt)
	rep.Role = RoleStandby
	rep.Major = obs.Standby.Info.Major()
	rep.Method = topology.Method(rec.Method)
	rep.Standby = summarize(obs.Standby.Info)
	rep.Slots = JudgeWithoutPrimary(rec.heldBackAt(e.now()), obs.Standby, e.cfg.Select, e.cfg.Exact, obs.Demoted)
	rep.Slots = append(rep.Slots, notInRecord(rec, e.journal, obs.Standby, e.cfg.Select)...)
	if demoted {
		rep.Slots = append(rep.Slots, demotedUnobserved(rec, e.journal, obs.Demoted, obs.Standby, e.cfg.Select)...)
	}
	rep.Selected, rep.Unselected = len(rec.Slots), rec.Unselected
	rep.WithoutPrimary = &WithoutPrimary{Why: perr.Error(), ObservedAt: rec.ObservedAt, AgeSeconds: age.Seconds(),
		SynchronizedStandby: rec.SynchronizedStandby, Meaning: withoutPrimaryMeaning(age, rec.SynchronizedStandby, rep.Major, demoted)}
	if !e.logged.withoutPrimary {
		e.log.Warn("the primary cannot be asked: the gate judges without it, from the standby and the last observation of the primary",
			"why", perr.Error(), "observed_at", rec.ObservedAt.Format(time.RFC3339), "age_seconds", age.Seconds(), "ready", rep.Ready(),
			"synchronized_standby", rec.SynchronizedStandby)
		e.logged.withoutPrimary = true
	}
	rep.Duration = e.now().Sub(rep.Started)
	if apply {
		return rep, perr
	}
	return rep, nil
}

// ErrCannotTell: without the primary, the gate cannot judge at all (rule 8).
var ErrCannotTell = errors.New("CANNOT TELL")

// ErrPrimaryAlive is the CANNOT TELL of a primary that is alive: the standby still streams from
// it, and only slotsync cannot reach it. Whatever a hook's policy, promoting now would split the
// cluster (it wraps ErrCannotTell).
var ErrPrimaryAlive error = primaryAlive{}

// primaryAlive is a CANNOT TELL that shows a primary alive: why says how it was seen (the
// standby streaming from it by default; a server in recovery following another, upstream.go).
type primaryAlive struct{ why string }

func (p primaryAlive) Error() string {
	if p.why != "" {
		return p.why
	}
	return "CANNOT TELL: the standby still streams from its primary, which is alive (only slotsync cannot reach it): " +
		"do not promote; fix slotsync's route or credentials to the primary"
}

func (primaryAlive) Unwrap() error { return ErrCannotTell }

// Is makes every primaryAlive, whatever its why, ErrPrimaryAlive.
func (primaryAlive) Is(target error) bool {
	_, ok := target.(primaryAlive)
	return ok
}

// writablePrimaryAlive is the answer to a promotion's question (Config.ForPromotion) while the
// primary answers read-write: it is alive, whether or not this standby streams from it right now,
// and promoting the standby would make two primaries. HA managers demote the primary before the
// new leader's hook asks, so a read-write primary then is a fencing that failed (its manager hung,
// no watchdog).
func writablePrimaryAlive(obs Observation) error {
	feeds := "this standby does not stream from it right now"
	if obs.Physical.Active || obs.Standby.Info.StreamsLive() {
		feeds = "this standby streams from it"
	}
	return primaryAlive{why: fmt.Sprintf("CANNOT TELL: asked before a promotion while the old primary is alive and read-write (%s answers, "+
		"not in recovery; %s): promoting this standby now would make two primaries, and consumers on the old one would confirm changes "+
		"this standby never gets; fence the old primary first (stop it, or let the HA manager demote it), then ask again", obs.PrimaryAddr, feeds)}
}

// cannotTell says why the gate cannot judge without the primary: the standby still streams
// from it (the primary is alive, only unreachable from here: promoting now would split the
// cluster, and its consumers may get ahead of this standby), the record is older than maxAge
// (slots made since are unknown to it), or the primary lived on unobserved past the record's
// renewal, or past the daemon's note of its last pass (slots changed then are unknown to it).
func cannotTell(standby topology.NodeInfo, perr error, rec *GateRecord, seen *GateSeen, now time.Time, maxAge time.Duration) error {
	age := now.Sub(rec.ObservedAt)
	lastCommit := now.Add(-standby.ReplayedCommitAge)
	switch {
	case livePrimarySeen(standby, perr):
		return ErrPrimaryAlive
	case standby.ReceiverStatus == "unknown":
		return fmt.Errorf(
			"%w: the role may not see whether the standby still streams from its primary (GRANT pg_read_all_stats, or pg_monitor, TO the slotsync role)",
			ErrCannotTell,
		)
	case maxAge > 0 && age > maxAge:
		return fmt.Errorf("%w: the last observation of the primary is %s old, past --max-record-age %s: slots made since are unknown to it",
			ErrCannotTell, age.Round(time.Second), maxAge)
	case !rec.RenewBy.IsZero() && standby.ReplayedCommitAge >= 0 && !failpoint.Mutant("record-outlived") &&
		lastCommit.After(rec.RenewBy.Add(lagMargin(RecordLagMargin, "record-margin-doubled"))):
		return fmt.Errorf("%w: the standby replayed a transaction the primary committed at %s, %s after slotsync's last observation of it (%s, "+
			"due to be renewed by %s): slotsync did not observe the primary's last moments (stalled, restarting, or its route to the primary cut), "+
			"so slots dropped, made again or moved back then are unknown to the gate; see slotsync's log for why its passes stopped",
			ErrCannotTell, lastCommit.UTC().Format("15:04:05.000"), lastCommit.Sub(rec.ObservedAt).Round(100*time.Millisecond),
			rec.ObservedAt.UTC().Format("15:04:05.000"), rec.RenewBy.UTC().Format("15:04:05.000"))
	case seen.outlived(rec, standby):
		return fmt.Errorf("%w: the standby replayed a transaction the primary committed at %s (the primary's clock), %s after slotsync's last pass "+
			"observed it (at %s; the next was due by %s): slotsync did not observe the primary's last moments (stalled, restarting, or its route to "+
			"the primary cut), so slots dropped, made again or moved back then are unknown to the gate; see slotsync's log for why its passes stopped",
			ErrCannotTell, standby.ReplayedCommitAt.Format("15:04:05.000"), standby.ReplayedCommitAt.Sub(seen.PrimaryClock).Round(100*time.Millisecond),
			seen.PrimaryClock.Format("15:04:05.000"), seen.RenewBy.Format("15:04:05.000"))
	}
	return nil
}

// livePrimarySeen says whether an observation (and the error it ended with) saw the standby
// stream from a primary: its WAL receiver streams, and not from a server found in recovery (a
// demoted primary takes no writes and passes none on).
func livePrimarySeen(standby topology.NodeInfo, err error) bool {
	return errors.Is(err, ErrPrimaryAlive) || standby.StreamsLive() && !errors.Is(err, ErrPrimaryInRecovery)
}

// noteStreaming remembers when a pass last saw the standby stream from its primary. An applying
// engine also writes into the journal, once per change, when the standby stopped streaming (the
// last time it saw it stream), so that check, a process of its own, knows how long the standby
// has been without its primary.
func (e *Engine) noteStreaming(obs Observation, err error, apply bool) {
	info := obs.Standby.Info
	if info.VersionNum == 0 {
		return // the standby was not observed
	}
	streaming := livePrimarySeen(info, err)
	if streaming {
		e.live.lastStreaming = e.now()
	}
	if !apply || e.cfg.ReadOnly || e.journal == nil {
		return
	}
	lostAt := e.journal.StandbyLostPrimaryAt
	switch {
	case !streaming && info.InRecovery && lostAt.IsZero() && !e.live.lastStreaming.IsZero():
		lostAt = e.live.lastStreaming
	case streaming && !lostAt.IsZero():
		lostAt = time.Time{}
	default:
		return
	}
	next := e.journal.clone()
	next.StandbyLostPrimaryAt = lostAt
	_ = e.commit(next, nil, "when the standby stopped streaming from its primary")
}

// lastStreamed is when the standby last streamed from its primary, as far as this engine can
// tell: what it saw itself, else what the daemon recorded (unless a later record saw it stream),
// else nothing before this engine's first pass.
func (e *Engine) lastStreamed() time.Time {
	if !e.live.lastStreaming.IsZero() {
		return e.live.lastStreaming
	}
	if j := e.journal; j != nil && !j.StandbyLostPrimaryAt.IsZero() {
		if rec := j.Gate; rec == nil || rec.StandbyCutOff || !rec.ObservedAt.After(j.StandbyLostPrimaryAt) {
			return j.StandbyLostPrimaryAt
		}
	}
	return e.live.started
}

// primaryLost holds the judgement without the primary until the standby has lost it: no WAL
// receiver streaming for PrimaryGoneAfter (rule 8). A receiver between two attempts to
// reconnect (the primary restarting, a cut connection; the standby retries every
// wal_retrieve_retry_interval) says nothing of the primary, which may be alive and taking
// writes that its consumers get and this standby does not. An applying pass answers CANNOT
// TELL until then; a judgement that changes nothing (check) watches the standby until then,
// and a receiver that streams again means the primary is alive. The standby's primary seen
// demoted (perr, or a later observation; JudgeUpstream) takes no writes: no need to wait, once
// the standby holds the WAL it has (a judgement that changes nothing watches for that too). It
// returns the latest view of the standby.
func (e *Engine) primaryLost(ctx context.Context, obs Observation, perr error, apply bool) (Observation, error) {
	const every = 250 * time.Millisecond
	start := e.now()
	for i := 0; ; i++ {
		demoted := errors.Is(perr, ErrPrimaryInRecovery)
		since := e.lastStreamed()
		lost := e.now().Sub(since)
		last := apply || i > int(e.cfg.PrimaryGoneAfter/every)+4
		pending := errors.Is(perr, ErrUpstreamPending) && e.now().Sub(start) < e.cfg.PrimaryGoneAfter
		switch {
		case pending && apply:
			return obs, fmt.Errorf("%w: it may be about to follow a primary promoted elsewhere; check watches it for %s (--primary-gone-after) "+
				"before it takes it for the standby's demoted primary", ErrCannotTell, e.cfg.PrimaryGoneAfter)
		case pending && i == 0:
			e.log.Info("the server taken for the primary is in recovery with an upstream configured and follows no one right now: watching "+
				"whether it follows a primary promoted elsewhere before judging", "watch_seconds", e.cfg.PrimaryGoneAfter.Seconds())
		case pending:
		case demoted && (last || obs.Standby.Info.WALEnd() >= obs.Demoted.WALEnd):
			// Demoted: gone at once, once the standby holds the demoted server's WAL (past the
			// wait, the verdicts say what the standby lacks).
			return obs, nil
		case !demoted && lost >= e.cfg.PrimaryGoneAfter:
			return obs, nil
		case last:
			// The message names the moment, not the time since: a daemon logs it once.
			return obs, fmt.Errorf("%w: the standby has not streamed from its primary since %s only; the gate judges without the primary once "+
				"it has been gone for %s (--primary-gone-after): until then the standby may be reconnecting to a primary that is alive",
				ErrCannotTell, since.UTC().Format("15:04:05.0"), e.cfg.PrimaryGoneAfter)
		case i == 0 && demoted:
			e.log.Info("the primary is demoted and the standby lacks some of its WAL: watching whether it receives it before judging",
				"standby_wal_end", obs.Standby.Info.WALEnd().String(), "demoted_wal_end", obs.Demoted.WALEnd.String())
		case i == 0:
			e.log.Info("the standby is not streaming from its primary: watching whether it reconnects before judging without the primary",
				"watch_seconds", (e.cfg.PrimaryGoneAfter - lost).Seconds())
		}
		if err := e.sleep(ctx, every); err != nil {
			return obs, err
		}
		octx, cancel := context.WithTimeout(ctx, e.cfg.ObserveTimeout)
		next, err := e.obs.Observe(octx)
		cancel()
		switch {
		case err == nil || livePrimarySeen(next.Standby.Info, err):
			return obs, ErrPrimaryAlive // it answers again, or the standby streams from it again
		case !primaryGone(err) || next.Standby.Info.VersionNum == 0:
			return obs, err
		}
		obs, perr = next, err
	}
}
