package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/slotsync/slotsync/lsncheck"
)

// PhysicalSlot is the name of the physical slot the standby streams through.
const PhysicalSlot = "slotsync_standby"

// StandbyAppName is the standby's application_name in pg_stat_replication.
const StandbyAppName = "standby"

// EnvBackend names the environment variable that chooses the backend: "local" (default) or "docker".
const EnvBackend = "SLOTSYNC_BACKEND"

// Options describe the pair to start.
type Options struct {
	Major int
	// Backend names where the servers run: "local" (binaries on this machine, the default) or
	// "docker". Empty: $SLOTSYNC_BACKEND, else "local". Any backend but local needs Launch.
	Backend string
	// Launch starts the pair's servers for a backend other than local, e.g. docker.Launch from
	// integration/docker (testcontainers-go), which this package does not link.
	Launch func(ctx context.Context, opts Options) (*Pair, error)
	// Conf lines are added to both nodes' postgresql.conf; PrimaryConf/StandbyConf to one only.
	Conf, PrimaryConf, StandbyConf []string
	// BaseDir is where the pair's temporary directory is made (default: the system temp dir).
	BaseDir string
	// Image is the container image for the Docker backend (default postgres:<major>).
	Image string
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
	// BeforeStandby, when set, runs on the primary before the standby is made (to create
	// slots that predate the standby, say).
	BeforeStandby func(ctx context.Context, primary *Node) error
	// NoStandby starts the primary alone (Pair.Standby is nil): a lone server, e.g. a
	// subscriber. Local backend only.
	NoStandby bool
	// WALSegmentMB is the WAL segment size initdb gives the cluster, in megabytes (0: 16);
	// sizes over 64 need min_wal_size and max_wal_size of at least two segments in Conf.
	// Local backend only.
	WALSegmentMB int
	// Minor names an older minor of Major to run instead of the newest (e.g. "16.2", for a
	// server bug fixed since): its binaries come from the cache (scripts/fetch-postgres.sh 16.2).
	// Local backend only.
	Minor string
}

// Pair is a running primary with a streaming physical standby.
type Pair struct {
	Major   int
	Primary *Node
	Standby *Node
	// Dir holds every file of a local pair (data directories, sockets, logs); empty for Docker.
	Dir     string
	cleanup []func(context.Context) error
	// promoteCommand, for external pairs, promotes the standby (sh -c).
	promoteCommand string
	// standbyConf is re-applied when a node is rebuilt as the standby (Rejoin).
	standbyConf []string
}

// BaseConf returns the settings every pair's nodes start with (a new slice each call).
func BaseConf() []string { return append([]string(nil), baseConf...) }

// OnClose adds f to what Close runs; Close runs them in reverse order (stop servers, then
// remove what they used). For backends outside this package.
func (p *Pair) OnClose(f func(context.Context) error) { p.cleanup = append(p.cleanup, f) }

// baseConf applies to both nodes of every pair.
var baseConf = []string{
	"listen_addresses = '127.0.0.1'",
	"wal_level = logical",
	"max_wal_senders = 16",
	"max_replication_slots = 64",
	"max_connections = 100",
	"shared_buffers = 32MB",
	"hot_standby = on",
	"hot_standby_feedback = on",
	// Test servers only crash by SIGKILL, which keeps the OS page cache: fsync buys nothing here.
	"fsync = off",
	"log_line_prefix = '%m [%p] %q%a '",
	"log_replication_commands = on",
}

