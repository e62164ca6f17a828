package topology

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Endpoint is one node's connection settings, parsed once from a libpq/pgx DSN (URL or
// key=value; PG* environment variables, passfile and sslmode apply). It opens connections to
// any database of that node.
type Endpoint struct {
	Role string // "primary" or "standby", for messages
	cfg  *pgx.ConnConfig
	// passwordFile, when set, is read again at every connection attempt (a rotated secret, a
	// Kubernetes Secret updated in place), as libpq re-reads its passfile.
	passwordFile string
}

// SetPasswordFile makes every connection read its password from path (a failed read keeps the
// password read last).
func (e *Endpoint) SetPasswordFile(path string) {
	if path != "" {
		e.passwordFile = path
	}
}

// ReadPasswordFile reads a password file: its content less a trailing line end.
func ReadPasswordFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(data), "\r\n"), nil
}

// connConfig is a copy of the endpoint's configuration for one connection to database db ("":
// the DSN's), with the password file read again.
func (e *Endpoint) connConfig(db string) *pgx.ConnConfig {
	cfg := e.cfg.Copy()
	if db != "" {
		cfg.Database = db
	}
	if e.passwordFile != "" {
		if pw, err := ReadPasswordFile(e.passwordFile); err == nil {
			cfg.Password = pw
		}
	}
	return cfg
}

// ParseEndpoint parses dsn for the node in role; a non-empty password (read from a secret file)
// overrides the DSN's own. The error never contains the DSN (it may hold a password).
func ParseEndpoint(role, dsn, password string) (*Endpoint, error) {
	if dsn == "" {
		return nil, &ConfigError{Field: role + " DSN", Problem: "is empty", Fix: fmt.Sprintf("give the %s's connection string", role)}
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, &ConfigError{Field: role + " DSN", Problem: "cannot be parsed: " + parseProblem(err, dsn),
			Fix: "use a libpq connection string, key=value or postgres:// URL form"}
	}
	if err := clientOnlyParams(cfg); err != nil {
		err.Field = role + " DSN"
		return nil, err
	}
	if password != "" {
		cfg.Password = password
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "slotsync"
	}
	return &Endpoint{Role: role, cfg: cfg}, nil
}

// parseProblem is what pgx says is wrong with a DSN (which key, which value), without the DSN
// itself, which pgx quotes and which may hold a password; "" when that cannot be told safely.
func parseProblem(err error, dsn string) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		msg = msg[i+3:]
	}
	if msg == "" || strings.Contains(msg, "`") || strings.Contains(dsn, msg) || LeaksFromDSN(msg, dsn) != "" {
		return "malformed" // the message repeats part of the DSN: it could be a secret
	}
	return msg
}

// safeWords may appear in both a DSN and a message about it: libpq's keywords and a few words
// that are never secrets.
const safeWords = "host hostaddr port user password passfile dbname database sslmode sslcert sslkey sslrootcert sslcrl sslcrldir " +
	"sslpassword sslsni sslnegotiation sslcompression requirepeer gssencmode channel_binding require_auth target_session_attrs " +
	"connect_timeout application_name fallback_application_name keepalives keepalives_idle keepalives_interval keepalives_count " +
	"tcp_user_timeout ssl_min_protocol_version ssl_max_protocol_version gsslib gssdelegation load_balance_hosts service servicefile " +
	"options replication krbsrvname krbspn postgres postgresql localhost invalid require prefer disable allow verify-ca verify-full"

// LeaksFromDSN reports a word of dsn (3 characters or more, not a libpq keyword) that text
// repeats: a message about a DSN must not, since the DSN may hold a password.
func LeaksFromDSN(text, dsn string) string {
	for _, word := range strings.FieldsFunc(dsn, func(r rune) bool { return strings.ContainsRune(" =:@/?&'\t\n", r) }) {
		if len(word) >= 3 && strings.Contains(text, word) && !containsWord(safeWords, word) {
			return word
		}
	}
	return ""
}

func containsWord(list, w string) bool {
	for _, x := range strings.Fields(list) {
		if x == w {
			return true
		}
	}
	return false
}

