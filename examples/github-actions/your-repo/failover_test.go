// Package failover_test is a test in your own repository: it fails over a throwaway pair of
// PostgreSQL containers with live consumers and fails on any lost or repeated change. The
// workflow in .github/workflows (failover-drill.yml beside this directory) runs it per major.
package failover_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/drill"
	"github.com/slotsync/slotsync/integration/drill/drilltest"
)

func TestFailoverKeepsOurSlots(t *testing.T) {
	major := 17
	if s := os.Getenv("PG_MAJOR"); s != "" {
		m, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("PG_MAJOR=%q: %v", s, err)
		}
		major = m
	}
	// Image: the official postgres:<major> unless SLOTSYNC_DOCKER_IMAGE names your own.
	drilltest.Check(t, integration.Options{Major: major, Backend: "docker", Image: os.Getenv("SLOTSYNC_DOCKER_IMAGE")},
		drill.Options{Kill: true})
}
