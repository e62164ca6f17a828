package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	slotsync "github.com/slotsync/slotsync/sync"
	"github.com/slotsync/slotsync/topology"
	"github.com/urfave/cli/v2"
)

// pairFlags are shared by every command that talks to a primary/standby pair.
func pairFlags() []cli.Flag {
	d := slotsync.DefaultConfig()
	return []cli.Flag{
		&cli.StringFlag{Name: "primary", Usage: "primary DSN (URL or key=value; PG* variables, passfile and sslmode apply). Default: the standby's primary_conninfo", EnvVars: []string{"SLOTSYNC_PRIMARY"}},
		&cli.StringFlag{Name: "primary-password-file", Usage: "read the primary's password from this file", EnvVars: []string{"SLOTSYNC_PRIMARY_PASSWORD_FILE"}},
		&cli.StringFlag{Name: "primary-user", Usage: "log in to the primary as this role (default: the DSN's; primary_conninfo names the standby's replication role)", EnvVars: []string{"SLOTSYNC_PRIMARY_USER"}},
		&cli.DurationFlag{Name: "primary-connect-timeout", Value: d.PrimaryConnectTimeout, Usage: "bound on connecting to the primary; past it the gate judges without the primary", EnvVars: []string{"SLOTSYNC_PRIMARY_CONNECT_TIMEOUT"}},
		&cli.DurationFlag{Name: "primary-gone-after", Value: d.PrimaryGoneAfter, Usage: "without the primary, the gate judges only once the standby has not streamed from it for this long (check watches the standby until then; a standby that streams again means the primary is alive: CANNOT TELL); more than the standby's wal_retrieve_retry_interval", EnvVars: []string{"SLOTSYNC_PRIMARY_GONE_AFTER"}},
		&cli.DurationFlag{Name: "max-record-age", Value: d.MaxRecordAge, Usage: "without the primary, the gate judges from a record at most this old (else CANNOT TELL, exit 2)", EnvVars: []string{"SLOTSYNC_MAX_RECORD_AGE"}},
		&cli.BoolFlag{Name: "strict", Usage: "the gate refuses to judge without the primary (CANNOT TELL, exit 2)", EnvVars: []string{"SLOTSYNC_STRICT"}},
		&cli.BoolFlag{Name: "exact", Usage: "the gate requires every copy exactly at its consumer's confirmed position (planned switchover, zero redelivery)", EnvVars: []string{"SLOTSYNC_EXACT"}},
		&cli.StringFlag{Name: "standby", Usage: "standby DSN (required)", EnvVars: []string{"SLOTSYNC_STANDBY"}},
		&cli.StringFlag{Name: "standby-password-file", Usage: "read the standby's password from this file", EnvVars: []string{"SLOTSYNC_STANDBY_PASSWORD_FILE"}},
		&cli.StringFlag{Name: "state-dir", Usage: "directory for slotsync's journal, kept across restarts, one per cluster", EnvVars: []string{"SLOTSYNC_STATE_DIR"}},
		&cli.StringFlag{Name: "method", Value: string(d.Method), Usage: "auto, sql (PG16+), statefile (exact copies; auto up to PG15, by choice on 16+) or native (PG17+)", EnvVars: []string{"SLOTSYNC_METHOD"}},
		&cli.StringFlag{Name: "slots", Usage: "comma-separated globs of slot names to manage (default: all)", EnvVars: []string{"SLOTSYNC_SLOTS"}},
		&cli.StringFlag{Name: "databases", Usage: "comma-separated databases whose slots to manage (default: all)", EnvVars: []string{"SLOTSYNC_DATABASES"}},
		&cli.StringFlag{Name: "plugins", Usage: "comma-separated output plugins whose slots to manage (default: all)", EnvVars: []string{"SLOTSYNC_PLUGINS"}},
		&cli.StringFlag{Name: "ignore-slots", Usage: "comma-separated globs of slot names never to manage, whatever the rest selects", EnvVars: []string{"SLOTSYNC_IGNORE_SLOTS"}},
		&cli.BoolFlag{Name: "set-failover", Usage: "native (17+): set failover=true on primary slots that lack it, while they are idle", EnvVars: []string{"SLOTSYNC_SET_FAILOVER"}},
		&cli.BoolFlag{Name: "adopt-copies", Usage: "after a lost or corrupt journal: make again, as slotsync's own, the idle standby slots it has no record of whose name, database and plugin match a primary slot (each is NOT READY, copy_not_ours, until then)", EnvVars: []string{"SLOTSYNC_ADOPT_COPIES"}},
		&cli.BoolFlag{Name: "drop-left-alone", Usage: "drop the copies slotsync made and no longer syncs (primary slot invalidated, or no longer selected) instead of keeping them; slots slotsync did not make are never dropped", EnvVars: []string{"SLOTSYNC_DROP_LEFT_ALONE"}},
		&cli.BoolFlag{Name: "drop-stale", Usage: "native (17+): drop inactive same-name slots with synced=false on the standby that block the server's slot sync", EnvVars: []string{"SLOTSYNC_DROP_STALE"}},
		&cli.BoolFlag{Name: "native-drive", Usage: "native (17+): call pg_sync_replication_slots() every pass instead of requiring sync_replication_slots = on", EnvVars: []string{"SLOTSYNC_NATIVE_DRIVE"}},
		&cli.BoolFlag{Name: "manage-synchronized-standby-slots", Usage: "17+: list this standby's physical slot in the primary's synchronized_standby_slots once it streams (no consumer of a failover slot gets ahead of it; they wait for it instead), and take out listed slots that are missing or idle for --standby-gone-after (run slotsync beside every node, the primary too, so a standby that is gone is taken out)", EnvVars: []string{"SLOTSYNC_MANAGE_SYNCHRONIZED_STANDBY_SLOTS"}},
		&cli.DurationFlag{Name: "standby-gone-after", Value: d.Native.StandbyGoneAfter, Usage: "with --manage-synchronized-standby-slots: a listed slot with no walsender for this long is taken out (consumers of failover slots wait at most this long for a standby that is gone)", EnvVars: []string{"SLOTSYNC_STANDBY_GONE_AFTER"}},
		&cli.DurationFlag{Name: "timeout", Value: d.ObserveTimeout, Usage: "bound on one observation of both nodes", EnvVars: []string{"SLOTSYNC_TIMEOUT"}},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "trace, debug, info, warn or error", EnvVars: []string{"SLOTSYNC_LOG_LEVEL"}},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json", EnvVars: []string{"SLOTSYNC_LOG_FORMAT"}},
	}
}

