package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	stdsync "sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
	slotsync "github.com/slotsync/slotsync/sync"
	"github.com/slotsync/slotsync/sync/method/statefile"
	"github.com/urfave/cli/v2"
)

func runCommand() *cli.Command {
	d := slotsync.DefaultConfig()
	return &cli.Command{
		Name:  "run",
		Usage: "the sidecar: copy every logical slot from the primary to the standby, in a loop",
		Description: "Runs passes every --interval; serves /metrics, /livez, /readyz and /promotion-ready on --listen. " +
			"With --once, makes one pass, prints what it did and exits (0 done, 1 a slot failed, 2 cannot connect, 3 configuration).",
		Flags: append(pairFlags(),
			&cli.BoolFlag{Name: "once", Usage: "make a single pass and exit", EnvVars: []string{"SLOTSYNC_ONCE"}},
			&cli.BoolFlag{Name: "json", Usage: "with --once, print the report as JSON", EnvVars: []string{"SLOTSYNC_JSON"}},
			&cli.DurationFlag{Name: "interval", Value: d.Interval, Usage: "time between full passes (listing both nodes, readiness, journal, creations, restarts)", EnvVars: []string{"SLOTSYNC_INTERVAL"}},
			&cli.DurationFlag{Name: "watch-interval", Value: d.WatchInterval, Usage: "between full passes, how often to look at the primary slots' positions and advance copies whose consumer moved (0: never)", EnvVars: []string{"SLOTSYNC_WATCH_INTERVAL"}},
			&cli.DurationFlag{Name: "max-backoff", Value: d.MaxBackoff, Usage: "longest wait after failed passes", EnvVars: []string{"SLOTSYNC_MAX_BACKOFF"}},
			&cli.DurationFlag{Name: "slot-timeout", Value: d.SlotTimeout, Usage: "bound on the work for one slot in one pass", EnvVars: []string{"SLOTSYNC_SLOT_TIMEOUT"}},
			&cli.StringFlag{Name: "advance-step", Value: fmt.Sprintf("%dMB", d.AdvanceStep>>20), Usage: "the most WAL one advance moves a copy (kB, MB, GB): a copy far behind catches up in such steps, logging its progress, while the other slots keep moving", EnvVars: []string{"SLOTSYNC_ADVANCE_STEP"}},
			&cli.IntFlag{Name: "workers", Value: d.Workers, Usage: "slots worked on at once", EnvVars: []string{"SLOTSYNC_WORKERS"}},
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:7461", Usage: "address for metrics and health endpoints (empty: none)", EnvVars: []string{"SLOTSYNC_LISTEN"}},
			&cli.StringFlag{Name: "web-config-file", Usage: "TLS and basic authentication for --listen: a Prometheus exporter-toolkit web configuration file (tls_server_config, basic_auth_users)", EnvVars: []string{"SLOTSYNC_WEB_CONFIG_FILE"}},
			&cli.DurationFlag{Name: "shutdown-timeout", Value: 10 * time.Second, Usage: "bound on a graceful stop after SIGTERM/SIGINT", EnvVars: []string{"SLOTSYNC_SHUTDOWN_TIMEOUT"}},
			&cli.DurationFlag{Name: "recheck", Value: 10 * time.Second, Usage: "after an error that needs a human, check again this often (quietly)", EnvVars: []string{"SLOTSYNC_RECHECK"}},
			// The state-file method (PostgreSQL 11-15; by choice on 16+).
			&cli.StringFlag{Name: "standby-data-dir", Usage: "statefile: the standby's data directory (slotsync runs as its owner, on the standby's host)", EnvVars: []string{"SLOTSYNC_STANDBY_DATA_DIR"}},
			&cli.StringFlag{Name: "restart", Value: "pg_ctl", Usage: "statefile: how to restart the standby to load new copies: pg_ctl, command or never (stage copies for the next start)", EnvVars: []string{"SLOTSYNC_RESTART"}},
			&cli.StringFlag{Name: "pg-ctl", Value: "pg_ctl", Usage: "statefile: the standby's pg_ctl", EnvVars: []string{"SLOTSYNC_PG_CTL"}},
			&cli.StringFlag{Name: "standby-log-file", Usage: "statefile: pg_ctl -l for the standby (default: its own logging settings)", EnvVars: []string{"SLOTSYNC_STANDBY_LOG_FILE"}},
			&cli.StringFlag{Name: "stop-command", Usage: "statefile, --restart command: stops the standby (e.g. systemctl stop postgresql@15-main)", EnvVars: []string{"SLOTSYNC_STOP_COMMAND"}},
			&cli.StringFlag{Name: "start-command", Usage: "statefile, --restart command: starts the standby and returns once it accepts connections", EnvVars: []string{"SLOTSYNC_START_COMMAND"}},
			&cli.StringFlag{Name: "restart-command", Usage: "statefile, --restart command: instead of stop and start, one command of the standby's manager that restarts it (e.g. patronictl restart --force SCOPE MEMBER); copies are staged while it runs", EnvVars: []string{"SLOTSYNC_RESTART_COMMAND"}},
			&cli.DurationFlag{Name: "min-restart-interval", Value: d.Statefile.MinRestartInterval, Usage: "statefile: least time between two standby restarts", EnvVars: []string{"SLOTSYNC_MIN_RESTART_INTERVAL"}},
			&cli.DurationFlag{Name: "catalog-hold-timeout", Value: d.Statefile.HoldTimeout, Usage: "statefile: how long the primary holds a new copy's catalog rows for the standby's feedback to cover it (12+); a copy not covered by then is made again. With --restart never, longer than the time until the standby's next start", EnvVars: []string{"SLOTSYNC_CATALOG_HOLD_TIMEOUT"}},
			&cli.DurationFlag{Name: "exact-copy-after", Usage: "sql and native methods (16+): a copy made by the standby's own decoding that still stands ahead of its consumer this long after it was made, the consumer not connected (paused, down, nightly), is replaced by an exact copy from the primary's state files, READY without the consumer; needs --standby-data-dir and the --restart settings above (0: never)", EnvVars: []string{"SLOTSYNC_EXACT_COPY_AFTER"}},
			&cli.BoolFlag{Name: "no-checkpoint", Usage: "statefile: do not CHECKPOINT the primary before reading slot state (for roles without pg_checkpoint)", EnvVars: []string{"SLOTSYNC_NO_CHECKPOINT"}},
		),
		Action: runAction,
	}
}

