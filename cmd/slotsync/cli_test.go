package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/internal/atomicfile"
	"github.com/slotsync/slotsync/lsncheck"
	slotsync "github.com/slotsync/slotsync/sync"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "slotsync-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "slotsync")
	// nethttpomithttp2 as the release builds it, so the daemon's endpoints are tested as they ship
	// (the man page stays: its test runs this binary).
	if out, err := exec.Command("go", "build", "-tags", "nethttpomithttp2", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build slotsync: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// slotsyncCmd runs the real binary with a clean SLOTSYNC_* environment plus env.
func slotsyncCmd(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLOTSYNC_") && !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

// slotsyncRun runs the app in this process, as main does, with the SLOTSYNC_* and PG*
// variables of the test's environment unset for the test: usage and configuration errors need
// no binary.
func slotsyncRun(t *testing.T, args ...string) result {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "SLOTSYNC_") || strings.HasPrefix(k, "PG") {
			t.Setenv(k, v) // restored when the test ends
			os.Unsetenv(k)
		}
	}
	var out, errb bytes.Buffer
	code := run(append([]string{"slotsync"}, args...), &out, &errb)
	return result{out.String(), errb.String(), code}
}

func TestUsageErrorsExit3AndNameTheFix(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"check"}, "--standby"},
		{[]string{"check", "--bogus"}, "not defined"},
		{[]string{"check", "--standby", "host=x", "--primary", "host=y", "--method", "magic"}, "auto, statefile, sql or native"},
		{[]string{"check", "--standby", "host=x", "--primary", "host=y", "--slots", "[bad"}, "globs"},
		{[]string{"check", "--standby", "host=x", "--primary", "host=y", "--log-level", "loud"}, "--log-level"},
		{[]string{"run", "--standby", "host=x", "--primary", "host=y"}, "--state-dir"},
		{[]string{"run", "--standby", "host=x", "--primary", "host=y", "--state-dir", "/tmp", "--restart", "bounce"}, "pg_ctl, command or never"},
		{[]string{"run", "--standby", "host=x", "--primary", "host=y", "--state-dir", "/tmp", "--restart", "command"}, "--stop-command"},
		{[]string{"status", "--standby", "host=x", "--standby-password-file", missing}, "password file"},
		{[]string{"doctor", "--standby", "host=x", "--primary", "postgres://u:pw@h:notaport/db"}, "cannot be parsed: invalid port"},
		{[]string{"check", "--standby", "host=x", "port=1"}, `unexpected argument "port=1"`},
		{[]string{"run", "--standby", "host=x", "extra"}, `unexpected argument "extra"`},
		{[]string{"help", "run", "extra"}, `unexpected argument "extra": help takes one command`},
		{[]string{"run", "--standby", "host=x", "--state-dir", "/tmp", "--json"}, "--json prints the report of run --once"},
		{[]string{"run", "--standby", "host=x", "--state-dir", "/tmp", "--once", "--listen", "127.0.0.1:9"}, "run --once makes one pass and serves nothing"},
		{[]string{"version", "extra"}, `"extra": version takes flags only`},
		{[]string{"chekc"}, `unknown command "chekc"`},
		// Input is refused, not replaced by a default.
		{[]string{"run", "--standby", "host=x", "--state-dir", "/tmp", "--workers", "0"}, "--workers 0: give 1 to 64"},
		{[]string{"run", "--standby", "host=x", "--state-dir", "/tmp", "--workers", "100000"}, "--workers 100000: give 1 to 64"},
		{[]string{"run", "--standby", "host=x", "--state-dir", "/tmp", "--advance-step", "1"}, "give a size from 1MB to 64GB"},
		{[]string{"check", "--standby", "host=x", "--timeout", "1ns"}, "--timeout 1ns: give a duration between"},
		{[]string{"run", "--standby", "host=x", "--state-dir", "/tmp", "--interval", "-1s"}, "--interval -1s: give a positive duration"},
		{[]string{"run", "--standby", "host=x", "--state-dir", "/tmp", "--slot-timeout", "0s"}, "--slot-timeout 0s"},
		{[]string{"run", "--standby", "host=x", "--state-dir", "/tmp", "--advance-step", "0MB"}, "--advance-step"},
		{[]string{"run", "--standby", "host=x", "--state-dir", "/tmp", "--watch-interval", "-5ms"}, "--watch-interval -5ms"},
		{[]string{"run", "--standby", "host=x", "--state-dir", "/tmp", "--exact-copy-after", "-1m"}, "--exact-copy-after -1m0s"},
		{[]string{"run", "--standby", "host=x", "--state-dir", "/tmp", "--exact-copy-after", "10m"}, "give --standby-data-dir"},
		{[]string{"run", "--standby", "host=x", "--state-dir", "/tmp", "--exact-copy-after", "10m", "--standby-data-dir", "/srv/pg", "--restart", "never"}, "give --restart pg_ctl"},
		{[]string{"run", "--standby", "host=x", "--state-dir", "/tmp", "--exact-copy-after", "10m", "--method", "statefile"}, "leave out --exact-copy-after"},
		{[]string{"check", "--standby", "host=x", "--timeout", "0s"}, "--timeout 0s"},
		{[]string{"drill", "--local", "--primary", "host=y"}, "give either --local or --primary and --standby"},
		{[]string{"check", "--standby", "host=x", "--primary", "host=y gssencmode=require"}, "gssencmode=require"},
	}
	for _, c := range cases {
		r := slotsyncRun(t, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, want 3 with %q; stderr: %s", c.args, r.code, c.want, r.stderr)
		}
		// One line on stderr, never the whole help on stdout.
		if strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 || strings.Contains(r.stdout, "USAGE:") {
			t.Errorf("%v: a usage error must be one line on stderr; stdout %q, stderr %q", c.args, r.stdout, r.stderr)
		}
	}
	// --json prints JSON on stdout for a usage or configuration error too.
	for _, cmd := range []string{"check", "status", "doctor"} {
		r := slotsyncRun(t, cmd, "--standby", "host=x", "--method", "magic", "--json")
		var res struct {
			ExitCode int    `json:"exit_code"`
			Error    string `json:"error"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != exitUsage || res.ExitCode != exitUsage || !strings.Contains(res.Error, "magic") {
			t.Errorf("%s --json with a bad --method: exit %d, %v, %q", cmd, r.code, err, r.stdout)
		}
	}
	var v struct {
		GoVersion string `json:"go_version"`
	}
	if r := slotsyncRun(t, "version", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || v.GoVersion == "" {
		t.Errorf("version --json: %d %q", r.code, r.stdout)
	}
	if r := slotsyncRun(t, "version"); r.code != 0 || !strings.Contains(r.stdout, "slotsync ") {
		t.Errorf("version: %+v", r)
	}
}

func TestCannotConnectExits2WithoutPassword(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dsn := fmt.Sprintf("host=127.0.0.1 port=%d user=u password=hunter2secret connect_timeout=2", port)
	state := t.TempDir()
	for _, args := range [][]string{{"check"}, {"status"}, {"doctor"}, {"run", "--once", "--state-dir", state}} {
		cmd := strings.Join(args, " ")
		r := slotsyncCmd(t, nil, append(args, "--standby", dsn, "--primary", dsn, "--json")...)
		if r.code != exitConnect {
			t.Errorf("%s: exit %d, want 2: %s %s", cmd, r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, "hunter2secret") {
			t.Errorf("%s printed the password", cmd)
		}
		var res struct {
			ExitCode int    `json:"exit_code"`
			Error    string `json:"error"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.ExitCode != exitConnect || res.Error == "" {
			t.Errorf("%s --json: %v %+v\n%s", cmd, err, res, r.stdout)
		}
	}
	// The secret may also come from a file; it never shows either.
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("filesecret99\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := slotsyncCmd(t, []string{"SLOTSYNC_STANDBY=" + dsn, "SLOTSYNC_PRIMARY=" + dsn, "SLOTSYNC_PRIMARY_PASSWORD_FILE=" + pw}, "check")
	if r.code != exitConnect || strings.Contains(r.stdout+r.stderr, "filesecret99") {
		t.Errorf("env and password file: %+v", r)
	}
}

// checkJSON is what check --json prints: the gate's one answer type, decoded as every reader of
// it does (the Patroni hook's test, the fault explorer's oracle).
type checkJSON = slotsync.Answer

func parseCheck(t *testing.T, r result) checkJSON {
	t.Helper()
	var c checkJSON
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields() // every field printed is one of the answer type's
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("check --json output is not JSON: %v\n%s", err, r.stdout)
	}
	if c.ExitCode != r.code {
		t.Fatalf("exit_code %d in JSON, process exited %d", c.ExitCode, r.code)
	}
	return c
}

