package sync

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/topology"
)

// TestScenarios runs the multi-pass scripts in testdata/scenarios: each command's input and
// its expected output sit together (go test ./sync -run TestScenarios -rewrite updates them).
// The engine runs for real (plan, apply, journal, memory, gate record, verdicts) against a
// simulated pair: the observer returns the scripted nodes, and the method carries out actions
// on the simulated standby. Commands:
//
//	method sql|statefile|native [set-failover drop-stale drive adopt-copies]  the method (before the first pass), its options
//	confirm-during-sync <slot>=<lsn>     the consumer confirms lsn on the primary just before the
//	                                     server's next slot sync (--native-drive), which copies
//	                                     the primary's failover slots onto the standby
//	primary <slot> [restart= confirmed= xmin= plugin= db= two_phase active failover temporary invalidated sent=]
//	standby <slot> [same keys, synced]   set a slot on a node (replacing it); "drop <node> <slot>" removes it
//	node [replay= receive= version= not-streaming recovery=false primary-started= horizon= timeline= history=T:LSN]
//	fail <slot> [error=conn|missing|wal-removed|refused]  the slot's next actions fail; "heal <slot>" ends it
//	hold <slot> / release <slot>         the state-file method's catalog hold of a slot on the primary
//	                                     (a temporary copy of the primary slot as it is now), or its end
//	primary-gone / primary-partitioned / primary-demoted / primary-back
//	                                     the primary is down (the standby stops streaming), or only
//	                                     slotsync cannot reach it (the standby streams), or it answers
//	                                     in recovery (the standby streams from it), or it is back;
//	                                     primary-demoted [wal=LSN follows-other upstream-configured standby-from-other
//	                                     itself other-cluster]: the server in recovery has WAL to
//	                                     LSN, streams from another server, has primary_conninfo set
//	                                     but streams from no one yet, the standby streams from
//	                                     another server, it is the standby, of another cluster
//	prepared <db>=<xid>,…                the primary's prepared transactions (none: "prepared")
//	wal <lsn>                            the primary's WAL insert position
//	clock <duration>                     time passes
//	pass / inspect                       one applying pass, or a judgement that changes nothing
//	plan                                 the pure plan of what the nodes show now
//	crash-after-actions                  a pass killed once its actions are done: intents are
//	                                     written ahead, the actions run, nothing else is recorded
//	journal / memory                     what the engine keeps
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		h := newHarness(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string { return h.run(t, d) })
	})
}

// scriptEpoch is when every script starts; times are printed from it.
var scriptEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type harness struct {
	eng     *Engine
	obs     *simObserver
	app     *simMethod
	now     time.Time
	ids     map[string]int // incarnation IDs, printed in order of appearance
	journal string         // the journal as last printed by a pass (changes are shown)
}

