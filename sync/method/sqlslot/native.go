package sqlslot

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/topology"
)

// SetFailover sets failover=true on the primary slot with ALTER_REPLICATION_SLOT over a
// replication connection to the slot's database (17+). The server refuses an active slot.
func (s *Session) SetFailover(ctx context.Context, name, database string) error {
	ep := s.m.primary.Endpoint()
	if ep == nil {
		return topology.ErrNoPrimaryConninfo
	}
	conn, err := ep.ConnectReplication(ctx, database)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	cmd := "ALTER_REPLICATION_SLOT " + pgx.Identifier{name}.Sanitize() + " ( FAILOVER true )"
	if _, err := conn.Exec(ctx, cmd).ReadAll(); err != nil {
		return fmt.Errorf("set failover=true on slot %q: %w", name, err)
	}
	return nil
}