func (o Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

// NewPair starts a primary and a streaming standby. On error everything started is stopped.
// The caller must call Close.
func NewPair(ctx context.Context, opts Options) (*Pair, error) {
	if !isSupported(opts.Major) {
		return nil, fmt.Errorf("PostgreSQL %d is not supported; use one of %v", opts.Major, SupportedMajors)
	}
	backend := opts.Backend
	if backend == "" {
		backend = os.Getenv(EnvBackend)
	}
	var (
		p   *Pair
		err error
	)
	switch {
	case opts.Launch != nil:
		p, err = opts.Launch(ctx, opts)
	case backend == "" || backend == "local":
		p, err = newLocalPair(ctx, opts)
	default:
		return nil, fmt.Errorf("backend %q (%s): set Options.Launch (docker.Launch from integration/docker), or use the local backend", backend, EnvBackend)
	}
	if err != nil {
		if p != nil {
			_ = p.Close()
		}
		return nil, err
	}
	if opts.NoStandby {
		return p, nil
	}
	if err := p.WaitStreaming(ctx); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

func newLocalPair(ctx context.Context, opts Options) (*Pair, error) {
	bin, err := opts.binaries()
	if err != nil {
		return nil, err
	}
	run, err := currentRunAs()
	if err != nil {
		return nil, err
	}
	if err := run.checkReachable(bin.Path("postgres")); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(opts.BaseDir, fmt.Sprintf("slotsync-pg%d-", opts.Major))
	if err != nil {
		return nil, fmt.Errorf("make pair directory: %w", err)
	}
	p := &Pair{Major: opts.Major, Dir: dir, standbyConf: opts.StandbyConf}
	p.cleanup = append(p.cleanup, func(context.Context) error { return os.RemoveAll(dir) })
	sock := filepath.Join(dir, "sock")
	if err := os.Mkdir(sock, 0o700); err != nil {
		return p, err
	}
	if err := run.chownTree(dir); err != nil {
		return p, fmt.Errorf("give %s to %s: %w", dir, run.name, err)
	}
	newServer := func(name string) (*localServer, error) {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		return &localServer{bin: bin, run: run, dataDir: filepath.Join(dir, name), sockDir: sock,
			logFile: filepath.Join(dir, name+".log"), port: port}, nil
	}

	prim, err := newServer("primary")
	if err != nil {
		return p, err
	}
	opts.logf("pg%d: new cluster %s", opts.Major, prim.dataDir)
	if err := prim.newCluster(ctx, opts.WALSegmentMB); err != nil {
		return p, err
	}
	conf := append(append(append([]string{}, baseConf...), opts.Conf...), "include 'node.conf'")
	if err := appendLines(filepath.Join(prim.dataDir, "postgresql.conf"), conf); err != nil {
		return p, err
	}
	if err := writeNodeConf(run, prim, append([]string{"cluster_name = 'primary'"}, opts.PrimaryConf...)); err != nil {
		return p, err
	}
	p.Primary = &Node{Name: "primary", Major: opts.Major, DataDir: prim.dataDir, life: prim}
	// Stop servers before the directory is removed: cleanup runs in reverse order.
	p.cleanup = append(p.cleanup, prim.close)
	if err := p.Primary.Start(ctx); err != nil {
		return p, err
	}
	if err := p.Primary.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true)", PhysicalSlot); err != nil {
		return p, err
	}

	if opts.BeforeStandby != nil {
		if err := opts.BeforeStandby(ctx, p.Primary); err != nil {
			return p, fmt.Errorf("before the standby: %w", err)
		}
	}
	if opts.NoStandby {
		return p, nil
	}
	// The standby is a copy of the cleanly stopped primary (what pg_basebackup would give,
	// without needing it: some packaged majors ship only initdb, pg_ctl and postgres).
	opts.logf("pg%d: cloning the primary into a standby", opts.Major)
	if err := p.Primary.Stop(ctx); err != nil {
		return p, err
	}
	stby, err := newServer("standby")
	if err != nil {
		return p, err
	}
	if err := copyDataDir(prim.dataDir, stby.dataDir); err != nil {
		return p, fmt.Errorf("copy primary data directory: %w", err)
	}
	if err := run.chownTree(stby.dataDir); err != nil {
		return p, err
	}
	if err := p.Primary.Start(ctx); err != nil {
		return p, err
	}
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=postgres application_name=%s",
		prim.port, Superuser, StandbyAppName)
	if err := makeStandby(run, stby, opts.Major, conninfo, opts.StandbyConf); err != nil {
		return p, err
	}
	p.Standby = &Node{Name: "standby", Major: opts.Major, DataDir: stby.dataDir, life: stby}
	p.cleanup = append(p.cleanup, stby.close)
	if err := p.Standby.Start(ctx); err != nil {
		return p, err
	}
	return p, nil
}

