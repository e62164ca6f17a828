package sync

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/topology"
)

// TestManagedSynchronizedStandbySlots (rule 10, 17+, --manage-synchronized-standby-slots): the
// standby's physical slot is listed on the primary once it streams; with the standby's WAL
// receiver cut, the consumer of a failover slot receives nothing past the standby, and the gate
// without the primary says, per slot, that no consumer could be ahead. slotsync beside the
// primary takes the standby out once it has been gone for the bound (the consumer then moves
// on), and beside a promoted node takes out an entry for a slot the node lacks.
func TestManagedSynchronizedStandbySlots(t *testing.T) {
	t.Parallel() // its own pair and ports; mostly waiting: runs beside another long test
	pgtest.ForEachMajor(t, nativeMajors, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, syncOn)
		f.eng.Close()
		// The record's "held back" holds while no sidecar could have taken the standby out yet
		// (rule 10: below --standby-gone-after), and --max-record-age stays below that bound.
		f.cfg.Native.ManageStandbySlots, f.cfg.Native.StandbyGoneAfter, f.cfg.PrimaryGoneAfter = true, 15*time.Second, time.Second
		f.cfg.MaxRecordAge = 10 * time.Second
		f.startEngine()
		p := f.pair.Primary
		f.must(p.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding', false, false, true)"))
		f.insert(2)
		f.untilReady("cdc", func() { f.consume(p, "cdc") })
		if got := showStandbySlots(f, p); got != integration.PhysicalSlot {
			t.Fatalf("the primary's synchronized_standby_slots is %q, want the standby's slot %s", got, integration.PhysicalSlot)
		}

		// Cut: the standby's primary_conninfo points at a port nothing listens on.
		f.must(f.pair.Standby.Exec(f.ctx, "ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port=1 dbname=postgres connect_timeout=1'"))
		f.must(f.pair.Standby.Exec(f.ctx, "SELECT pg_reload_conf()"))
		waitNotStreaming(t, f)
		f.pass()
		rows := f.insert(3)
		if err := consumeFor(f, p, 2*time.Second); err == nil || !strings.Contains(err.Error(), "statement timeout") {
			t.Fatalf("the consumer of a failover slot got changes the standby never received: %v", err)
		}
		f.must(p.Kill(f.ctx))
		judgedWithoutPrimary(t, f)

		// slotsync beside the primary, back up with the standby still cut off: the standby is
		// taken out once gone for the bound, and the consumer moves on.
		f.must(p.Start(f.ctx))
		beside := f.cfg
		beside.StandbyDSN, beside.StateDir, beside.Logger = p.DSN("postgres"), t.TempDir(), hclog.NewNullLogger()
		eng, err := New(beside)
		f.must(err)
		defer eng.Close()
		deadline := time.Now().Add(30 * time.Second)
		for showStandbySlots(f, p) != "" {
			if time.Now().After(deadline) {
				t.Fatalf("a standby gone for longer than the bound is still listed: %q", showStandbySlots(f, p))
			}
			_, err := eng.RunOnce(f.ctx)
			f.must(err)
			time.Sleep(500 * time.Millisecond)
		}
		if got := f.consume(p, "cdc"); len(got) != len(rows) {
			t.Fatalf("once the gone standby was taken out the consumer got %v, want %v", got, rows)
		}

		// The standby promoted, with an entry it inherited for a slot it lacks: taken out.
		f.must(f.pair.Promote(f.ctx))
		f.must(f.pair.Standby.Exec(f.ctx, "ALTER SYSTEM SET synchronized_standby_slots = '"+integration.PhysicalSlot+"'"))
		f.must(f.pair.Standby.Exec(f.ctx, "SELECT pg_reload_conf()"))
		deadline = time.Now().Add(10 * time.Second)
		for showStandbySlots(f, f.pair.Standby) != "" { // passes, as the daemon makes them
			if time.Now().After(deadline) {
				t.Fatalf("the promoted node still lists %q, a slot it lacks", showStandbySlots(f, f.pair.Standby))
			}
			_, err := f.eng.RunOnce(f.ctx)
			f.must(err)
			time.Sleep(200 * time.Millisecond)
		}
	})
}

