package integration

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Superuser is the role every test cluster is initialised with (trust authentication on loopback).
const Superuser = "postgres"

// lifecycle is what a backend (local processes or containers) does to run one server.
type lifecycle interface {
	start(ctx context.Context) error
	stop(ctx context.Context) error // clean, fast shutdown
	kill(ctx context.Context) error // SIGKILL every server process, then wait until they are gone
	endpoint(ctx context.Context) (host string, port int, err error)
	close(ctx context.Context) error // stop whatever still runs; idempotent
}

// Server is what a backend outside this package (containers, say) does to run one server.
type Server interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error // clean, fast shutdown
	Kill(ctx context.Context) error // SIGKILL every server process, then wait until they are gone
	Endpoint(ctx context.Context) (host string, port int, err error)
	Close(ctx context.Context) error // stop whatever still runs; idempotent
}

type serverLife struct{ s Server }

func (l serverLife) start(ctx context.Context) error { return l.s.Start(ctx) }
func (l serverLife) stop(ctx context.Context) error  { return l.s.Stop(ctx) }
func (l serverLife) kill(ctx context.Context) error  { return l.s.Kill(ctx) }
func (l serverLife) close(ctx context.Context) error { return l.s.Close(ctx) }
func (l serverLife) endpoint(ctx context.Context) (string, int, error) {
	return l.s.Endpoint(ctx)
}

// NewNode makes a node run by s: name is "primary" or "standby", dataDir as the server sees it.
func NewNode(name string, major int, dataDir string, s Server) *Node {
	return &Node{Name: name, Major: major, DataDir: dataDir, life: serverLife{s}}
}

// Node is one PostgreSQL server of a pair.
type Node struct {
	Name    string // "primary" or "standby"
	Major   int
	DataDir string // as the server sees it (a container path for the Docker backend)
	life    lifecycle
	dsn     string // external nodes: the user's DSN
}

// DSN returns a key=value connection string to database db (default "postgres").
func (n *Node) DSN(db string) string {
	if db == "" {
		db = "postgres"
	}
	if n.dsn != "" {
		return withParam(n.dsn, "dbname", db)
	}
	host, port, err := n.life.endpoint(context.Background())
	if err != nil {
		// An unreachable endpoint yields a DSN that fails to connect with a clear error.
		host, port = "invalid.invalid", 1
	}
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable connect_timeout=10", host, port, Superuser, db)
}

// ReplicationDSN returns a DSN for a replication connection to database db:
// logical replication ("replication=database") when logical is true, physical otherwise.
func (n *Node) ReplicationDSN(db string, logical bool) string {
	mode := "true"
	if logical {
		mode = "database"
	}
	return withParam(n.DSN(db), "replication", mode)
}

// Addr returns host:port of the server.
func (n *Node) Addr(ctx context.Context) (string, error) {
	host, port, err := n.life.endpoint(ctx)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), nil
}

// Start starts the server and waits until it accepts connections.
func (n *Node) Start(ctx context.Context) error {
	if err := n.life.start(ctx); err != nil {
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	return nil
}

// Stop shuts the server down cleanly (fast mode) and waits.
func (n *Node) Stop(ctx context.Context) error {
	if err := n.life.stop(ctx); err != nil {
		return fmt.Errorf("stop %s: %w", n.Name, err)
	}
	return nil
}

// Restart stops then starts the server.
func (n *Node) Restart(ctx context.Context) error {
	if err := n.Stop(ctx); err != nil {
		return err
	}
	return n.Start(ctx)
}

// Kill sends SIGKILL to the postmaster and all its children (a crash), and waits until they are gone.
func (n *Node) Kill(ctx context.Context) error {
	if err := n.life.kill(ctx); err != nil {
		return fmt.Errorf("kill -9 %s: %w", n.Name, err)
	}
	return nil
}

// Connect opens a connection to database db as the superuser. The caller closes it.
func (n *Node) Connect(ctx context.Context, db string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, n.DSN(db))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", n.Name, err)
	}
	return conn, nil
}

// Exec runs one SQL statement in database "postgres".
func (n *Node) Exec(ctx context.Context, sql string, args ...any) error {
	return n.ExecDB(ctx, "postgres", sql, args...)
}

// ExecDB runs one SQL statement in database db.
func (n *Node) ExecDB(ctx context.Context, db, sql string, args ...any) error {
	conn, err := n.Connect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("%s: %s: %w", n.Name, sql, err)
	}
	return nil
}

// QueryRow runs a query returning one row in database "postgres" and scans it into dest.
func (n *Node) QueryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	return n.QueryRowDB(ctx, "postgres", sql, args, dest...)
}

// QueryRowDB runs a query returning one row in database db and scans it into dest.
func (n *Node) QueryRowDB(ctx context.Context, db, sql string, args []any, dest ...any) error {
	conn, err := n.Connect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, sql, args...).Scan(dest...); err != nil {
		return fmt.Errorf("%s: %s: %w", n.Name, sql, err)
	}
	return nil
}

// VacuumCatalogs vacuums pg_attribute and pg_class in database db, and pg_class again until it
// keeps no dead row, at most ten times (a VACUUM prunes no page it cannot lock for cleanup at
// once: a session reading it); it returns the dead rows pg_class still keeps.
func (n *Node) VacuumCatalogs(ctx context.Context, db string) (int64, error) {
	if err := n.ExecDB(ctx, db, "VACUUM pg_attribute"); err != nil {
		return 0, err
	}
	var dead int64
	for range 10 {
		if err := n.ExecDB(ctx, db, "VACUUM pg_class"); err != nil {
			return 0, err
		}
		if err := n.QueryRowDB(ctx, db, "SELECT n_dead_tup FROM pg_stat_sys_tables WHERE relname = 'pg_class'", nil, &dead); err != nil {
			return 0, err
		}
		if dead == 0 {
			return 0, nil
		}
		select {
		case <-ctx.Done():
			return dead, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return dead, nil
}

// InRecovery reports pg_is_in_recovery().
func (n *Node) InRecovery(ctx context.Context) (bool, error) {
	var rec bool
	err := n.QueryRow(ctx, "SELECT pg_is_in_recovery()", nil, &rec)
	return rec, err
}
