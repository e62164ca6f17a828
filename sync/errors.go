package sync

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/slotsync/slotsync/topology"
)

// Class sorts errors by what the caller can do about them.
type Class int

const (
	// Retry: transient (network, a node restarting, a timeout); try the pass again later.
	Retry Class = iota
	// SkipSlot: this slot cannot be worked on now; the others go on.
	SkipSlot
	// Stop: a human must act (wrong cluster, permissions, configuration, promotion); retrying
	// would only repeat the same message.
	Stop
)

func (c Class) String() string {
	switch c {
	case Retry:
		return "retry"
	case SkipSlot:
		return "skip_slot"
	case Stop:
		return "stop"
	}
	return "unknown"
}

// Cause is what kind of trouble an error is; Classify (what the engine does next) and the
// command line's exit codes both follow from it, so the error types are sorted in one place.
type Cause int

const (
	// CauseTransient: the network, a node restarting or shutting down, a timeout, an unknown
	// error: trying again later may succeed.
	CauseTransient Cause = iota
	// CauseSlot: this slot's work failed (in use, does not exist, lagging): the others go on.
	CauseSlot
	// CauseHuman: configuration, privileges, prerequisites, the wrong cluster: a human must act.
	CauseHuman
	// CausePromoted: the standby is a primary now.
	CausePromoted
)

// CauseOf sorts an error by its type, SQLSTATE and message.
func CauseOf(err error) Cause {
	var (
		cfgErr    *topology.ConfigError
		prereqErr *topology.PrereqError
		connErr   *topology.ConnError
		pgErr     *pgconn.PgError
		nodeErr   *NodeError
	)
	switch {
	case err == nil:
		return CauseTransient
	case errors.Is(err, topology.ErrPromoted):
		return CausePromoted
	case errors.As(err, &cfgErr), errors.As(err, &prereqErr), errors.Is(err, ErrUnsupportedMethod):
		return CauseHuman
	case errors.As(err, &connErr):
		if connErr.Retryable() {
			return CauseTransient
		}
		return CauseHuman
	case errors.As(err, &nodeErr):
		// A failed observation of a node: a pass to retry, unless a human must act.
		if c := CauseOf(nodeErr.Err); c == CauseHuman || c == CausePromoted {
			return c
		}
		return CauseTransient
	case errors.As(err, &pgErr):
		return causePg(pgErr)
	case errors.Is(err, context.DeadlineExceeded):
		return CauseSlot
	}
	return CauseTransient
}

// Classify sorts an error from a pass or from one slot's work by what the engine does next.
func Classify(err error) Class {
	switch CauseOf(err) {
	case CauseSlot:
		return SkipSlot
	case CauseHuman, CausePromoted:
		return Stop
	}
	return Retry
}

func causePg(e *pgconn.PgError) Cause {
	switch {
	case e.Code == "42501" || strings.HasPrefix(e.Code, "28"): // insufficient privilege, auth
		return CauseHuman
	case e.Code == "55000" && strings.Contains(e.Message, "minimum is"):
		// "cannot advance replication slot to X, minimum is Y": the standby lags or the copy
		// is ahead. Never an invalidation (docs/RULES.md, lesson 2).
		return CauseSlot
	case e.Code == "55006", e.Code == "42704", e.Code == "42710", e.Code == "55000":
		// in use, does not exist (anymore), already exists, not in the right state
		return CauseSlot
	case strings.HasPrefix(e.Code, "08"), strings.HasPrefix(e.Code, "57"), strings.HasPrefix(e.Code, "53"):
		// connection, operator intervention (shutdown, cancel), insufficient resources
		return CauseTransient
	}
	return CauseSlot
}
