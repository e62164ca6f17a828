package explore

import (
	stdsync "sync"
	"time"
)

// lasting keeps what a fault of some length holds (slotsync paused, its route to the primary
// cut, the standby's primary_conninfo changed, its walsender stalled) until the last of the
// faults holding it ends: a shorter fault that began earlier does not end a longer one that
// began after it, and the end that runs is the first holder's (what it found, it restores).
type lasting struct {
	mu    stdsync.Mutex
	holds map[string]*hold
}

type hold struct {
	until time.Time
	end   func()
}

// hold holds what for d from now, ended by end unless a fault holds it already: then that
// fault's end runs once the later of the two is over.
func (l *lasting) hold(what string, d time.Duration, end func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds == nil {
		l.holds = map[string]*hold{}
	}
	h := l.holds[what]
	if h == nil {
		h = &hold{end: end}
		l.holds[what] = h
	}
	if u := time.Now().Add(d); u.After(h.until) {
		h.until = u
	}
	time.AfterFunc(d, func() { l.release(what, h) })
}

// release ends h once its last holder's time is over.
func (l *lasting) release(what string, h *hold) {
	l.mu.Lock()
	last := l.holds[what] == h && !time.Now().Before(h.until)
	if last {
		delete(l.holds, what)
	}
	l.mu.Unlock()
	if last {
		h.end()
	}
}
