package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	stdsync "sync"
	"syscall"
	"time"
)

// localServer runs one cluster from local binaries with pg_ctl, as an unprivileged user when
// the caller is root. Every file it makes lives under its pair's directory.
type localServer struct {
	bin     Binaries
	run     runAs
	dataDir string
	sockDir string
	logFile string
	port    int
	conf    []string // node.conf's lines beyond port and socket (rewritten with a new port)
}

func (s *localServer) endpoint(context.Context) (string, int, error) { return "127.0.0.1", s.port, nil }

// pgctl runs pg_ctl as the run user and returns its output with the server log's tail on failure.
func (s *localServer) pgctl(ctx context.Context, args ...string) error {
	cmd := s.run.command(s.bin.Path("pg_ctl"), append([]string{"-D", s.dataDir}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := runCtx(ctx, cmd); err != nil {
		return fmt.Errorf("pg_ctl %s: %w: %s%s", strings.Join(args, " "), err,
			strings.TrimSpace(out.String()), s.logTail())
	}
	return nil
}

// start starts the server. A port taken since it was chosen (freePort can only find a port
// that was free a moment ago, and tests run in parallel) is replaced by another, twice at most.
func (s *localServer) start(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := s.pgctl(ctx, "-l", s.logFile, "-w", "-t", "120", "start")
		if err == nil || attempt == 2 || !strings.Contains(s.logTail(), "Address already in use") {
			return err
		}
		port, perr := FreePort()
		if perr != nil {
			return err
		}
		s.port = port
		if werr := writeNodeConf(s.run, s, s.conf); werr != nil {
			return err
		}
	}
}

func (s *localServer) stop(ctx context.Context) error {
	return s.pgctl(ctx, "-m", "fast", "-w", "-t", "120", "stop")
}

// postmasterPID reads the first line of postmaster.pid (0 when the file is absent).
func (s *localServer) postmasterPID() (int, error) {
	data, err := os.ReadFile(filepath.Join(s.dataDir, "postmaster.pid"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("parse postmaster.pid: %w", err)
	}
	return pid, nil
}

// kill SIGKILLs the postmaster's process group: pg_ctl starts the postmaster in a session of
// its own, so the group is exactly the server's processes.
func (s *localServer) kill(ctx context.Context) error {
	pid, err := s.postmasterPID()
	if err != nil {
		return err
	}
	if pid <= 0 {
		return errors.New("not running (no postmaster.pid)")
	}
	err = syscall.Kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		// The postmaster does not lead a process group (pg_ctl of 11 does not setsid): kill it
		// and its children one by one.
		return killTree(ctx, pid)
	}
	if err != nil {
		return fmt.Errorf("signal process group %d: %w", pid, err)
	}
	return waitGone(ctx, pid)
}

// killTree SIGKILLs pid and its children and waits until they are gone.
func killTree(ctx context.Context, pid int) error {
	pids := append(childrenOf(pid), pid)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range pids {
		for syscall.Kill(p, 0) == nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d still alive after SIGKILL", p)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// childrenOf lists the processes whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
		rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
		if f := strings.Fields(rest); len(f) > 1 {
			if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
				out = append(out, child)
			}
		}
	}
	return out
}

// waitGone waits until no process of group pgid is left.
func waitGone(ctx context.Context, pgid int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of group %d still alive after SIGKILL", pgid)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// close stops the server if it still runs: fast first, then immediate, then SIGKILL.
func (s *localServer) close(ctx context.Context) error {
	pid, err := s.postmasterPID()
	if err != nil || pid == 0 {
		return err
	}
	if syscall.Kill(pid, 0) != nil {
		return nil // stale pid file after a crash
	}
	if err := s.pgctl(ctx, "-m", "fast", "-w", "-t", "30", "stop"); err == nil {
		return nil
	}
	if err := s.pgctl(ctx, "-m", "immediate", "-w", "-t", "30", "stop"); err == nil {
		return nil
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	return waitGone(ctx, pid)
}

func (s *localServer) logTail() string {
	data, err := os.ReadFile(s.logFile)
	if err != nil || len(data) == 0 {
		return ""
	}
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return "\n--- " + s.logFile + " (tail) ---\n" + string(data)
}

// runCtx runs cmd and kills it when ctx ends.
func runCtx(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return ctx.Err()
	}
}

// handedOut holds the ports FreePort gave this process: the kernel may give a port again once
// its listener is closed, before the server it was for has bound it (an etcd and a sidecar's
// metrics listener once shared one), so a port is given once.
var handedOut = struct {
	stdsync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort asks the kernel for a free loopback TCP port that this process was not given before.
func FreePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no loopback TCP port this process was not given already")
}

// initdb creates a new cluster in s.dataDir with trust authentication for the superuser, with
// WAL segments of segMB megabytes (0: the default, 16).
func (s *localServer) initdb(ctx context.Context, segMB int) error {
	args := []string{"-D", s.dataDir, "-U", Superuser, "-A", "trust", "--encoding=UTF8", "--locale=C", "-N"}
	if segMB != 0 {
		args = append(args, fmt.Sprintf("--wal-segsize=%d", segMB))
	}
	cmd := s.run.command(s.bin.Path("initdb"), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := runCtx(ctx, cmd); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, out.String())
	}
	return nil
}

// copyDataDir copies a stopped cluster's data directory as pg_basebackup would lay it out:
// no postmaster.pid/opts, no replication slots, no temporary files.
func copyDataDir(src, dst string) error {
	skip := map[string]bool{"postmaster.pid": true, "postmaster.opts": true}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if skip[rel] {
			return nil
		}
		if strings.HasPrefix(rel, "pg_replslot/") || strings.HasPrefix(rel, "pg_stat_tmp/") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return copyFile(path, target, info.Mode().Perm())
		}
		return nil
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// shmInUse finds the id in PostgreSQL's refusal to start over a shared memory block still in use
// ("pre-existing shared memory block (key K, ID N) is still in use").
var shmInUse = regexp.MustCompile(`pre-existing shared memory block \(key \d+, ID (\d+)\) is still in use`)

// KillShmHolders SIGKILLs every process still attached to the System V shared memory block that
// err (a failed start) names: a process of a killed server that outlived its postmaster (under
// load, for minutes). It does nothing for any other error.
func KillShmHolders(err error) {
	id := shmIDOf(err)
	if id == "" {
		return
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, perr := strconv.Atoi(e.Name())
		if perr != nil {
			continue
		}
		maps, rerr := os.ReadFile(filepath.Join("/proc", e.Name(), "maps"))
		if rerr != nil {
			continue
		}
		for _, line := range strings.Split(string(maps), "\n") {
			// "addr perms offset dev inode path": a System V segment's inode is its id.
			if f := strings.Fields(line); len(f) >= 6 && f[4] == id && strings.HasPrefix(f[5], "/SYSV") {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
}

// shmIDOf is the id of the shared memory block a failed start names as still in use ("" for
// any other error).
func shmIDOf(err error) string {
	if err == nil {
		return ""
	}
	if m := shmInUse.FindStringSubmatch(err.Error()); m != nil {
		return m[1]
	}
	return ""
}
