package statefile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slotsync/slotsync/lsncheck"
)

// golden15 is a state file written by a real PostgreSQL 15, raw and parsed.
func golden15(t *testing.T) ([]byte, *State) { return goldenState(t, 15) }

// goldenState is a state file written by a real PostgreSQL of the major, raw and parsed.
func goldenState(t *testing.T, major int) ([]byte, *State) {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("testdata/pg%d.state", major))
	if err != nil {
		t.Fatal(err)
	}
	st, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return raw, st
}

// TestRemoveOnlyLogicalSlots: Installer.Remove takes away a logical slot's directory, and never a
// physical slot's (a cascaded standby's, say) or one whose state file it cannot read.
func TestRemoveOnlyLogicalSlots(t *testing.T) {
	raw, logical := golden15(t)
	physical, _ := Parse(raw)
	physical.Database, physical.Plugin = 0, ""
	physRaw, err := physical.Encode()
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	slots := map[string][]byte{"cdc": raw, "cascade": physRaw, "garbled": []byte("not a state file")}
	for name, content := range slots {
		dir := filepath.Join(data, "pg_replslot", name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "state"), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(data, "pg_replslot", "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	in := Installer{DataDir: data}
	if logical.Database == 0 {
		t.Fatal("the golden file should be a logical slot")
	}
	for name, want := range map[string]string{"cascade": "physical slot", "garbled": "cannot read"} {
		if err := in.Remove(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("remove %s: %v, want an error saying %q", name, err, want)
		}
		if _, err := os.Stat(filepath.Join(data, "pg_replslot", name, "state")); err != nil {
			t.Errorf("%s was touched: %v", name, err)
		}
	}
	for _, name := range []string{"cdc", "empty", "absent"} {
		if err := in.Remove(name); err != nil {
			t.Errorf("remove %s: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(data, "pg_replslot", name)); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", name, err)
		}
	}
}

// TestInstallNeverSynced: a 17+ state file that says synced (the primary was once a standby
// whose server synced the slot) is installed as an ordinary slot; failover is kept as read.
func TestInstallNeverSynced(t *testing.T) {
	_, st := goldenState(t, 17)
	st.Synced, st.Failover = true, true
	in := Installer{DataDir: t.TempDir()}
	if err := os.MkdirAll(in.replslot(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := in.Install(st, nil); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(in.replslot(), st.Name, "state"))
	if err != nil {
		t.Fatal(err)
	}
	installed, err := Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if installed.Synced || !installed.Failover || installed.ConfirmedFlush != st.ConfirmedFlush {
		t.Errorf("installed synced=%v failover=%v confirmed_flush %s, want an unsynced copy of %s with failover kept",
			installed.Synced, installed.Failover, lsncheck.LSN(installed.ConfirmedFlush), lsncheck.LSN(st.ConfirmedFlush))
	}
	if !st.Synced {
		t.Error("Install changed the state it was given")
	}
}

// TestInstallWithSnapshot: the decoding snapshot goes into pg_logical/snapshots under the name
// PostgreSQL looks for, before the slot directory; one already there is kept; a snapshot of
// another position than the state file's restart_lsn is refused and nothing is written.
func TestInstallWithSnapshot(t *testing.T) {
	_, st := golden15(t)
	data := t.TempDir()
	for _, d := range []string{"pg_replslot", "pg_logical/snapshots"} {
		if err := os.MkdirAll(filepath.Join(data, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	in := Installer{DataDir: data}
	snapPath := filepath.Join(data, "pg_logical", "snapshots", SnapshotName(st.RestartLSN))

	wrong := &Snapshot{LSN: st.RestartLSN + 8, Data: []byte{1, 0xE0, 0xA1, 0x51}}
	if err := in.Install(st, wrong); err == nil {
		t.Fatal("a snapshot of another position was installed")
	}
	if ents, _ := os.ReadDir(filepath.Join(data, "pg_logical", "snapshots")); len(ents) != 0 {
		t.Fatalf("a refused install wrote %v", ents)
	}
	if _, err := os.Stat(filepath.Join(data, "pg_replslot", st.Name)); !os.IsNotExist(err) {
		t.Fatalf("a refused install wrote the slot: %v", err)
	}

	want := []byte{1, 0xE0, 0xA1, 0x51, 42}
	if err := in.Install(st, &Snapshot{LSN: st.RestartLSN, Data: want}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(snapPath)
	if err != nil || string(got) != string(want) {
		t.Fatalf("snapshot %s: %v %v", snapPath, got, err)
	}
	if fi, _ := os.Stat(snapPath); fi.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot mode %v", fi.Mode())
	}
	if err := in.Remove(st.Name); err != nil {
		t.Fatal(err)
	}
	if err := in.Install(st, &Snapshot{LSN: st.RestartLSN, Data: []byte("other")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(snapPath); string(got) != string(want) {
		t.Fatalf("a snapshot already there was overwritten: %v", got)
	}
	if SnapshotName(0x1_0000_2A30) != "1-2A30.snap" {
		t.Fatalf("name %s", SnapshotName(0x1_0000_2A30))
	}
}

// TestTimelineOf: after failovers, a WAL segment is named on the timeline it was written on, as
// the primary's walsender reads it: a timeline's switch segment is the next timeline's file.
func TestTimelineOf(t *testing.T) {
	src := WALSource{Timeline: 3, SegmentSize: 0x1000000, History: map[int]lsncheck.LSN{1: 0x3000158, 2: 0x5A00000}}
	for lsn, want := range map[uint64]uint32{0x1000000: 1, 0x2FFFFFF: 1, 0x3000000: 2, 0x3000158: 2, 0x4000000: 2, 0x4FFFFFF: 2, 0x5000000: 3, 0x59FFFFF: 3, 0x7000000: 3} {
		if got := src.TimelineOf(lsn); got != want {
			t.Errorf("%X: timeline %d, want %d", lsn, got, want)
		}
	}
	if got := (WALSource{Timeline: 2, SegmentSize: 0x1000000}).TimelineOf(0x1000000); got != 2 {
		t.Errorf("without a history: %d", got)
	}
}

// TestServerState reads postmaster.pid: a live pid runs; its status line says whether it stops.
func TestServerState(t *testing.T) {
	dir := t.TempDir()
	write := func(status string) {
		content := fmt.Sprintf("%d\n%s\n1700000000\n5432\n/tmp\n127.0.0.1\n  1234   5678\n%s\n", os.Getpid(), dir, status)
		if err := os.WriteFile(filepath.Join(dir, "postmaster.pid"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if r, s, err := ServerState(dir); r || s || err != nil {
		t.Fatalf("no postmaster.pid: %v %v %v", r, s, err)
	}
	write("ready   ")
	if r, s, err := ServerState(dir); !r || s || err != nil {
		t.Fatalf("ready: %v %v %v", r, s, err)
	}
	write("stopping")
	if r, s, err := ServerState(dir); !r || !s || err != nil {
		t.Fatalf("stopping: %v %v %v", r, s, err)
	}
}