func newHarness(t *testing.T) *harness {
	snap := twoNodeSnapshot()
	snap.Primary.Slots, snap.Standby.Slots = map[string]topology.Slot{}, map[string]topology.Slot{}
	snap.Primary.Info.CurrentLSN, snap.Standby.Info.ReceiveLSN = 0x9000000, 0x9000000
	snap.Primary.Info.VersionNum, snap.Standby.Info.VersionNum = 160010, 160010
	snap.Physical = topology.PhysicalSlot{Exists: true, Active: true, Xmin: 650}
	h := &harness{obs: &simObserver{snap: snap}, now: scriptEpoch, ids: map[string]int{}}
	h.obs.now = func() time.Time { return h.now }
	h.app = &simMethod{obs: h.obs, traits: TraitsOf(topology.MethodSQL), failing: map[string]error{}}
	cfg := Config{PrimaryDSN: "x", StandbyDSN: "y", StateDir: t.TempDir(), Method: topology.MethodSQL, Workers: 1, CreateWorkers: 1}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h.eng = newEngine(cfg, h.obs, &Journal{Version: journalVersion, Slots: map[string]*Entry{}})
	h.eng.now = func() time.Time { return h.now }
	h.eng.sleep = func(context.Context, time.Duration) error { h.now = h.now.Add(time.Second); return nil } // a watch passes time
	h.eng.methods = func(topology.Method) (method.Method, error) { return h.app, nil }
	return h
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "method":
		h.setMethod(t, d)
		return ""
	case "confirm-during-sync":
		// A consumer confirms while a pass runs: the server's next slot sync copies the primary
		// slot past what the pass read of it.
		for _, a := range d.CmdArgs {
			l, err := lsncheck.ParseLSN(a.Vals[0])
			if err != nil {
				t.Fatal(err)
			}
			h.obs.confirmAtSync = append(h.obs.confirmAtSync, confirmAt{a.Key, l})
		}
		return ""
	case "server-sync-waits", "server-sync-copies":
		// The server's slot sync makes no copy (waits: for a running-xacts record its consumer
		// has confirmed past), or copies the failover slots again.
		h.obs.syncWaits = d.Cmd == "server-sync-waits"
		return ""
	case "running-xacts":
		return fmt.Sprintf("asked of the primary: %d", h.obs.runningXacts)
	case "primary", "standby":
		h.setSlot(t, d)
		return ""
	case "drop":
		delete(h.obs.node(d.CmdArgs[0].Key).Slots, d.CmdArgs[1].Key)
		return ""
	case "node":
		h.setNode(t, d)
		return ""
	case "fail":
		h.app.failing[d.CmdArgs[0].Key] = scriptError(d)
		return ""
	case "prepared":
		h.setPrepared(d)
		return ""
	case "wal":
		l, err := lsncheck.ParseLSN(d.CmdArgs[0].Key)
		if err != nil {
			t.Fatal(err)
		}
		h.obs.snap.Primary.Info.CurrentLSN = l
		return ""
	case "heal":
		delete(h.app.failing, d.CmdArgs[0].Key)
		return ""
	case "hold", "release":
		h.holdOrRelease(d)
		return ""
	case "primary-gone", "primary-partitioned", "primary-demoted", "primary-back":
		h.primaryState(t, d)
		return ""
	case "clock":
		dur, err := time.ParseDuration(d.CmdArgs[0].Key)
		if err != nil {
			t.Fatal(err)
		}
		h.now = h.now.Add(dur)
		return ""
	case "pass", "inspect":
		return h.pass(d.Cmd == "pass")
	case "plan":
		return h.plan()
	case "crash-after-actions":
		return h.crashAfterActions()
	case "journal":
		return h.printJournal()
	case "memory":
		return h.printMemory()
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}

// setMethod is "method <name> [set-failover] [drop-stale] [drive] [adopt-copies]
// [exact-copy-after=<duration>]": the engine's method and its settings.
func (h *harness) setMethod(t *testing.T, d *datadriven.TestData) {
	m := topology.Method(d.CmdArgs[0].Key)
	h.eng.cfg.Method, h.app.traits = m, TraitsOf(m)
	h.eng.cfg.Native.SetFailover = d.HasArg("set-failover")
	h.eng.cfg.Native.DropStale = d.HasArg("drop-stale")
	h.eng.cfg.Native.Drive = d.HasArg("drive")
	h.eng.cfg.AdoptCopies = d.HasArg("adopt-copies")
	h.eng.cfg.ExactCopyAfter = 0
	if d.HasArg("exact-copy-after") {
		var after string
		d.ScanArgs(t, "exact-copy-after", &after)
		dur, err := time.ParseDuration(after)
		if err != nil {
			t.Fatal(err)
		}
		h.eng.cfg.ExactCopyAfter = dur
	}
}

// setPrepared is "prepared app=701,702": the primary's prepared transactions, by database.
func (h *harness) setPrepared(d *datadriven.TestData) {
	h.obs.snap.Prepared = map[string][]lsncheck.XID{}
	for _, a := range d.CmdArgs {
		for _, v := range a.Vals {
			var x uint32
			fmt.Sscan(v, &x)
			h.obs.snap.Prepared[a.Key] = append(h.obs.snap.Prepared[a.Key], lsncheck.XID(x))
		}
	}
}

// holdOrRelease is "hold <slot>": the state-file method's catalog hold of it on the primary (a
// temporary copy of the primary slot as it is now); "release <slot>": the hold is gone.
func (h *harness) holdOrRelease(d *datadriven.TestData) {
	name := d.CmdArgs[0].Key
	hold := method.HoldName(h.obs.snap.Standby.Info.PrimarySlotName, name)
	if d.Cmd == "release" {
		delete(h.obs.snap.Primary.Slots, hold)
		return
	}
	s := h.obs.snap.Primary.Slots[name]
	s.Name, s.Temporary = hold, true
	h.obs.snap.Primary.Slots[hold] = s
}

// primaryState is "primary-gone": the primary is down, and the standby's WAL receiver stops
// streaming; "primary-partitioned": only slotsync cannot reach it, the standby still streams
// from it; "primary-demoted": it answers in recovery, and the standby streams from it (a cascade
// that carries nothing new); "primary-back": it answers again.
func (h *harness) primaryState(t *testing.T, d *datadriven.TestData) {
	h.obs.gone, h.obs.demoted = d.Cmd == "primary-gone" || d.Cmd == "primary-partitioned", d.Cmd == "primary-demoted"
	h.obs.snap.Standby.Info.ReceiverStatus = map[bool]string{true: "", false: "streaming"}[d.Cmd == "primary-gone"]
	if h.obs.demoted {
		h.obs.upstream = h.upstreamOf(t, d)
	}
}

