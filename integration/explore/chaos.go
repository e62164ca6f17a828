package explore

import (
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	stdsync "sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pglogrepl"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/drill"
)

// ChaosOptions tune the chaos drill: failovers at random moments under random faults, the gate
// asked at each as an HA hook asks it, and its answers judged against the consumers.
type ChaosOptions struct {
	// Seed: iteration i draws its plan from Seed+i, so any iteration replays alone.
	Seed       int64
	Iterations int
	// Slotsync is the slotsync binary run as the sidecar and asked as the gate. For a build with
	// the tag failpoints, Arm gives the environment that crashes it at a step (name@hit), or
	// stalls it there for a written plan's Stall: then such crashes are drawn too. (The release
	// binary, which runs the drill too, names no failpoint variable.)
	Slotsync string
	Arm      func(step string, stall time.Duration) []string
	// Method is slotsync's --method (default auto: statefile up to 15, sql from 16).
	Method   string
	StateDir string
	Logger   hclog.Logger
	// NewPair starts the pair of one iteration; the drill closes it.
	NewPair func(ctx context.Context) (*integration.Pair, error)
	// Each, if set, is given every iteration as soon as it is judged (a long run keeps what
	// it found even if stopped before its end).
	Each func(ChaosIteration)
	// Shadows: gate mutants asked beside the gate at each of its questions (shadow.go), each
	// judged as the gate is (ChaosIteration.Shadows).
	Shadows []string
	// Plans, if set, are run instead of plans drawn from Seed (a replay from a report's plan, or
	// the mutation matrix's plans written for a rule).
	Plans []Plan
}

// HoldTimeout is the catalog hold timeout the chaos drill gives slotsync: short, so that a hold
// outliving it is seen within an iteration.
const HoldTimeout = 5 * time.Second

