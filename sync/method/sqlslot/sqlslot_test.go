package sqlslot

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestRefusedIsOnlyAPrivilegeError: a primary whose connection closed is not reported as a
// missing GRANT EXECUTE on pg_log_standby_snapshot().
func TestRefusedIsOnlyAPrivilegeError(t *testing.T) {
	priv := fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "42501", Message: "permission denied for function pg_log_standby_snapshot"})
	if !refused(priv) {
		t.Error("a privilege error is a refusal")
	}
	for _, err := range []error{errors.New("unexpected EOF"), &pgconn.PgError{Code: "57P01", Message: "terminating connection"}} {
		if refused(err) {
			t.Errorf("%v: reported as a missing grant", err)
		}
	}
}
