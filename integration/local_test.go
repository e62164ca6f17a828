package integration

import (
	"errors"
	"testing"
)

// TestShmIDOf: the id of a block still in use is read from PostgreSQL's refusal to start, and
// nothing from any other error.
func TestShmIDOf(t *testing.T) {
	refused := errors.New(`pg_ctl: could not start server; FATAL:  pre-existing shared memory block (key 11010354, ID 8421591) is still in use`)
	if got := shmIDOf(refused); got != "8421591" {
		t.Fatalf("id %q, want 8421591", got)
	}
	if got := shmIDOf(errors.New("connection refused")); got != "" {
		t.Fatalf("id %q of another error", got)
	}
	if shmIDOf(nil) != "" {
		t.Fatal("an id of no error")
	}
}
