package main

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/drill"
	slotsync "github.com/slotsync/slotsync/sync"
	"github.com/slotsync/slotsync/topology"
	"github.com/urfave/cli/v2"
)

// drillReport is the drill's JSON answer.
type drillReport struct {
	OK     bool            `json:"ok"`
	Runs   []drill.Verdict `json:"runs"`
	Error  string          `json:"error,omitempty"`
	Passed int             `json:"failovers_passed"`
	Failed int             `json:"failovers_failed"`
}

func drillCommand() *cli.Command {
	return &cli.Command{
		Name:  "drill",
		Usage: "a failover drill: slots, writes, real consumers, slotsync, promotion, resume, and a verdict on every change",
		Description: "With --local, starts throwaway primary/standby pairs from the PostgreSQL binaries on this machine " +
			"(/usr/lib/postgresql/N/bin, or $SLOTSYNC_PG_CACHE/N/bin) and fails over cleanly and with the primary killed -9. With --primary and --standby, " +
			"drills once against that pair (it creates a database 'drill' and two slots, and promotes the standby with " +
			"--promote-command or pg_promote()). Exit 0 when every change arrived exactly once, 1 on any loss or " +
			"repetition, 2 when the drill could not run, 3 on a usage error.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "local", Usage: "drill on throwaway local pairs", EnvVars: []string{"SLOTSYNC_DRILL_LOCAL"}},
			&cli.IntFlag{Name: "major", Usage: "PostgreSQL major for --local (default: the newest installed)", EnvVars: []string{"SLOTSYNC_DRILL_MAJOR"}},
			&cli.StringFlag{Name: "mode", Value: "both", Usage: "clean, kill (the primary is killed -9), both, or random (--local: each iteration draws kill or clean, one or two failovers and the live phase's length from --seed)", EnvVars: []string{"SLOTSYNC_DRILL_MODE"}},
			&cli.Int64Flag{Name: "seed", Usage: "seed for --mode random (default: from the clock; printed)", EnvVars: []string{"SLOTSYNC_DRILL_SEED"}},
			&cli.BoolFlag{Name: "switch-back", Usage: "fail over twice: the old primary rejoins as a standby and the consumers survive a switch back (--local)", EnvVars: []string{"SLOTSYNC_DRILL_SWITCH_BACK"}},
			&cli.IntFlag{Name: "iterations", Value: 1, Usage: "repeat the drill this many times (--local)", EnvVars: []string{"SLOTSYNC_DRILL_ITERATIONS"}},
			&cli.DurationFlag{Name: "duration", Value: 3 * time.Second, Usage: "live phase before each failover", EnvVars: []string{"SLOTSYNC_DRILL_DURATION"}},
			// A drill against a given pair promotes its standby: its DSNs and the confirmation
			// come from the command line only, never from an environment set for the sidecar.
			&cli.StringFlag{Name: "primary", Usage: "primary DSN of a given pair (command line only)"},
			&cli.StringFlag{Name: "standby", Usage: "standby DSN of a given pair (command line only)"},
			&cli.BoolFlag{Name: "promote-yes", Usage: "confirm a drill against a given pair: it creates database drill and slots there and PROMOTES the standby (command line only)"},
			&cli.StringFlag{Name: "promote-command", Usage: "shell command that promotes the given standby (default: SELECT pg_promote())", EnvVars: []string{"SLOTSYNC_PROMOTE_COMMAND"}},
			&cli.BoolFlag{Name: "json", Usage: "print JSON", EnvVars: []string{"SLOTSYNC_JSON"}},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "trace, debug, info, warn or error", EnvVars: []string{"SLOTSYNC_LOG_LEVEL"}},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json", EnvVars: []string{"SLOTSYNC_LOG_FORMAT"}},
		},
		Action: drillAction,
	}
}

