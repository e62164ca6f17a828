package explore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	stdsync "sync"
	"syscall"
	"time"
)

// sidecar runs `slotsync run` as a process and starts it again whenever it ends, as systemd's
// Restart=always or a pod's restart policy would. It tells the crashes it caused (kill -9,
// failpoints) from exits of slotsync's own (a loop, an error that needs a human).
type sidecar struct {
	bin  string
	args []string
	logs *os.File

	mu       stdsync.Mutex
	cmd      *exec.Cmd
	armed    []string // environment of the first process only (a failpoint)
	stopping bool
	crashes  int // ended by SIGKILL: by the drill or at a failpoint
	// lastCrashed: the last process ended by a crash the drill caused (kill -9, or the armed
	// failpoint, whose step may come at the shutdown's last journal save): when stop finds it
	// so, that is the drill's crash, not slotsync's failure to stop.
	lastCrashed bool
	crashedAt   time.Time // when the last crash the drill caused ended a process
	ownExits    []string  // ended by itself: how, with its last words
	done        chan struct{}
}

func newSidecar(bin string, args, armed []string, logPath string) (*sidecar, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	return &sidecar{bin: bin, args: args, armed: armed, logs: f, done: make(chan struct{})}, nil
}

// supervise runs slotsync until stop; call it in its own goroutine.
func (s *sidecar) supervise(ctx context.Context) {
	defer close(s.done)
	for ctx.Err() == nil {
		var tail bytes.Buffer
		cmd := exec.Command(s.bin, s.args...)
		cmd.Stdout, cmd.Stderr = s.logs, &tailWriter{w: s.logs, tail: &tail}
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return
		}
		cmd.Env = append(os.Environ(), s.armed...)
		s.armed = nil
		err := cmd.Start()
		s.cmd = cmd
		s.mu.Unlock()
		if err != nil {
			s.ownExit("start: " + err.Error())
			return
		}
		err = cmd.Wait()
		s.ended(err, tail.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (s *sidecar) ended(err error, tail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var exit *exec.ExitError
	killed := errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
	s.lastCrashed = killed && (!s.stopping || strings.HasPrefix(lastLine(tail), "failpoint "))
	switch {
	case s.lastCrashed:
		s.crashes, s.crashedAt = s.crashes+1, time.Now()
	case s.stopping:
	default:
		s.ownExits = append(s.ownExits, fmt.Sprintf("%v: %s", err, lastLine(tail)))
	}
}

func (s *sidecar) ownExit(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ownExits = append(s.ownExits, why)
}

// lastCrash is when the drill's last crash of slotsync ended a process (zero: none yet).
func (s *sidecar) lastCrash() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.crashedAt
}

// signal sends sig to the running process (SIGSTOP to pause slotsync across a cutover, as a
// process stalled at that moment would be; SIGCONT to let it go on).
func (s *sidecar) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// kill crashes the running process (kill -9); the supervisor starts it again.
func (s *sidecar) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
	}
}

// stop ends slotsync as a service manager does (SIGTERM) and reports whether it exited cleanly
// within the timeout.
func (s *sidecar) stop(timeout time.Duration) error {
	s.mu.Lock()
	s.stopping = true
	cmd := s.cmd
	s.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	defer s.logs.Close()
	select {
	case <-s.done:
	case <-time.After(timeout):
		if cmd != nil && cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		<-s.done
		return fmt.Errorf("slotsync did not stop within %s of SIGTERM", timeout)
	}
	s.mu.Lock()
	crashed := s.lastCrashed
	s.mu.Unlock()
	if cmd != nil && cmd.ProcessState != nil && !cmd.ProcessState.Success() && !crashed {
		return fmt.Errorf("slotsync stopped with %s", cmd.ProcessState)
	}
	return nil
}

// tailWriter copies to w and keeps the last bytes written, for the last words of a process.
type tailWriter struct {
	w    *os.File
	tail *bytes.Buffer
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.tail.Write(p)
	if t.tail.Len() > 4096 {
		rest := append([]byte(nil), t.tail.Bytes()[t.tail.Len()-2048:]...)
		t.tail.Reset()
		t.tail.Write(rest)
	}
	return t.w.Write(p)
}

func lastLine(s string) string {
	s = string(bytes.TrimRight([]byte(s), "\n"))
	if i := bytes.LastIndexByte([]byte(s), '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
