package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
)

var (
	failpointOnce stdsync.Once
	failpointBin  string
	failpointErr  error
)

// failpointBinary builds slotsync with the tag failpoints (SLOTSYNC_FAILPOINTS crashes it at a
// named step, as kill -9 would), once per test run.
func failpointBinary(t *testing.T) string {
	t.Helper()
	failpointOnce.Do(func() {
		failpointBin = filepath.Join(filepath.Dir(binary), "slotsync-failpoints")
		out, err := exec.Command("go", "build", "-tags", "nethttpomithttp2,failpoints", "-o", failpointBin, ".").CombinedOutput()
		if err != nil {
			failpointErr = err
			t.Logf("%s", out)
		}
	})
	if failpointErr != nil {
		t.Fatalf("build slotsync with failpoints: %v", failpointErr)
	}
	return failpointBin
}

// runBinary runs bin like slotsyncCmd runs the release binary.
func runBinary(t *testing.T, bin string, env []string, args ...string) result {
	t.Helper()
	saved := binary
	binary = bin
	defer func() { binary = saved }()
	return slotsyncCmd(t, env, args...)
}

// TestGateAfterACrashMidRecreate (rule 8, the gate record written ahead): a slot recreated on
// the primary is recreated on the standby; slotsync is killed (SIGKILL) right after making the
// new copy, before it records anything; then the primary is killed. Judged without the
// primary, the new copy (ahead of its consumer) must not be READY. Before the record was
// written ahead, it said READY from the old copy's record.
func TestGateAfterACrashMidRecreate(t *testing.T) {
	pgtest.ForEachMajor(t, []int{16, 17}, func(t *testing.T, major int) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		pair := pgtest.StartPair(t, integration.Options{Major: major})
		fp := failpointBinary(t)
		pgtest.Must(t, pair.Primary.Exec(ctx, "CREATE TABLE t (id int)"))
		pgtest.Must(t, pair.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('old', 'test_decoding')"))
		pgtest.Must(t, pair.Primary.Exec(ctx, "INSERT INTO t VALUES (1)"))
		pgtest.Must(t, pair.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		pgtest.Must(t, pair.WaitCaughtUp(ctx))
		state := t.TempDir()
		args := func(cmd string, extra ...string) []string {
			return append([]string{cmd, "--primary", pair.Primary.DSN("postgres"), "--standby", pair.Standby.DSN("postgres"), "--state-dir", state}, extra...)
		}
		// The passes here are single ones (run --once) with the test's steps between them, so
		// each says the next comes within a long interval: at the default second, a loaded
		// machine's gap between the last pass and the crashed one outlives the pass's note, and
		// the gate rightly says CANNOT TELL (rule 8a) before this rule is reached.
		pass := func() []string { return args("run", "--once", "--slots", "cdc", "--interval", "30s") }
		deadline := time.Now().Add(90 * time.Second)
		for {
			pgtest.Must(t, pair.Primary.Exec(ctx, "INSERT INTO t VALUES (2)"))
			pgtest.Must(t, pair.Primary.Exec(ctx, "SELECT pg_log_standby_snapshot()"))
			pgtest.Must(t, pair.Primary.Exec(ctx, "SELECT count(*) FROM pg_logical_slot_get_changes('cdc', NULL, NULL)"))
			pgtest.Must(t, pair.WaitCaughtUp(ctx))
			slotsyncCmd(t, nil, pass()...)
			if r := slotsyncCmd(t, nil, args("check", "--slots", "cdc")...); r.code == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the copy never became READY")
			}
		}
		// cdc is made again on the primary from the older slot: its restart_lsn goes back, so the
		// next pass recreates the copy; slotsync dies right after making the new one.
		pgtest.Must(t, pair.Primary.Exec(ctx, "SELECT pg_drop_replication_slot('cdc')"))
		pgtest.Must(t, pair.Primary.Exec(ctx, "SELECT pg_copy_logical_replication_slot('old', 'cdc')"))
		pgtest.Must(t, pair.WaitCaughtUp(ctx))
		r := runBinary(t, fp, []string{"SLOTSYNC_FAILPOINTS=sql.after-create=crash"}, pass()...)
		if r.code != -1 || !strings.Contains(r.stderr, "failpoint sql.after-create: crashing") {
			t.Fatalf("slotsync was not killed after making the new copy: exit %d\n%s", r.code, r.stderr)
		}
		pgtest.Must(t, pair.Primary.Kill(ctx))
		// Judged without the primary once the standby no longer streams from it.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			r = slotsyncCmd(t, nil, args("check", "--slots", "cdc", "--json")...)
			if r.code != exitConnect {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the gate never judged without the primary: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
		}
		c := parseCheck(t, r)
		if r.code == 0 || c.Ready || !hasReason(c, "cdc", "copy_being_made") {
			t.Fatalf("judged without the primary after a crash mid-recreate: exit %d %+v\n%s", r.code, c, r.stdout)
		}
	})
}