func scriptError(d *datadriven.TestData) error {
	kind := "refused"
	for _, a := range d.CmdArgs {
		if a.Key == "error" && len(a.Vals) > 0 {
			kind = a.Vals[0]
		}
	}
	switch kind {
	case "conn":
		return &pgconn.PgError{Code: "08006", Message: "connection failure"}
	case "missing":
		return &pgconn.PgError{Code: "42704", Message: "replication slot does not exist"}
	case "wal-removed":
		return &pgconn.PgError{Code: "58P01", Message: "requested WAL segment has already been removed"}
	}
	return errors.New("the standby refused the copy")
}

func (h *harness) setSlot(t *testing.T, d *datadriven.TestData) {
	name := d.CmdArgs[0].Key
	s := topology.Slot{Identity: lsncheck.Identity{Name: name, Database: "app", Plugin: "pgoutput"}, WALStatus: "reserved"}
	for _, a := range d.CmdArgs[1:] {
		v := ""
		if len(a.Vals) > 0 {
			v = a.Vals[0]
		}
		switch a.Key {
		case "restart", "confirmed", "sent":
			l, err := lsncheck.ParseLSN(v)
			if err != nil {
				t.Fatalf("%s: %v", d.Pos, err)
			}
			*map[string]*lsncheck.LSN{"restart": &s.RestartLSN, "confirmed": &s.ConfirmedFlush, "sent": &s.SentLSN}[a.Key] = l
		case "xmin":
			var x uint32
			fmt.Sscan(v, &x)
			s.CatalogXmin = lsncheck.XID(x)
		case "plugin":
			s.Plugin = v
		case "db":
			s.Database = v
		case "two_phase":
			s.TwoPhase = true
		case "active":
			s.Active, s.ActivePID = true, 4242
		case "failover":
			s.Failover = true
		case "temporary":
			s.Temporary = true
		case "synced":
			s.Synced = true
		case "invalidated":
			s.Invalidated, s.InvalidationReason, s.WALStatus = true, "wal_removed", "lost"
		case "snapshot":
			// snapshot=present|absent: whether the node has a decoding snapshot at restart_lsn
			// (not looked at without it).
			s.Snapshot = map[string]topology.SnapshotState{"present": topology.SnapshotPresent, "absent": topology.SnapshotAbsent}[v]
		default:
			t.Fatalf("%s: unknown key %q", d.Pos, a.Key)
		}
	}
	h.obs.node(d.Cmd).Slots[name] = s
}

func (h *harness) setNode(t *testing.T, d *datadriven.TestData) {
	info := &h.obs.snap.Standby.Info
	for _, a := range d.CmdArgs {
		v := ""
		if len(a.Vals) > 0 {
			v = a.Vals[0]
		}
		switch a.Key {
		case "replay", "receive":
			l, err := lsncheck.ParseLSN(v)
			if err != nil {
				t.Fatalf("%s: %v", d.Pos, err)
			}
			if a.Key == "replay" {
				info.ReplayLSN = l
			} else {
				info.ReceiveLSN = l
			}
		case "version":
			var n int
			fmt.Sscan(v, &n)
			info.VersionNum, h.obs.snap.Primary.Info.VersionNum = n, n
			info.SyncReplicationSlots, info.HasConninfoDBName = n >= 170000, n >= 170000
		case "not-streaming":
			info.ReceiverStatus = ""
		case "preload":
			info.PreloadLibraries = strings.Join(a.Vals, ",") // the standby's shared_preload_libraries
		case "commit-age":
			// commit-age=<duration>: the primary committed the last transaction the standby
			// replayed this long before the next observation.
			age, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("%s: %v", d.Pos, err)
			}
			info.ReplayedCommitAge = age
		case "recovery":
			info.InRecovery = v != "false"
		case "timeline":
			var n int
			fmt.Sscan(v, &n)
			h.obs.snap.Primary.Info.Timeline, info.Timeline, info.HistoryTimeline = n, n, n
		case "history":
			// history=1:0/3000000 (a timeline and where it ended; repeat the key for more)
			h.obs.history = map[int]lsncheck.LSN{}
			for _, hv := range a.Vals {
				tli, end, _ := strings.Cut(hv, ":")
				var n int
				fmt.Sscan(tli, &n)
				l, err := lsncheck.ParseLSN(end)
				if err != nil {
					t.Fatalf("%s: %v", d.Pos, err)
				}
				h.obs.history[n] = l
			}
		case "reloaded":
			// reloaded: the standby's configuration was reloaded now (pg_conf_load_time()).
			info.ReloadedAt = h.now
		case "primary-started":
			h.obs.snap.Primary.Info.StartedAt = v
		case "horizon":
			var x uint32
			fmt.Sscan(v, &x)
			h.obs.snap.Physical.Xmin = lsncheck.XID(x)
		case "slot-wal-limit":
			// slot-wal-limit=<MB>: the standby's max_slot_wal_keep_size, its segments 16 MB.
			fmt.Sscan(v, &info.MaxSlotWALKeepMB)
			info.WALSegmentBytes = 16 << 20
		default:
			t.Fatalf("%s: unknown key %q", d.Pos, a.Key)
		}
	}
}

