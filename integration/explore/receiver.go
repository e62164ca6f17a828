package explore

import (
	"context"
	"fmt"
	stdsync "sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/integration"
)

// receiverLog is the ground truth of whether the standby streamed from its primary: its WAL
// receiver's status, read every receiverEvery through the iteration. The oracle judges an answer
// made without a primary that was alive against it: the gate may judge without the primary only
// once the standby has not streamed for --primary-gone-after (rule 8).
type receiverLog struct {
	node    atomic.Pointer[integration.Node] // the standby now (a switchover changes it)
	mu      stdsync.Mutex
	samples []receiverSample
}

type receiverSample struct {
	at        time.Time
	streaming bool
	// copies: the standby's logical slots, each "name confirmed_flush restart_lsn".
	copies string
}

const receiverEvery = 100 * time.Millisecond

// run samples until ctx ends; a failed read (the standby restarting) is a sample of not streaming.
func (r *receiverLog) run(ctx context.Context) {
	var conn *pgx.Conn
	var on *integration.Node
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for ctx.Err() == nil {
		n := r.node.Load()
		if n != on && conn != nil {
			conn.Close(context.Background())
			conn = nil
		}
		on = n
		streaming, copies := false, ""
		if conn == nil && n != nil {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			conn, _ = n.Connect(cctx, "postgres")
			cancel()
		}
		if conn != nil {
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			err := conn.QueryRow(qctx, standbySample).Scan(&streaming, &copies)
			cancel()
			if err != nil {
				conn.Close(context.Background())
				conn, streaming = nil, false
			}
		}
		r.mu.Lock()
		r.samples = append(r.samples, receiverSample{at: time.Now(), streaming: streaming, copies: copies})
		r.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(receiverEvery):
		}
	}
}

// standbySample reads whether the standby streams and where its copies stand.
const standbySample = `SELECT EXISTS (SELECT FROM pg_stat_wal_receiver WHERE status = 'streaming'),
       coalesce((SELECT string_agg(slot_name || ' ' || coalesce(confirmed_flush_lsn::text, '-') || ' ' || coalesce(restart_lsn::text, '-'), ', '
                   ORDER BY slot_name) FROM pg_replication_slots WHERE slot_type = 'logical'), '')`

// timeline is what the samples saw change, from start on: the standby streaming or not, and
// its copies' positions (each pass's advances), one line per change ("+1.2s ...").
func (r *receiverLog) timeline(start time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	var prev *receiverSample
	for i := range r.samples {
		s := &r.samples[i]
		at := fmt.Sprintf("%+.1fs", s.at.Sub(start).Seconds())
		if prev == nil || s.streaming != prev.streaming {
			out = append(out, at+map[bool]string{true: " the standby streams", false: " the standby does not stream"}[s.streaming])
		}
		if (prev == nil || s.copies != prev.copies) && (s.copies != "" || prev != nil) {
			out = append(out, at+" copies: "+s.copies)
		}
		prev = s
	}
	return out
}

// notStreamingAround: every sample within margin of t saw the standby not streaming, and there
// was one at least.
func (r *receiverLog) notStreamingAround(t time.Time, margin time.Duration) bool {
	if r == nil || t.IsZero() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := false
	for _, s := range r.samples {
		if s.at.Before(t.Add(-margin)) || s.at.After(t.Add(margin)) {
			continue
		}
		if s.streaming {
			return false
		}
		seen = true
	}
	return seen
}

// lastStreamed is the last sample at or before t that saw the standby streaming (zero: none).
func (r *receiverLog) lastStreamed(t time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last time.Time
	for _, s := range r.samples {
		if s.at.After(t) {
			break
		}
		if s.streaming {
			last = s.at
		}
	}
	return last
}
