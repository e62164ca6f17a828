package sync

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

// applier carries out one action on the standby. Each worker has its own session.
type applier interface {
	// Session returns a per-worker handle holding that worker's connections.
	Session() applySession
}

type applySession interface {
	Create(ctx context.Context, ps topology.Slot) error
	Advance(ctx context.Context, name, database string, target lsncheck.LSN) (lsncheck.LSN, error)
	Drop(ctx context.Context, name, database string) error
	Close()
}

// staleConnection reports an error that means the statement did not run because the session
// was gone: nothing was sent, or the server had terminated the backend (shutdown, restart).
func staleConnection(err error) bool {
	if pgconn.SafeToRetry(err) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03")
}