// pass prints each action and its outcome, the verdicts, and what changed in the journal.
func (h *harness) pass(apply bool) string {
	h.app.calls = nil
	var rep Report
	var err error
	if apply {
		rep, err = h.eng.RunOnce(context.Background())
	} else {
		rep, err = h.eng.Inspect(context.Background())
	}
	var b strings.Builder
	if err != nil {
		fmt.Fprintf(&b, "error (%s): %v\n", Classify(err), err)
	}
	if rep.WithoutPrimary != nil {
		fmt.Fprintf(&b, "without the primary: record %s old\n", time.Duration(rep.WithoutPrimary.AgeSeconds*float64(time.Second)))
	}
	if rep.Role == RolePrimary {
		b.WriteString("role: primary\n")
	}
	for _, c := range h.app.calls {
		fmt.Fprintf(&b, "call: %s\n", c)
	}
	for _, s := range rep.Slots {
		fmt.Fprintf(&b, "%s: %s %s", s.Name, s.Action, s.Code)
		if s.ExactCopy {
			b.WriteString(" (exact copy)") // made beside the method's own copies
		}
		if s.Error != "" {
			fmt.Fprintf(&b, " failed (%s): %s", s.ErrorClass, s.Error)
		}
		if s.Gate {
			if s.Verdict.Ready {
				b.WriteString(" | READY")
			} else {
				fmt.Fprintf(&b, " | NOT READY %v", s.Verdict.Reasons)
			}
		}
		fmt.Fprintf(&b, "\n  %s\n", s.Reason)
	}
	if apply && err == nil && rep.Role != RolePrimary {
		fmt.Fprintf(&b, "ready: %v\n", rep.Ready())
	}
	if j := h.printJournal(); j != h.journal {
		h.journal = j
		b.WriteString("journal:\n" + indent(j))
	}
	return b.String()
}

// crashAfterActions is a pass that dies (kill -9) right after its actions, before it records
// their results and the gate: what the journal and the gate record hold then is what the write-
// ahead put there.
func (h *harness) crashAfterActions() string {
	h.app.calls = nil
	actions := Plan(h.planInput())
	if _, err := h.eng.recordIntents(actions, h.obs.snap.Primary.Info.Timeline, h.obs.snap.Primary.Info.CurrentLSN); err != nil {
		return "error: " + err.Error() + "\n"
	}
	for _, a := range actions {
		if a.Changes() {
			h.eng.apply(context.Background(), h.app, a)
		}
	}
	h.app.Flush(context.Background(), method.View{})
	var b strings.Builder
	for _, c := range h.app.calls {
		fmt.Fprintf(&b, "call: %s\n", c)
	}
	if j := h.printJournal(); j != h.journal {
		h.journal = j
		b.WriteString("journal:\n" + indent(j))
	}
	return b.String()
}

func (h *harness) planInput() PlanInput {
	e := h.eng
	return PlanInput{Primary: h.obs.snap.Primary, Standby: h.obs.snap.Standby, Journal: e.journal, Select: e.cfg.Select,
		Traits: h.app.traits, Native: e.cfg.Native, AdvanceStep: e.cfg.AdvanceStep, Now: h.now,
		Recopy: e.mem.recopy, Copies: e.mem.copies, MaxCopies: e.cfg.Statefile.MaxAttempts, Failing: e.backoffs(true), Prepared: h.obs.snap.Prepared}
}

func (h *harness) plan() string {
	in := h.planInput()
	var b strings.Builder
	for _, a := range Plan(in) {
		fmt.Fprintf(&b, "%s %s %s", a.Slot, a.Kind, a.Code)
		if a.Kind == KindAdvance {
			fmt.Fprintf(&b, " target=%s", a.Target)
		}
		if a.Rebase {
			b.WriteString(" rebase")
		}
		fmt.Fprintf(&b, "\n  %s\n", a.Reason)
	}
	return b.String()
}

