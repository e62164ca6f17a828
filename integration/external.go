package integration

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// errExternal is returned by lifecycle operations on nodes slotsync did not start.
var errExternal = errors.New("not available for an external pair: slotsync did not start this server")

// externalServer is a node that runs elsewhere, known only by its DSN.
type externalServer struct{ dsn string }

func (s *externalServer) start(context.Context) error { return errExternal }
func (s *externalServer) stop(context.Context) error  { return errExternal }
func (s *externalServer) kill(context.Context) error  { return errExternal }
func (s *externalServer) close(context.Context) error { return nil }
func (s *externalServer) endpoint(context.Context) (string, int, error) {
	cfg, err := pgconn.ParseConfig(s.dsn)
	if err != nil {
		return "", 0, errors.New("cannot parse the DSN")
	}
	return cfg.Host, int(cfg.Port), nil
}

// ExternalPair wraps a primary and its standby that run elsewhere, for a drill against them.
// They cannot be stopped, started or killed; Promote runs promoteCommand (sh -c) when given, or
// pg_promote() on the standby.
func ExternalPair(ctx context.Context, primaryDSN, standbyDSN, promoteCommand string) (*Pair, error) {
	p := &Pair{promoteCommand: promoteCommand,
		Primary: &Node{Name: "primary", life: &externalServer{primaryDSN}, dsn: primaryDSN},
		Standby: &Node{Name: "standby", life: &externalServer{standbyDSN}, dsn: standbyDSN}}
	var vnum int
	if err := p.Primary.QueryRow(ctx, "SELECT current_setting('server_version_num')::int", nil, &vnum); err != nil {
		return nil, err
	}
	p.Major = vnum / 10000
	p.Primary.Major, p.Standby.Major = p.Major, p.Major
	return p, nil
}

// withParam sets one connection parameter in a DSN of either form; later key=value pairs win.
func withParam(dsn, key, value string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			if key == "dbname" {
				u.Path = "/" + value
			} else {
				q := u.Query()
				q.Set(key, value)
				u.RawQuery = q.Encode()
			}
			return u.String()
		}
	}
	value = strings.ReplaceAll(strings.ReplaceAll(value, `\`, `\\`), `'`, `\'`)
	return fmt.Sprintf("%s %s='%s'", dsn, key, value)
}

// runPromoteCommand runs the user's promote command.
func runPromoteCommand(ctx context.Context, command string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-c", command).CombinedOutput()
	if err != nil {
		return fmt.Errorf("promote command: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// External reports whether the pair runs elsewhere (its servers cannot be stopped or killed).
func (p *Pair) External() bool {
	_, ok := p.Primary.life.(*externalServer)
	return ok
}