// configError is a usage or configuration error: exit 3, nothing changed.
func configError(format string, args ...any) error {
	return cli.Exit(fmt.Sprintf(format, args...), exitUsage)
}

func newLogger(c *cli.Context, w io.Writer) (hclog.Logger, error) {
	level := hclog.LevelFromString(c.String("log-level"))
	if level == hclog.NoLevel {
		return nil, configError("--log-level %q: use trace, debug, info, warn or error", c.String("log-level"))
	}
	format := c.String("log-format")
	if format != "text" && format != "json" {
		return nil, configError("--log-format %q: use text or json", format)
	}
	return hclog.New(&hclog.LoggerOptions{Name: "slotsync", Level: level, Output: w, JSONFormat: format == "json"}), nil
}

func readSecret(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	pw, err := topology.ReadPasswordFile(path)
	if err != nil {
		return "", configError("read password file: %v", err)
	}
	return pw, nil
}

// buildConfig turns the flags every pair command shares into a sync.Config, from the defaults
// (slotsync.DefaultConfig); with no --primary the engine finds the primary from the standby's
// primary_conninfo on every pass. The engine validates it, once (slotsync.New, slotsync.Observe).
func buildConfig(c *cli.Context, log hclog.Logger, readOnly bool) (slotsync.Config, error) {
	cfg := slotsync.DefaultConfig()
	cfg.PrimaryDSN, cfg.StandbyDSN, cfg.StateDir = c.String("primary"), c.String("standby"), c.String("state-dir")
	cfg.PrimaryUser, cfg.Strict, cfg.Exact = c.String("primary-user"), c.Bool("strict"), c.Bool("exact")
	cfg.ForPromotion = readOnly && c.Bool("for-promotion")
	cfg.Method, cfg.ReadOnly, cfg.Logger = topology.Method(c.String("method")), readOnly, log
	cfg.Select = slotsync.Selection{Patterns: parseList(c.String("slots")),
		Databases: parseList(c.String("databases")), Plugins: parseList(c.String("plugins")), Ignore: parseList(c.String("ignore-slots"))}
	cfg.Native = slotsync.NativeConfig{SetFailover: c.Bool("set-failover"), DropStale: c.Bool("drop-stale"), Drive: c.Bool("native-drive"),
		ManageStandbySlots: c.Bool("manage-synchronized-standby-slots")}
	cfg.DropLeftAlone = c.Bool("drop-left-alone")
	cfg.AdoptCopies = c.Bool("adopt-copies")
	var err error
	if cfg.PrimaryConnectTimeout, err = positive(c, "primary-connect-timeout"); err != nil {
		return cfg, err
	}
	if cfg.ObserveTimeout, err = positive(c, "timeout"); err != nil {
		return cfg, err
	}
	for _, b := range []struct {
		name     string
		v        time.Duration
		min, max time.Duration
	}{{"timeout", cfg.ObserveTimeout, 100 * time.Millisecond, 10 * time.Minute},
		{"primary-connect-timeout", cfg.PrimaryConnectTimeout, 100 * time.Millisecond, 10 * time.Minute}} {
		if b.v < b.min || b.v > b.max {
			return cfg, configError("--%s %s: give a duration between %s and %s", b.name, b.v, b.min, b.max)
		}
	}
	if cfg.MaxRecordAge, err = positive(c, "max-record-age"); err != nil {
		return cfg, err
	}
	if cfg.PrimaryGoneAfter, err = positive(c, "primary-gone-after"); err != nil {
		return cfg, err
	}
	if cfg.Native.StandbyGoneAfter, err = positive(c, "standby-gone-after"); err != nil {
		return cfg, err
	}
	if cfg.PrimaryPassword, err = readSecret(c.String("primary-password-file")); err != nil {
		return cfg, err
	}
	cfg.PrimaryPasswordFile, cfg.StandbyPasswordFile = c.String("primary-password-file"), c.String("standby-password-file")
	if cfg.StandbyPassword, err = readSecret(c.String("standby-password-file")); err != nil {
		return cfg, err
	}
	// A DSN that cannot be parsed is a usage error, before any connection (an empty one is the
	// engine's to refuse, naming the flag).
	if _, _, err := cfg.Endpoints(); err != nil && cfg.StandbyDSN != "" {
		return cfg, classifyExit(err)
	}
	return cfg, nil
}

