package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
)

// TestPromotionHookWritablePrimary (rule 8; correctness review 5, finding D): the Patroni hook as
// shipped, run on a standby whose copies are READY while the old primary is alive, read-write
// and streaming to it (its HA manager hung, no watchdog: the fencing failure the hook guards
// against), blocks the promotion whatever SLOTSYNC_ON_NOT_READY says, and says why in one line.
// Before, the gate judged with the live primary, READY, and the hook exited 0: two primaries.
// check without --for-promotion (a planned switchover's question, asked before the primary is
// stopped) still answers READY with the primary up.
func TestPromotionHookWritablePrimary(t *testing.T) {
	pgtest.ForEachMajor(t, []int{15, 16, 17, 18, 19}, func(t *testing.T, major int) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		pair := pgtest.StartPair(t, integration.Options{Major: major})
		pgtest.Must(t, pair.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		pgtest.Must(t, pair.WaitCaughtUp(ctx))
		state := t.TempDir()
		// As the hook asks: the standby alone, the primary found from its primary_conninfo.
		base := []string{"--standby", pair.Standby.DSN("postgres"), "--state-dir", state}
		run := append([]string{"run", "--once"}, base...)
		if major < 16 {
			pgCtl, err := integration.PgCtl(major)
			pgtest.Must(t, err)
			dir := pair.Standby.DataDir
			run = append(run, "--standby-data-dir", dir, "--restart", "command", "--min-restart-interval", "1ms",
				"--stop-command", fmt.Sprintf("%s -D %s -m fast -w stop", pgCtl, dir),
				"--start-command", fmt.Sprintf("%s -D %s -w -l %s/restarted.log start", pgCtl, dir, dir))
		}
		for deadline := time.Now().Add(90 * time.Second); ; {
			pgtest.Must(t, pair.Primary.Exec(ctx, "CHECKPOINT"))
			pgtest.Must(t, pair.Primary.Exec(ctx, "SELECT count(*) FROM pg_logical_slot_get_changes('cdc', NULL, NULL)"))
			pgtest.Must(t, pair.WaitCaughtUp(ctx))
			if r := slotsyncCmd(t, nil, run...); r.code != 0 {
				t.Fatalf("run --once: %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if r := slotsyncCmd(t, nil, append([]string{"check"}, base...)...); r.code == 0 {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("the copy never became READY: %s%s", r.stdout, r.stderr)
			}
		}
		pgtest.Must(t, pair.WaitStreaming(ctx))
		for _, policy := range []string{"proceed", "block-for=1s"} {
			cmd := exec.Command("sh", "../../examples/patroni/pre-promote.sh")
			cmd.Env = []string{"PATH=/usr/bin:/bin", "SLOTSYNC_BIN=" + binary, "SLOTSYNC_STANDBY=" + pair.Standby.DSN("postgres"),
				"SLOTSYNC_STATE_DIR=" + state, "SLOTSYNC_WAIT=2s", "SLOTSYNC_ON_NOT_READY=" + policy}
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != 1 || !strings.Contains(string(out), "BLOCKING the promotion of this node: the old primary is alive") ||
				!strings.Contains(string(out), "read-write") || !strings.Contains(string(out), "this standby streams from it") {
				t.Fatalf("the hook with the old primary read-write (%s): exit %d, want 1 and why\n%s", policy, code, out)
			}
		}
		if r := slotsyncCmd(t, nil, append([]string{"check", "--wait", "30s"}, base...)...); r.code != 0 {
			t.Fatalf("check without --for-promotion, the primary up: %d, want READY\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}