// makeStandby configures s as a standby streaming from conninfo through the pair's physical
// slot: settings and standby.signal on 12+, recovery.conf on 11 (where these are not settings).
func makeStandby(run runAs, s *localServer, major int, conninfo string, extra []string) error {
	return makeStandbyOf(run, s, major, conninfo, PhysicalSlot, extra)
}

// makeStandbyOf is makeStandby through physical slot slot.
func makeStandbyOf(run runAs, s *localServer, major int, conninfo, slot string, extra []string) error {
	recovery := []string{
		fmt.Sprintf("primary_conninfo = '%s'", conninfo),
		fmt.Sprintf("primary_slot_name = '%s'", slot),
	}
	if major < 12 {
		if err := writeNodeConf(run, s, append([]string{"cluster_name = 'standby'"}, extra...)); err != nil {
			return err
		}
		_ = os.Remove(filepath.Join(s.dataDir, "recovery.done"))
		return writeOwned(run, filepath.Join(s.dataDir, "recovery.conf"), []byte("standby_mode = 'on'\n"+strings.Join(recovery, "\n")+"\n"))
	}
	if err := writeNodeConf(run, s, append(append([]string{"cluster_name = 'standby'"}, recovery...), extra...)); err != nil {
		return err
	}
	return writeOwned(run, filepath.Join(s.dataDir, "standby.signal"), nil)
}

// writeNodeConf writes the settings that differ between the nodes (node.conf, included last
// from postgresql.conf, before postgresql.auto.conf).
func writeNodeConf(run runAs, s *localServer, extra []string) error {
	s.conf = extra
	lines := append([]string{
		fmt.Sprintf("port = %d", s.port),
		fmt.Sprintf("unix_socket_directories = '%s'", s.sockDir),
	}, extra...)
	return writeOwned(run, filepath.Join(s.dataDir, "node.conf"), []byte(strings.Join(lines, "\n")+"\n"))
}

func writeOwned(run runAs, path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return run.chownTree(path)
}

