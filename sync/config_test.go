package sync

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slotsync/slotsync/sync/method/statefile"
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

// TestExactCopyAfterNeedsItsSettings: --exact-copy-after is refused, with the fix, where it
// could not work or would mean nothing; nothing else is changed.
func TestExactCopyAfterNeedsItsSettings(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string // "" for accepted
	}{
		{"negative", Config{ExactCopyAfter: -time.Second}, "give --exact-copy-after a duration"},
		{"with the state-file method", Config{ExactCopyAfter: time.Minute, Method: "statefile"}, "leave out --exact-copy-after"},
		{"without the data directory", Config{ExactCopyAfter: time.Minute}, "give --standby-data-dir"},
		{"with --restart never", Config{ExactCopyAfter: time.Minute, Statefile: statefile.Config{DataDir: "/srv/pg"}}, "give --restart pg_ctl"},
		{"with it", Config{ExactCopyAfter: time.Minute, Statefile: statefile.Config{DataDir: "/srv/pg", Restarter: noRestart{}}}, ""},
		{"check judges, writes nothing", Config{ExactCopyAfter: time.Minute, ReadOnly: true}, ""},
		{"off", Config{}, ""},
	} {
		c.cfg.StandbyDSN, c.cfg.StateDir = "x", "/var/lib/slotsync"
		err := c.cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: want an error naming %q, got %v", c.name, c.want, err)
		}
	}
}

// noRestart is a restarter that is never called (configuration checks only).
type noRestart struct{}

func (noRestart) Stop(context.Context) error  { return nil }
func (noRestart) Start(context.Context) error { return nil }
