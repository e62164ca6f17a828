package sync

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/slotsync/slotsync/topology"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want Class
	}{
		{&pgconn.PgError{Code: "55000", Message: "cannot advance replication slot to 0/5, minimum is 0/9"}, SkipSlot},
		{&pgconn.PgError{Code: "42501", Message: "permission denied"}, Stop},
		{&pgconn.PgError{Code: "57P01", Message: "terminating connection"}, Retry},
		{&pgconn.PgError{Code: "55006", Message: "replication slot is active"}, SkipSlot},
		{topology.ErrPromoted, Stop},
		{&topology.PrereqError{}, Stop},
		{&topology.ConnError{Err: errors.New("refused")}, Retry},
		{&topology.ConnError{Err: &pgconn.PgError{Code: "28P01"}}, Stop},
		{context.DeadlineExceeded, SkipSlot},
		{&NodeError{Node: "primary", Err: context.DeadlineExceeded}, Retry},
		{&NodeError{Node: "standby", Err: &pgconn.PgError{Code: "42501"}}, Stop},
		{&topology.NotFollowingError{Why: "another timeline"}, Retry}, // rule 7: waited out, never a stop
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