func (h *harness) printJournal() string {
	var b strings.Builder
	j := h.eng.journal
	for _, name := range sortedKeys(j.Slots) {
		ent := j.Slots[name]
		if _, ok := h.ids[ent.Incarnation]; !ok {
			h.ids[ent.Incarnation] = len(h.ids) + 1
		}
		fmt.Fprintf(&b, "%s incarnation=#%d last_primary=%s/%s/%d", name, h.ids[ent.Incarnation], ent.Primary.RestartLSN, ent.Primary.ConfirmedFlush, ent.Primary.CatalogXmin)
		if ent.WALVerified {
			b.WriteString(" wal_verified")
		}
		if ent.Method == string(topology.MethodStatefile) && h.eng.method != topology.MethodStatefile {
			fmt.Fprintf(&b, " made_by=%s", ent.Method) // beside the method in force (--exact-copy-after)
		}
		if ent.TwoPhaseFrom != 0 {
			fmt.Fprintf(&b, " two_phase(seen=%v pending=%v settled_at=%s)", ent.TwoPhaseSeen, ent.TwoPhasePending, ent.TwoPhaseSettledAt)
		}
		if ent.HorizonSeenAt != 0 {
			fmt.Fprintf(&b, " horizon_seen_at=%s", ent.HorizonSeenAt)
		}
		if ent.ScratchAt != 0 {
			fmt.Fprintf(&b, " scratch_at=%s", ent.ScratchAt)
		}
		if ent.OtherWriter != "" {
			b.WriteString(" other_writer")
		}
		b.WriteString("\n")
	}
	for _, name := range sortedKeys(j.ServerCopies) {
		fmt.Fprintf(&b, "%s server's copy horizon_seen_at=%s\n", name, j.ServerCopies[name])
	}
	if g := j.Gate; g != nil {
		fmt.Fprintf(&b, "gate record at +%s:", g.ObservedAt.Sub(scriptEpoch))
		for _, name := range sortedKeys(g.Slots) {
			fmt.Fprintf(&b, " %s=%v", name, map[bool]string{true: "READY", false: "NOT READY"}[g.Slots[name].Ready])
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (h *harness) printMemory() string {
	var b strings.Builder
	m := h.eng.mem
	for _, name := range sortedKeys(m.failures) {
		f := m.failures[name]
		fmt.Fprintf(&b, "backoff %s: %d failures, retry at +%s\n", name, f.count, f.retryAt.Sub(h.now))
	}
	for _, name := range sortedKeys(m.copies) {
		fmt.Fprintf(&b, "copies %s: %d\n", name, m.copies[name])
	}
	for _, name := range sortedKeys(m.recopy) {
		fmt.Fprintf(&b, "recopy %s: %s\n", name, m.recopy[name])
	}
	for _, name := range sortedKeys(m.watched) {
		fmt.Fprintf(&b, "watched %s\n", name)
	}
	for _, name := range sortedKeys(m.changedBy) {
		fmt.Fprintf(&b, "changed under slotsync %s: %d\n", name, m.changedBy[name])
	}
	if b.Len() == 0 {
		return "empty\n"
	}
	return b.String()
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = "  " + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// upstreamOf reads primary-demoted's arguments: by default the standby's own primary, demoted,
// following no one, with the WAL the standby has, and the standby streaming from it.
func (h *harness) upstreamOf(t *testing.T, d *datadriven.TestData) UpstreamFacts {
	sb := h.obs.snap.Standby.Info
	f := UpstreamFacts{Reached: topology.NodeInfo{SystemID: sb.SystemID, StartedAt: "demoted", InRecovery: true, ReplayLSN: sb.WALEnd(),
		HistoryTimeline: sb.HistoryTimeline, CanReadAllSettings: true}, StandbyStreamsFromIt: true}
	for _, a := range d.CmdArgs {
		switch a.Key {
		case "wal":
			l, err := lsncheck.ParseLSN(a.Vals[0])
			if err != nil {
				t.Fatal(err)
			}
			f.Reached.ReplayLSN = l
		case "follows-other":
			f.Reached.ReceiverStatus = "streaming"
		case "upstream-configured":
			f.Reached.PrimaryConninfo = "host=elsewhere"
		case "standby-from-other":
			f.StandbyStreamsFromIt = false
		case "itself":
			f.Reached.StartedAt = sb.StartedAt
		case "other-cluster":
			f.Reached.SystemID = "another"
		default:
			t.Fatalf("primary-demoted: unknown argument %q", a.Key)
		}
	}
	return f
}