// ChaosIteration is one faulted failover and what the oracle made of it.
type ChaosIteration struct {
	Number int    `json:"number"`
	Seed   int64  `json:"seed"`
	Plan   string `json:"plan"`
	// Drawn is the plan itself, with its draw version: replayed whole by drill --plan FILE.
	Drawn  Plan    `json:"plan_drawn"`
	Faults []Fault `json:"faults"`
	Major  int     `json:"major"`
	// ServerVersion: the primary's server_version, the minor release the iteration ran on.
	ServerVersion string                `json:"server_version,omitempty"`
	Method        string                `json:"method"`
	Failover      drill.FailoverVerdict `json:"failover"`
	Judged        []Judged              `json:"judged"`
	// History: what Judged was drawn from, to judge the iteration again (Rejudge).
	History *History `json:"history,omitempty"`
	// SlotsyncCrashes: kill -9 and failpoint crashes of the sidecar (each restarted).
	SlotsyncCrashes int `json:"slotsync_crashes"`
	// LongestHold: the longest a slotsync_hold_% slot stayed on the primary.
	LongestHold time.Duration `json:"longest_hold_ns"`
	// Problems: the standby left down, slotsync exiting by itself or not stopping, a hold or
	// physical slot pinning the primary, a drill step that failed.
	Problems []string `json:"problems,omitempty"`
	Lies     int      `json:"ready_while_loss"`
	OK       bool     `json:"ok"`
	// Switchovers made during the live phase (FaultSwitchover: there and back is two).
	Switchovers int `json:"switchovers,omitempty"`
	// SwitchAnswers: what the gate beside the standby answered with the primary demoted, one per
	// switchover ("exit 0 without the primary", …), as Patroni's pre_promote hook asks it.
	SwitchAnswers []string `json:"switch_answers,omitempty"`
	// HookAnswers: every answer of a hook's cutover (Plan.Hook), the READY it promoted on last.
	HookAnswers []string `json:"hook_answers,omitempty"`
	// Applied and Skipped: each fault of the plan as carried out (with when), or skipped and
	// why; Armed: the failpoint slotsync was armed with (one its method reaches), if any.
	Applied []string `json:"applied,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
	Armed   string   `json:"armed,omitempty"`
	// Truths: what the servers said right before the question and the primary's end (Truth);
	// BindingByServers: the answer with the primary is binding because the servers said no
	// consumer held anything the standby lacked when the primary went, though writes went on.
	// StopUnsent: the primary was stopped cleanly after writes that followed the question, the
	// standby not streaming then (stopUnsent): the answer with the primary promised no consumer
	// ahead only as of the question.
	Truths           []Truth `json:"truths,omitempty"`
	BindingByServers bool    `json:"binding_by_servers,omitempty"`
	StopUnsent       bool    `json:"stop_unsent,omitempty"`
	// Shadows: each gate mutant asked beside the gate, judged (ChaosOptions.Shadows).
	Shadows []ShadowVerdict `json:"shadows,omitempty"`
	// Timeline: what the standby showed change through the iteration, from the start of the
	// live phase: whether it streamed, and where its copies stood (each pass's advances); the
	// faults applied, the truths and the hook's answers carry their own times.
	Timeline []string `json:"timeline,omitempty"`
}

// ChaosReport is a chaos run.
type ChaosReport struct {
	Seed int64 `json:"seed"`
	// Slotsync: the binary that ran as sidecar and gate, so a report names what it judged.
	Slotsync   BinaryID         `json:"slotsync"`
	OK         bool             `json:"ok"`
	Iterations []ChaosIteration `json:"iterations"`
	Tally      Tally            `json:"tally"`
}

// Chaos runs the chaos drill. An error means it could not run (no pair); what it found is in
// the report.
func Chaos(ctx context.Context, opts ChaosOptions) (ChaosReport, error) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	rep := ChaosReport{Seed: opts.Seed, OK: true, Slotsync: identify(opts.Slotsync)}
	opts.Logger.Info("chaos drill", "seed", opts.Seed, "iterations", opts.Iterations, "failpoints", opts.Arm != nil)
	n := opts.Iterations
	if len(opts.Plans) > 0 {
		n = len(opts.Plans)
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		plan := DrawPlan(opts.Seed+int64(i), opts.Arm != nil)
		if len(opts.Plans) > 0 {
			plan = opts.Plans[i]
		}
		it, err := chaosIteration(ctx, opts, i+1, plan)
		if err != nil {
			return rep, err
		}
		rep.Iterations = append(rep.Iterations, it)
		rep.OK = rep.OK && it.OK
		if opts.Each != nil {
			opts.Each(it)
		}
		lvl := hclog.Info
		if !it.OK {
			lvl = hclog.Error
		}
		opts.Logger.Log(lvl, "chaos iteration", "number", it.Number, "seed", it.Seed, "ok", it.OK, "ready_while_loss", it.Lies,
			"problems", fmt.Sprint(it.Problems))
	}
	rep.Tally = TallyOf(rep.Iterations)
	return rep, ctx.Err()
}

// chaosIteration runs one plan on a new pair. An error means the pair could not be made.
func chaosIteration(ctx context.Context, opts ChaosOptions, n int, plan Plan) (ChaosIteration, error) {
	it := ChaosIteration{Number: n, Seed: plan.Seed, Plan: plan.String(), Faults: plan.Faults(), Drawn: plan}
	if plan.Method != "" {
		opts.Method = plan.Method
	}
	log := opts.Logger.With("iteration", n)
	log.Info("plan", "plan", it.Plan)
	pair, err := newChaosPair(ctx, opts, log)
	if err != nil {
		return it, err
	}
	defer pair.Close()
	it.Major = pair.Major
	if err := pair.Primary.QueryRow(ctx, "SHOW server_version", nil, &it.ServerVersion); err != nil {
		it.ServerVersion = "unknown: " + err.Error()
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	wd, err := newWorld(ictx, pair, opts, filepath.Join(opts.StateDir, fmt.Sprint(n)), plan, log)
	if err != nil {
		it.Problems = append(it.Problems, "drill setup: "+err.Error())
		return it, nil
	}
	defer wd.close()
	it.Armed = wd.armedAt
	if err := wd.run(ictx, plan, &it); err != nil {
		it.Problems = append(it.Problems, err.Error())
	}
	for _, j := range it.Judged {
		if j.Lie {
			it.Lies++
		}
	}
	it.OK = it.Lies == 0 && len(it.Problems) == 0
	return it, nil
}

// newChaosPair starts an iteration's pair, trying again twice: a port another run took between
// its choice and the server's start is no reason to end a long run.
func newChaosPair(ctx context.Context, opts ChaosOptions, log hclog.Logger) (*integration.Pair, error) {
	var err error
	for attempt := 1; attempt <= 3 && ctx.Err() == nil; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		var pair *integration.Pair
		pair, err = opts.NewPair(pctx)
		cancel()
		if err == nil {
			return pair, nil
		}
		log.Warn("could not start the pair", "attempt", attempt, "error", err)
	}
	if err == nil {
		err = ctx.Err()
	}
	return nil, err
}

// world is one iteration's pair, consumers, writer and sidecar.
type world struct {
	pair     *integration.Pair
	stateDir string // the sidecar's and the gate's --state-dir
	proxy    *integration.Proxy
	side     *sidecar
	feeds    []*feed
	w        *drill.Writer
	writes   writes
	bin      string
	method   string
	dir      string
	gateArgs []string
	// settings: the drawn flags every sidecar of the plan and its gate take (--max-record-age,
	// --manage-synchronized-standby-slots), as a user sets them in every node's environment.
	settings []string
	holds    *holdWatch
	log      hclog.Logger
	// other is slotsync beside the first primary, started at the first switchover (with
	// otherArgs, its gate's), as every node of an HA cluster runs one; switched counts the
	// switchovers made; switchProblems, what went wrong in them (a loss after READY, a gate that
	// did not judge with the primary demoted).
	// stopWithin bounds slotsync's stop after SIGTERM: longer with the state-file method, which
	// finishes a standby restart it began before it exits (never leaving the standby down).
	stopWithin     time.Duration
	other          *sidecar
	otherArgs      []string
	switched       int
	switchProblems []string
	switchAnswers  []string
	// recv: whether the standby streamed, sampled through the iteration (the oracle's ground
	// truth for answers judged without a live primary).
	recv *receiverLog
	// frozen: slotsync is paused from the question with the primary to the promotion (Plan.Freeze).
	frozen bool
	// hook: the cutover was a hook's (Plan.Hook); byServers: the answer with the primary binds
	// by the servers' word (bindingByServers); stopUnsent: a clean stop could not send the
	// standby what was written after the answer (stopUnsent); walEnd: the standby's end of WAL
	// at its promotion.
	hook, byServers, stopUnsent bool
	walEnd                      pglogrepl.LSN
	// remadeAt: when each slot was last changed on the primary (its drop, as it is made again:
	// Residual); remadeMu guards it.
	remadeAt map[string]time.Time
	remadeMu stdsync.Mutex
	// olderAdvanced: where the writer stood when each slot's older slot was advanced
	// (FaultOlderAdvanced; the steps run one after another).
	olderAdvanced map[string]writerAt
	// residualAt: the Residual gathered at the promotion.
	residualAt Residual
	// exact: the gate is asked with --exact (Plan.GateExact); forPromotion: with
	// --for-promotion (Plan.ForPromotion); native: how the native method runs (Plan.ServerSync,
	// Plan.KeepStale).
	exact, forPromotion bool
	native              nativeOpts
	// hookAnswers: every answer of a hook's cutover, in order (GateAnswer.brief).
	hookAnswers []string
	// liveness: the gate not READY in a quiet window (world.quiet).
	liveness []string
	// disagreements: answers whose exit code, ready and per-slot verdicts disagree
	// (GateAnswer.disagreement).
	disagreements []string
	// armedAt: the failpoint slotsync's first process was armed with (reachedFailpoint).
	armedAt string
	// stalled: the primary's walsender to the standby, while FaultSenderStalled holds it.
	stalled atomic.Int64
	// lasting: what the faults of some length hold, until the last of them ends.
	lasting lasting
	// truths: what the servers said right before the question and right before the primary's
	// end (readTruth), in order.
	truths []Truth
	// syncStandbySkipped: why Plan.SyncStandbySlots was not applied ("" when it was).
	syncStandbySkipped string
	// faultNote: what the fault being applied set up otherwise than it means to, reported with
	// it as applied (faults takes it).
	faultNote string
	// liveStart: when the live phase began (the timeline's zero).
	liveStart time.Time
	// demoteSkipped: Plan.Demote could not be carried out on this pair (Docker): the primary
	// was killed or stopped instead.
	demoteSkipped bool
	// siblingSkipped: Plan.Sibling could not be carried out (no second standby); leader: the
	// leader's address the standby streams through in it.
	siblingSkipped bool
	leader         *integration.Proxy
	// demotedRoute: the demoted primary's route to the second standby (Plan.DemoteToSibling).
	demotedRoute *integration.Proxy
	// second: the sidecar beside a second standby (Plan.SecondStandby); secondSkipped: why
	// there is none ("" when there is).
	second        *sidecar
	secondNode    *integration.Node
	secondSkipped string
	// interval: every sidecar's --interval (Plan.Interval).
	interval time.Duration
	// primaryDSN: the primary through the proxy, as slotsync reaches it.
	primaryDSN string
	// liveEnds: closed (endLive) by a fault that found the window it searched for: the live
	// phase ends at once, and the cutover follows.
	liveEnds    chan struct{}
	endLiveOnce stdsync.Once
	// shadows: the gate mutants asked beside the gate (ChaosOptions.Shadows); shadowWith and
	// shadowWithout: their answers with and without the primary (shadow.go); shadowErrors:
	// shadow questions that could not be asked; shadowReadier: the shadows that said READY where
	// the gate beside them did not.
	shadows                   []string
	shadowWith, shadowWithout map[string]GateAnswer
	shadowErrors              []string
	shadowReadier             map[string]bool
}

// endLive ends the live phase at once (world.liveEnds).
func (wd *world) endLive() { wd.endLiveOnce.Do(func() { close(wd.liveEnds) }) }

// listStandby makes the primary's synchronized_standby_slots list the standby's physical slot
// (Plan.SyncStandbySlots), or has every sidecar list its own (Plan.ManageStandbySlots); it
// returns why not when the pair or the plan does not allow it.
func (wd *world) listStandby(ctx context.Context, plan Plan) (string, error) {
	switch {
	case wd.pair.Major < 17:
		return "synchronized_standby_slots needs 17+", nil
	case plan.Has(FaultSwitchover):
		return "a switchover would leave the old primary's list naming a slot it does not have", nil
	}
	if plan.ManageStandbySlots {
		// Rule 10: every sidecar of the plan lists its own standby once it streams.
		wd.settings = append(wd.settings, "--manage-synchronized-standby-slots")
		return "", nil
	}
	if err := wd.pair.Primary.Exec(ctx, "ALTER SYSTEM SET synchronized_standby_slots = '"+integration.PhysicalSlot+"'"); err != nil {
		return "", err
	}
	return "", wd.pair.Primary.Exec(ctx, "SELECT pg_reload_conf()")
}

// slotNames are the drill's slots, in the order of its feeds.
func (wd *world) slotNames() []string {
	out := make([]string, len(wd.feeds))
	for i, f := range wd.feeds {
		out[i] = f.c.Slot
	}
	return out
}

// instantSlots is what the rules at the instant read: the consumers' slots, and the older slots a
// slot may be made again from (FaultSlotBehind), which slotsync copies too unless the plan
// leaves them out.
func (wd *world) instantSlots() []string {
	out := wd.slotNames()
	for _, s := range drill.Slots {
		out = append(out, behind(s.Name))
	}
	return out
}

// noteTruth reads the servers' truth of the moment when; a hook's question read again replaces
// the one before it (the last question is the one the promotion followed).
func (wd *world) noteTruth(ctx context.Context, when string) {
	t := readTruth(ctx, wd.pair.Primary, wd.pair.Standby, wd.slotNames(), when)
	if n := len(wd.truths); n > 0 && wd.truths[n-1].When == when {
		wd.truths[n-1] = t
		return
	}
	wd.truths = append(wd.truths, t)
}

// truthOf is the truth read of the moment when (zero when none was read).
func (wd *world) truthOf(when string) Truth { return truthIn(wd.truths, when) }

// writes is the writer's run, paused around switchovers and at the cutover.
type writes struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// feed is a consumer following its slot, stopped and started around a slot's recreation.
type feed struct {
	c      *drill.Consumer
	next   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// writerAt is where the drill's writer stood: its next transaction's id, and those open.
type writerAt struct {
	next int
	open map[int]bool
}

func newWorld(ctx context.Context, pair *integration.Pair, opts ChaosOptions, dir string, plan Plan, log hclog.Logger) (*world, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := drill.Setup(ctx, pair); err != nil {
		return nil, err
	}
	older := slices.ContainsFunc([]Fault{FaultSlotBehind, FaultSlotBehindSkipped, FaultSlotBehindOtherPlugin, FaultOlderAdvanced}, plan.Has)
	if older && pair.Major >= 12 {
		if err := (&world{pair: pair}).makeBehind(ctx); err != nil {
			return nil, err
		}
	}
	addr, err := pair.Primary.Addr(ctx)
	if err != nil {
		return nil, err
	}
	proxy, err := integration.NewProxy(addr)
	if err != nil {
		return nil, err
	}
	wd := &world{pair: pair, proxy: proxy, w: &drill.Writer{}, bin: opts.Slotsync, method: opts.Method, dir: dir, log: log, stopWithin: 20 * time.Second,
		liveEnds: make(chan struct{}),
		recv:     &receiverLog{}, exact: plan.GateExact, forPromotion: plan.ForPromotion, interval: plan.Interval, shadows: opts.Shadows}
	wd.recv.node.Store(pair.Standby)
	if statefileMethod(pair, opts.Method) || plan.ExactCopyAfter > 0 {
		wd.stopWithin = 3 * time.Minute // the drill's pg_ctl stop (60 s) and start (-t 120) commands
	}
	primary := fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=postgres sslmode=disable connect_timeout=2", proxy.Port(), integration.Superuser)
	wd.primaryDSN = primary
	wd.stateDir = filepath.Join(dir, "state")
	wd.native = nativeOpts{serverSync: plan.ServerSync, keepStale: plan.KeepStale}
	wd.gateArgs = gateArgs(primary, pair.Standby.DSN("postgres"), wd.stateDir, opts.Method, wd.native)
	if plan.OlderOutside {
		wd.gateArgs = append(wd.gateArgs, "--ignore-slots", behind("*"))
	}
	if plan.MaxRecordAge > 0 {
		wd.settings = append(wd.settings, "--max-record-age", plan.MaxRecordAge.String())
	}
	if err := wd.arrange(ctx, plan, opts); err != nil {
		proxy.Close()
		return nil, err
	}
	wd.gateArgs = append(wd.gateArgs, wd.settings...)
	args, err := sidecarArgs(pair, opts.Method, plan.ExactCopyAfter, plan.Interval, wd.gateArgs)
	if err != nil {
		proxy.Close()
		return nil, err
	}
	var armed []string
	if wd.armedAt = reachedFailpoint(plan.Failpoint, statefileMethod(pair, opts.Method)); wd.armedAt != "" && opts.Arm != nil {
		armed = opts.Arm(wd.armedAt, plan.Stall)
	}
	if wd.side, err = newSidecar(opts.Slotsync, args, armed, filepath.Join(dir, "slotsync.log")); err != nil {
		proxy.Close()
		return nil, err
	}
	for _, s := range drill.Slots {
		c := drill.NewConsumer(s.Name, s.Plugin)
		// The test_decoding consumer resumes from the slot's position, as pg_recvlogical does
		// without --startpos: what it gets twice is checked against the gate's redelivery window.
		c.FromSlot = s.Plugin == "test_decoding"
		c.AckEvery = plan.ConfirmEvery
		wd.feeds = append(wd.feeds, &feed{c: c, next: make(chan struct{}, 1)})
	}
	wd.holds = &holdWatch{node: pair.Primary, firstSeen: map[string]time.Time{}}
	return wd, nil
}

// reachedFailpoint is the plan's failpoint (name@hit) as armed for the iteration's method: a step
// of the other method (statefile.* and hold.* on the state-file method, sql.* and watch.*
// otherwise) is never reached, so it is replaced by the step of this method at the same place
// in the list of those it reaches (the same seed arms the same step).
func reachedFailpoint(fp string, statefile bool) string {
	if fp == "" {
		return ""
	}
	name, hit, _ := strings.Cut(fp, "@")
	reaches := func(step string) bool {
		own := strings.HasPrefix(step, "statefile.") || strings.HasPrefix(step, "hold.")
		other := strings.HasPrefix(step, "sql.") || strings.HasPrefix(step, "watch.")
		return statefile && !other || !statefile && !own
	}
	if reaches(name) {
		return fp
	}
	var mine []string
	for _, s := range FailpointSteps {
		if reaches(s) {
			mine = append(mine, s)
		}
	}
	i := slices.Index(FailpointSteps, name)
	if i < 0 {
		return fp // a step this drill does not know: armed as written
	}
	return mine[i%len(mine)] + "@" + hit
}

// gateArgs are the flags `slotsync check` (and `run`, beside them) takes for one standby.
func gateArgs(primary, standby, stateDir, method string, native nativeOpts) []string {
	return append([]string{"--primary", primary, "--standby", standby, "--state-dir", stateDir, "--primary-connect-timeout", "2s"},
		methodArgs(method, native)...)
}

// nativeOpts: how a plan runs the native method: serverSync, the server's own worker syncs and
// slotsync does not drive it (Plan.ServerSync); keepStale, the same-name slots a demotion left
// on the standby are not dropped (Plan.KeepStale).
type nativeOpts struct{ serverSync, keepStale bool }

// methodArgs are the flags of slotsync's method, for `run` and `check` alike: with native, the
// server's slot sync driven by slotsync (pg_sync_replication_slots(), no sync_replication_slots
// needed) and same-name slots a demotion left on the standby dropped, unless the plan says not.
func methodArgs(method string, native nativeOpts) []string {
	if method == "" {
		return nil
	}
	args := []string{"--method", method}
	if method != "native" {
		return args
	}
	if !native.serverSync {
		args = append(args, "--native-drive")
	}
	if !native.keepStale {
		args = append(args, "--drop-stale")
	}
	return args
}

// statefileMethod: slotsync runs the state-file method on this pair (auto picks it up to 15).
func statefileMethod(pair *integration.Pair, method string) bool {
	return method == "statefile" || ((method == "" || method == "auto") && pair.Major <= 15)
}

// explorerInterval is the sidecar's --interval when the plan sets none.
const explorerInterval = 200 * time.Millisecond

// sidecarArgs is `slotsync run` beside the standby: through the proxy to the primary, passes
// every interval (0: fast ones, explorerInterval), a short catalog hold, and for the state-file
// method (or exact copies beside another, exact > 0: --exact-copy-after) pg_ctl as the servers'
// user.
func sidecarArgs(pair *integration.Pair, method string, exact, interval time.Duration, common []string) ([]string, error) {
	if interval <= 0 {
		interval = explorerInterval
	}
	args := append([]string{"run", "--interval", interval.String(), "--listen", "", "--log-format", "json",
		"--catalog-hold-timeout", HoldTimeout.String(), "--min-restart-interval", "1s"}, common...)
	installs := statefileMethod(pair, method)
	if exact > 0 && !installs && pair.Major >= 16 && pair.Dir != "" {
		args, installs = append(args, "--exact-copy-after", exact.String()), true
	}
	if !installs || pair.Dir == "" {
		return args, nil
	}
	bin, err := integration.FindBinaries(pair.Major)
	if err != nil {
		return nil, err
	}
	asUser, err := integration.ShellPrefix()
	if err != nil {
		return nil, err
	}
	dir := pair.Standby.DataDir
	return append(args, "--standby-data-dir", dir, "--restart", "command",
		"--stop-command", fmt.Sprintf("%s%s -D %s -m fast -w stop", asUser, bin.Path("pg_ctl"), dir),
		"--start-command", fmt.Sprintf("%s%s -D %s -w -t 120 -l %s/restarted.log start", asUser, bin.Path("pg_ctl"), dir, dir)), nil
}

// arrange sets up what the plan and the method ask of the pair before slotsync starts:
// failover slots (native), synchronized_standby_slots, a second standby with its sidecar.
func (wd *world) arrange(ctx context.Context, plan Plan, opts ChaosOptions) error {
	if opts.Method == "native" {
		for _, s := range drill.Slots {
			if err := wd.setFailover(ctx, s.Name); err != nil {
				return err
			}
		}
		if plan.ServerSync && wd.pair.Major >= 17 {
			if err := wd.pair.Standby.Exec(ctx, "ALTER SYSTEM SET sync_replication_slots = on"); err != nil {
				return err
			}
			if err := wd.pair.Standby.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
				return err
			}
		}
	}
	if plan.OlderOutside && wd.pair.Major >= 12 { // the older slots are copies (makeBehind)
		if err := wd.changeCatalogBehind(ctx); err != nil {
			return fmt.Errorf("a catalog change behind the older slots: %w", err)
		}
	}
	var err error
	if plan.SyncStandbySlots {
		if wd.syncStandbySkipped, err = wd.listStandby(ctx, plan); err != nil {
			return err
		}
	}
	if plan.SecondStandby {
		wd.secondSkipped, err = wd.addSecondStandby(ctx, plan, opts)
	}
	return err
}

// addSecondStandby starts a second standby of the primary, streaming through a physical slot of
// its own, and makes a sidecar beside it with its own state directory (Plan.SecondStandby); it
// returns why not when the pair or the plan does not allow it.
func (wd *world) addSecondStandby(ctx context.Context, plan Plan, opts ChaosOptions) (string, error) {
	switch {
	case wd.pair.Dir == "":
		return "a second standby needs a local pair", nil
	case statefileMethod(wd.pair, opts.Method):
		return "the state-file method restarts its standby with commands the drill gives one standby", nil
	case plan.Has(FaultSwitchover):
		return "a switchover re-points one standby only", nil
	}
	n, err := wd.pair.AddStandby(ctx, "slotsync_second")
	if err != nil {
		return "", fmt.Errorf("second standby: %w", err)
	}
	wd.secondNode = n
	gate := gateArgs(wd.primaryDSN, n.DSN("postgres"), filepath.Join(wd.dir, "state-second"), opts.Method, wd.native)
	args, err := sidecarArgs(wd.pair, opts.Method, 0, wd.interval, append(gate, wd.settings...))
	if err != nil {
		return "", err
	}
	wd.second, err = newSidecar(opts.Slotsync, args, nil, filepath.Join(wd.dir, "slotsync-second.log"))
	return "", err
}

func (wd *world) close() {
	if wd.other != nil {
		_ = wd.other.stop(wd.stopWithin) // stopped already, unless the iteration ended early
	}
	if wd.second != nil {
		_ = wd.second.stop(wd.stopWithin)
	}
	_ = wd.proxy.Close()
	if wd.leader != nil {
		_ = wd.leader.Close()
	}
	if wd.demotedRoute != nil {
		_ = wd.demotedRoute.Close()
	}
}

// ask runs the gate as an HA hook does: `slotsync check --json` beside the standby.
func (wd *world) ask(ctx context.Context) (GateAnswer, error) {
	a, _, err := wd.askBeside(ctx, nil)
	return a, err
}

// askWithoutPrimary asks the gate after the primary went away, again while it cannot yet tell
// (the standby's WAL receiver has not noticed), as a hook that waits a little would.
func (wd *world) askWithoutPrimary(ctx context.Context) (GateAnswer, error) {
	deadline := time.Now().Add(30 * time.Second)
	pending := wd.shadows
	for {
		a, got, err := wd.askBeside(ctx, pending)
		pending = wd.shadowsWithout(pending, got)
		if err != nil || !a.CannotTell || time.Now().After(deadline) {
			return a, err
		}
		select {
		case <-ctx.Done():
			return a, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// ArmFailpoint is the environment that crashes a failpoints build of slotsync at step (name@hit),
// or stalls it there for stall: ChaosOptions.Arm for such a build.
func ArmFailpoint(step string, stall time.Duration) []string {
	if stall > 0 {
		return []string{"SLOTSYNC_FAILPOINTS=" + step + "=delay:" + stall.String()}
	}
	return []string{"SLOTSYNC_FAILPOINTS=" + step + "=crash"}
}

// HasFailpoints says whether the slotsync binary at path was built with the tag failpoints (Go
// records the build's tags in it).
func HasFailpoints(path string) bool {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return false
	}
	for _, st := range info.Settings {
		if st.Key == "-tags" && slices.Contains(strings.Split(st.Value, ","), "failpoints") {
			return true
		}
	}
	return false
}

// BinaryID names a binary: its path, the SHA-256 of its bytes and the commit Go recorded in it
// ("unknown" when it records none, "" fields when the file cannot be read).
type BinaryID struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Commit string `json:"commit"`
}

// identify reads what names the binary at path ("": none given).
func identify(path string) BinaryID {
	id := BinaryID{Path: path}
	if path == "" {
		return id
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return id
	}
	sum := sha256.Sum256(data)
	id.SHA256, id.Commit = hex.EncodeToString(sum[:]), "unknown"
	if info, err := buildinfo.ReadFile(path); err == nil {
		for _, st := range info.Settings {
			if st.Key == "vcs.revision" {
				id.Commit = st.Value
			}
		}
		for _, st := range info.Settings {
			if st.Key == "vcs.modified" && st.Value == "true" && id.Commit != "unknown" {
				id.Commit += "-dirty"
			}
		}
	}
	return id
}
