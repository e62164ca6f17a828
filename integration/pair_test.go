package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestParseMajors(t *testing.T) {
	cases := []struct {
		in       string
		want     []int
		explicit bool
		wantErr  bool
	}{
		{"", nil, false, false},
		{"15,16,17,18", []int{15, 16, 17, 18}, true, false},
		{" 17 , 17,13", []int{17, 13}, true, false},
		{"12", nil, true, true},
		{"15,x", nil, true, true},
	}
	for _, c := range cases {
		got, explicit, err := ParseMajors(c.in)
		if (err != nil) != c.wantErr || explicit != c.explicit || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("ParseMajors(%q) = %v, %v, %v; want %v, %v, err=%v", c.in, got, explicit, err, c.want, c.explicit, c.wantErr)
		}
	}
}

func TestFindBinariesMissingSaysHow(t *testing.T) {
	t.Setenv(EnvCache, t.TempDir())
	_, err := FindBinaries(13)
	if err == nil {
		t.Skip("PostgreSQL 13 is installed system-wide")
	}
	if !errors.Is(err, ErrBinariesMissing) || !strings.Contains(err.Error(), "scripts/fetch-postgres.sh 13") {
		t.Fatalf("error should say how to get the binaries, got %v", err)
	}
}

func TestCopyDataDirSkipsSlotsAndPid(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()+"/copy"
	mustWrite := func(p string) {
		t.Helper()
		if err := writeOwned(runAs{}, p, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"pg_replslot/s1", "base/1", "pg_stat_tmp"} {
		if err := mkdirAll(src + "/" + d); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(src + "/pg_replslot/s1/state")
	mustWrite(src + "/postmaster.pid")
	mustWrite(src + "/base/1/1234")
	mustWrite(src + "/pg_stat_tmp/global.stat")
	if err := copyDataDir(src, dst); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"pg_replslot/s1", "postmaster.pid", "pg_stat_tmp/global.stat"} {
		if exists(dst + "/" + gone) {
			t.Errorf("%s was copied", gone)
		}
	}
	for _, kept := range []string{"pg_replslot", "base/1/1234"} {
		if !exists(dst + "/" + kept) {
			t.Errorf("%s was not copied", kept)
		}
	}
}

// TestPairIsReal proves, on every requested major, that a pair is a real primary with a real
// streaming standby: replication, recovery, logical decoding, replay pause, crash recovery and
// promotion.
func TestPairIsReal(t *testing.T) {
	ForEachMajor(t, nil, func(t *testing.T, major int) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		p := StartPair(t, Options{Major: major})
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}

		var version int
		must(p.Primary.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000", nil, &version))
		if version != major {
			t.Fatalf("server major %d, want %d", version, major)
		}
		for _, n := range []*Node{p.Primary, p.Standby} {
			rec, err := n.InRecovery(ctx)
			must(err)
			if rec != (n == p.Standby) {
				t.Fatalf("%s: pg_is_in_recovery() = %v", n.Name, rec)
			}
		}

		// A row written on the primary is read on the standby.
		must(p.Primary.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY, v text)"))
		must(p.Primary.Exec(ctx, "INSERT INTO t VALUES (1, 'one')"))
		must(p.WaitCaughtUp(ctx))
		var v string
		must(p.Standby.QueryRow(ctx, "SELECT v FROM t WHERE id = 1", nil, &v))
		if v != "one" {
			t.Fatalf("standby read %q", v)
		}
		// The standby is read-only.
		if err := p.Standby.Exec(ctx, "INSERT INTO t VALUES (2, 'two')"); !isSQLState(err, "25006") {
			t.Fatalf("write on the standby: want read-only error 25006, got %v", err)
		}

		// Logical slots on the primary decode changes, with both plugins.
		must(p.Primary.Exec(ctx, "CREATE PUBLICATION pub FOR TABLE t"))
		must(p.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('td', 'test_decoding')"))
		must(p.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('po', 'pgoutput')"))
		must(p.Primary.Exec(ctx, "INSERT INTO t VALUES (3, 'three')"))
		var data string
		must(p.Primary.QueryRow(ctx, "SELECT string_agg(data, ';') FROM pg_logical_slot_get_changes('td', NULL, NULL)", nil, &data))
		if !strings.Contains(data, "INSERT: id[integer]:3 v[text]:'three'") {
			t.Fatalf("test_decoding output %q lacks the insert", data)
		}
		var n int
		must(p.Primary.QueryRow(ctx, `SELECT count(*) FROM pg_logical_slot_get_binary_changes('po', NULL, NULL,
			'proto_version', '1', 'publication_names', 'pub') WHERE get_byte(data, 0) = ascii('I')`, nil, &n))
		if n != 1 {
			t.Fatalf("pgoutput decoded %d inserts, want 1", n)
		}

		// Replay pause really stops replay: a row written while paused is not visible, then is.
		must(p.PauseReplay(ctx))
		before, err := p.ReplayLSN(ctx)
		must(err)
		must(p.Primary.Exec(ctx, "INSERT INTO t VALUES (4, 'four')"))
		cur, err := p.CurrentLSN(ctx)
		must(err)
		time.Sleep(500 * time.Millisecond)
		after, err := p.ReplayLSN(ctx)
		must(err)
		if after != before || after >= cur {
			t.Fatalf("replay moved while paused: %s -> %s (primary at %s)", before, after, cur)
		}
		must(p.Standby.QueryRow(ctx, "SELECT count(*) FROM t WHERE id = 4", nil, &n))
		if n != 0 {
			t.Fatal("row written during the pause is visible on the standby")
		}
		must(p.ResumeReplay(ctx))
		must(p.WaitReplayed(ctx, cur))
		must(p.Standby.QueryRow(ctx, "SELECT count(*) FROM t WHERE id = 4", nil, &n))
		if n != 1 {
			t.Fatal("row not replayed after resume")
		}

		// kill -9 of the primary, then start: crash recovery keeps committed rows and streaming resumes.
		must(p.Primary.Exec(ctx, "INSERT INTO t VALUES (5, 'five')"))
		must(p.Primary.Kill(ctx))
		if _, err := p.Primary.InRecovery(ctx); err == nil {
			t.Fatal("primary still answers after kill -9")
		}
		must(p.Primary.Start(ctx))
		must(p.Primary.QueryRow(ctx, "SELECT count(*) FROM t WHERE id = 5", nil, &n))
		if n != 1 {
			t.Fatal("committed row lost in crash recovery")
		}
		must(p.WaitStreaming(ctx))
		must(p.Standby.Restart(ctx))
		must(p.WaitStreaming(ctx))

		// Promotion makes the standby writable.
		must(p.WaitCaughtUp(ctx))
		must(p.Promote(ctx))
		must(p.Standby.Exec(ctx, "INSERT INTO t VALUES (6, 'six')"))
		must(p.Standby.QueryRow(ctx, "SELECT count(*) FROM t", nil, &n))
		if n != 5 {
			t.Fatalf("promoted standby has %d rows, want 5", n)
		}
	})
}

func isSQLState(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

// TestDockerBackend starts a pair of official postgres containers (pg_basebackup standby) and
// checks that the standby replays; it skips, saying why, when no Docker engine is reachable.
func TestDockerBackend(t *testing.T) {
	p := StartPair(t, Options{Major: 17, Backend: "docker"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Primary.Exec(ctx, "CREATE TABLE d AS SELECT 1 AS x"); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	var x int
	if err := p.Standby.QueryRow(ctx, "SELECT x FROM d", nil, &x); err != nil || x != 1 {
		t.Fatalf("standby read %d, %v", x, err)
	}
}

func TestWithParam(t *testing.T) {
	cases := []struct{ dsn, key, val, want string }{
		{"host=h user=u", "dbname", "drill", "host=h user=u dbname='drill'"},
		{"host=h", "replication", "database", "host=h replication='database'"},
		{"host=h", "application_name", `it's`, `host=h application_name='it\'s'`},
		{"postgres://u:p@h:5432/app?sslmode=require", "dbname", "drill", "postgres://u:p@h:5432/drill?sslmode=require"},
		{"postgresql://h/app", "replication", "database", "postgresql://h/app?replication=database"},
	}
	for _, c := range cases {
		if got := withParam(c.dsn, c.key, c.val); got != c.want {
			t.Errorf("withParam(%q, %s, %s) = %q, want %q", c.dsn, c.key, c.val, got, c.want)
		}
	}
}
