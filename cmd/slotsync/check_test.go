package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/slotsync/slotsync/lsncheck"
	slotsync "github.com/slotsync/slotsync/sync"
)

// TestCheckResultCannotTell: a gate that cannot judge without the primary says so in the JSON a
// hook reads, and says apart when it is because the primary is alive (a hook then blocks).
func TestCheckResultCannotTell(t *testing.T) {
	for _, tc := range []struct {
		err         error
		tell, alive bool
	}{
		{fmt.Errorf("reach the primary: timeout: %w", slotsync.ErrPrimaryAlive), true, true},
		{fmt.Errorf("reach the primary: timeout: %w: the record is old", slotsync.ErrCannotTell), true, false},
		{errors.New("connect to standby: refused"), false, false},
	} {
		r := newCheckResult(nil, tc.err)
		if r.CannotTell != tc.tell || r.PrimaryAlive != tc.alive || r.Ready || r.ExitCode != exitConnect {
			t.Errorf("%v: cannot_tell %v primary_alive %v ready %v exit %d", tc.err, r.CannotTell, r.PrimaryAlive, r.Ready, r.ExitCode)
		}
		data, _ := json.Marshal(r)
		if got := strings.Contains(string(data), `"primary_alive":true`); got != tc.alive {
			t.Errorf("%v: JSON %s", tc.err, data)
		}
	}
}

// TestNoLagWithoutACopy: a slot with no copy shows no sync lag ("-"), not "0 B", which reads as
// in sync; a copy shows its lag.
func TestNoLagWithoutACopy(t *testing.T) {
	rep := &slotsync.Report{Slots: []slotsync.SlotReport{
		{Name: "missing", Gate: true, Primary: &lsncheck.Position{}},
		{Name: "copied", Gate: true, Primary: &lsncheck.Position{}, Copy: &lsncheck.Position{}, Verdict: lsncheck.Verdict{SyncLagBytes: 2048}},
	}}
	var check, status bytes.Buffer
	printCheck(&check, newCheckResult(rep, nil))
	printStatus(&status, newCheckResult(rep, nil))
	for name, out := range map[string]string{"check": check.String(), "status": status.String()} {
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "missing") && (strings.Contains(line, "0 B / 0 B") || (name == "check" && strings.Contains(line, "0 B")) || !strings.Contains(line, " - ")) {
				t.Errorf("%s: %q", name, line)
			}
			if strings.HasPrefix(line, "copied") && !strings.Contains(line, "2.0 KiB") {
				t.Errorf("%s: %q", name, line)
			}
		}
	}
}
