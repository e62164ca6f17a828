package sync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"github.com/slotsync/slotsync/topology"
)

// TestStatefileRefusesAnotherDataDir (operators review round 4, finding 1): --standby-data-dir
// naming another cluster on the same host, or another server of the same cluster (a second
// standby), is refused with a configuration error before anything is written into it or a
// restart is made on it. Before, slotsync wrote slot state files and a decoding snapshot into the
// other cluster (which then failed to start: PANIC, unsupported slot file version) and restarted
// it.
func TestStatefileRefusesAnotherDataDir(t *testing.T) {
	pgtest.ForEachMajor(t, []int{13, 15}, func(t *testing.T, major int) {
		f := newFixtureWith(t, major, topology.MethodStatefile, integration.Options{})
		f.must(f.pair.Primary.ExecDB(f.ctx, "app", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')"))
		f.must(f.pair.WaitCaughtUp(f.ctx))
		other := pgtest.StartPair(t, integration.Options{Major: major})
		second, err := f.pair.AddStandby(f.ctx, "second")
		f.must(err)
		for _, n := range []*integration.Node{other.Standby, second} {
			var started string
			f.must(n.QueryRow(f.ctx, "SELECT pg_postmaster_start_time()::text", nil, &started))
			f.eng.Close()
			f.cfg.Statefile.DataDir, f.cfg.Statefile.Restarter = n.DataDir, nodeRestarter{n}
			f.startEngine()
			_, err := f.eng.RunOnce(f.ctx)
			if err == nil || Classify(err) != Stop {
				t.Fatalf("a pass with --standby-data-dir of %s: want a configuration error, got %v", n.Name, err)
			}
			t.Logf("%s: %v", n.Name, err)
			if _, err := os.Stat(filepath.Join(n.DataDir, "pg_replslot", "cdc")); err == nil {
				t.Fatalf("a slot copy was written into %s", n.DataDir)
			}
			var now string
			f.must(n.QueryRow(f.ctx, "SELECT pg_postmaster_start_time()::text", nil, &now))
			if now != started {
				t.Fatalf("%s was restarted", n.Name)
			}
		}
		// The standby's own directory: the copy is made.
		f.eng.Close()
		f.cfg.Statefile.DataDir, f.cfg.Statefile.Restarter = f.pair.Standby.DataDir, nodeRestarter{f.pair.Standby}
		f.startEngine()
		if _, ok := f.pass()["cdc"]; !ok {
			t.Fatal("no copy of cdc with the standby's own data directory")
		}
	})
}
