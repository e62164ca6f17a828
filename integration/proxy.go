package integration

import (
	"net"
	stdsync "sync"
)

// Proxy is a TCP proxy on loopback for fault tests: it forwards to a server and can cut the
// network (blackhole: connections hang, nothing flows) or reset every connection.
type Proxy struct {
	ln     net.Listener
	target string

	mu        stdsync.Mutex
	conns     map[net.Conn]bool
	blackhole bool
	closed    bool
}

// NewProxy starts a proxy to target (host:port). Close it when done.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.serve()
	return p, nil
}

// Port is where the proxy listens on 127.0.0.1.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *Proxy) handle(client net.Conn) {
	if !p.track(client) {
		client.Close()
		return
	}
	p.mu.Lock()
	hole := p.blackhole
	p.mu.Unlock()
	if hole {
		return // accepted, never answered: the client hangs until its own timeout
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	server, err := net.Dial("tcp", target)
	if err != nil {
		p.drop(client)
		return
	}
	if !p.track(server) {
		server.Close()
		p.drop(client)
		return
	}
	go p.pipe(server, client)
	p.pipe(client, server)
}

// pipe copies src to dst unless the network is cut; a cut stops the copy silently.
func (p *Proxy) pipe(src, dst net.Conn) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			hole := p.blackhole
			p.mu.Unlock()
			if !hole {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
		}
		if err != nil {
			break
		}
	}
	p.drop(src)
	p.mu.Lock()
	hole := p.blackhole
	p.mu.Unlock()
	if !hole {
		p.drop(dst)
	}
	// Cut, the other side never learns that this one closed (a host that lost its power): its
	// connection stays open, silent, until its own timeout or a Reset.
}

func (p *Proxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// Blackhole cuts the network: open connections stop moving data, a side that closes is not
// told to the other, and new connections hang.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	p.blackhole = true
	p.mu.Unlock()
}

// Blackholed says whether the network is cut (Blackhole, not yet Restore).
func (p *Proxy) Blackholed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blackhole
}

// Restore lets data flow again (connections cut meanwhile stay broken, as after a real cut).
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.blackhole = false
	p.mu.Unlock()
}

// Redirect sends new connections to target from now on and resets the open ones, as a virtual IP
// or a Service moved to another server does.
func (p *Proxy) Redirect(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
	p.Reset()
}

// Retarget points the proxy at to if it points at from, and reports whether it did: a server
// that came back on another address (a container started again gets a new host port) is
// followed, while a proxy pointed elsewhere meanwhile (an address moved) is left as it is. Open
// connections are reset when it moves.
func (p *Proxy) Retarget(from, to string) bool {
	p.mu.Lock()
	moved := p.target == from && from != to
	if moved {
		p.target = to
	}
	p.mu.Unlock()
	if moved {
		p.Reset()
	}
	return moved
}

// Reset closes every connection at once with a TCP reset.
func (p *Proxy) Reset() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	for c := range conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Reset()
	return p.ln.Close()
}
