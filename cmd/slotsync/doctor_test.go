package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
)

// loadAsFailoverSlots restarts the standby with a library named pg_failover_slots in its
// shared_preload_libraries (on: true) or without it. The library is the server's own
// test_decoding module under that name (found through dynamic_library_path), which does nothing
// when loaded: what slotsync reads is the setting, as it would with the real extension.
func loadAsFailoverSlots(t *testing.T, ctx context.Context, pair *integration.Pair, on bool) {
	t.Helper()
	if !on {
		pgtest.Must(t, pair.Standby.Exec(ctx, "ALTER SYSTEM RESET shared_preload_libraries"))
		pgtest.Must(t, pair.Standby.Exec(ctx, "ALTER SYSTEM RESET dynamic_library_path"))
		pgtest.Must(t, pair.Standby.Restart(ctx))
		return
	}
	var libdir string
	pgtest.Must(t, pair.Standby.QueryRow(ctx, "SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'", nil, &libdir))
	module, err := os.ReadFile(filepath.Join(libdir, "test_decoding.so"))
	pgtest.Must(t, err)
	dir := filepath.Join(pair.Dir, "lib")
	pgtest.Must(t, os.MkdirAll(dir, 0o755))
	pgtest.Must(t, os.Chmod(dir, 0o755))
	pgtest.Must(t, os.WriteFile(filepath.Join(dir, "pg_failover_slots.so"), module, 0o644))
	pgtest.Must(t, pair.Standby.Exec(ctx, "ALTER SYSTEM SET dynamic_library_path = '"+dir+":$libdir'"))
	pgtest.Must(t, pair.Standby.Exec(ctx, "ALTER SYSTEM SET shared_preload_libraries = 'pg_failover_slots'"))
	pgtest.Must(t, pair.Standby.Restart(ctx))
}

// TestOtherSynchronizerLeftAlone (issue 34 item 3): with pg_failover_slots loaded on the standby,
// which copies, advances and drops the same slots, doctor names it and fails, and slotsync never
// fights it: every slot is skipped and said so, its copy neither advanced nor dropped, and the
// gate answers NOT READY other_synchronizer instead of vouching for copies another tool writes.
// With the library gone, slotsync syncs again.
func TestOtherSynchronizerLeftAlone(t *testing.T) {
	pgtest.ForEachMajor(t, []int{15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		pair := pgtest.StartPair(t, integration.Options{Major: major})
		pgtest.Must(t, pair.Primary.Exec(ctx, "CREATE TABLE t (id int)"))
		pgtest.Must(t, pair.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		pgtest.Must(t, pair.WaitCaughtUp(ctx))
		state := t.TempDir()
		base := []string{"--primary", pair.Primary.DSN("postgres"), "--standby", pair.Standby.DSN("postgres"), "--state-dir", state}
		args := func(cmd string, extra ...string) []string { return append(append([]string{cmd}, base...), extra...) }
		copied := major >= 16 // a state-file copy (15) needs a standby restart: the pass with the library loaded is what counts here
		if copied {
			if r := slotsyncCmd(t, nil, args("run", "--once")...); r.code != 0 {
				t.Fatalf("run --once: %d\n%s%s", r.code, r.stdout, r.stderr)
			}
		}
		copyConfirmed := func() string {
			var lsn string
			err := pair.Standby.QueryRow(ctx, "SELECT coalesce((SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'cdc'), 'none')", nil, &lsn)
			pgtest.Must(t, err)
			return lsn
		}
		before := copyConfirmed()

		loadAsFailoverSlots(t, ctx, pair, true)
		pgtest.Must(t, pair.Primary.Exec(ctx, "INSERT INTO t SELECT generate_series(1, 100)"))
		pgtest.Must(t, pair.Primary.Exec(ctx, "SELECT count(*) FROM pg_logical_slot_get_changes('cdc', NULL, NULL)"))
		pgtest.Must(t, pair.WaitCaughtUp(ctx))

		if r := slotsyncCmd(t, nil, args("doctor")...); r.code != exitNotReady || !strings.Contains(r.stdout, "other_synchronizer") ||
			!strings.Contains(r.stdout, "pg_failover_slots") {
			t.Fatalf("doctor with pg_failover_slots loaded on the standby: %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		runArgs := args("run", "--once", "--json")
		if !copied {
			runArgs = append(runArgs, "--standby-data-dir", pair.Standby.DataDir)
		}
		r := slotsyncCmd(t, nil, runArgs...)
		var rep struct {
			Slots []struct{ Name, Action, Code string }
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Slots) != 1 || rep.Slots[0].Action != "skip" || rep.Slots[0].Code != "other_synchronizer" {
			t.Fatalf("run --once with pg_failover_slots loaded: %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		if after := copyConfirmed(); after != before {
			t.Fatalf("slotsync moved the copy beside another synchronizer: %s, then %s", before, after)
		}
		r = slotsyncCmd(t, nil, args("check", "--json")...)
		if c := parseCheck(t, r); r.code != exitNotReady || c.Ready || !hasReason(c, "cdc", "other_synchronizer") {
			t.Fatalf("check with pg_failover_slots loaded: %d %+v", r.code, c)
		}

		loadAsFailoverSlots(t, ctx, pair, false)
		if r := slotsyncCmd(t, nil, args("doctor")...); strings.Contains(r.stdout, "pg_failover_slots") {
			t.Fatalf("doctor without the library still names it: %d\n%s", r.code, r.stdout)
		}
		if !copied {
			return
		}
		if r := slotsyncCmd(t, nil, args("run", "--once")...); r.code != 0 {
			t.Fatalf("run --once without the library: %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if after := copyConfirmed(); after == before {
			t.Fatalf("the copy did not advance once the other synchronizer was gone: %s", after)
		}
	})
}
