package drilltest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/drill/drilltest"
	"github.com/slotsync/slotsync/integration/pgtest"
)

// TestChaosOnDocker runs the chaos drill as a team would against its own image: a pair of
// containers, the slotsync binary as the sidecar on the host, one faulted failover. It skips
// without a reachable Docker engine. Its seed is fixed, so that CI draws the same failover each
// run; SLOTSYNC_CHAOS_SEED replays another ("clock" draws one, printed).
func TestChaosOnDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a drill runs on real PostgreSQL pairs")
	}
	major := pgtest.DockerMajor()
	if major < 16 {
		t.Skipf("the chaos drill on PostgreSQL %d needs the state-file method, which writes into the standby's data directory: not inside a container", major)
	}
	bin := filepath.Join(t.TempDir(), "slotsync")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../cmd/slotsync").CombinedOutput(); err != nil {
		t.Fatalf("build slotsync: %v\n%s", err, out)
	}
	seed := int64(5100)
	switch s := os.Getenv("SLOTSYNC_CHAOS_SEED"); s {
	case "":
	case "clock":
		seed = 0 // drilltest.Chaos draws one from the clock and logs it
	default:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("SLOTSYNC_CHAOS_SEED=%q: want a number or \"clock\"", s)
		}
		seed = n
	}
	rep := drilltest.Chaos(t, integration.Options{Major: major, Backend: "docker"}, bin, 1, seed)
	if len(rep.Iterations) != 1 || len(rep.Iterations[0].Judged) == 0 {
		t.Fatalf("no failover was judged: %+v", rep)
	}
}