// onceOnlyFlags refuses, on the command line, a flag that means nothing in the mode asked for:
// --json without --once (the daemon prints no report; --log-format json makes its logs JSON),
// --listen with --once (one pass serves nothing). From the environment they are let be: an env
// file is shared by the daemon and the hook that runs check --json.
func onceOnlyFlags(c *cli.Context) error {
	given := func(name, env string) bool { return c.IsSet(name) && os.Getenv(env) == "" }
	switch {
	case !c.Bool("once") && c.Bool("json") && given("json", "SLOTSYNC_JSON"):
		return cli.Exit("usage: --json prints the report of run --once; the daemon logs (give --log-format json for JSON logs)", exitUsage)
	case c.Bool("once") && given("listen", "SLOTSYNC_LISTEN") && c.String("listen") != "":
		return cli.Exit("usage: --listen serves metrics while the daemon runs; run --once makes one pass and serves nothing (drop --listen)", exitUsage)
	}
	return nil
}

func runAction(c *cli.Context) error {
	if err := onceOnlyFlags(c); err != nil {
		return err
	}
	cfg, log, err := configure(c, false)
	if err == nil {
		err = runConfig(c, &cfg)
	}
	if err != nil {
		if c.Bool("once") {
			return failJSON(c, err)
		}
		return err
	}
	eng, err := slotsync.New(cfg)
	if err != nil {
		if c.Bool("once") {
			return failJSON(c, classifyExit(err))
		}
		return classifyExit(err)
	}

	if c.Bool("once") {
		return runOnce(c, eng)
	}

	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d := newDaemon(log, cfg)
	reloadOnHangup(ctx, log, func() {
		eng.Wake()
		d.wakeLoop()
	})
	var srv *http.Server
	if addr := c.String("listen"); addr != "" {
		webConfig := c.String("web-config-file")
		if err := web.Validate(webConfig); err != nil {
			eng.Close()
			return configError("--web-config-file %s: %v", webConfig, err)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			eng.Close()
			return configError("--listen %s: %v", addr, err)
		}
		srv = &http.Server{Handler: d.handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
			WriteTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second}
		// The exporters' own TLS and basic authentication (exporter-toolkit): the endpoints name
		// slots, databases and hosts.
		webLog := slog.New(slog.NewTextHandler(io.Discard, nil))
		go func() { _ = web.Serve(ln, srv, &web.FlagConfig{WebConfigFile: &webConfig}, webLog) }()
		log.Info("serving metrics and health", "address", ln.Addr().String(), "tls_or_auth", webConfig != "")
	}

	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		d.loop(ctx, eng, c.Duration("recheck"))
	}()
	<-ctx.Done()
	log.Info("stopping")
	bound := c.Duration("shutdown-timeout")
	sctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	select {
	case <-loopDone:
		eng.Close() // only once the loop is done with the connections
	case <-sctx.Done():
		if eng.RestartInProgress() {
			log.Warn("a standby restart is in progress; waiting for it to finish before exiting")
			<-loopDone
			eng.Close()
		} else {
			log.Warn("the running pass did not end within the shutdown bound; exiting anyway", "bound_seconds", bound.Seconds())
		}
	}
	if srv != nil {
		_ = srv.Shutdown(sctx)
	}
	return nil
}

