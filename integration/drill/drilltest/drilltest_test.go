package drilltest

import (
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/drill"
)

// TestCheckOnDocker is the helper users call from their own CI; it skips without a Docker engine.
func TestCheckOnDocker(t *testing.T) {
	Check(t, integration.Options{Major: 17, Backend: "docker"}, drill.Options{Duration: time.Second, Kill: true})
}
