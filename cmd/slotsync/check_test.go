package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

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
