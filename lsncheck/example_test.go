package lsncheck_test

import (
	"fmt"

	"github.com/slotsync/slotsync/lsncheck"
)

// A standby copy that trails its consumer is READY: after a promotion the consumer gets again
// what it confirmed since (redelivery), and loses nothing.
func ExampleReadiness() {
	id := lsncheck.Identity{Name: "cdc", Database: "app", Plugin: "pgoutput"}
	primary := lsncheck.Seen{Identity: id, Position: lsncheck.Position{RestartLSN: 0x1000000, ConfirmedFlush: 0x2000400, CatalogXmin: 750}}
	copied := lsncheck.Seen{Identity: id, Position: lsncheck.Position{RestartLSN: 0x1000000, ConfirmedFlush: 0x2000000, CatalogXmin: 750}}
	v := lsncheck.Readiness(lsncheck.ReadinessInput{
		Primary: primary, CopyExists: true, Copy: copied, CopyWALAvailable: true, StandbyWALEnd: 0x3000000,
	})
	fmt.Println(v.Ready, v.SyncLagBytes)

	// A copy ahead of its consumer would skip what the consumer has not confirmed yet.
	copied.ConfirmedFlush = 0x2000800
	v = lsncheck.Readiness(lsncheck.ReadinessInput{
		Primary: primary, CopyExists: true, Copy: copied, CopyWALAvailable: true, StandbyWALEnd: 0x3000000,
	})
	fmt.Println(v.Ready, v.Reasons)
	// Output:
	// true 1024
	// false [copy_confirmed_flush_ahead]
}

// A slot seen again with its restart_lsn gone back is another slot of the same name.
func ExampleCompareIncarnation() {
	id := lsncheck.Identity{Name: "cdc", Database: "app", Plugin: "pgoutput"}
	before := lsncheck.Seen{Identity: id, Position: lsncheck.Position{RestartLSN: 0x2000000, ConfirmedFlush: 0x2100000, CatalogXmin: 760}}
	after := lsncheck.Seen{Identity: id, Position: lsncheck.Position{RestartLSN: 0x1000000, ConfirmedFlush: 0x2200000, CatalogXmin: 760}}
	change, why := lsncheck.CompareIncarnation(before, after)
	fmt.Println(change == lsncheck.NewIncarnation, why)
	// Output: true restart_lsn went backwards from 0/2000000 to 0/1000000
}
