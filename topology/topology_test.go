package topology

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
)

func healthy() (NodeInfo, NodeInfo, PhysicalSlot) {
	p := NodeInfo{SystemID: "7", VersionNum: 160004, WALLevel: "logical", CanReadAllStats: true}
	s := NodeInfo{SystemID: "7", VersionNum: 160004, InRecovery: true, WALLevel: "logical", HotStandbyFeedback: true, PrimarySlotName: "sb", CanReplicate: true,
		CanReadAllStats: true, CanListWAL: true}
	return p, s, PhysicalSlot{Exists: true, Active: true}
}

func TestVerify(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(p, s *NodeInfo, ph *PhysicalSlot)
		check  string // the failed check, "" for none
		fixHas string
	}{
		{"healthy pair", func(p, s *NodeInfo, ph *PhysicalSlot) {}, "", ""},
		{"another cluster", func(p, s *NodeInfo, ph *PhysicalSlot) { s.SystemID = "8" }, "system_identifier", "its own physical standby"},
		{"majors differ", func(p, s *NodeInfo, ph *PhysicalSlot) { s.VersionNum = 170000 }, "major_version", "same major"},
		{"primary is a standby", func(p, s *NodeInfo, ph *PhysicalSlot) { p.InRecovery = true }, "primary_role", "read-write primary"},
		{"standby of another cluster not in recovery", func(p, s *NodeInfo, ph *PhysicalSlot) { s.InRecovery, s.SystemID = false, "9" }, "standby_role", "physical standby"},
		{"wal_level replica", func(p, s *NodeInfo, ph *PhysicalSlot) { p.WALLevel = "replica" }, "wal_level", "wal_level = logical"},
		{"no primary_slot_name", func(p, s *NodeInfo, ph *PhysicalSlot) { s.PrimarySlotName = "" }, "primary_slot_name", "pg_create_physical_replication_slot"},
		{"physical slot missing", func(p, s *NodeInfo, ph *PhysicalSlot) { ph.Exists = false }, "physical_slot", "pg_create_physical_replication_slot('sb')"},
		{"hot_standby_feedback off", func(p, s *NodeInfo, ph *PhysicalSlot) { s.HotStandbyFeedback = false }, "hot_standby_feedback", "hot_standby_feedback = on"},
		{"sql method: standby wal_level replica", func(p, s *NodeInfo, ph *PhysicalSlot) { s.WALLevel = "replica" }, "wal_level", "restart the standby"},
		{"sql method: no REPLICATION", func(p, s *NodeInfo, ph *PhysicalSlot) { s.CanReplicate = false }, "privileges", "REPLICATION"},
		{"physical slot inactive is not a config error", func(p, s *NodeInfo, ph *PhysicalSlot) { ph.Active = false }, "", ""},
	}
	for _, c := range cases {
		p, s, ph := healthy()
		c.mutate(&p, &s, &ph)
		err := Verify(p, s, ph, MethodSQL)
		if c.check == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var pe *PrereqError
		if !errors.As(err, &pe) {
			t.Errorf("%s: want a PrereqError, got %v", c.name, err)
			continue
		}
		found := false
		for _, pr := range pe.Problems {
			if pr.Check == c.check && strings.Contains(pr.Fix, c.fixHas) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: want check %s with fix containing %q, got %+v", c.name, c.check, c.fixHas, pe.Problems)
		}
	}
	p, s, ph := healthy()
	s.InRecovery = false
	if err := Verify(p, s, ph, MethodSQL); !errors.Is(err, ErrPromoted) {
		t.Errorf("promoted standby: %v", err)
	}
}

func TestWarnings(t *testing.T) {
	p, s, ph := healthy()
	s.ReceiverStatus = "streaming"
	if w := Warnings(p, s, ph); len(w) != 0 {
		t.Fatalf("healthy pair warned: %+v", w)
	}
	s.ReceiverStatus, ph.Active = "", false
	w := Warnings(p, s, ph)
	if len(w) != 2 || w[0].Check != "wal_receiver" || !strings.Contains(w[0].Issue, "no WAL receiver") || w[1].Check != "physical_slot_active" {
		t.Fatalf("cut-off standby: %+v", w)
	}
	s.ReceiverStatus, ph.Active, s.CanListWAL = "streaming", true, false
	if w := Warnings(p, s, ph); len(w) != 1 || w[0].Check != "wal_files" || !strings.Contains(w[0].Fix, "pg_monitor") {
		t.Fatalf("a role that may not list pg_wal: %+v", w)
	}
}