// judgedWithoutPrimary asks the gate until it judges without the primary, and requires cdc READY
// with no consumer ahead promised.
func judgedWithoutPrimary(t *testing.T, f *fixture) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rep, err := f.eng.Inspect(f.ctx)
		if err == nil && rep.WithoutPrimary != nil {
			if !rep.WithoutPrimary.SynchronizedStandby {
				t.Fatalf("without the primary: the record does not say synchronized_standby_slots listed the standby: %+v", rep.WithoutPrimary)
			}
			for _, s := range rep.Slots {
				if s.Name == "cdc" && (!s.Verdict.Ready || !strings.Contains(s.Verdict.Detail, "no consumer could be ahead")) {
					t.Fatalf("without the primary, cdc: %+v", s.Verdict)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gate never judged without the primary: %v %+v", err, rep.WithoutPrimary)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func showStandbySlots(f *fixture, n *integration.Node) string {
	f.t.Helper()
	var s string
	f.must(n.QueryRow(f.ctx, "SHOW synchronized_standby_slots", nil, &s))
	return s
}

// consumeFor reads the slot's changes with a statement timeout (decoding a failover slot waits
// for the standbys synchronized_standby_slots lists).
func consumeFor(f *fixture, n *integration.Node, timeout time.Duration) error {
	conn, err := n.Connect(f.ctx, "app")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(f.ctx, fmt.Sprintf("SET statement_timeout = %d", timeout.Milliseconds())); err != nil {
		return err
	}
	_, err = conn.Exec(f.ctx, "SELECT count(*) FROM pg_logical_slot_get_changes('cdc', NULL, NULL)")
	return err
}

// TestManagedStandbySlotsLeastPrivilege (rule 10) runs --manage-synchronized-standby-slots as
// the role docs/PRIVILEGES.md documents: without its two grants for the setting, slotsync says
// which grants are missing, changes nothing and syncs on; with them, it lists the standby.
func TestManagedStandbySlotsLeastPrivilege(t *testing.T) {
	pgtest.ForEachMajor(t, nativeMajors, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodAuto, syncOn)
		p := f.pair.Primary
		for _, sql := range []string{"CREATE ROLE slotsync LOGIN REPLICATION", "GRANT pg_monitor TO slotsync",
			"GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO slotsync"} {
			f.must(p.Exec(f.ctx, sql))
		}
		f.must(f.pair.WaitCaughtUp(f.ctx))
		f.eng.Close()
		f.cfg.Native.ManageStandbySlots = true
		f.cfg.PrimaryDSN = strings.Replace(f.cfg.PrimaryDSN, "user=postgres", "user=slotsync", 1)
		f.cfg.StandbyDSN = strings.Replace(f.cfg.StandbyDSN, "user=postgres", "user=slotsync", 1)
		f.startEngine()
		f.pass()
		if got := showStandbySlots(f, p); got != "" {
			t.Fatalf("set without the grants: %q", got)
		}
		if log := f.logs.String(); !strings.Contains(log, "could not set synchronized_standby_slots on the primary") ||
			!strings.Contains(log, "GRANT ALTER SYSTEM ON PARAMETER synchronized_standby_slots") {
			t.Fatalf("a missing grant is not named:\n%s", log)
		}
		f.must(p.Exec(f.ctx, "GRANT ALTER SYSTEM ON PARAMETER synchronized_standby_slots TO slotsync"))
		f.must(p.Exec(f.ctx, "GRANT EXECUTE ON FUNCTION pg_reload_conf() TO slotsync"))
		deadline := time.Now().Add(15 * time.Second)
		for showStandbySlots(f, p) != integration.PhysicalSlot {
			if time.Now().After(deadline) {
				t.Fatalf("with the documented grants the primary's synchronized_standby_slots is %q, want %s", showStandbySlots(f, p), integration.PhysicalSlot)
			}
			f.pass()
			time.Sleep(200 * time.Millisecond)
		}
	})
}
