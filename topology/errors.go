package topology

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// StaleConnection reports an error that means the statement did not run because the session
// was gone: nothing was sent, or the server had terminated the backend (shutdown, restart).
func StaleConnection(err error) bool {
	if pgconn.SafeToRetry(err) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03")
}

// SlotMissing reports "replication slot does not exist" (42704).
func SlotMissing(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42704"
}

// PermissionDenied reports "permission denied" (42501): the role lacks a privilege, as opposed
// to a connection that failed or closed.
func PermissionDenied(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// WALRemoved reports "requested WAL segment … has already been removed" (58P01).
func WALRemoved(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "58P01"
}

// StillInRecovery returns ErrPromoted when the node the connection is on is not in recovery.
func StillInRecovery(ctx context.Context, c *pgx.Conn) error {
	var rec bool
	if err := c.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&rec); err != nil {
		return err
	}
	if !rec {
		return ErrPromoted
	}
	return nil
}

// DecodeError reports an error of logical decoding itself (the WAL cannot be read or makes no
// sense from the slot's positions: XX000-XX002 internal errors such as "invalid record length",
// WAL removed): the copy cannot serve its consumer, whatever its positions say.
func DecodeError(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return strings.HasPrefix(pgErr.Code, "XX") || pgErr.Code == "58P01"
}
