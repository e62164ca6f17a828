package topology

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestPermissionDenied: a primary whose connection closed is not reported as a missing GRANT
// EXECUTE on pg_log_standby_snapshot().
func TestPermissionDenied(t *testing.T) {
	priv := fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "42501", Message: "permission denied for function pg_log_standby_snapshot"})
	if !PermissionDenied(priv) {
		t.Error("a privilege error is a refusal")
	}
	for _, err := range []error{errors.New("unexpected EOF"), &pgconn.PgError{Code: "57P01", Message: "terminating connection"}} {
		if PermissionDenied(err) {
			t.Errorf("%v: reported as a missing grant", err)
		}
	}
}