// runConfig adds the run command's own flags to cfg. Input is refused, not replaced: a zero
// or negative duration, --workers below 1, a bad size.
func runConfig(c *cli.Context, cfg *slotsync.Config) error {
	var err error
	for _, f := range []struct {
		name string
		dst  *time.Duration
	}{{"interval", &cfg.Interval}, {"max-backoff", &cfg.MaxBackoff}, {"slot-timeout", &cfg.SlotTimeout}} {
		if *f.dst, err = positive(c, f.name); err != nil {
			return err
		}
	}
	if cfg.Workers = c.Int("workers"); cfg.Workers < 1 || cfg.Workers > 64 {
		return configError("--workers %d: give 1 to 64 (each is a connection to the standby)", cfg.Workers)
	}
	if cfg.AdvanceStep, err = parseSize(c.String("advance-step")); err != nil || cfg.AdvanceStep < 1<<20 || cfg.AdvanceStep > 64<<30 {
		return configError("--advance-step %q: give a size from 1MB to 64GB, such as 256MB (%v)", c.String("advance-step"), err)
	}
	switch cfg.WatchInterval = c.Duration("watch-interval"); {
	case cfg.WatchInterval < 0:
		return configError("--watch-interval %s: give a positive duration, or 0 for no watch between passes", cfg.WatchInterval)
	case cfg.WatchInterval == 0:
		cfg.WatchInterval = -1 // 0 on the command line: no watch
	}
	if cfg.Statefile, err = statefileConfig(c); err != nil {
		return err
	}
	if cfg.ExactCopyAfter = c.Duration("exact-copy-after"); cfg.ExactCopyAfter < 0 {
		return configError("--exact-copy-after %s: give a positive duration (e.g. 10m), or leave it out", cfg.ExactCopyAfter)
	}
	return nil
}

// newDaemon makes what the endpoints answer from, for the engine's configuration.
func newDaemon(log hclog.Logger, cfg slotsync.Config) *daemon {
	return &daemon{log: log, m: newMetrics(), staleAfter: 3*cfg.MaxBackoff + cfg.SlotTimeout + cfg.ObserveTimeout,
		gate: freshness{staleAfter: max(5*cfg.Interval, 5*time.Second), nextPassWithin: cfg.Interval + cfg.PrimaryConnectTimeout + time.Second, strict: cfg.Strict},
		now:  time.Now, wake: make(chan struct{}, 1)}
}

// daemon holds what the health endpoints answer from.
type daemon struct {
	log        hclog.Logger
	m          *metrics
	staleAfter time.Duration // /readyz: the loop is stuck past this
	gate       freshness     // /promotion-ready: which pass it answers from
	now        func() time.Time

	mu stdsync.Mutex
	passes
	lastSuccess time.Time
	stopped     string // why syncing stopped (an error that needs a human)
	// journalFailing: the journal could not be written at the last pass (what for).
	journalFailing string
	// wake: SIGHUP while syncing is stopped: check again now, not after --recheck.
	wake chan struct{}
}

