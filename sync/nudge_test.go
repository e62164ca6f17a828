package sync

import (
	"slices"
	"testing"

	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/topology"
)

func TestServerSyncWaits(t *testing.T) {
	slot := func(db string, failover, temporary bool, confirmed lsncheck.LSN) topology.Slot {
		s := topology.Slot{Failover: failover, Temporary: temporary}
		s.Database, s.Plugin, s.ConfirmedFlush = db, "pgoutput", confirmed
		return s
	}
	primary := map[string]topology.Slot{
		"new":       slot("app", true, false, 0x500), // no copy yet
		"temp":      slot("app", true, false, 0x500), // the server's copy still temporary
		"synced":    slot("app", true, false, 0x500), // persistent already
		"away":      slot("app", true, false, 0x200), // its consumer has not confirmed past the last record
		"plain":     slot("app", false, false, 0x500),
		"elsewhere": slot("other", true, false, 0x500), // not selected
	}
	standby := map[string]topology.Slot{
		"temp":   slot("app", true, true, 0x100),
		"synced": slot("app", true, false, 0x500),
	}
	sel := Selection{Databases: []string{"app"}}
	for _, c := range []struct {
		after lsncheck.LSN
		want  []string
	}{
		{0, []string{"away", "new", "temp"}}, // none asked yet: every slot waiting
		{0x300, []string{"new", "temp"}},     // away has not confirmed past the last record
		{0x600, nil},                         // no consumer past it yet: no new record
	} {
		if got := serverSyncWaits(primary, standby, sel, c.after); !slices.Equal(got, c.want) {
			t.Errorf("after %s: %v, want %v", c.after, got, c.want)
		}
	}
}