func TestChooseMethod(t *testing.T) {
	cases := []struct {
		major   int
		req     Method
		want    Method
		wantErr string
	}{
		{13, MethodAuto, MethodStatefile, ""},
		{15, MethodAuto, MethodStatefile, ""},
		{16, MethodAuto, MethodSQL, ""},
		{18, MethodAuto, MethodSQL, ""},
		{15, MethodSQL, "", "statefile"},
		{16, MethodNative, "", "17+"},
		{17, MethodNative, MethodNative, ""},
		{16, MethodStatefile, MethodStatefile, ""},
		{16, "bogus", "", "auto, statefile, sql or native"},
	}
	for _, c := range cases {
		got, err := ChooseMethod(NodeInfo{VersionNum: c.major * 10000}, c.req)
		if c.wantErr != "" {
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ChooseMethod(%d, %s): want config error with %q, got %v", c.major, c.req, c.wantErr, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ChooseMethod(%d, %s) = %s, %v; want %s", c.major, c.req, got, err, c.want)
		}
	}
	// On 17+ auto follows the standby: its own slot sync on means native.
	if m, _ := ChooseMethod(NodeInfo{VersionNum: 170000, SyncReplicationSlots: true}, MethodAuto); m != MethodNative {
		t.Errorf("17 with sync_replication_slots: %s", m)
	}
	if m, _ := ChooseMethod(NodeInfo{VersionNum: 160000, SyncReplicationSlots: true}, MethodAuto); m != MethodSQL {
		t.Errorf("16: %s", m)
	}
}

func TestNativeChecks(t *testing.T) {
	p, s, _ := healthy()
	p.VersionNum, s.VersionNum = 170004, 170004
	probs := methodProblems(s, MethodNative, false)
	if len(probs) != 2 || probs[0].Check != "sync_replication_slots" || probs[1].Check != "primary_conninfo_dbname" {
		t.Fatalf("native on a bare standby: %+v", probs)
	}
	s.HasConninfoDBName = true
	if probs := methodProblems(s, MethodNative, true); len(probs) != 0 {
		t.Fatalf("driven by slotsync with a dbname: %+v", probs)
	}
	// synchronized_standby_slots: this standby missing, another listed and down.
	w := NativeWarnings(p, s, []SyncedStandbySlot{{Name: "other", Exists: true, Active: false}})
	if len(w) != 2 || !strings.Contains(w[0].Issue, "inactive") || !strings.Contains(w[1].Fix, "'other,sb'") {
		t.Fatalf("warnings: %+v", w)
	}
	if w := NativeWarnings(p, s, []SyncedStandbySlot{{Name: "sb", Exists: true, Active: true}}); len(w) != 0 {
		t.Fatalf("a correct list warned: %+v", w)
	}
}

func TestParseEndpointNeverShowsPassword(t *testing.T) {
	for _, dsn := range []string{"postgres://u:s3cret@host:notaport/db", "host=h password=s3cret port=x"} {
		_, err := ParseEndpoint("primary", dsn, "")
		if err == nil {
			t.Fatalf("%q parsed", dsn)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("error shows the password: %v", err)
		}
	}
	ep, err := ParseEndpoint("standby", "host=127.0.0.1 port=1 dbname=app password=s3cret", "")
	if err != nil || ep.Database() != "app" {
		t.Fatalf("%v %v", ep, err)
	}
	_, err = ep.Connect(context.Background(), "")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("connect error shows the password or succeeded: %v", err)
	}
}

func TestSlotColumnsPerVersion(t *testing.T) {
	for v, want := range map[int][]string{
		130000: {"wal_status", "false"},
		140000: {"two_phase"},
		160000: {"conflicting"},
		170000: {"invalidation_reason", "failover", "synced"},
	} {
		cols := strings.Join(slotColumns(v), ",")
		for _, w := range want {
			if !strings.Contains(cols, w) {
				t.Errorf("version %d: %q lacks %s", v, cols, w)
			}
		}
	}
	if strings.Contains(strings.Join(slotColumns(160000), ","), "synced") || strings.Contains(strings.Join(slotColumns(130000), ","), "two_phase") {
		t.Error("columns of newer versions asked of older ones")
	}
	if len(slotColumns(130000)) != len(slotColumns(180000)) {
		t.Error("column count differs between versions: the scan would break")
	}
}