// runOnce makes one pass. With --json every outcome, a failure to connect included, is printed
// in the check schema, its exit_code the process's: 0 the pass ran and every slot action
// succeeded, 1 a slot action failed, 2 a node cannot be reached, 3 configuration.
func runOnce(c *cli.Context, eng *slotsync.Engine) error {
	defer eng.Close()
	rep, err := eng.RunOnce(c.Context)
	res := newCheckResult(&rep, err)
	if err != nil && res.Report == nil {
		if c.Bool("json") {
			writeJSON(c.App.Writer, res)
		}
		return classifyExit(err)
	}
	res.ExitCode = exitOK
	var failed error
	for _, s := range rep.Slots {
		if s.Error != "" && failed == nil {
			failed = cli.Exit(fmt.Sprintf("slot %s: %s", s.Name, s.Error), exitNotReady)
			res.ExitCode = exitNotReady
		}
	}
	if c.Bool("json") {
		writeJSON(c.App.Writer, res)
	} else {
		printStatus(c.App.Writer, res)
	}
	return failed
}

// loop runs the engine; after an error that needs a human it keeps the endpoints up and checks
// again every recheck, logging only when the error changes. Roles move (rule 9): on a node that
// is the primary the engine's passes succeed and sync nothing, and it syncs again once the node
// is a standby.
func (d *daemon) loop(ctx context.Context, eng *slotsync.Engine, recheck time.Duration) {
	for {
		err := eng.Run(ctx, d.record)
		if err == nil || ctx.Err() != nil {
			return
		}
		d.mu.Lock()
		d.stopped = err.Error()
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-time.After(recheck):
		}
	}
}

// wakeLoop makes a loop waiting out --recheck check again at once (SIGHUP).
func (d *daemon) wakeLoop() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *daemon) record(rep slotsync.Report, err error) {
	d.m.observe(rep, err)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lastErr, d.lastAttempt, d.degraded = err, d.now(), nil
	d.journalFailing = ""
	if rep.Journal != nil {
		d.journalFailing = rep.Journal.Failing
	}
	if err == nil {
		r := rep
		d.last, d.lastSuccess, d.stopped = &r, d.now(), ""
	} else if rep.WithoutPrimary != nil {
		r := rep
		d.degraded = &r
	}
}

// reloadOnHangup makes SIGHUP (a reload, by habit: systemctl reload) what a reload can mean
// here: a full pass now, on new connections (the primary found again from the standby's
// primary_conninfo, password files read again) and, while syncing is stopped for a human, the
// check again at once. Settings given by flags change with a restart; both are logged.
func reloadOnHangup(ctx context.Context, log hclog.Logger, wake func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: a full pass now, on new connections; settings given by flags change with a restart")
				wake()
			}
		}
	}()
}

// getOnly answers 405 to methods other than GET and HEAD.
func getOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h(w, r)
	}
}

func (d *daemon) handler() http.Handler {
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(d.m.reg, promhttp.HandlerOpts{})
	mux.HandleFunc("/metrics", getOnly(metrics.ServeHTTP))
	mux.HandleFunc("/livez", getOnly(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	}))
	// /readyz: the sidecar works — it makes passes and its configuration is usable. A primary
	// that is down, or this node being the primary, is not the sidecar failing: the promotion
	// gate (/promotion-ready) says what those mean.
	mux.HandleFunc("/readyz", getOnly(func(w http.ResponseWriter, _ *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		switch {
		case d.stopped != "":
			http.Error(w, "stopped until a human acts: "+d.stopped, http.StatusServiceUnavailable)
		case d.lastAttempt.IsZero():
			http.Error(w, "no pass has run yet", http.StatusServiceUnavailable)
		case d.now().Sub(d.lastAttempt) > d.staleAfter:
			http.Error(w, fmt.Sprintf("no pass for %s: the loop is stuck", d.now().Sub(d.lastAttempt).Round(time.Second)), http.StatusServiceUnavailable)
		case d.journalFailing != "":
			http.Error(w, "the journal cannot be written (last: "+
				""+d.journalFailing+"): see the log; without the primary the gate judges from an older record, then cannot", http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ok")
		}
	}))
	// /promotion-ready answers like `check` from the latest pass; it is the promotion gate, not
	// the sidecar's own readiness.
	mux.HandleFunc("/promotion-ready", getOnly(func(w http.ResponseWriter, req *http.Request) {
		d.mu.Lock()
		res := d.gate.answer(d.now(), d.passes)
		d.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !res.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		if req.URL.Query().Get("full") == "" {
			res = res.Summary() // the slots not READY only; ?full=1 lists every slot
		}
		writeJSON(w, res)
	}))
	return mux
}

