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

// applySession is the method contract: what each method does to the standby for one action.
type applySession interface {
	Create(ctx context.Context, ps topology.Slot) error
	// Replace puts a copy of ps's new incarnation in place of the copy in database copyDB.
	Replace(ctx context.Context, ps topology.Slot, copyDB string) error
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