// TestReadRealPair reads node info and slots from a real pair of every requested major.
func TestReadRealPair(t *testing.T) {
	pgtest.ForEachMajor(t, nil, func(t *testing.T, major int) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		pair := pgtest.StartPair(t, integration.Options{Major: major})
		if err := pair.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('s1', 'test_decoding')"); err != nil {
			t.Fatal(err)
		}
		if major >= 14 {
			if err := pair.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('s2', 'pgoutput', false, true)"); err != nil {
				t.Fatal(err)
			}
		}
		if err := pair.WaitCaughtUp(ctx); err != nil {
			t.Fatal(err)
		}
		// The primary through hostaddr, its host a name that does not resolve: the address is
		// dialled (TestHostaddrHonoured has the rest).
		pdsn := pair.Primary.DSN("")
		if m := regexp.MustCompile(`host=([0-9.]+) `).FindStringSubmatch(pdsn); m != nil {
			pdsn = strings.Replace(pdsn, m[0], "host=unresolvable.invalid hostaddr="+m[1]+" ", 1)
		}
		pep, _ := ParseEndpoint("primary", pdsn, "")
		sep, _ := ParseEndpoint("standby", pair.Standby.DSN(""), "")
		pc, err := pep.Connect(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close(ctx)
		sc, err := sep.Connect(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close(ctx)
		pi, err := ReadNodeInfo(ctx, pc)
		if err != nil {
			t.Fatal(err)
		}
		si, err := ReadNodeInfo(ctx, sc)
		if err != nil {
			t.Fatal(err)
		}
		if pi.Major() != major || si.Major() != major || pi.InRecovery || !si.InRecovery || pi.SystemID != si.SystemID || pi.SystemID == "" {
			t.Fatalf("node info: primary %+v standby %+v", pi, si)
		}
		// 11 keeps the recovery settings in recovery.conf: they are read from the WAL receiver,
		// whose conninfo names the replication pseudo-database.
		if si.PrimarySlotName != integration.PhysicalSlot || !si.HotStandbyFeedback || (!si.HasConninfoDBName && major >= 12) ||
			!strings.Contains(si.PrimaryConninfo, "host=127.0.0.1") || pi.CurrentLSN == 0 || si.ReplayLSN == 0 {
			t.Fatalf("standby settings: %+v", si)
		}
		if si.WALSegmentBytes != 16<<20 || si.MaxSlotWALKeepMB != -1 || si.WALKeepMB != 0 || !si.KeepsSlotWAL(1, si.WALEnd()) {
			t.Fatalf("the standby's WAL settings (defaults: 16 MB segments, no slot limit, no wal_keep_size): %+v", si)
		}
		ph, err := ReadPhysicalSlot(ctx, pc, si.PrimarySlotName)
		if err != nil || !ph.Exists || !ph.Active {
			t.Fatalf("physical slot: %+v %v", ph, err)
		}
		checkSeesPatroni(ctx, t, pair.Standby.DSN(""), sc, si)
		if err := Verify(pi, si, ph, MethodAuto); err != nil {
			t.Fatalf("a healthy pair fails verification: %v", err)
		}
		if w := Warnings(pi, si, ph); len(w) != 0 {
			t.Fatalf("a healthy pair has warnings: %+v", w)
		}
		if pi.Timeline != 1 || si.Timeline != 1 || CheckFollows(pi, si, ph) != nil {
			t.Fatalf("timelines: primary %d, standby %d: %v", pi.Timeline, si.Timeline, CheckFollows(pi, si, ph))
		}
		slots, err := LogicalSlots(ctx, pc, pi.VersionNum)
		if err != nil {
			t.Fatal(err)
		}
		s1 := slots["s1"]
		if s1.Plugin != "test_decoding" || s1.Database != "postgres" || !s1.Known() || s1.Invalidated || s1.TwoPhase {
			t.Fatalf("s1: %+v", s1)
		}
		if (s1.WALStatus != "reserved" && major >= 13) || !s1.WALAvailable() { // wal_status is 13+
			t.Fatalf("s1 WAL: %+v", s1)
		}
		if major >= 14 && !slots["s2"].TwoPhase {
			t.Fatalf("s2 two_phase: %+v", slots["s2"])
		}
		readSnapshotsReal(ctx, t, pair.Primary, pc, pi.VersionNum)
	})
}

