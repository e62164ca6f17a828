package sync

import (
	stdsync "sync"

	"github.com/slotsync/slotsync/topology"
)

// primaryLink is the primary the engine talks to: pinned by the configuration, or found on every
// pass from the standby's primary_conninfo, because an HA manager re-points standbys (rule 9).
// It is shared by the observer and the methods; safe for concurrent use.
type primaryLink struct {
	mu     stdsync.Mutex
	pinned bool
	ep     *topology.Endpoint
	// conninfo is the primary_conninfo ep was made from (discovered links only).
	conninfo string
	// user and password replace the discovered conninfo's role (--primary-user): primary_conninfo
	// names the standby's replication role, which may not read slot state.
	user, password string
	// passwordFile: the password file, read again at every connection (with user only).
	passwordFile string
}

func pinnedPrimary(ep *topology.Endpoint) *primaryLink { return &primaryLink{pinned: true, ep: ep} }

func discoveredPrimary(user, password, passwordFile string) *primaryLink {
	return &primaryLink{user: user, password: password, passwordFile: passwordFile}
}

// Endpoint is the current primary, or nil when none is known yet.
func (l *primaryLink) Endpoint() *topology.Endpoint {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ep
}

// follow points a discovered link at conninfo (the standby's primary_conninfo now). It reports
// whether the primary changed; a pinned link never does. An empty conninfo leaves no primary.
func (l *primaryLink) follow(conninfo string) (changed bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pinned || conninfo == l.conninfo {
		return false, nil
	}
	if conninfo == "" {
		l.ep, l.conninfo = nil, ""
		return true, nil
	}
	ep, err := topology.ParseEndpoint("primary", conninfo, "")
	if err != nil {
		return false, err
	}
	// primary_conninfo often has no dbname: use postgres rather than the user's name.
	ep.DefaultDatabase("postgres")
	ep.SetUser(l.user, l.password)
	if l.user != "" {
		ep.SetPasswordFile(l.passwordFile)
	}
	l.ep, l.conninfo = ep, conninfo
	return true, nil
}