// clientOnlyParams takes out of cfg's startup parameters the libpq connection keywords that
// pgx does not know and would otherwise send to the server as settings, which the server
// refuses (FATAL: unrecognized configuration parameter). Patroni, for one, writes
// gssencmode=prefer into every primary_conninfo. Keywords that only tune the client's own
// socket are dropped; one that asks for a protection slotsync cannot give is refused, naming
// the key, rather than silently weakened.
func clientOnlyParams(cfg *pgx.ConnConfig) *ConfigError {
	rp := cfg.RuntimeParams
	for _, k := range []string{"keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
		"tcp_user_timeout", "sslcompression", "gsslib", "gssdelegation", "load_balance_hosts"} {
		delete(rp, k)
	}
	if err := honourHostaddr(cfg); err != nil {
		return err
	}
	if v, ok := rp["fallback_application_name"]; ok {
		if rp["application_name"] == "" {
			rp["application_name"] = v
		}
		delete(rp, "fallback_application_name")
	}
	if v, ok := rp["gssencmode"]; ok {
		if v == "require" {
			return &ConfigError{Problem: "asks for gssencmode=require, which slotsync cannot provide (no GSSAPI encryption)",
				Fix: "use sslmode=verify-full for an encrypted connection, or gssencmode=prefer"}
		}
		delete(rp, "gssencmode") // disable or prefer: a plain or TLS connection is what libpq falls back to
	}
	for k, fix := range map[string]string{
		"requirepeer":              "drop requirepeer (slotsync cannot check the server process's user)",
		"sslcrl":                   "drop sslcrl (certificate revocation lists are not supported)",
		"sslcrldir":                "drop sslcrldir (certificate revocation lists are not supported)",
		"ssl_min_protocol_version": "drop ssl_min_protocol_version (slotsync uses TLS 1.2 or newer)",
		"ssl_max_protocol_version": "drop ssl_max_protocol_version",
	} {
		if _, ok := rp[k]; ok {
			if k == "ssl_min_protocol_version" && (rp[k] == "TLSv1.2" || rp[k] == "TLSv1" || rp[k] == "TLSv1.1") {
				delete(rp, k) // Go's TLS client never goes below 1.2
				continue
			}
			return &ConfigError{Problem: fmt.Sprintf("has %s, which slotsync cannot honour", k), Fix: fix}
		}
	}
	return nil
}

// honourHostaddr connects to hostaddr as libpq does: the address is dialled, while host still
// names the server for TLS verification and the password file (pgx read both from host
// already). Lists of hosts with hostaddr are refused by name.
func honourHostaddr(cfg *pgx.ConnConfig) *ConfigError {
	addr, ok := cfg.RuntimeParams["hostaddr"]
	if !ok {
		return nil
	}
	delete(cfg.RuntimeParams, "hostaddr")
	if addr == "" {
		return nil
	}
	if strings.Contains(addr, ",") || net.ParseIP(addr) == nil {
		return &ConfigError{Problem: "has hostaddr=" + addr + ", which slotsync takes only as one numeric address",
			Fix: "give one IP address in hostaddr (with one host), or put the server's name in host and drop hostaddr"}
	}
	name := cfg.Host
	for _, fb := range cfg.Fallbacks {
		if fb.Host != name {
			return &ConfigError{Problem: "has hostaddr with several hosts", Fix: "give one host with hostaddr, or drop hostaddr"}
		}
	}
	cfg.Host = addr
	for _, fb := range cfg.Fallbacks {
		fb.Host = addr
	}
	return nil
}

// User is the role this endpoint logs in as.
func (e *Endpoint) User() string { return e.cfg.User }

// Addr is the host and port the endpoint connects to (for logs; never the password).
func (e *Endpoint) Addr() string { return fmt.Sprintf("%s:%d", e.cfg.Host, e.cfg.Port) }

// SetUser makes the endpoint log in as user (with password, when not empty) instead of the
// DSN's own: a primary found from primary_conninfo would otherwise log in as the standby's
// replication role.
func (e *Endpoint) SetUser(user, password string) {
	if user != "" {
		e.cfg.User = user
		e.cfg.Password = password
	}
}

// DefaultDatabase makes connections without a database name go to db (a DSN without dbname
// would otherwise use the user's name as the database).
func (e *Endpoint) DefaultDatabase(db string) {
	if e.cfg.Database == "" {
		e.cfg.Database = db
	}
}