func appendLines(path string, lines []string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString("\n# slotsync test pair\n" + strings.Join(lines, "\n") + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Close stops both servers (also after a crash or a failed start) and removes every file.
func (p *Pair) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	for i := len(p.cleanup) - 1; i >= 0; i-- {
		errs = append(errs, p.cleanup[i](ctx))
	}
	p.cleanup = nil
	return errors.Join(errs...)
}

// Poll calls check every interval until it reports done (nil), or ctx or timeout ends (an error
// naming what was awaited and the last error check returned).
func Poll(ctx context.Context, timeout time.Duration, what string, check func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		done, err := check(ctx)
		if err == nil && done {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitStreaming waits until the primary shows the standby streaming.
func (p *Pair) WaitStreaming(ctx context.Context) error {
	return Poll(ctx, 2*time.Minute, "the standby to stream", func(ctx context.Context) (bool, error) {
		var n int
		err := p.Primary.QueryRow(ctx,
			"SELECT count(*) FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'",
			[]any{StandbyAppName}, &n)
		return n == 1, err
	})
}

// CurrentLSN returns the primary's current WAL insert position.
func (p *Pair) CurrentLSN(ctx context.Context) (pglogrepl.LSN, error) {
	var s string
	if err := p.Primary.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text", nil, &s); err != nil {
		return 0, err
	}
	return pglogrepl.ParseLSN(s)
}

// ReplayLSN returns the standby's last replayed position.
func (p *Pair) ReplayLSN(ctx context.Context) (pglogrepl.LSN, error) {
	var s string
	if err := p.Standby.QueryRow(ctx, "SELECT coalesce(pg_last_wal_replay_lsn(), '0/0')::text", nil, &s); err != nil {
		return 0, err
	}
	return pglogrepl.ParseLSN(s)
}

// WaitReplayed waits until the standby has replayed up to lsn.
func (p *Pair) WaitReplayed(ctx context.Context, lsn pglogrepl.LSN) error {
	return Poll(ctx, 2*time.Minute, fmt.Sprintf("the standby to replay %s", lsn), func(ctx context.Context) (bool, error) {
		got, err := p.ReplayLSN(ctx)
		return got >= lsn, err
	})
}

// DropPhysicalSlot drops the standby's physical slot on the primary, as a cleanup that takes it
// for an orphan would: it ends the walsender that holds it, and tries again while the slot is
// still active, for at most 10 s. The standby's WAL receiver fails to start again until the
// slot is made again (CreatePhysicalSlot); meanwhile the primary keeps no WAL and no horizon for
// it.
func (p *Pair) DropPhysicalSlot(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := p.Primary.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL",
			PhysicalSlot)
		if err == nil {
			err = p.Primary.Exec(ctx, "SELECT pg_drop_replication_slot($1)", PhysicalSlot)
		}
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// CreatePhysicalSlot makes the standby's physical slot on the primary again (after
// DropPhysicalSlot), reserving WAL at once; the standby's WAL receiver takes it at its next try
// (wal_retrieve_retry_interval) and its first report sets the slot's horizon from none.
func (p *Pair) CreatePhysicalSlot(ctx context.Context) error {
	return p.Primary.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true)", PhysicalSlot)
}

// SetStandbyFeedback turns the standby's hot_standby_feedback off, or on again (its
// configuration file's value: on), by ALTER SYSTEM and a reload.
func (p *Pair) SetStandbyFeedback(ctx context.Context, on bool) error {
	sql := "ALTER SYSTEM SET hot_standby_feedback = off"
	if on {
		sql = "ALTER SYSTEM RESET hot_standby_feedback"
	}
	if err := p.Standby.Exec(ctx, sql); err != nil {
		return err
	}
	return p.Standby.Exec(ctx, "SELECT pg_reload_conf()")
}

// Restartpoint makes the standby run a restartpoint: a checkpoint on the primary, replayed, then
// one on the standby. It removes the WAL segments no slot of the standby keeps, and invalidates
// the slots beyond its max_slot_wal_keep_size.
func (p *Pair) Restartpoint(ctx context.Context) error {
	if err := p.Primary.Exec(ctx, "CHECKPOINT"); err != nil {
		return err
	}
	if err := p.WaitCaughtUp(ctx); err != nil {
		return err
	}
	return p.Standby.Exec(ctx, "CHECKPOINT")
}

// CleanStandbyWAL makes a restartpoint on the standby, then removes from its pg_wal every WAL
// file whose segment comes before that restartpoint's redo segment, comparing names without the
// timeline as pg_archivecleanup does: what a pg_archivecleanup aimed at pg_wal by a misconfigured
// archive_cleanup_command does. The server is not told: its slots' wal_status, which counts only
// the WAL it removed itself, still says reserved. It returns how many files it removed and the
// redo position.
func (p *Pair) CleanStandbyWAL(ctx context.Context) (removed int, redo string, err error) {
	if err := p.Restartpoint(ctx); err != nil {
		return 0, "", err
	}
	var segBytes int64
	q := "SELECT redo_lsn::text, (SELECT setting::bigint FROM pg_settings WHERE name = 'wal_segment_size') FROM pg_control_checkpoint()"
	if err := p.Standby.QueryRow(ctx, q, nil, &redo, &segBytes); err != nil {
		return 0, "", err
	}
	pos, err := lsncheck.ParseLSN(redo)
	if err != nil || segBytes <= 0 {
		return 0, redo, fmt.Errorf("the standby's restartpoint at %q, %d-byte segments: %v", redo, segBytes, err)
	}
	keep := lsncheck.SegmentName(0, pos, uint64(segBytes))[8:]
	files, err := filepath.Glob(filepath.Join(p.Standby.DataDir, "pg_wal", strings.Repeat("[0-9A-F]", 24)))
	if err != nil {
		return 0, redo, err
	}
	for _, f := range files {
		if filepath.Base(f)[8:] < keep {
			if err := os.Remove(f); err != nil {
				return removed, redo, err
			}
			removed++
		}
	}
	return removed, redo, nil
}

// HoleStandbyWAL removes from the standby's pg_wal the first WAL file whose segment comes after
// the one holding after and before the one holding the standby's replay position: a file lost
// behind the server's back (a disk error, a careless rm) in the middle of pg_wal, the oldest file
// left in place. The server is not told: its slots' wal_status still says reserved. It returns
// the file removed ("" when no segment lies between the two).
func (p *Pair) HoleStandbyWAL(ctx context.Context, after lsncheck.LSN) (string, error) {
	f, err := p.standbyWALFileBetween(ctx, after)
	if err != nil || f == "" {
		return "", err
	}
	return filepath.Base(f), os.Remove(f)
}

// DamageStandbyWAL overwrites with zeros, keeping its size, the first WAL file of the standby's
// pg_wal whose segment comes after the one holding after and before the one holding the
// standby's replay position: a file damaged on disk behind the server's back. The standby, which
// replayed it already, reads it no more; a decoding that starts before it fails there ("invalid
// magic number"). It returns the file damaged ("" when no segment lies between).
func (p *Pair) DamageStandbyWAL(ctx context.Context, after lsncheck.LSN) (string, error) {
	f, err := p.standbyWALFileBetween(ctx, after)
	if err != nil || f == "" {
		return "", err
	}
	st, err := os.Stat(f)
	if err != nil {
		return "", err
	}
	// Cut to nothing and grown back: its size kept, its bytes read as zeros.
	if err := os.Truncate(f, 0); err != nil {
		return "", err
	}
	return filepath.Base(f), os.Truncate(f, st.Size())
}

// standbyWALFileBetween is the path of the first WAL file of the standby's pg_wal whose segment
// comes after the one holding after and before the one holding the standby's replay position (""
// when there is none).
func (p *Pair) standbyWALFileBetween(ctx context.Context, after lsncheck.LSN) (string, error) {
	var replay string
	var segBytes int64
	q := "SELECT pg_last_wal_replay_lsn()::text, (SELECT setting::bigint FROM pg_settings WHERE name = 'wal_segment_size')"
	if err := p.Standby.QueryRow(ctx, q, nil, &replay, &segBytes); err != nil {
		return "", err
	}
	pos, err := lsncheck.ParseLSN(replay)
	if err != nil || segBytes <= 0 {
		return "", fmt.Errorf("the standby's replay at %q, %d-byte segments: %v", replay, segBytes, err)
	}
	from := lsncheck.SegmentName(0, after, uint64(segBytes))[8:]
	to := lsncheck.SegmentName(0, pos, uint64(segBytes))[8:]
	files, err := filepath.Glob(filepath.Join(p.Standby.DataDir, "pg_wal", strings.Repeat("[0-9A-F]", 24)))
	if err != nil {
		return "", err
	}
	slices.SortFunc(files, func(a, b string) int { return strings.Compare(filepath.Base(a)[8:], filepath.Base(b)[8:]) })
	for _, f := range files {
		if seg := filepath.Base(f)[8:]; seg > from && seg < to {
			return f, nil
		}
	}
	return "", nil
}

// SwitchSegments switches the primary's WAL segment n times, each time out of a segment the
// primary wrote into: pg_switch_wal switches nothing when nothing was written since the last
// switch, so a switch that left the insert position in its segment is followed by a CHECKPOINT
// (WAL no logical consumer decodes) and tried again, within 3n switches in all.
func (p *Pair) SwitchSegments(ctx context.Context, n int) error {
	q := "SELECT pg_walfile_name(pg_current_wal_insert_lsn())"
	var seg string
	if err := p.Primary.QueryRow(ctx, q, nil, &seg); err != nil {
		return err
	}
	for switched, tries := 0, 0; switched < n; tries++ {
		if tries == 3*n {
			return fmt.Errorf("%d of %d WAL segments switched after %d tries", switched, n, tries)
		}
		if err := p.Primary.Exec(ctx, "SELECT pg_switch_wal()"); err != nil {
			return err
		}
		var now string
		if err := p.Primary.QueryRow(ctx, q, nil, &now); err != nil {
			return err
		}
		if now != seg {
			seg, switched = now, switched+1
			continue
		}
		if err := p.Primary.Exec(ctx, "CHECKPOINT"); err != nil {
			return err
		}
	}
	return nil
}

// WaitCaughtUp waits until the standby has replayed everything the primary wrote so far.
func (p *Pair) WaitCaughtUp(ctx context.Context) error {
	lsn, err := p.CurrentLSN(ctx)
	if err != nil {
		return err
	}
	return p.WaitReplayed(ctx, lsn)
}

// PauseReplay pauses WAL replay on the standby and waits until it is really paused.
func (p *Pair) PauseReplay(ctx context.Context) error {
	if err := p.Standby.Exec(ctx, "SELECT pg_wal_replay_pause()"); err != nil {
		return err
	}
	// 14+ tells "pause requested" from "paused"; 13 only knows the request, which replay
	// honours before the next record.
	query := "SELECT pg_get_wal_replay_pause_state() = 'paused'"
	if p.Major < 14 {
		query = "SELECT pg_is_wal_replay_paused()"
	}
	return Poll(ctx, time.Minute, "replay to pause", func(ctx context.Context) (bool, error) {
		var paused bool
		err := p.Standby.QueryRow(ctx, query, nil, &paused)
		return paused, err
	})
}

// ResumeReplay resumes WAL replay on the standby.
func (p *Pair) ResumeReplay(ctx context.Context) error {
	return p.Standby.Exec(ctx, "SELECT pg_wal_replay_resume()")
}

// Promote promotes the standby and waits until it accepts writes.
func (p *Pair) Promote(ctx context.Context) error {
	if p.promoteCommand != "" {
		if err := runPromoteCommand(ctx, p.promoteCommand); err != nil {
			return err
		}
		return Poll(ctx, 2*time.Minute, "the promoted standby to leave recovery", func(ctx context.Context) (bool, error) {
			rec, err := p.Standby.InRecovery(ctx)
			return !rec, err
		})
	}
	if local, isLocal := p.Standby.life.(*localServer); isLocal && p.Major < 12 {
		// 11 has no pg_promote(): pg_ctl promote, as its operators do.
		if err := local.pgctl(ctx, "-w", "-t", "120", "promote"); err != nil {
			return fmt.Errorf("promote standby: %w", err)
		}
	} else {
		var ok bool
		if err := p.Standby.QueryRow(ctx, "SELECT pg_promote(true, 120)", nil, &ok); err != nil {
			return err
		}
		if !ok {
			return errors.New("promote standby: pg_promote returned false")
		}
	}
	return Poll(ctx, time.Minute, "the promoted standby to leave recovery", func(ctx context.Context) (bool, error) {
		rec, err := p.Standby.InRecovery(ctx)
		return !rec, err
	})
}

// DemotePrimary stops the primary cleanly and starts it again in recovery, following no one, as
// an HA manager demotes it in a switchover before re-pointing it: it takes no writes, and the
// standby may stream from it again (a cascade that carries nothing new). Local pairs only.
func (p *Pair) DemotePrimary(ctx context.Context) error {
	return p.DemotePrimaryAfter(ctx, p.Primary.Stop)
}

// DemotePrimaryFollowing is DemotePrimary with the demoted primary's primary_conninfo set to
// conninfo, through physical slot slot ("" none), as an HA manager demotes a leader to follow the
// new one it knows of. Local pairs only.
func (p *Pair) DemotePrimaryFollowing(ctx context.Context, conninfo, slot string) error {
	prim, ok := p.Primary.life.(*localServer)
	if !ok {
		return errors.New("demote needs a local pair")
	}
	if err := p.Primary.Stop(ctx); err != nil {
		return err
	}
	if err := makeStandbyOf(prim.run, prim, p.Major, conninfo, slot, p.standbyConf); err != nil {
		return fmt.Errorf("demote: %w", err)
	}
	return p.Primary.Start(ctx)
}

// DemotePrimaryAfter is DemotePrimary with the primary ended by end instead of a clean stop: a
// kill -9, as an HA manager restarts read-only a leader that crashed or lost its lock, leaves on
// it WAL the standby may not have received. Local pairs only.
func (p *Pair) DemotePrimaryAfter(ctx context.Context, end func(context.Context) error) error {
	prim, ok := p.Primary.life.(*localServer)
	if !ok {
		return errors.New("demote needs a local pair")
	}
	if err := end(ctx); err != nil {
		return err
	}
	if err := makeStandby(prim.run, prim, p.Major, "", p.standbyConf); err != nil {
		return fmt.Errorf("demote: %w", err)
	}
	return p.Primary.Start(ctx)
}

// Rejoin rebuilds the old primary as a streaming standby of the promoted one and swaps the
// roles, so a pair can fail over again (switch back). Local pairs only. Like a fresh
// pg_basebackup, the rebuilt standby has no replication slots of its own, unless keepSlots:
// then it keeps the logical slots it had as a primary, as after pg_rewind (the stale same-name
// slots that stop PostgreSQL 17's slot sync). The new primary is stopped for a moment while its
// data directory is copied.
func (p *Pair) Rejoin(ctx context.Context, keepSlots bool) error {
	return p.rejoin(ctx, keepSlots, false)
}

// RejoinFresh rebuilds the old primary as a standby of the promoted one as pg_basebackup -X
// stream would: no slots, and no WAL of the timelines before the new primary's (only what the
// backup needs is copied), so WAL from before the failover must come from the new primary.
func (p *Pair) RejoinFresh(ctx context.Context) error {
	return p.rejoin(ctx, false, true)
}

func (p *Pair) rejoin(ctx context.Context, keepSlots, onlyCurrentTimeline bool) error {
	oldPrim, ok1 := p.Primary.life.(*localServer)
	newPrim, ok2 := p.Standby.life.(*localServer)
	if !ok1 || !ok2 {
		return errors.New("rejoin needs a local pair")
	}
	if rec, err := p.Standby.InRecovery(ctx); err != nil || rec {
		return fmt.Errorf("rejoin: the standby must be promoted first (in recovery: %v, %v)", rec, err)
	}
	if err := oldPrim.close(ctx); err != nil {
		return fmt.Errorf("rejoin: stop the old primary: %w", err)
	}
	if err := p.Standby.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true)", PhysicalSlot); err != nil {
		return err
	}
	if err := p.Standby.Stop(ctx); err != nil {
		return err
	}
	var kept string
	if keepSlots {
		kept = oldPrim.dataDir + ".slots"
		if err := os.Rename(filepath.Join(oldPrim.dataDir, "pg_replslot"), kept); err != nil {
			return fmt.Errorf("rejoin: keep the old slots: %w", err)
		}
	}
	if err := os.RemoveAll(oldPrim.dataDir); err != nil {
		return fmt.Errorf("rejoin: remove the old data directory: %w", err)
	}
	if err := copyDataDir(newPrim.dataDir, oldPrim.dataDir); err != nil {
		return fmt.Errorf("rejoin: copy the new primary: %w", err)
	}
	if onlyCurrentTimeline {
		if err := dropOlderTimelines(filepath.Join(oldPrim.dataDir, "pg_wal")); err != nil {
			return fmt.Errorf("rejoin: %w", err)
		}
	}
	if kept != "" {
		// Only the logical slots: the physical one belongs to the new topology.
		entries, _ := os.ReadDir(kept)
		for _, e := range entries {
			if e.Name() == PhysicalSlot {
				continue
			}
			if err := os.Rename(filepath.Join(kept, e.Name()), filepath.Join(oldPrim.dataDir, "pg_replslot", e.Name())); err != nil {
				return err
			}
		}
		_ = os.RemoveAll(kept)
	}
	if err := oldPrim.run.chownTree(oldPrim.dataDir); err != nil {
		return err
	}
	if err := p.Standby.Start(ctx); err != nil {
		return err
	}
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=postgres application_name=%s", newPrim.port, Superuser, StandbyAppName)
	if err := makeStandby(oldPrim.run, oldPrim, p.Major, conninfo, p.standbyConf); err != nil {
		return err
	}
	p.Primary, p.Standby = p.Standby, p.Primary
	p.Primary.Name, p.Standby.Name = "primary", "standby"
	if err := p.Standby.Start(ctx); err != nil {
		return err
	}
	return p.WaitStreaming(ctx)
}

