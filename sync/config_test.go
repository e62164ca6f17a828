package sync

import (
	"strings"
	"testing"
	"time"
)

// TestMaxRecordAgeBelowStandbyGoneAfter: a record older than --standby-gone-after could claim a
// slot held back after any node's sidecar took the standby out of synchronized_standby_slots.
func TestMaxRecordAgeBelowStandbyGoneAfter(t *testing.T) {
	cfg := Config{StandbyDSN: "x", ReadOnly: true, MaxRecordAge: 5 * time.Minute, Native: NativeConfig{StandbyGoneAfter: time.Minute}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "standby-gone-after") {
		t.Fatalf("want a configuration error naming --standby-gone-after, got %v", err)
	}
	cfg.MaxRecordAge = 30 * time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}
