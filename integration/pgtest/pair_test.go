package pgtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/slotsync/slotsync/integration"
)

// TestPairIsReal proves, on every requested major, that a pair is a real primary with a real
// streaming standby: replication, recovery, logical decoding, replay pause, crash recovery and
// promotion.
func TestPairIsReal(t *testing.T) {
	ForEachMajor(t, nil, func(t *testing.T, major int) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		p := StartPair(t, integration.Options{Major: major})

		var version int
		Must(t, p.Primary.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000", nil, &version))
		if version != major {
			t.Fatalf("server major %d, want %d", version, major)
		}
		for _, n := range []*integration.Node{p.Primary, p.Standby} {
			rec, err := n.InRecovery(ctx)
			Must(t, err)
			if rec != (n == p.Standby) {
				t.Fatalf("%s: pg_is_in_recovery() = %v", n.Name, rec)
			}
		}

		// A row written on the primary is read on the standby.
		Must(t, p.Primary.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY, v text)"))
		Must(t, p.Primary.Exec(ctx, "INSERT INTO t VALUES (1, 'one')"))
		Must(t, p.WaitCaughtUp(ctx))
		var v string
		Must(t, p.Standby.QueryRow(ctx, "SELECT v FROM t WHERE id = 1", nil, &v))
		if v != "one" {
			t.Fatalf("standby read %q", v)
		}
		// The standby is read-only.
		if err := p.Standby.Exec(ctx, "INSERT INTO t VALUES (2, 'two')"); !isSQLState(err, "25006") {
			t.Fatalf("write on the standby: want read-only error 25006, got %v", err)
		}

		// Logical slots on the primary decode changes, with both plugins.
		Must(t, p.Primary.Exec(ctx, "CREATE PUBLICATION pub FOR TABLE t"))
		Must(t, p.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('td', 'test_decoding')"))
		Must(t, p.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('po', 'pgoutput')"))
		Must(t, p.Primary.Exec(ctx, "INSERT INTO t VALUES (3, 'three')"))
		var data string
		Must(t, p.Primary.QueryRow(ctx, "SELECT string_agg(data, ';') FROM pg_logical_slot_get_changes('td', NULL, NULL)", nil, &data))
		if !strings.Contains(data, "INSERT: id[integer]:3 v[text]:'three'") {
			t.Fatalf("test_decoding output %q lacks the insert", data)
		}
		var n int
		Must(t, p.Primary.QueryRow(ctx, `SELECT count(*) FROM pg_logical_slot_get_binary_changes('po', NULL, NULL,
			'proto_version', '1', 'publication_names', 'pub') WHERE get_byte(data, 0) = ascii('I')`, nil, &n))
		if n != 1 {
			t.Fatalf("pgoutput decoded %d inserts, want 1", n)
		}

		// Replay pause really stops replay: a row written while paused is not visible, then is.
		Must(t, p.PauseReplay(ctx))
		before, err := p.ReplayLSN(ctx)
		Must(t, err)
		Must(t, p.Primary.Exec(ctx, "INSERT INTO t VALUES (4, 'four')"))
		cur, err := p.CurrentLSN(ctx)
		Must(t, err)
		time.Sleep(500 * time.Millisecond)
		after, err := p.ReplayLSN(ctx)
		Must(t, err)
		if after != before || after >= cur {
			t.Fatalf("replay moved while paused: %s -> %s (primary at %s)", before, after, cur)
		}
		Must(t, p.Standby.QueryRow(ctx, "SELECT count(*) FROM t WHERE id = 4", nil, &n))
		if n != 0 {
			t.Fatal("row written during the pause is visible on the standby")
		}
		Must(t, p.ResumeReplay(ctx))
		Must(t, p.WaitReplayed(ctx, cur))
		Must(t, p.Standby.QueryRow(ctx, "SELECT count(*) FROM t WHERE id = 4", nil, &n))
		if n != 1 {
			t.Fatal("row not replayed after resume")
		}

		// kill -9 of the primary, then start: crash recovery keeps committed rows and streaming resumes.
		Must(t, p.Primary.Exec(ctx, "INSERT INTO t VALUES (5, 'five')"))
		Must(t, p.Primary.Kill(ctx))
		if _, err := p.Primary.InRecovery(ctx); err == nil {
			t.Fatal("primary still answers after kill -9")
		}
		Must(t, p.Primary.Start(ctx))
		Must(t, p.Primary.QueryRow(ctx, "SELECT count(*) FROM t WHERE id = 5", nil, &n))
		if n != 1 {
			t.Fatal("committed row lost in crash recovery")
		}
		Must(t, p.WaitStreaming(ctx))
		Must(t, p.Standby.Restart(ctx))
		Must(t, p.WaitStreaming(ctx))

		// Promotion makes the standby writable.
		Must(t, p.WaitCaughtUp(ctx))
		Must(t, p.Promote(ctx))
		Must(t, p.Standby.Exec(ctx, "INSERT INTO t VALUES (6, 'six')"))
		Must(t, p.Standby.QueryRow(ctx, "SELECT count(*) FROM t", nil, &n))
		if n != 5 {
			t.Fatalf("promoted standby has %d rows, want 5", n)
		}
	})
}

func isSQLState(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

// TestSlowSkipsOnlyWhenQuick: a test of the slow tier runs unless SLOTSYNC_QUICK=1.
func TestSlowSkipsOnlyWhenQuick(t *testing.T) {
	for _, c := range []struct {
		quick string
		skip  bool
	}{{"", false}, {"0", false}, {"1", true}} {
		t.Run("quick="+c.quick, func(t *testing.T) {
			t.Setenv(EnvQuick, c.quick)
			ran, skipped := false, false
			t.Run("slow", func(t *testing.T) {
				defer func() { skipped = t.Skipped() }()
				Slow(t)
				ran = true
			})
			if skipped != c.skip || ran == c.skip {
				t.Errorf("SLOTSYNC_QUICK=%q: skipped %v, ran on %v; want skipped %v", c.quick, skipped, ran, c.skip)
			}
		})
	}
}