// checkSeesPatroni: a node is Patroni's when a session of Patroni is on it, named "Patroni"
// before 4 and "Patroni heartbeat", "Patroni restapi" and the like from 4 (doctor's ha_manager
// row); si, read with no such session, is not.
func checkSeesPatroni(ctx context.Context, t *testing.T, dsn string, conn *pgx.Conn, si NodeInfo) {
	t.Helper()
	if si.ManagedByPatroni {
		t.Fatal("a node without Patroni's sessions is taken for Patroni's")
	}
	for _, name := range []string{"Patroni", "Patroni heartbeat"} {
		patroni, err := pgx.Connect(ctx, dsn+" application_name='"+name+"'")
		if err != nil {
			t.Fatal(err)
		}
		info, err := ReadNodeInfo(ctx, conn)
		patroni.Close(ctx)
		if err != nil || !info.ManagedByPatroni {
			t.Fatalf("with a session named %q: ManagedByPatroni %v, %v", name, info.ManagedByPatroni, err)
		}
	}
}

// readSnapshotsReal: once s1 has decoded past a running-xacts record, its restart_lsn is where
// decoding serialized a snapshot, and ReadSnapshots finds the file both ways (listing the
// directory, one stat per slot). On 19 the LSN's text is zero-padded and the file's name is not.
func readSnapshotsReal(ctx context.Context, t *testing.T, p *integration.Node, pc *pgx.Conn, versionNum int) {
	t.Helper()
	for _, q := range []string{"CREATE TABLE snap_t (i int)", "INSERT INTO snap_t VALUES (1)", "CHECKPOINT", "INSERT INTO snap_t VALUES (2)", "CHECKPOINT",
		"SELECT count(*) FROM pg_logical_slot_get_changes('s1', NULL, NULL)"} {
		if err := p.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, list := range []bool{false, versionNum >= 150000} { // pg_ls_logicalsnapdir() is 15+
		slots, err := LogicalSlots(ctx, pc, versionNum)
		if err != nil {
			t.Fatal(err)
		}
		if err := ReadSnapshots(ctx, pc, slots, list); err != nil {
			t.Fatal(err)
		}
		if s1 := slots["s1"]; s1.Snapshot != SnapshotPresent {
			var files string
			_ = p.QueryRow(ctx, "SELECT string_agg(name, ' ') FROM pg_ls_dir('pg_logical/snapshots') AS name", nil, &files)
			t.Fatalf("listing %v: s1's snapshot at %s not found (%v); the directory holds %s", list, s1.RestartLSN, s1.Snapshot, files)
		}
	}
}

func TestDoctor(t *testing.T) {
	p, s, ph := healthy()
	s.ReceiverStatus, s.MaxReplicationSlots, p.CanLogStandbySnapshot = "streaming", 10, true
	for _, c := range Doctor(DoctorInput{Primary: p, Standby: s, Physical: ph, Method: MethodSQL, PrimarySlots: 3}) {
		if !c.OK {
			t.Errorf("healthy pair: %+v", c)
		}
	}
	// The native method with sync_replication_slots off fails its row unless slotsync drives
	// the server's sync itself (--native-drive).
	p17, s17 := p, s
	p17.VersionNum, s17.VersionNum, s17.HasConninfoDBName = 170004, 170004, true
	for _, drive := range []bool{false, true} {
		for _, c := range Doctor(DoctorInput{Primary: p17, Standby: s17, Physical: ph, Method: MethodNative, Drive: drive, PrimarySlots: 1}) {
			if c.Name == "sync_replication_slots" && c.OK != drive {
				t.Errorf("native, driven %v: %+v", drive, c)
			}
		}
	}
	// On 16.0-16.3 the sql method refuses (a slot created there can be "consistent" mid-
	// transaction), naming the minor and the fix.
	p162, s162 := p, s
	p162.VersionNum, s162.VersionNum = 160002, 160002
	var minor *Check
	for _, c := range Doctor(DoctorInput{Primary: p162, Standby: s162, Physical: ph, Method: MethodSQL, PrimarySlots: 1}) {
		if c.Name == "minor_version" {
			minor = &c
		}
	}
	if minor == nil || minor.OK || !strings.Contains(minor.Problem, "16.2") || !strings.Contains(minor.Fix, "16.4") {
		t.Errorf("16.2 doctor: %+v", minor)
	}
	// The state-file method needs pg_read_binary_file, and pg_stat_file on the standby to see
	// each copy's decoding snapshot; CHECKPOINT is only advised.
	p15, s15 := p, s
	p15.VersionNum, s15.VersionNum = 150004, 150004
	bad := map[string]Check{}
	for _, c := range Doctor(DoctorInput{Primary: p15, Standby: s15, Physical: ph, Method: MethodStatefile, PrimarySlots: 3}) {
		if !c.OK {
			bad[c.Name] = c
		}
	}
	if len(bad) != 3 || bad["state_files"].Severity != "error" || bad["checkpoint"].Severity != "warning" || bad["decoding_snapshots"].Severity != "error" ||
		!strings.Contains(bad["state_files"].Fix, "pg_read_binary_file(text)") || !strings.Contains(bad["checkpoint"].Fix, "pg_checkpoint") {
		t.Errorf("statefile doctor: %+v", bad)
	}
	// Exact copies beside the sql method (--exact-copy-after) are state-file copies: the same
	// checks, which the sql method alone leaves out.
	p16, s16 := p15, s15
	p16.VersionNum, s16.VersionNum = 160004, 160004
	for _, exact := range []bool{false, true} {
		bad := map[string]bool{}
		for _, c := range Doctor(DoctorInput{Primary: p16, Standby: s16, Physical: ph, Method: MethodSQL, PrimarySlots: 3, ExactCopies: exact}) {
			bad[c.Name] = !c.OK
		}
		if bad["state_files"] != exact || bad["checkpoint"] != exact || bad["decoding_snapshots"] != exact {
			t.Errorf("sql method, exact copies %v: %+v", exact, bad)
		}
	}
}

// TestDoctorFailures: the checks a pair fails (their fixes named), and the native method's
// request of running-xacts records only when it drives the server's sync.
func TestDoctorFailures(t *testing.T) {
	p, s, ph := healthy()
	s.ReceiverStatus, s.MaxReplicationSlots, p.CanLogStandbySnapshot = "streaming", 10, true
	s.HotStandbyFeedback, s.MaxReplicationSlots, p.CanLogStandbySnapshot = false, 2, false
	failed := map[string]Check{}
	for _, c := range Doctor(DoctorInput{Primary: p, Standby: s, Physical: ph, Method: MethodSQL, PrimarySlots: 3, StandbySlots: 1}) {
		if !c.OK {
			failed[c.Name] = c
		}
	}
	if len(failed) != 3 {
		t.Fatalf("want 3 failed checks, got %+v", failed)
	}
	if c := failed["max_replication_slots"]; !strings.Contains(c.Fix, "max_replication_slots = 10") {
		t.Errorf("max_replication_slots fix: %+v", c)
	}
	if c := failed["standby_snapshot"]; c.Severity != "warning" || !strings.Contains(c.Fix, "GRANT EXECUTE") {
		t.Errorf("standby_snapshot: %+v", c)
	}
	if c := failed["hot_standby_feedback"]; c.Severity != "error" || !strings.Contains(c.Fix, "hot_standby_feedback = on") {
		t.Errorf("hot_standby_feedback: %+v", c)
	}
	// The native method asks the primary for running-xacts records only when it drives the
	// server's slot sync (--native-drive).
	pn, sn := p, s
	pn.VersionNum, sn.VersionNum = 170002, 170002
	for _, drive := range []bool{false, true} {
		warned := false
		for _, c := range Doctor(DoctorInput{Primary: pn, Standby: sn, Physical: ph, Method: MethodNative, Drive: drive, PrimarySlots: 3, StandbySlots: 1}) {
			warned = warned || c.Name == "standby_snapshot" && !c.OK
		}
		if warned != drive {
			t.Errorf("native, --native-drive %v: standby_snapshot warned %v", drive, warned)
		}
	}
}

// TestDoctorWarnings: PostgreSQL 18 invalidating idle copies; a slot WAL limit on the standby
// only; Patroni dropping copies.
func TestDoctorWarnings(t *testing.T) {
	p, s, ph := healthy()
	s.ReceiverStatus, s.MaxReplicationSlots, p.CanLogStandbySnapshot = "streaming", 10, true
	s.IdleSlotTimeout, s.ManagedByPatroni = "30", true
	s.MaxSlotWALKeepMB, p.MaxSlotWALKeepMB = 1024, -1 // a limit on the standby only
	warned := map[string]Check{}
	for _, c := range Doctor(DoctorInput{Primary: p, Standby: s, Physical: ph, Method: MethodSQL, PrimarySlots: 3}) {
		if !c.OK {
			warned[c.Name] = c
		}
	}
	if c := warned["idle_replication_slot_timeout"]; c.Severity != "warning" || !strings.Contains(c.Fix, "idle_replication_slot_timeout = 0") {
		t.Errorf("idle_replication_slot_timeout: %+v", c)
	}
	if c := warned["ha_manager"]; c.Severity != "warning" || !strings.Contains(c.Fix, "ignore_slots") {
		t.Errorf("ha_manager: %+v", c)
	}
	if c := warned["max_slot_wal_keep_size"]; c.Severity != "warning" || !strings.Contains(c.Fix, "max_slot_wal_keep_size = -1") ||
		!strings.Contains(c.Problem, "1024 MB on the standby (the primary: no limit)") {
		t.Errorf("max_slot_wal_keep_size: %+v", c)
	}
	if len(warned) != 3 {
		t.Errorf("want 3 warnings, got %+v", warned)
	}
}

func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{"host=h port=5432 password=pw1", "postgres://u:pw1@h:5432/db?sslmode=disable", "host='a b' password='p w'", "postgres://[::1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		_, err := ParseEndpoint("primary", dsn, "")
		// An error says what is wrong (a key, pgx's words for the problem) but never repeats a
		// value of the DSN, which may be a password.
		var ce *ConfigError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("not a configuration error: %v", err)
		}
		if err != nil {
			if w := LeaksFromDSN(ce.Problem, dsn); w != "" {
				t.Fatalf("the error repeats %q from the DSN: %v", w, err)
			}
		}
	})
}

