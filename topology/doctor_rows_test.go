package topology

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryProblemHasADoctorRow: Doctor lists only the checks in its table, so a problem whose
// check has no row there is never shown (a state-file copy NOT READY while doctor says OK).
// Every check and node this package's code can emit, read from its source, has a row.
func TestEveryProblemHasADoctorRow(t *testing.T) {
	rows := map[string]bool{}
	for _, d := range doctorChecks {
		rows[d.name+"/"+d.node] = true
	}
	emitted := regexp.MustCompile(`(?:Check: "([a-z_]+)", Node: "([a-z]+)"|add\("([a-z_]+)", "([a-z]+)")`)
	files, _ := filepath.Glob("*.go")
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range emitted.FindAllStringSubmatch(string(src), -1) {
			check, node := m[1]+m[3], m[2]+m[4]
			seen++
			if !rows[check+"/"+node] {
				t.Errorf("%s: check %q on %s can be emitted but has no row in doctorChecks: doctor would never show it", f, check, node)
			}
		}
	}
	if seen < 20 {
		t.Fatalf("found only %d emitted checks: the pattern no longer matches how problems are made", seen)
	}
}

// TestDoctorShowsMissingSnapshotGrant: a role that may not stat files on the standby keeps every
// state-file copy NOT READY; doctor says so, with the grant.
func TestDoctorShowsMissingSnapshotGrant(t *testing.T) {
	primary := NodeInfo{VersionNum: 150004, CanReadStateFiles: true, CanCheckpoint: true}
	standby := NodeInfo{VersionNum: 150004, InRecovery: true, CanStatFiles: false}
	for _, c := range Doctor(DoctorInput{Primary: primary, Standby: standby, Physical: PhysicalSlot{}, Method: MethodStatefile, PrimarySlots: 1}) {
		if c.Name == "decoding_snapshots" {
			if c.OK || !strings.Contains(c.Fix, "pg_stat_file") {
				t.Fatalf("decoding_snapshots: %+v", c)
			}
			return
		}
	}
	t.Fatal("doctor lists no decoding_snapshots check for the state-file method")
}
