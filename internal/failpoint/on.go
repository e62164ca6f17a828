//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	stdsync "sync"
	"syscall"
	"time"
)

type fp struct {
	action string
	delay  time.Duration
	nth    int // 0: every hit
	hits   int
}

var (
	once   stdsync.Once
	mu     stdsync.Mutex
	points map[string]*fp
)

// parse reads a SLOTSYNC_FAILPOINTS value.
func parse(spec string) (map[string]*fp, error) {
	out := map[string]*fp{}
	for _, item := range strings.Split(spec, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, action, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("failpoint %q: want name=action", item)
		}
		p := &fp{action: action}
		if n, at, ok := strings.Cut(name, "@"); ok {
			nth, err := strconv.Atoi(at)
			if err != nil || nth < 1 {
				return nil, fmt.Errorf("failpoint %q: @N takes a hit number from 1", item)
			}
			name, p.nth = n, nth
		}
		if d, ok := strings.CutPrefix(action, "delay:"); ok {
			dur, err := time.ParseDuration(d)
			if err != nil {
				return nil, fmt.Errorf("failpoint %q: %v", item, err)
			}
			p.action, p.delay = "delay", dur
		}
		if p.action != "crash" && p.action != "error" && p.action != "delay" {
			return nil, fmt.Errorf("failpoint %q: the action is crash, error or delay:<duration>", item)
		}
		out[name] = p
	}
	return out, nil
}

func load() {
	var err error
	if points, err = parse(os.Getenv("SLOTSYNC_FAILPOINTS")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
}

// Hit acts as SLOTSYNC_FAILPOINTS says for the step name: crash the process with SIGKILL,
// sleep, or return an error the step fails with.
func Hit(name string) error {
	once.Do(load)
	mu.Lock()
	p := points[name]
	if p == nil {
		mu.Unlock()
		return nil
	}
	p.hits++
	if p.nth != 0 && p.hits != p.nth {
		mu.Unlock()
		return nil
	}
	mu.Unlock()
	switch p.action {
	case "crash":
		fmt.Fprintf(os.Stderr, "failpoint %s: crashing (SIGKILL)\n", name)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	case "delay":
		time.Sleep(p.delay)
		return nil
	}
	return fmt.Errorf("failpoint %s", name)
}

// Set arms the failpoints of spec (SLOTSYNC_FAILPOINTS's form) in place of any armed before,
// each hit counted from none: for tests that run slotsync in their own process.
func Set(spec string) error {
	ps, err := parse(spec)
	if err != nil {
		return err
	}
	once.Do(func() {}) // the environment no longer arms anything
	mu.Lock()
	defer mu.Unlock()
	points = ps
	return nil
}

// Hits is how many times the armed failpoint name was hit since it was armed.
func Hits(name string) int {
	mu.Lock()
	defer mu.Unlock()
	if p := points[name]; p != nil {
		return p.hits
	}
	return 0
}