// passes is what the daemon last saw of its passes.
type passes struct {
	last        *slotsync.Report // the latest pass that succeeded
	lastErr     error            // the latest pass's error
	lastAttempt time.Time        // when the latest pass ended
	// degraded is the latest pass's verdict judged without the primary (rule 8), if it had one.
	degraded *slotsync.Report
}

// freshness is the daemon's choice of what /promotion-ready answers from: the latest pass's
// verdict judged without the primary while recent (unless strict); else the latest pass, while
// it is recent, succeeded and the next is not overdue; else readiness unknown.
type freshness struct {
	strict bool // the gate does not judge without the primary
	// staleAfter: an observation at most this old (a few passes); past it readiness is unknown,
	// since rule 5 can change within a second.
	staleAfter time.Duration
	// nextPassWithin: a READY with the primary is served only until the next pass is overdue (an
	// interval, plus the bound on connecting to the primary, plus a second): a pass stuck
	// connecting to a primary that vanished must not leave the last READY up meanwhile.
	nextPassWithin time.Duration
}

// answer is the gate's answer at now.
func (f freshness) answer(now time.Time, p passes) checkResult {
	switch {
	case p.degraded != nil && !f.strict && now.Sub(p.degraded.Started) <= f.staleAfter:
		return newCheckResult(p.degraded, p.lastErr)
	case p.last == nil || p.lastErr != nil || now.Sub(p.last.Started) > f.staleAfter || now.Sub(p.lastAttempt) > f.nextPassWithin:
		err := p.lastErr
		if err == nil || p.degraded != nil {
			err = fmt.Errorf("no observation in the last %s, or no pass ended in the last %s (a pass is slow or stuck connecting, or the loop is stuck): readiness "+
				"unknown",
				f.staleAfter, f.nextPassWithin)
		}
		return newCheckResult(nil, err)
	}
	return newCheckResult(p.last, nil)
}

// statefileConfig reads the state-file method's flags; they matter only when that method is
// chosen (PostgreSQL 15 and older, or --method statefile).
func statefileConfig(c *cli.Context) (statefile.Config, error) {
	dir := c.String("standby-data-dir")
	sc := slotsync.DefaultConfig().Statefile
	sc.DataDir, sc.NoCheckpoint = dir, c.Bool("no-checkpoint")
	var err error
	if sc.MinRestartInterval, err = positive(c, "min-restart-interval"); err != nil {
		return sc, err
	}
	if sc.HoldTimeout, err = positive(c, "catalog-hold-timeout"); err != nil {
		return sc, err
	}
	switch c.String("restart") {
	case "pg_ctl":
		sc.Restarter = statefile.PgCtl{Path: c.String("pg-ctl"), DataDir: dir, LogFile: c.String("standby-log-file")}
	case "command":
		stop, start, restart := c.String("stop-command"), c.String("start-command"), c.String("restart-command")
		switch {
		case restart != "" && stop == "" && start == "":
			sc.Restarter = statefile.RestartCommand{Command: restart}
		case restart == "" && stop != "" && start != "":
			sc.Restarter = statefile.Commands{StopCommand: stop, StartCommand: start}
		default:
			return sc, configError("--restart command needs either --restart-command alone, or --stop-command and --start-command")
		}
	case "never":
	default:
		return sc, configError("--restart %q: use pg_ctl, command or never", c.String("restart"))
	}
	return sc, nil
}

// parseSize reads a size as PostgreSQL writes one: a number of bytes, or with kB, MB, GB or TB
// (powers of 1024).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		shift  uint
	}{{"TB", 40}, {"GB", 30}, {"MB", 20}, {"kB", 10}, {"B", 0}}
	shift := uint(0)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, shift = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("%q is not a size: give bytes or a number with kB, MB, GB or TB, e.g. 256MB", s)
	}
	return n << shift, nil
}
