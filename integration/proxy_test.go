package integration

import (
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// echoOnce listens on loopback and answers each connection with its own name.
func echoOnce(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, name)
			c.Close()
		}
	}()
	return ln.Addr().String()
}

func TestProxyRetarget(t *testing.T) {
	a, b, c := echoOnce(t, "a"), echoOnce(t, "b"), echoOnce(t, "c")
	p, err := NewProxy(a)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	read := func() string {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port())), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		got, _ := io.ReadAll(conn)
		return string(got)
	}
	if got := read(); got != "a" {
		t.Fatalf("before: %q, want a", got)
	}
	if !p.Retarget(a, b) || read() != "b" {
		t.Fatal("retarget from the address it points at: not followed")
	}
	p.Redirect(c) // an address moved meanwhile
	if p.Retarget(b, a) || read() != "c" {
		t.Fatal("retarget from an address it no longer points at: moved it")
	}
}
