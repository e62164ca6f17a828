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

// Classify sorts an error from a pass or from one slot's work.
func Classify(err error) Class {
	var (
		cfgErr    *topology.ConfigError
		prereqErr *topology.PrereqError
		connErr   *topology.ConnError
		pgErr     *pgconn.PgError
	)
	var nodeErr *NodeError
	switch {
	case err == nil:
		return Retry
	case errors.As(err, &nodeErr):
		// A failed observation of a node: retry the pass, unless a human must act.
		if c := Classify(nodeErr.Err); c == Stop {
			return Stop
		}
		return Retry
	case errors.Is(err, topology.ErrPromoted), errors.As(err, &cfgErr), errors.As(err, &prereqErr), errors.Is(err, ErrUnsupportedMethod):
		return Stop
	case errors.As(err, &connErr):
		if connErr.Retryable() {
			return Retry
		}
		return Stop
	case errors.As(err, &pgErr):
		return classifyPg(pgErr)
	case errors.Is(err, context.DeadlineExceeded):
		return SkipSlot
	}
	return Retry
}

func classifyPg(e *pgconn.PgError) Class {
	switch {
	case e.Code == "42501" || strings.HasPrefix(e.Code, "28"): // insufficient privilege, auth
		return Stop
	case e.Code == "55000" && strings.Contains(e.Message, "minimum is"):
		// "cannot advance replication slot to X, minimum is Y": the standby lags or the copy
		// is ahead. Never an invalidation (docs/RULES.md, lesson 2).
		return SkipSlot
	case e.Code == "55006", e.Code == "42704", e.Code == "42710", e.Code == "55000":
		// in use, does not exist (anymore), already exists, not in the right state
		return SkipSlot
	case strings.HasPrefix(e.Code, "08"), strings.HasPrefix(e.Code, "57"), strings.HasPrefix(e.Code, "53"):
		// connection, operator intervention (shutdown, cancel), insufficient resources
		return Retry
	}
	return SkipSlot
}

// isUndefinedObject reports "replication slot does not exist".
func isUndefinedObject(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42704"
}

// isWALRemoved reports "requested WAL segment … has already been removed" (58P01).
func isWALRemoved(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "58P01"
}