// TestConnErrorOneLine: a failure to connect is one line, each distinct attempt once (TLS then
// plain failing alike is one failure), and names the database only when there is one.
func TestConnErrorOneLine(t *testing.T) {
	ep, err := ParseEndpoint("standby", "host=127.0.0.1 port=1 sslmode=prefer connect_timeout=2", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ep.Connect(context.Background(), "")
	if err == nil {
		t.Fatal("connected to port 1")
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\t") || strings.Count(msg, "dial error") != 1 || strings.Contains(msg, `database ""`) {
		t.Fatalf("%q", msg)
	}
	if !strings.HasPrefix(msg, "connect to standby: ") {
		t.Fatalf("%q", msg)
	}
}

// TestHostaddrHonoured: hostaddr is dialled, host still names the server for TLS and the
// password file (as libpq does); what cannot be honoured is refused by name, never dropped.
func TestHostaddrHonoured(t *testing.T) {
	ep, err := ParseEndpoint("primary", "host=db.example hostaddr=127.0.0.2 port=5433 sslmode=require", "")
	if err != nil {
		t.Fatal(err)
	}
	if ep.cfg.Host != "127.0.0.2" || ep.cfg.Port != 5433 || ep.cfg.TLSConfig == nil || ep.cfg.TLSConfig.ServerName != "db.example" {
		t.Fatalf("host %q port %d tls %+v", ep.cfg.Host, ep.cfg.Port, ep.cfg.TLSConfig)
	}
	if _, ok := ep.cfg.RuntimeParams["hostaddr"]; ok {
		t.Fatal("hostaddr would be sent to the server as a setting")
	}
	prefer, err := ParseEndpoint("primary", "host=db.example hostaddr=::1 sslmode=prefer", "")
	if err != nil || prefer.cfg.Host != "::1" || len(prefer.cfg.Fallbacks) == 0 || prefer.cfg.Fallbacks[0].Host != "::1" {
		t.Fatalf("sslmode=prefer tries TLS and plain, both at hostaddr: %v %+v", err, prefer)
	}
	for _, dsn := range []string{"host=a,b hostaddr=127.0.0.1,127.0.0.2", "host=a hostaddr=db.example"} {
		_, err := ParseEndpoint("standby", dsn, "")
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "hostaddr") {
			t.Errorf("%q: want a configuration error naming hostaddr, got %v", dsn, err)
		}
	}
}

