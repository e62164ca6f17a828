package topology

import (
	"testing"
	"time"
)

// TestStreamsLive: a receiver that has heard nothing from its primary for wal_receiver_timeout
// (a minute when that is 0) says nothing of the primary (correctness review round 4, finding 6:
// a silently dead connection kept a hook blocked on primary_alive).
func TestStreamsLive(t *testing.T) {
	cases := []struct {
		status          string
		silent, timeout time.Duration
		want            bool
	}{
		{"streaming", time.Second, time.Minute, true},
		{"streaming", 61 * time.Second, time.Minute, false},
		{"streaming", 10 * time.Second, 5 * time.Second, false},
		{"streaming", 59 * time.Second, 0, true},
		{"streaming", 2 * time.Minute, 0, false},
		{"", 0, time.Minute, false},
	}
	for _, c := range cases {
		n := NodeInfo{InRecovery: true, ReceiverStatus: c.status, ReceiverSilentFor: c.silent, ReceiverTimeout: c.timeout}
		if got := n.StreamsLive(); got != c.want {
			t.Errorf("%+v: StreamsLive %v, want %v", c, got, c.want)
		}
	}
}
