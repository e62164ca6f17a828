package bench

import (
	"context"
	"regexp"
	"strconv"
	stdsync "sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	slotsync "github.com/slotsync/slotsync/sync"
)

var rowID = regexp.MustCompile(`INSERT: id\[integer\]:(\d+)`)

// streamer is a steadily consuming client as pg_recvlogical is without --startpos: it starts
// where the slot's confirmed_flush is, and confirms what it received every 100 ms.
type streamer struct {
	slot string
	mu   stdsync.Mutex
	got  map[int]int
	recv int // rows received, repeats included
	last pglogrepl.LSN
}

func (s *streamer) run(ctx context.Context, dsn string) error {
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if err := pglogrepl.StartReplication(ctx, conn, s.slot, 0, pglogrepl.StartReplicationOptions{}); err != nil {
		return err
	}
	next := time.Now().Add(100 * time.Millisecond)
	for ctx.Err() == nil {
		if time.Now().After(next) {
			s.mu.Lock()
			at := s.last
			s.mu.Unlock()
			if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: at, WALFlushPosition: at, WALApplyPosition: at}); err != nil {
				return err
			}
			next = time.Now().Add(100 * time.Millisecond)
		}
		rctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		msg, err := conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if pgconn.Timeout(err) {
				continue
			}
			return err
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || cd.Data[0] != pglogrepl.XLogDataByteID {
			continue
		}
		xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
		if err != nil {
			return err
		}
		s.mu.Lock()
		if m := rowID.FindSubmatch(xld.WALData); m != nil {
			id, _ := strconv.Atoi(string(m[1]))
			s.got[id]++
			s.recv++
		}
		s.last = max(s.last, xld.WALStart+pglogrepl.LSN(len(xld.WALData)))
		s.mu.Unlock()
	}
	return nil
}

// BenchmarkRedelivery: rows a steadily consuming client (confirming every 100 ms, restarting
// from the slot after a failover) receives twice after the primary is killed -9 and the standby
// promoted: slotsync at its defaults beside PostgreSQL 17's own sync of a failover slot, one
// writer inserting a row every 10 ms. The aim: at most what the consumer confirms in 100 ms.
func BenchmarkRedelivery(b *testing.B) {
	m := major(b)
	if m < 17 {
		b.Skip("the comparison needs PostgreSQL 17+")
	}
	worst := map[string]int{} // rows received twice, the most over the failovers
	for i := 0; i < b.N; i++ {
		p, ctx := startPair(b, m, "sync_replication_slots = on")
		must(b, p.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('ours', 'test_decoding')"))
		must(b, p.Primary.Exec(ctx, "SELECT pg_create_logical_replication_slot('theirs', 'test_decoding', false, false, true)"))
		cfg := slotsync.Config{PrimaryDSN: p.Primary.DSN("postgres"), StandbyDSN: p.Standby.DSN("postgres"), StateDir: b.TempDir(), Logger: hclog.NewNullLogger()}
		e, err := slotsync.New(cfg)
		must(b, err)
		runCtx, stopSync := context.WithCancel(ctx)
		syncDone := make(chan struct{})
		go func() { _ = e.Run(runCtx, nil); close(syncDone) }()
		streamers := map[string]*streamer{"slotsync": {slot: "ours", got: map[int]int{}}, "postgres": {slot: "theirs", got: map[int]int{}}}
		streamCtx, stopStreams := context.WithCancel(ctx)
		var wg stdsync.WaitGroup
		for _, s := range streamers {
			wg.Add(1)
			go func(s *streamer) { defer wg.Done(); _ = s.run(streamCtx, p.Primary.ReplicationDSN("postgres", true)) }(s)
		}
		id := 0
		write := func(d time.Duration) {
			for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				id++
				_ = p.Primary.Exec(ctx, "INSERT INTO t (id, v) VALUES ($1, 'x')", id)
			}
		}
		write(20 * time.Second) // the copies exist and are READY, the consumers steady
		must(b, p.Primary.Kill(ctx))
		stopStreams()
		wg.Wait()
		stopSync()
		<-syncDone
		e.Close()
		must(b, p.Promote(ctx))
		before := map[string]int{}
		for who, s := range streamers {
			before[who] = s.recv
		}
		streamCtx, stopStreams = context.WithCancel(ctx)
		for _, s := range streamers {
			wg.Add(1)
			go func(s *streamer) { defer wg.Done(); _ = s.run(streamCtx, p.Standby.ReplicationDSN("postgres", true)) }(s)
		}
		time.Sleep(3 * time.Second)
		stopStreams()
		wg.Wait()
		for who, s := range streamers {
			twice := 0
			for _, n := range s.got {
				if n > 1 {
					twice++
				}
			}
			if s.recv == before[who] {
				b.Fatalf("%s: the consumer received nothing after the failover", who)
			}
			worst[who] = max(worst[who], twice)
			b.Logf("failover %d: %s: %d rows received twice", i+1, who, twice)
		}
	}
	for who, n := range worst {
		b.ReportMetric(float64(n), who+"-max-rows-twice")
	}
	b.ReportMetric(10, "rows-confirmed-per-100ms")
}
