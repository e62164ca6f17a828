package drilltest_test

import (
	"testing"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/drill"
	"github.com/slotsync/slotsync/integration/drill/drilltest"
)

// In your own repository, a test that fails over a throwaway pair with live consumers (here
// containers of the official postgres image) and fails on any lost or repeated change.
func ExampleCheck() {
	_ = func(t *testing.T) {
		v := drilltest.Check(t, integration.Options{Major: 17, Backend: "docker"}, drill.Options{Kill: true})
		t.Logf("%d failovers, every change exactly once", len(v.Failovers))
	}
}