// TestClientOnlyKeywordsNeverReachTheServer: libpq keywords pgx does not know (Patroni writes
// gssencmode=prefer into every primary_conninfo) are dropped or refused, never sent to the
// server as settings, which it would refuse with FATAL.
func TestClientOnlyKeywordsNeverReachTheServer(t *testing.T) {
	patroni := "dbname=postgres user=replicator passfile=/tmp/pgpass host=10.0.0.1 port=5432 sslmode=prefer application_name=n2 " +
		"gssencmode=prefer channel_binding=prefer target_session_attrs=read-write keepalives=1 keepalives_idle=5 " +
		"keepalives_interval=2 keepalives_count=3 tcp_user_timeout=1000 fallback_application_name=x"
	ep, err := ParseEndpoint("primary", patroni, "")
	if err != nil {
		t.Fatal(err)
	}
	for k := range ep.cfg.RuntimeParams {
		if k != "application_name" {
			t.Errorf("%s would be sent to the server as a setting", k)
		}
	}
	if ep.cfg.RuntimeParams["application_name"] != "n2" || ep.User() != "replicator" {
		t.Errorf("application_name %q, user %q", ep.cfg.RuntimeParams["application_name"], ep.User())
	}
	for dsn, key := range map[string]string{
		"host=h gssencmode=require":               "gssencmode",
		"host=h requirepeer=postgres":             "requirepeer",
		"host=h sslcrl=/x.crl":                    "sslcrl",
		"host=h ssl_min_protocol_version=TLSv1.3": "ssl_min_protocol_version",
	} {
		_, err := ParseEndpoint("primary", dsn, "")
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), key) || ce.Field != "primary DSN" {
			t.Errorf("%q: want a configuration error naming %s, got %v", dsn, key, err)
		}
	}
	ep, err = ParseEndpoint("primary", "host=h ssl_min_protocol_version=TLSv1.2", "")
	if err != nil || len(ep.cfg.RuntimeParams) != 1 {
		t.Errorf("TLSv1.2 minimum is what Go gives anyway: %v %v", err, ep.cfg.RuntimeParams)
	}
	ep.SetUser("slotsync", "pw")
	if ep.User() != "slotsync" || ep.cfg.Password != "pw" {
		t.Errorf("SetUser: %q", ep.User())
	}
}