// positive reads a duration flag that must be above zero (0 is refused, not taken as the
// default).
func positive(c *cli.Context, name string) (time.Duration, error) {
	d := c.Duration(name)
	if d <= 0 {
		return 0, configError("--%s %s: give a positive duration (or leave it out for the default)", name, d)
	}
	return d, nil
}

// parseList splits a comma-separated flag value, dropping empty items.
func parseList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// configure makes the logger and the validated configuration every pair command starts from.
func configure(c *cli.Context, readOnly bool) (slotsync.Config, hclog.Logger, error) {
	log, err := newLogger(c, c.App.ErrWriter)
	if err != nil {
		return slotsync.Config{}, nil, err
	}
	cfg, err := buildConfig(c, log, readOnly)
	return cfg, log, err
}

// classifyExit maps an error to the exit code contract, from the one sorting of errors
// (slotsync.CauseOf): 3 when a human must fix input, privileges or prerequisites, 1 when the
// standby is a primary now, 2 for connection trouble and anything else transient.
func classifyExit(err error) error {
	if err == nil {
		return nil
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return err
	}
	switch slotsync.CauseOf(err) {
	case slotsync.CauseHuman:
		return cli.Exit(err.Error(), exitUsage)
	case slotsync.CausePromoted:
		return cli.Exit(err.Error(), exitNotReady)
	}
	return cli.Exit(err.Error(), exitConnect)
}

// exitCodeOf returns the code classifyExit would give.
func exitCodeOf(err error) int { return slotsync.ExitCodeOf(err) }