func drillAction(c *cli.Context) error {
	log, err := newLogger(c, c.App.ErrWriter)
	if err != nil {
		return err
	}
	plan, err := planDrill(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stateDir, err := os.MkdirTemp("", "slotsync-drill-state-")
	if err != nil {
		return cli.Exit(err.Error(), exitConnect)
	}
	defer os.RemoveAll(stateDir)

	rep := drillReport{OK: true}
	runOne := func(pair *integration.Pair, kill bool, fo int, duration time.Duration) error {
		v, err := drill.Run(ctx, pair, drill.Options{Duration: duration, Kill: kill, Failovers: fo,
			StateDir: stateDir + fmt.Sprintf("/%d", len(rep.Runs)), Logger: log.Named("drill")})
		rep.Runs = append(rep.Runs, v)
		for _, f := range v.Failovers {
			if f.OK {
				rep.Passed++
			} else {
				rep.Failed++
			}
		}
		rep.OK = rep.OK && v.OK && err == nil
		return err
	}
	var runErr error
	if plan.local {
		runErr = drillLocal(ctx, plan, log, runOne)
	} else {
		if err := checkDrillPair(ctx, c, log); err != nil {
			return err
		}
		pair, err := integration.ExternalPair(ctx, c.String("primary"), c.String("standby"), c.String("promote-command"))
		if err != nil {
			return classifyExit(err)
		}
		runErr = runOne(pair, false, 1, plan.duration)
	}
	if runErr != nil {
		rep.OK, rep.Error = false, runErr.Error()
	}
	if c.Bool("json") {
		writeJSON(c.App.Writer, rep)
	} else {
		printDrill(c.App.Writer, rep)
	}
	switch {
	case rep.Failed > 0:
		return cli.Exit("", exitNotReady)
	case runErr != nil:
		return cli.Exit("", exitConnect)
	}
	return nil
}

// drillRun is what a drill does, from its flags.
type drillRun struct {
	local      bool
	major      int
	kills      []bool // one failover each, per iteration: kill -9 (true) or clean stop
	failovers  int
	iterations int
	random     bool
	seed       int64
	duration   time.Duration
}

// planDrill checks the flags (a usage error names the fix and nothing runs) and says what the
// drill does.
func planDrill(c *cli.Context) (drillRun, error) {
	p := drillRun{local: c.Bool("local"), major: c.Int("major"), failovers: 1, iterations: c.Int("iterations"),
		seed: c.Int64("seed"), duration: c.Duration("duration")}
	if !p.local && c.String("standby") == "" && os.Getenv("SLOTSYNC_STANDBY") != "" {
		return p, configError("drill does not take the pair from SLOTSYNC_STANDBY/SLOTSYNC_PRIMARY: it promotes the standby; give --primary, --standby and " +
			"--promote-yes on the command line, or --local")
	}
	if p.local == (c.String("standby") != "") || (p.local && c.String("primary") != "") {
		return p, configError("give either --local or --primary and --standby")
	}
	switch c.String("mode") {
	case "clean":
		p.kills = []bool{false}
	case "kill":
		p.kills = []bool{true}
	case "both":
		p.kills = []bool{false, true}
	case "random":
		p.kills, p.random = []bool{false}, true
	case "chaos":
		return p, configError("--mode chaos: the fault explorer is its own program: slotsync-explore run --major N --seed S --iterations K")
	default:
		return p, configError("--mode %q: use clean, kill, both or random", c.String("mode"))
	}
	if c.Bool("switch-back") {
		p.failovers = 2
	}
	if p.iterations < 1 {
		return p, configError("--iterations must be at least 1")
	}
	if !p.local {
		return p, checkExternalDrill(c)
	}
	if p.major == 0 {
		m, err := newestInstalled()
		if err != nil {
			return p, err
		}
		p.major = m
	}
	if !slices.Contains(integration.SupportedMajors, p.major) {
		return p, configError("--major %d: use one of %v", p.major, integration.SupportedMajors)
	}
	if p.seed == 0 {
		p.seed = time.Now().UnixNano()
	}
	return p, nil
}

// newestInstalled is the newest major whose server binaries this machine has: the default of
// drill and sandbox.
func newestInstalled() (int, error) {
	for _, m := range slices.Backward(integration.SupportedMajors) {
		if _, err := integration.FindBinaries(m); err == nil {
			return m, nil
		}
	}
	return 0, configError("no PostgreSQL server binaries found: %s", integration.HowToGet(17))
}

// checkExternalDrill refuses what a drill against a given pair cannot do.
func checkExternalDrill(c *cli.Context) error {
	if c.String("primary") == "" {
		return configError("a drill against a given pair needs --primary too")
	}
	if c.Bool("switch-back") || c.String("mode") == "kill" || c.Int("iterations") > 1 {
		return configError("--switch-back, --mode kill and --iterations need --local: slotsync cannot rebuild or kill servers it did not start")
	}
	if !c.Bool("promote-yes") {
		return configError("a drill against a given pair PROMOTES its standby: run it only against a pair you can lose, and confirm with --promote-yes")
	}
	return nil
}

// drillLocal runs the drill's iterations on throwaway local pairs; in random mode each draws
// kill or clean, one or two failovers and the live phase's length from the printed seed.
func drillLocal(ctx context.Context, p drillRun, log hclog.Logger, runOne func(*integration.Pair, bool, int, time.Duration) error) error {
	rng := rand.New(rand.NewSource(p.seed))
	if p.random {
		log.Info("random drill", "seed", p.seed)
	}
	for i := 0; i < p.iterations; i++ {
		for _, kill := range p.kills {
			fo, duration := p.failovers, p.duration
			if p.random {
				kill, fo = rng.Intn(2) == 1, 1+rng.Intn(2)
				duration = time.Duration(500+rng.Intn(2500)) * time.Millisecond
			}
			sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			pair, err := integration.NewPair(sctx, integration.Options{Major: p.major})
			cancel()
			if err != nil {
				return err
			}
			err = runOne(pair, kill, fo, duration)
			pair.Close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// checkDrillPair refuses a given pair that is not one primary and its own streaming standby
// (rule 7), and says what the drill is about to do, before it does anything.
func checkDrillPair(ctx context.Context, c *cli.Context, log hclog.Logger) error {
	cfg := slotsync.Config{PrimaryDSN: c.String("primary"), StandbyDSN: c.String("standby"), ReadOnly: true, Logger: log}
	snap, err := slotsync.Observe(ctx, cfg)
	if err == nil {
		err = topology.Verify(snap.Primary.Info, snap.Standby.Info, snap.Physical, topology.MethodAuto)
	}
	if err != nil {
		return classifyExit(fmt.Errorf("the drill's pair: %w", err))
	}
	promote := "SELECT pg_promote() on the standby"
	if cmd := c.String("promote-command"); cmd != "" {
		promote = "the promote command"
	}
	log.Warn("drill against a given pair: it creates database drill with a table, a publication and two slots on the primary, "+
		"writes and consumes for the live phase, then PROMOTES the standby ("+promote+"); the old primary is left running",
		"system_identifier", snap.Primary.Info.SystemID, "major", snap.Primary.Info.Major())
	return nil
}

func printDrill(w io.Writer, rep drillReport) {
	for _, v := range rep.Runs {
		for _, f := range v.Failovers {
			fmt.Fprintf(w, "failover %d (%s, PostgreSQL %d): %d rows on the new primary; gate open %s after the consumers stopped\n",
				f.Number, f.Mode, v.Major, f.Rows, f.TimeToReady.Round(time.Millisecond))
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "  SLOT\tPLUGIN\tCONFIRMED\tACKED BEFORE\tRESUMED\tLOST\tREPEATED\tAHEAD\tRESULT")
			for _, s := range f.Slots {
				result := "ok"
				if !s.OK {
					result = "FAILED"
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", s.Slot, s.Plugin, s.Confirmed, s.Durable, s.Resumed,
					len(s.Lost), len(s.Repeated), len(s.Ahead), result)
			}
			tw.Flush()
			for _, s := range f.Slots {
				if len(s.Lost) > 0 {
					fmt.Fprintf(w, "  %s lost ids %v\n", s.Slot, head(s.Lost))
				}
				if len(s.Repeated) > 0 {
					fmt.Fprintf(w, "  %s got ids again %v\n", s.Slot, head(s.Repeated))
				}
				if len(s.Ahead) > 0 {
					fmt.Fprintf(w, "  %s had acknowledged ids the new primary lacks %v\n", s.Slot, head(s.Ahead))
				}
			}
		}
	}
	switch {
	case rep.Error != "":
		fmt.Fprintf(w, "DRILL ERROR: %s\n", rep.Error)
	case rep.OK:
		fmt.Fprintf(w, "PASS: %d failovers, every change arrived exactly once\n", rep.Passed)
	default:
		fmt.Fprintf(w, "FAIL: %d of %d failovers lost or repeated changes\n", rep.Failed, rep.Passed+rep.Failed)
	}
}

func head(ids []int) []int {
	if len(ids) > 20 {
		return ids[:20]
	}
	return ids
}