func TestWALAvailable(t *testing.T) {
	for status, want := range map[string]bool{"reserved": true, "extended": true, "": true, "unreserved": false, "lost": false} {
		s := Slot{WALStatus: status}
		s.RestartLSN = 0x100
		if got := s.WALAvailable(); got != want {
			t.Errorf("wal_status %q: available %v, want %v", status, got, want)
		}
	}
}

// TestCheckFollows: the standby follows this primary unless it receives another timeline, or
// streams while its slot here is idle; what cannot be seen proves nothing.
func TestCheckFollows(t *testing.T) {
	prim := NodeInfo{Timeline: 2}
	streaming := NodeInfo{Timeline: 2, ReceiverStatus: "streaming", PrimarySlotName: "s"}
	active := PhysicalSlot{Exists: true, Active: true}
	cases := []struct {
		name    string
		standby NodeInfo
		phys    PhysicalSlot
		follows bool
	}{
		{"same timeline, slot in use", streaming, active, true},
		{"another timeline", NodeInfo{Timeline: 1, ReceiverStatus: "streaming"}, active, false},
		{"streams, slot idle here", streaming, PhysicalSlot{Exists: true}, false},
		{"not streaming, slot idle", NodeInfo{Timeline: 0, ReceiverStatus: ""}, PhysicalSlot{Exists: true}, true},
		{"timeline not visible to the role", NodeInfo{ReceiverStatus: "streaming"}, active, true},
	}
	for _, c := range cases {
		err := CheckFollows(prim, c.standby, c.phys)
		var nf *NotFollowingError
		if (err == nil) != c.follows || (err != nil && !errors.As(err, &nf)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