func hasReason(c checkJSON, slot, reason string) bool {
	for _, s := range c.Slots {
		if s.Name == slot {
			for _, r := range s.Verdict.Reasons {
				if string(r) == reason {
					return true
				}
			}
		}
	}
	return false
}

// TestCommandsAgainstARealPair drives check, run --once, status and doctor on real pairs.
func TestCommandsAgainstARealPair(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 17, 18, 19}, func(t *testing.T, major int) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		pair := pgtest.StartPair(t, integration.Options{Major: major})
		pgtest.Must(t, pair.Primary.Exec(ctx, "CREATE DATABASE app"))
		pgtest.Must(t, pair.Primary.ExecDB(ctx, "app", "CREATE TABLE t (id int)"))
		pgtest.Must(t, pair.Primary.ExecDB(ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		pgtest.Must(t, pair.WaitCaughtUp(ctx))
		state := t.TempDir()
		cp := cliPair{t: t, ctx: ctx, pair: pair, state: state}
		args := cp.args

		if r := slotsyncCmd(t, nil, args("doctor")...); r.code != 0 || !strings.Contains(r.stdout, "OK: nothing blocks") {
			t.Fatalf("doctor on a healthy pair: %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		// The same flags on every node: beside the primary, doctor has nothing to check (exit 0).
		if r := slotsyncCmd(t, nil, "doctor", "--standby", pair.Primary.DSN("postgres")); r.code != 0 || !strings.Contains(r.stdout, "this node is the primary") {
			t.Fatalf("doctor beside the primary: %d\n%s%s", r.code, r.stdout, r.stderr)
		}

		// No copy yet: not ready, the slot named with the reason.
		r := slotsyncCmd(t, nil, args("check", "--json")...)
		c := parseCheck(t, r)
		if r.code != exitNotReady || c.Ready || len(c.NotReady) != 1 || c.NotReady[0] != "cdc" || !hasReason(c, "cdc", "missing") {
			t.Fatalf("check before sync: %d %+v", r.code, c)
		}
		if c.Major != major || c.Primary.SystemID == "" || c.Slots[0].Database != "app" || c.Slots[0].Primary == nil {
			t.Fatalf("check JSON fields: %+v", c)
		}
		if r := slotsyncCmd(t, nil, args("check")...); r.code != exitNotReady || !strings.Contains(r.stdout, "NOT READY") || !strings.Contains(r.stdout, "cdc") {
			t.Fatalf("check table: %d\n%s", r.code, r.stdout)
		}

		// One pass makes the copy; it starts ahead of the consumer: still not ready.
		if r := slotsyncCmd(t, nil, args("run", "--once", "--state-dir", state)...); r.code != 0 {
			t.Fatalf("run --once: %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		c = parseCheck(t, slotsyncCmd(t, nil, args("check", "--json")...))
		if c.Ready || !hasReason(c, "cdc", "copy_confirmed_flush_ahead") {
			t.Fatalf("check after creation: %+v", c)
		}
		// status shows a NOT READY copy and exits 0, and its JSON's exit_code is its own; so is
		// run --once --json's, in the check schema.
		r = slotsyncCmd(t, nil, args("status", "--json")...)
		if c = parseCheck(t, r); r.code != 0 || c.ExitCode != 0 || c.Ready || len(c.Slots) != 1 {
			t.Fatalf("status --json of a NOT READY copy: %d %+v", r.code, c)
		}
		r = slotsyncCmd(t, nil, args("run", "--once", "--json", "--state-dir", state)...)
		if c = parseCheck(t, r); r.code != 0 || c.ExitCode != 0 || len(c.Slots) != 1 || c.Slots[0].Name != "cdc" {
			t.Fatalf("run --once --json: %d %+v", r.code, c)
		}

		cp.untilReady()
		cp.redeliveryWindow()
		cp.selectionAndStatus()
		cp.urlAndPGVariables()
		cp.brokenPrerequisite()

		cp.withoutPrimary()
	})
}

// cliPair is a real pair, with a slot cdc on the primary, and slotsync's state directory, for
// TestCommandsAgainstARealPair.
type cliPair struct {
	t     *testing.T
	ctx   context.Context
	pair  *integration.Pair
	state string
}

// args is a command's arguments, naming the pair's primary and standby, then extra.
func (cp cliPair) args(cmd string, extra ...string) []string {
	return append([]string{cmd, "--primary", cp.pair.Primary.DSN("postgres"), "--standby", cp.pair.Standby.DSN("postgres")}, extra...)
}

// untilReady: the consumer moves past the copy; passes make it ready. The primary is discovered
// from the standby's primary_conninfo when --primary is not given.
func (cp cliPair) untilReady() {
	cp.t.Helper()
	var r result
	deadline := time.Now().Add(90 * time.Second)
	for {
		pgtest.Must(cp.t, cp.pair.Primary.ExecDB(cp.ctx, "app", "INSERT INTO t VALUES (1)"))
		pgtest.Must(cp.t, cp.pair.Primary.Exec(cp.ctx, "SELECT pg_log_standby_snapshot()"))
		pgtest.Must(cp.t, cp.pair.Primary.ExecDB(cp.ctx, "app", "SELECT count(*) FROM pg_logical_slot_get_changes('cdc', NULL, NULL)"))
		pgtest.Must(cp.t, cp.pair.WaitCaughtUp(cp.ctx))
		slotsyncCmd(cp.t, nil, cp.args("run", "--once", "--state-dir", cp.state)...)
		r = slotsyncCmd(cp.t, []string{"SLOTSYNC_STANDBY=" + cp.pair.Standby.DSN("postgres")}, "check", "--json")
		if r.code == 0 {
			break
		}
		if time.Now().After(deadline) {
			cp.t.Fatalf("never ready: %s", r.stdout)
		}
	}
	if c := parseCheck(cp.t, r); !c.Ready || len(c.NotReady) != 0 || !c.Slots[0].Verdict.Ready {
		cp.t.Fatalf("ready check: %+v", c)
	}
}

// redeliveryWindow: the consumer confirms more, no pass follows: the READY copy is behind it, and
// the answer says what a consumer resuming from the slot's position would receive again, from
// the copy's confirmed_flush to the consumer's.
func (cp cliPair) redeliveryWindow() {
	cp.t.Helper()
	pgtest.Must(cp.t, cp.pair.Primary.ExecDB(cp.ctx, "app", "INSERT INTO t SELECT generate_series(1, 100)"))
	pgtest.Must(cp.t, cp.pair.Primary.ExecDB(cp.ctx, "app", "SELECT count(*) FROM pg_logical_slot_get_changes('cdc', NULL, NULL)"))
	pgtest.Must(cp.t, cp.pair.WaitCaughtUp(cp.ctx))
	r := slotsyncCmd(cp.t, nil, cp.args("check", "--json", "--summary", "--state-dir", cp.state)...)
	c := parseCheck(cp.t, r)
	var primaryConfirmed string
	pgtest.Must(cp.t, cp.pair.Primary.QueryRow(cp.ctx, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'cdc'", nil, &primaryConfirmed))
	confirmed, err := lsncheck.ParseLSN(primaryConfirmed) // 19 pads the text ("0/01B90A78")
	pgtest.Must(cp.t, err)
	if !c.Ready || len(c.Redelivery) != 1 || c.Redelivery[0].Slot != "cdc" || c.Redelivery[0].To != confirmed ||
		c.Redelivery[0].Bytes != int64(c.Redelivery[0].To-c.Redelivery[0].From) || c.Redelivery[0].Bytes <= 0 || c.Redelivery[0].AtLeast {
		cp.t.Fatalf("the redelivery window of a READY copy behind its consumer (confirmed %s): %+v\n%s", primaryConfirmed, c.Redelivery, r.stdout)
	}
	if r := slotsyncCmd(cp.t, nil, cp.args("check", "--state-dir", cp.state)...); !strings.Contains(r.stdout, "redelivery window of cdc") {
		cp.t.Fatalf("check does not say what may be received again:\n%s", r.stdout)
	}
	if r := slotsyncCmd(cp.t, nil, cp.args("run", "--once", "--state-dir", cp.state)...); r.code != 0 { // the copy catches up
		cp.t.Fatalf("run --once: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// selectionAndStatus: a selection that matches none of the primary's slots is no READY; status
// shows the copy.
func (cp cliPair) selectionAndStatus() {
	cp.t.Helper()
	// A selection that matches none of the primary's slots (a typo, or every slot ignored)
	// is no READY: the gate would protect nothing (operators review round 4, finding 3).
	for _, sel := range [][]string{{"--slots", "nomatch*"}, {"--ignore-slots", "c*"}, {"--plugins", "wal2json"}} {
		r := slotsyncCmd(cp.t, nil, cp.args("check", append(sel, "--json", "--state-dir", cp.state)...)...)
		if c := parseCheck(cp.t, r); r.code != exitNotReady || c.Ready || !strings.Contains(c.NothingSelected, "cdc") {
			cp.t.Fatalf("check %v: want NOT READY naming the unselected slot, got %d %+v", sel, r.code, c)
		}
		if r := slotsyncCmd(cp.t, nil, cp.args("doctor", sel...)...); r.code != exitNotReady || !strings.Contains(r.stdout, "selection") {
			cp.t.Fatalf("doctor %v: want the selection check failed, got %d\n%s", sel, r.code, r.stdout)
		}
	}
	if r := slotsyncCmd(cp.t, nil, cp.args("status", "--state-dir", cp.state)...); r.code != 0 || !strings.Contains(r.stdout, "cdc") || !strings.Contains(r.stdout, "RETAINED") {
		cp.t.Fatalf("status: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if c := parseCheck(cp.t, slotsyncCmd(cp.t, nil, cp.args("status", "--json")...)); len(c.Slots) != 1 {
		cp.t.Fatalf("status --json: %+v", c)
	}
}

// urlAndPGVariables: DSNs in URL form, and libpq's PG* variables filling what a DSN leaves out.
func (cp cliPair) urlAndPGVariables() {
	cp.t.Helper()
	paddr, err := cp.pair.Primary.Addr(cp.ctx)
	pgtest.Must(cp.t, err)
	saddr, err := cp.pair.Standby.Addr(cp.ctx)
	pgtest.Must(cp.t, err)
	sport := saddr[strings.LastIndex(saddr, ":")+1:]
	r := slotsyncCmd(cp.t, []string{"PGUSER=postgres", "PGPORT=" + sport, "PGSSLMODE=disable", "PGDATABASE=postgres"},
		"check", "--primary", "postgres://postgres@"+paddr+"/postgres?sslmode=disable", "--standby", "host=127.0.0.1", "--json")
	if c := parseCheck(cp.t, r); r.code != 0 || !c.Ready {
		cp.t.Fatalf("URL and PG* variables: %d %+v %s", r.code, c, r.stderr)
	}
}

// brokenPrerequisite: doctor exits 1 and prints the line that fixes it; check refuses.
func (cp cliPair) brokenPrerequisite() {
	cp.t.Helper()
	pgtest.Must(cp.t, cp.pair.Standby.Exec(cp.ctx, "ALTER SYSTEM SET hot_standby_feedback = off"))
	pgtest.Must(cp.t, cp.pair.Standby.Exec(cp.ctx, "SELECT pg_reload_conf()"))
	time.Sleep(300 * time.Millisecond)
	if r := slotsyncCmd(cp.t, nil, cp.args("doctor")...); r.code != exitNotReady || !strings.Contains(r.stdout, "ALTER SYSTEM SET hot_standby_feedback = on") {
		cp.t.Fatalf("doctor with hot_standby_feedback off: %d\n%s", r.code, r.stdout)
	}
	if r := slotsyncCmd(cp.t, nil, cp.args("check")...); r.code != exitUsage || !strings.Contains(r.stdout+r.stderr, "hot_standby_feedback = on") {
		cp.t.Fatalf("check with a failed prerequisite: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	pgtest.Must(cp.t, cp.pair.Standby.Exec(cp.ctx, "ALTER SYSTEM RESET hot_standby_feedback"))
	pgtest.Must(cp.t, cp.pair.Standby.Exec(cp.ctx, "SELECT pg_reload_conf()"))
	time.Sleep(300 * time.Millisecond)
}

// withoutPrimary (rule 8): the gate without the primary, a second slot's copy not ready yet.
func (cp cliPair) withoutPrimary() {
	cp.t.Helper()
	pgtest.Must(cp.t, cp.pair.Primary.ExecDB(cp.ctx, "app", "SELECT pg_create_logical_replication_slot('late', 'test_decoding')"))
	pgtest.Must(cp.t, cp.pair.WaitCaughtUp(cp.ctx))
	if r := slotsyncCmd(cp.t, nil, cp.args("run", "--once", "--state-dir", cp.state)...); r.code != 0 {
		cp.t.Fatalf("run --once: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if c := parseCheck(cp.t, slotsyncCmd(cp.t, nil, cp.args("check", "--json")...)); c.Ready || len(c.NotReady) != 1 || c.NotReady[0] != "late" {
		cp.t.Fatalf("check with a new copy: %+v", c)
	}
	pgtest.Must(cp.t, cp.pair.Primary.Kill(cp.ctx)) // as pg_ctl stop -m immediate, or a crash
	discovered := []string{"SLOTSYNC_STANDBY=" + cp.pair.Standby.DSN("postgres"), "SLOTSYNC_STATE_DIR=" + cp.state}
	for _, env := range [][]string{nil, discovered} {
		a := cp.args("check", "--json", "--state-dir", cp.state)
		if env != nil {
			a = []string{"check", "--json"}
		}
		start := time.Now()
		r := slotsyncCmd(cp.t, env, a...)
		c := parseCheck(cp.t, r)
		cp.t.Logf("check without the primary answered in %s", time.Since(start).Round(time.Millisecond))
		if r.code != exitNotReady || c.WithoutPrimary == nil || len(c.NotReady) != 1 || c.NotReady[0] != "late" || len(c.Slots) != 2 {
			cp.t.Fatalf("check without the primary: %d %+v\n%s", r.code, c, r.stderr)
		}
		if c.WithoutPrimary.AgeSeconds <= 0 || c.WithoutPrimary.Meaning == "" || c.WithoutPrimary.Why == "" {
			cp.t.Fatalf("the answer must say it was judged without the primary, from what and how old: %+v", c.WithoutPrimary)
		}
		if !strings.Contains(r.stderr, "the gate judges without it") {
			cp.t.Fatalf("the log must say it was judged without the primary:\n%s", r.stderr)
		}
	}
	// The READY copy alone: the gate opens, and the table says on what it judged.
	r := slotsyncCmd(cp.t, nil, cp.args("check", "--state-dir", cp.state, "--slots", "cdc")...)
	if r.code != 0 || !strings.Contains(r.stdout, "JUDGED WITHOUT THE PRIMARY") || !strings.Contains(r.stdout, "READY: promoting") {
		cp.t.Fatalf("check --slots cdc without the primary: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Strict: no judgement without the primary; nor without the daemon's journal, where there
	// is nothing to judge from. Either is CANNOT TELL, in the table and in the JSON a hook reads.
	for _, c := range []struct {
		args []string
		says string
	}{{[]string{"--state-dir", cp.state, "--strict"}, "strict"}, {nil, "no earlier observation"}} {
		a := append([]string{"--slots", "cdc"}, c.args...)
		if r := slotsyncCmd(cp.t, nil, cp.args("check", a...)...); r.code != exitConnect || !strings.Contains(r.stdout, "CANNOT TELL") || !strings.Contains(r.stdout, c.says) {
			cp.t.Fatalf("check %v without the primary: %d\n%s%s", c.args, r.code, r.stdout, r.stderr)
		}
		r := slotsyncCmd(cp.t, nil, cp.args("check", append(a, "--json")...)...)
		var ans slotsync.Answer
		if err := json.Unmarshal([]byte(r.stdout), &ans); err != nil || r.code != exitConnect || !ans.CannotTell || ans.PrimaryAlive || ans.ExitCode != exitConnect {
			cp.t.Fatalf("check %v --json without the primary: %d %v\n%s%s", c.args, r.code, err, r.stdout, r.stderr)
		}
	}
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestDaemonAgainstARealPair runs the sidecar, scrapes its metrics and endpoints, cuts the
// primary away and back, and stops it with SIGTERM.
func TestDaemonAgainstARealPair(t *testing.T) {
	pgtest.ForEachMajor(t, []int{17}, func(t *testing.T, major int) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		pair := pgtest.StartPair(t, integration.Options{Major: major})
		if err := pair.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"); err != nil {
			t.Fatal(err)
		}
		port := pgtest.FreePort(t)
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		// The password is ignored by trust authentication; it must never be printed.
		secret := " password=daemonsecret42"
		state := t.TempDir()
		cmd := exec.Command(binary, "run", "--primary", pair.Primary.DSN("postgres")+secret, "--standby", pair.Standby.DSN("postgres")+secret,
			"--state-dir", state, "--interval", "200ms", "--max-backoff", "1s", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
			"--log-format", "json", "--shutdown-timeout", "5s")
		logs := &pgtest.LockedBuffer{}
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		defer func() {
			_ = cmd.Process.Kill()
			if t.Failed() {
				t.Logf("daemon log:\n%s", logs.String())
			}
		}()

		pgtest.WaitFor(t, "/readyz", 30*time.Second, func() bool { code, _ := get(base + "/readyz"); return code == 200 })
		if code, _ := get(base + "/livez"); code != 200 {
			t.Fatalf("/livez %d", code)
		}
		// One writer per state directory: a second run says who holds it and exits 3.
		r := slotsyncCmd(t, nil, "run", "--once", "--primary", pair.Primary.DSN("postgres"), "--standby", pair.Standby.DSN("postgres"), "--state-dir", state)
		if r.code != exitUsage || !strings.Contains(r.stderr, "in use by another slotsync (pid ") {
			t.Fatalf("a second run on the daemon's state directory: %d %s", r.code, r.stderr)
		}
		// The fresh copy is ahead of the consumer: the gate says no.
		code, body := get(base + "/promotion-ready")
		if code != 503 || !strings.Contains(body, `"not_ready"`) || !strings.Contains(body, "cdc") {
			t.Fatalf("/promotion-ready before the consumer moved: %d %s", code, body)
		}
		if _, m := get(base + "/metrics"); !regexp.MustCompile(`slotsync_slot_not_ready_reason\{database="postgres",plugin="test_decoding",reason="[a-z_]+",slot="cdc"\} 1`).MatchString(m) {
			t.Errorf("no not-ready reason series for the fresh copy:\n%s", grepLines(m, "slotsync_slot_"))
		}
		// The consumer confirms past the copy: the gate opens.
		pgtest.WaitFor(t, "/promotion-ready", 60*time.Second, func() bool {
			_ = pair.Primary.Exec(ctx, "SELECT pg_log_standby_snapshot()")
			_ = pair.Primary.Exec(ctx, "SELECT count(*) FROM pg_logical_slot_get_changes('cdc', NULL, NULL)")
			code, _ := get(base + "/promotion-ready")
			return code == 200
		})
		daemonMetricsOfAReadyCopy(t, base)

		daemonWithoutPrimary(t, ctx, pair, base)

		daemonOnThePromoted(t, ctx, pair, base)

		// SIGHUP (a reload: systemctl reload) does not stop it: a full pass runs at once, on
		// new connections.
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		pgtest.WaitFor(t, "the SIGHUP's pass to be logged", 10*time.Second, func() bool {
			return strings.Contains(logs.String(), "SIGHUP: a full pass now") && strings.Contains(logs.String(), "a full pass now, on new connections (woken)")
		})
		if code, _ := get(base + "/livez"); code != 200 {
			t.Fatalf("/livez after SIGHUP: %d", code)
		}
		// SIGTERM stops it within the bound, cleanly.
		start := time.Now()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("exit after SIGTERM: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("no exit within 15 s of SIGTERM")
		}
		t.Logf("stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
		if strings.Contains(logs.String(), "daemonsecret42") {
			t.Fatal("the daemon logged a password")
		}
		// Each distinct connection error is logged once, not once per retry.
		if n := strings.Count(logs.String(), "sync pass failed"); n < 1 || n > 4 {
			t.Errorf("%d 'sync pass failed' lines while the primary was down", n)
		}
	})
}

// daemonMetricsOfAReadyCopy: the daemon's metrics with copy cdc READY, and passes counted.
func daemonMetricsOfAReadyCopy(t *testing.T, base string) {
	t.Helper()
	_, metricsText := get(base + "/metrics")
	const cdc = `database="postgres",plugin="test_decoding",slot="cdc"`
	for _, want := range []string{`slotsync_slot_ready{` + cdc + `} 1`, `slotsync_node_up{node="upstream"} 1`, "slotsync_build_info{",
		`slotsync_slot_sync_lag_bytes{` + cdc + `}`, `slotsync_slot_retained_wal_bytes{database="postgres",node="local",plugin="test_decoding",slot="cdc"}`, `slotsync_slot_info{database="postgres",plugin="test_decoding",slot="cdc",slot_name="cdc"} 1`,
		"slotsync_sync_duration_seconds_bucket", "slotsync_last_success_timestamp_seconds", "slotsync_promotion_ready 1",
		"slotsync_standby_restarts_total 0", `slotsync_slot_consumer_ahead_bytes{` + cdc + `} 0`, `slotsync_slot_copy_ahead_bytes{` + cdc + `} 0`} {
		if !strings.Contains(metricsText, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if !strings.Contains(metricsText, "slotsync_sync_runs_total") || strings.Contains(metricsText, "slotsync_sync_runs_total 0\n") {
		t.Error("no sync runs counted")
	}
}

// daemonWithoutPrimary: the primary goes away: the sidecar itself still works (/readyz), the gate
// judges without the primary from its last observation (rule 8), and metrics say so; then the
// primary comes back.
func daemonWithoutPrimary(t *testing.T, ctx context.Context, pair *integration.Pair, base string) {
	t.Helper()
	if err := pair.Primary.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitFor(t, "the gate to judge without the primary", 30*time.Second, func() bool {
		code, body := get(base + "/promotion-ready")
		return code == 200 && strings.Contains(body, `"without_primary"`)
	})
	if code, body := get(base + "/readyz"); code != 200 {
		t.Errorf("/readyz with the primary down: %d %s", code, body)
	}
	_, metricsText := get(base + "/metrics")
	for _, want := range []string{`slotsync_node_up{node="upstream"} 0`, "slotsync_gate_without_primary 1", "slotsync_promotion_ready 1"} {
		if !strings.Contains(metricsText, want) {
			t.Errorf("metrics with the primary down lack %s:\n%s", want, grepLines(metricsText, "slotsync_node_up", "slotsync_gate", "slotsync_promotion"))
		}
	}
	if strings.Contains(metricsText, `slotsync_sync_errors_total{class="retry",scope="pass"} 0`) || !strings.Contains(metricsText, `slotsync_sync_errors_total{class="retry",scope="pass"}`) {
		t.Error("failed passes not counted while the primary was down")
	}
	if err := pair.Primary.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitFor(t, "/readyz to recover", 60*time.Second, func() bool { code, _ := get(base + "/readyz"); return code == 200 })
	pgtest.WaitFor(t, "the gate with the primary back", 60*time.Second, func() bool {
		code, body := get(base + "/promotion-ready")
		return code == 200 && !strings.Contains(body, `"without_primary"`)
	})
}

// daemonOnThePromoted: the standby is promoted: the sidecar still works and says this node is
// the primary.
func daemonOnThePromoted(t *testing.T, ctx context.Context, pair *integration.Pair, base string) {
	t.Helper()
	if err := pair.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitFor(t, "/promotion-ready to say this node is the primary", 30*time.Second, func() bool {
		code, body := get(base + "/promotion-ready")
		return code == 503 && strings.Contains(body, `"role": "primary"`)
	})
	if code, body := get(base + "/readyz"); code != 200 {
		t.Errorf("/readyz on the promoted node: %d %s", code, body)
	}
	if _, m := get(base + "/metrics"); !strings.Contains(m, "slotsync_node_is_primary 1") || !strings.Contains(m, "slotsync_promotion_ready 0") ||
		!strings.Contains(m, `slotsync_node_up{node="local"} 1`) || strings.Contains(m, `node="upstream"`) {
		t.Errorf("metrics on the promoted node:\n%s", grepLines(m, "slotsync_node_is_primary", "slotsync_promotion_ready", "slotsync_node_up"))
	}
}

func grepLines(text string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}

func TestDrillCommand(t *testing.T) {
	for _, args := range [][]string{{"drill"}, {"drill", "--local", "--mode", "sideways"}, {"drill", "--standby", "host=x"},
		{"drill", "--local", "--major", "10"}, {"drill", "--primary", "host=x", "--standby", "host=y", "--switch-back"},
		{"drill", "--primary", "host=x", "--standby", "host=y", "--promote-yes", "--mode", "chaos"},
		{"sandbox", "--major", "9"}, {"sandbox", "--for", "-1s"}, {"check", "--standby", "host=x", "--wait", "-5s"}} {
		if r := slotsyncCmd(t, nil, args...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want 3: %s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	pgtest.ForEachMajor(t, []int{13, 14, 15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		r := slotsyncCmd(t, nil, "drill", "--local", "--major", fmt.Sprint(major), "--mode", "kill", "--duration", "1s", "--json")
		var rep struct {
			OK     bool `json:"ok"`
			Passed int  `json:"failovers_passed"`
			Runs   []struct {
				Major int `json:"major"`
			} `json:"runs"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("drill --json: %v\n%s\n%s", err, r.stdout, r.stderr)
		}
		if r.code != 0 || !rep.OK || rep.Passed != 1 || rep.Runs[0].Major != major {
			t.Fatalf("drill: exit %d %+v\n%s", r.code, rep, r.stderr)
		}
	})
}

// TestStatefileCommandLine drives the state-file method through the binary on 15 and older:
// doctor, run --once with --restart command, and check with the daemon's --state-dir.
func TestStatefileCommandLine(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 14, 15}, func(t *testing.T, major int) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		pair := pgtest.StartPair(t, integration.Options{Major: major})
		// pg_ctl refuses root: run it as the clusters' user, as an operator's command would.
		pgCtl, err := integration.PgCtl(major)
		pgtest.Must(t, err)
		dir := pair.Standby.DataDir
		stop := fmt.Sprintf("%s -D %s -m fast -w stop", pgCtl, dir)
		start := fmt.Sprintf("%s -D %s -w -l %s/restarted.log start", pgCtl, dir, dir)
		if err := pair.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"); err != nil {
			t.Fatal(err)
		}
		if err := pair.WaitCaughtUp(ctx); err != nil {
			t.Fatal(err)
		}
		state := t.TempDir()
		base := []string{"--primary", pair.Primary.DSN("postgres"), "--standby", pair.Standby.DSN("postgres"), "--state-dir", state}
		if r := slotsyncCmd(t, nil, append([]string{"doctor"}, base...)...); r.code != 0 || !strings.Contains(r.stdout, "method: statefile") {
			t.Fatalf("doctor: %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		// doctor checks --standby-data-dir as the daemon would, before any standby is stopped:
		// the primary's directory is another server's (operators review round 4, finding 1).
		if r := slotsyncCmd(t, nil, append(append([]string{"doctor"}, base...), "--standby-data-dir", dir)...); r.code != 0 {
			t.Fatalf("doctor with the standby's data directory: %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r := slotsyncCmd(t, nil, append(append([]string{"doctor"}, base...), "--standby-data-dir", pair.Primary.DataDir)...); r.code != exitNotReady ||
			!strings.Contains(r.stdout, "standby_data_dir") {
			t.Fatalf("doctor with the primary's data directory: %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		runArgs := append(append([]string{"run", "--once", "--json"}, base...), "--standby-data-dir", dir,
			"--restart", "command", "--stop-command", stop, "--start-command", start, "--min-restart-interval", "1ms")
		r := slotsyncCmd(t, nil, runArgs...)
		if r.code != 0 || !strings.Contains(r.stdout, `"standby_restarts": 1`) {
			t.Fatalf("run --once: %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		deadline := time.Now().Add(90 * time.Second)
		for {
			if err := pair.Primary.Exec(ctx, "CHECKPOINT"); err != nil {
				t.Fatal(err)
			}
			if err := pair.Primary.Exec(ctx, "SELECT count(*) FROM pg_logical_slot_get_changes('cdc', NULL, NULL)"); err != nil {
				t.Fatal(err)
			}
			if err := pair.WaitCaughtUp(ctx); err != nil {
				t.Fatal(err)
			}
			if r := slotsyncCmd(t, nil, runArgs...); r.code != 0 || strings.Contains(r.stdout, `"standby_restarts": 1`) {
				t.Fatalf("a later pass: %d (a second restart?)\n%s%s", r.code, r.stdout, r.stderr)
			}
			r = slotsyncCmd(t, nil, append([]string{"check", "--json"}, base...)...)
			if r.code == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("never ready: %s", r.stdout)
			}
		}
		if c := parseCheck(t, r); c.Method != "statefile" || !c.Ready {
			t.Fatalf("check: %+v", c)
		}

		// slotsync killed -9 in the middle of a standby restart (right after the stop, or instead
		// of the start): the next run finds the standby down and starts it (rule 6).
		for i, step := range []struct{ stop, start string }{
			{stop + `; kill -9 "$PPID"`, start},
			{stop, `kill -9 "$PPID"`},
		} {
			if err := pair.Primary.Exec(ctx, fmt.Sprintf("SELECT pg_create_logical_replication_slot('killed%d', 'test_decoding')", i)); err != nil {
				t.Fatal(err)
			}
			if err := pair.WaitCaughtUp(ctx); err != nil {
				t.Fatal(err)
			}
			killed := append(append([]string{"run", "--once"}, base...), "--standby-data-dir", dir,
				"--restart", "command", "--stop-command", step.stop, "--start-command", step.start, "--min-restart-interval", "1ms")
			if r := slotsyncCmd(t, nil, killed...); r.code != -1 && r.code != 137 {
				t.Fatalf("step %d: slotsync was not killed: %d %s", i, r.code, r.stderr)
			}
			if _, err := pair.Standby.InRecovery(ctx); err == nil {
				t.Fatalf("step %d: the standby still runs: the kill did not interrupt a restart", i)
			}
			r := slotsyncCmd(t, nil, runArgs...)
			if r.code != 0 || !strings.Contains(r.stderr, "interrupted") {
				t.Fatalf("step %d: the run after the kill: %d\n%s", i, r.code, r.stderr)
			}
			if _, err := pair.Standby.InRecovery(ctx); err != nil {
				t.Fatalf("step %d: the standby is still down after the next run: %v", i, err)
			}
			if err := pair.WaitStreaming(ctx); err != nil {
				t.Fatal(err)
			}
		}

		restartWithoutLogFile(t, ctx, pair, base, pgCtl)
	})
}

// restartWithoutLogFile: --restart pg_ctl without --standby-log-file: the restarted postmaster
// inherits pg_ctl's output and holds it open for good; the pass must still end.
func restartWithoutLogFile(t *testing.T, ctx context.Context, pair *integration.Pair, base []string, pgCtl string) {
	t.Helper()
	wrapper := filepath.Join(t.TempDir(), "pg_ctl")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec "+pgCtl+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := pair.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('cdc2', 'test_decoding')"); err != nil {
		t.Fatal(err)
	}
	if err := pair.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 90*time.Second)
	defer rcancel()
	cmd := exec.CommandContext(rctx, binary, append(append([]string{"run", "--once", "--json"}, base...), "--standby-data-dir", pair.Standby.DataDir,
		"--restart", "pg_ctl", "--pg-ctl", wrapper, "--min-restart-interval", "1ms")...)
	out, err := cmd.Output()
	if rctx.Err() != nil || err != nil || !strings.Contains(string(out), `"standby_restarts": 1`) {
		t.Fatalf("run --once with --restart pg_ctl and no log file: %v (timed out: %v)\n%s", err, rctx.Err() != nil, out)
	}
}

// TestHookUserReadsTheStateDirectory (operators review round 4, finding 5): the daemon's state
// directory, written by one user with the group of another (the systemd example's Group=postgres,
// the user Patroni runs its pre_promote hook as), can be read by check run as that other user.
// Before, the journal was 0600 and check as the hook's user exited 2 on "permission denied",
// which the example's hook took for "cannot tell" and promoted anyway.
func TestHookUserReadsTheStateDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon and the hook run as two users")
	}
	hookUser, err := integration.RunUser()
	if err != nil || hookUser == "" {
		t.Skipf("no unprivileged user to run the hook as: %v", err)
	}
	u, err := user.Lookup(hookUser)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.Atoi(u.Gid)
	base, err := os.MkdirTemp("", "slotsync-hook-") // beside the clusters, where their user may go
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(base, "state")
	// The daemon (root here, standing for slotsync) under systemd's UMask=0027, its directory
	// given to the hook user's group as StateDirectory= with Group= does.
	old := syscall.Umask(0o027)
	err = atomicfile.Write(state, "journal.json", []byte(`{"version": 1, "system_identifier": "1", "slots": {}}`))
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{state, filepath.Join(state, "journal.json")} {
		if err := os.Chown(p, 0, gid); err != nil {
			t.Fatal(err)
		}
	}
	prefix, err := integration.ShellPrefix()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "slotsync")
	if data, err := os.ReadFile(binary); err != nil || os.WriteFile(bin, data, 0o755) != nil {
		t.Fatalf("copy the binary where the hook user may run it: %v", err)
	}
	words := append(strings.Fields(prefix), bin, "check", "--json", "--standby", "host=127.0.0.1 port=1 connect_timeout=1", "--state-dir", state)
	out, _ := exec.Command(words[0], words[1:]...).CombinedOutput()
	if !strings.Contains(string(out), `"exit_code"`) {
		t.Fatalf("check as %s did not answer:\n%s", hookUser, out)
	}
	if strings.Contains(string(out), "permission denied") {
		t.Fatalf("check as %s cannot read the daemon's state directory:\n%s", hookUser, out)
	}
}