// ConnectReplication opens a logical replication connection (replication=database) to
// database db, for replication commands such as ALTER_REPLICATION_SLOT.
func (e *Endpoint) ConnectReplication(ctx context.Context, db string) (*pgconn.PgConn, error) {
	cfg := e.connConfig(db)
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, &cfg.Config)
	if err != nil {
		return nil, &ConnError{Role: e.Role, Database: cfg.Database, Err: err}
	}
	return conn, nil
}

// Database is the database named by the DSN (the one slotsync lists slots from).
func (e *Endpoint) Database() string { return e.cfg.Database }

// Connect opens a connection to database db of this node ("" = the DSN's database).
func (e *Endpoint) Connect(ctx context.Context, db string) (*pgx.Conn, error) {
	cfg := e.connConfig(db)
	// Every session resolves names in pg_catalog alone: a database owner's objects in public (an
	// operator =(text,text), say) must not change what slotsync's statements mean.
	cfg.AfterConnect = func(ctx context.Context, c *pgconn.PgConn) error {
		_, err := c.Exec(ctx, safeSearchPath).ReadAll()
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, &ConnError{Role: e.Role, Database: cfg.Database, Err: err}
	}
	return conn, nil
}

// safeSearchPath is run first in every session slotsync opens.
const safeSearchPath = "SET search_path = pg_catalog, pg_temp"

// ConnError is a failure to reach a node: worth retrying, unless it is authentication or
// privileges, which need a human (see Retryable). A missing database is retried: on a standby
// it may simply not be replayed yet.
type ConnError struct {
	Role, Database string
	Err            error
}

func (e *ConnError) Error() string {
	where := e.Role
	if e.Database != "" {
		where += fmt.Sprintf(" (database %q)", e.Database)
	}
	msg := fmt.Sprintf("connect to %s: %s", where, oneLine(e.Err.Error()))
	var pgErr *pgconn.PgError
	if errors.As(e.Err, &pgErr) && strings.HasPrefix(pgErr.Code, "28") {
		msg += fmt.Sprintf(" (fix: check the %s's password: --%s-password-file, the DSN's password or passfile, PGPASSWORD; "+
			"and that the server's pg_hba.conf lets this role in from this host)", e.Role, e.Role)
	}
	return msg
}

// oneLine folds pgconn's message, one line per host and TLS attempt (sslmode=prefer tries TLS,
// then plain, often failing the same way), into one line with each distinct failure once: a text
// log would otherwise show the lines joined by literal \n and \t.
func oneLine(msg string) string {
	var out []string
	seen := map[string]bool{}
	for _, line := range strings.Split(msg, "\n") {
		if line = strings.TrimSpace(line); line != "" && !seen[line] {
			seen[line] = true
			out = append(out, line)
		}
	}
	return strings.Join(out, " ")
}

func (e *ConnError) Unwrap() error { return e.Err }

// Retryable reports whether trying again later may succeed (network, server starting or
// shutting down), as opposed to wrong credentials, privileges or a missing database.
func (e *ConnError) Retryable() bool {
	var pgErr *pgconn.PgError
	if errors.As(e.Err, &pgErr) {
		switch pgErr.Code[:2] {
		case "28", "42": // invalid authorization, privileges
			return false
		}
		return true
	}
	return true // network errors, timeouts, a server starting or shutting down
}

// ConfigError is invalid input; nothing was changed. Fix says what to do.
type ConfigError struct {
	Field, Problem, Fix string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("%s %s: %s", e.Field, e.Problem, e.Fix) }

// ErrNoPrimaryConninfo: no primary was given and the standby's primary_conninfo is empty, as an
// HA manager leaves it while there is no leader (or this role cannot read it:
// ErrPrimaryConninfoUnreadable wraps it).
var ErrNoPrimaryConninfo = errors.New(
	"no primary given and the standby's primary_conninfo is empty (no leader right now, or an HA manager re-pointing the standby)",
)

// ErrPrimaryConninfoUnreadable: no primary was given and this role may not read the standby's
// primary_conninfo (it is ErrNoPrimaryConninfo too).
var ErrPrimaryConninfoUnreadable = fmt.Errorf(
	"%w: this role may not read it (GRANT pg_read_all_settings TO the slotsync role, or give --primary)",
	ErrNoPrimaryConninfo,
)
