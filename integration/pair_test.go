package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slotsync/slotsync/lsncheck"
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
		{"10", nil, true, true},
		{"11,12", []int{11, 12}, true, false},
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

// TestStartTakesAnotherPortWhenItsPortIsTaken: a port free when chosen can be taken by another
// test before the server binds it; the server then starts on another.
func TestStartTakesAnotherPortWhenItsPortIsTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a real server")
	}
	if _, err := FindBinaries(15); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := NewPair(ctx, Options{Major: 15, NoStandby: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Primary.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	addr, err := p.Primary.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := p.Primary.Start(ctx); err != nil {
		t.Fatalf("start with its port taken: %v", err)
	}
	moved, _ := p.Primary.Addr(ctx)
	if moved == addr {
		t.Fatalf("still on %s", addr)
	}
	if _, err := p.Primary.InRecovery(ctx); err != nil {
		t.Fatalf("the server on its new port %s: %v", moved, err)
	}
}

// TestAddStandbyKeepsTheFirstStreaming: a second standby is a clone of the primary, stopped and
// started for it (cloneOfPrimary, as for a Twin); the pair's standby streams again when
// AddStandby returns (its WAL receiver would otherwise wait wal_retrieve_retry_interval, and the
// first seconds of a three-node test would run without it).
// newPair15 is a pair of 15 (Debian's), closed when the test ends; the test is skipped with
// -short or without 15.
func newPair15(ctx context.Context, t *testing.T) *Pair {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs real servers")
	}
	if _, err := FindBinaries(15); err != nil {
		t.Skip(err)
	}
	p, err := NewPair(ctx, Options{Major: 15})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestAddStandbyKeepsTheFirstStreaming(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := newPair15(ctx, t)
	if _, err := p.AddStandby(ctx, "second"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := p.Primary.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'",
		[]any{StandbyAppName}, &n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatal("the pair's standby does not stream when AddStandby returns")
	}
}

// TestSwitchSegmentsSwitchesWhenNothingWasWritten: three switches in a row after a switch, with
// nothing written between, still leave three segments behind (pg_switch_wal alone switches none).
func TestSwitchSegmentsSwitchesWhenNothingWasWritten(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := newPair15(ctx, t)
	segment := func() string {
		var s string
		if err := p.Primary.QueryRow(ctx, "SELECT pg_walfile_name(pg_current_wal_insert_lsn())", nil, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := p.Primary.Exec(ctx, "SELECT pg_switch_wal()"); err != nil {
		t.Fatal(err)
	}
	before := segment()
	if err := p.SwitchSegments(ctx, 3); err != nil {
		t.Fatal(err)
	}
	after := segment()
	from, _ := lsncheck.SegmentStart(before, 16<<20)
	to, _ := lsncheck.SegmentStart(after, 16<<20)
	if got := (to - from) / (16 << 20); got != 3 {
		t.Fatalf("from %s to %s: %d segments switched, want 3", before, after, got)
	}
}

// TestPairsAreClustersOfTheirOwn: pairs made from one initdb template have system identifiers of
// their own (the primary's and its standby's the same), stream, and keep the segment size asked
// for, on every major the run names (15 when it names none).
func TestPairsAreClustersOfTheirOwn(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs real servers")
	}
	majors, _, err := ParseMajors(os.Getenv(EnvMajors))
	if err != nil || len(majors) == 0 {
		majors = []int{15}
	}
	for _, major := range majors {
		t.Run(fmt.Sprintf("pg%d", major), func(t *testing.T) {
			if _, err := FindBinaries(major); err != nil {
				t.Skip(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			ids := map[string]bool{}
			for _, seg := range []int{0, 0, 1} {
				p, err := NewPair(ctx, Options{Major: major, WALSegmentMB: seg})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Close() })
				var prim, stby string
				var size int64
				q := "SELECT system_identifier::text, (SELECT setting::bigint FROM pg_settings WHERE name = 'wal_segment_size') FROM pg_control_system()"
				if err := p.Primary.QueryRow(ctx, q, nil, &prim, &size); err != nil {
					t.Fatal(err)
				}
				if err := p.Standby.QueryRow(ctx, "SELECT system_identifier::text FROM pg_control_system()", nil, &stby); err != nil {
					t.Fatal(err)
				}
				want := int64(16) << 20
				if seg != 0 {
					want = int64(seg) << 20
				}
				if size != want {
					t.Errorf("wal_segment_size %d, want %d", size, want)
				}
				if prim != stby || ids[prim] {
					t.Fatalf("primary %s, standby %s, identifiers before: %v", prim, stby, ids)
				}
				ids[prim] = true
				if err := p.Primary.Exec(ctx, "CREATE TABLE t AS SELECT 1 AS x"); err != nil {
					t.Fatal(err)
				}
				if err := p.WaitCaughtUp(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