// AddStandby starts a second standby of the primary, streaming through its own physical slot
// (slot, made here), with the first standby's settings: a copy of the cleanly stopped primary
// (started again at once), as the pair's standby was made. For tests of two standbys' sidecars
// at once; local pairs only; stopped with the pair.
func (p *Pair) AddStandby(ctx context.Context, slot string) (*Node, error) {
	prim, ok := p.Primary.life.(*localServer)
	if !ok {
		return nil, errors.New("a second standby needs a local pair")
	}
	if err := p.Primary.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true)", slot); err != nil {
		return nil, err
	}
	s, err := p.cloneOfPrimary(ctx, prim, "standby")
	if err != nil {
		return nil, err
	}
	name := filepath.Base(s.dataDir)
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=postgres application_name=%s", prim.port, Superuser, name)
	if err := makeStandbyOf(prim.run, s, p.Major, conninfo, slot, p.standbyConf); err != nil {
		return nil, err
	}
	n := &Node{Name: name, Major: p.Major, DataDir: s.dataDir, life: s}
	p.cleanup = append(p.cleanup, s.close)
	if err := n.Start(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// cloneOfPrimary copies the cleanly stopped primary (started again at once) into a new data
// directory of the pair, named prefix and a number, given to the servers' user, with a port of
// its own; not started. It returns once the pair's standby streams again: the primary's restart
// cut it off, and its WAL receiver would try again only after wal_retrieve_retry_interval (5 s),
// while callers expect a pair that streams, as NewPair gives.
func (p *Pair) cloneOfPrimary(ctx context.Context, prim *localServer, prefix string) (*localServer, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s%d", prefix, len(p.cleanup))
	s := &localServer{bin: prim.bin, run: prim.run, dataDir: filepath.Join(p.Dir, name), sockDir: prim.sockDir,
		logFile: filepath.Join(p.Dir, name+".log"), port: port}
	if err := p.Primary.Stop(ctx); err != nil {
		return nil, err
	}
	copyErr := copyDataDir(prim.dataDir, s.dataDir)
	if err := p.Primary.Start(ctx); err != nil {
		return nil, err
	}
	if copyErr != nil {
		return nil, fmt.Errorf("%s: copy the primary: %w", name, copyErr)
	}
	if p.Standby != nil {
		if err := p.WaitStreaming(ctx); err != nil {
			return nil, err
		}
	}
	return s, prim.run.chownTree(s.dataDir)
}

// binaries are the server binaries of the pair's major (or older minor).
func (o Options) binaries() (Binaries, error) {
	if o.Minor != "" {
		return FindMinorBinaries(o.Major, o.Minor)
	}
	return FindBinaries(o.Major)
}

// dropOlderTimelines removes the WAL segments of every timeline but the newest from dir.
func dropOlderTimelines(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	newest := ""
	for _, e := range entries {
		if len(e.Name()) == 24 && e.Name()[:8] > newest {
			newest = e.Name()[:8]
		}
	}
	for _, e := range entries {
		if name := e.Name(); (len(name) == 24 || strings.HasSuffix(name, ".partial")) && name[:8] < newest {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Twin starts a third server of the pair's system: a copy of the cleanly stopped primary (which
// is started again at once), running as a primary of its own. With newTimeline it is first
// started as a standby of nothing and promoted, so it writes a new timeline, as a sibling standby
// promoted elsewhere would; without, it writes the primary's timeline, as a clone after a split
// brain does. No slot is copied. For tests of what slotsync does when pointed at a server its
// standby does not follow; local pairs of 12+ only; stopped with the pair.
func (p *Pair) Twin(ctx context.Context, newTimeline bool) (*Node, error) {
	prim, ok := p.Primary.life.(*localServer)
	if !ok || p.Major < 12 {
		return nil, errors.New("twin needs a local pair of 12+")
	}
	twin, err := p.cloneOfPrimary(ctx, prim, "twin")
	if err != nil {
		return nil, err
	}
	name := filepath.Base(twin.dataDir)
	extra := []string{"cluster_name = 'twin'"}
	if err := writeNodeConf(prim.run, twin, extra); err != nil {
		return nil, err
	}
	if newTimeline {
		if err := writeOwned(prim.run, filepath.Join(twin.dataDir, "standby.signal"), nil); err != nil {
			return nil, err
		}
	}
	n := &Node{Name: name, Major: p.Major, DataDir: twin.dataDir, life: twin}
	p.cleanup = append(p.cleanup, twin.close)
	if err := n.Start(ctx); err != nil {
		return nil, err
	}
	if newTimeline {
		if err := n.Exec(ctx, "SELECT pg_promote(true, 60)"); err != nil {
			return nil, fmt.Errorf("twin: promote: %w", err)
		}
	}
	return n, nil
}
