package e2e

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testbin"
	"github.com/idserver/idserver/internal/testpki"
)

// Every listener bounded (issue 29): floods of idle HTTP keep-alive
// connections, TLS handshakes never finished and idle RESP connections,
// on the real binary with its open files limit lowered.

// startAllPorts runs the binary with the open files limit set to nofile,
// on a port, a tls-port and a metrics-addr, each passed as a socket, and
// returns it with its metrics-addr.
func startAllPorts(t *testing.T, nofile int, pki testpki.PKI, args ...string) (*process, string) {
	t.Helper()
	tlsSock, httpSock := testbin.Listen(t, "tls-port"), testbin.Listen(t, "metrics-addr")
	args = append(args, "--dir", t.TempDir(), "--tls-port", tlsSock.Port,
		"--tls-cert-file", pki.File("server.crt"), "--tls-key-file", pki.File("server.key"), "--tls-ca-cert-file", pki.File("ca.crt"),
		"--metrics-addr", "127.0.0.1:"+httpSock.Port)
	args, sockets := withPort(t, args)
	p := testbin.Start(t, nil, append(sockets, tlsSock, httpSock),
		"sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile), binary}, args...)...)
	return p, "127.0.0.1:" + httpSock.Port
}

// dialAll opens n connections to addr, each sending hello, and returns
// them (closed when the test ends).
func dialAll(t *testing.T, addr string, n int, hello string) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.Write([]byte(hello))
		conns[i] = c
	}
	return conns
}

// A TLS handshake never finished: a record header promising a
// ClientHello of 512 bytes, and one of them.
const halfHandshake = "\x16\x03\x01\x02\x00\x01"

// command sends a command on c and returns the first line of the reply.
func command(t *testing.T, c net.Conn, r *bufio.Reader, cmd string) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte(cmd + "\r\n"))
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("%s: %q, %v", cmd, line, err)
	}
	return line
}

// TestDescriptorFlood: with an open files limit of 160 (maxclients
// fitted to 98: 160 − 34 own − 10 spares − 4 HTTP − 2 × 7 pending), 60
// idle HTTP keep-alive connections, 60 TLS handshakes never finished, and
// RESP connections until refused and 20 more that stay, flood every port
// at once. RESP serves exactly its share, and refuses the next clients
// with the plain maxclients error (or closes them, past the share of
// those refused), never the out of descriptors one; once one leaves, a
// new client's GETID works; no reservation save fails, and the server
// saves and issues IDs throughout (reserve-ms 100: past it, IDs need a
// save); the process never holds more than the limit less a save's two;
// and /healthz answers once the idle HTTP connections time out.
func TestDescriptorFlood(t *testing.T) {
	const nofile, maxClients, pending = 160, 98, 7
	pki := testpki.New(t)
	p, httpAddr := startAllPorts(t, nofile, pki, "--metrics-maxclients", "4", "--metrics-timeout", "2",
		"--reserve-ms", "100", "--tls-auth-clients", "no")
	if !p.Logged(fmt.Sprintf(`"rlimit_nofile":%d,"own":34,"spares":10,"http":4,"peers":0,"refused":%d,"tls_handshakes":%d,"maxclients":%d`, nofile, pending, pending, maxClients)) {
		t.Fatalf("no budget, or another, logged at start:\n%s", strings.Join(p.Lines(), "\n"))
	}
	pid := p.Cmd.Process.Pid
	ctl, ctlr, line := pingConn(t, p.Addr, 5*time.Second)
	if line != pong {
		t.Fatalf("first client: %q", line)
	}
	savesBefore, _ := strconv.Atoi(infoField(t, ctl, ctlr, "reservation_saves"))

	peak := 0
	watchFDs := func() { peak = max(peak, openFDs(t, pid)) }
	httpFlood := dialAll(t, httpAddr, 60, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	watchFDs()
	dialAll(t, p.TLSAddr, 60, halfHandshake)
	watchFDs()
	await.True(t, 10*time.Second, "the TLS handshakes under way at their share", func() bool {
		return infoField(t, ctl, ctlr, "tls_handshakes_in_progress") == strconv.Itoa(pending)
	})

	served := 1 // ctl
	for {
		c, _, line := pingConn(t, p.Addr, 5*time.Second)
		watchFDs()
		if line == pong {
			served++
			if served > maxClients {
				t.Fatalf("%d clients served, maxclients %d", served, maxClients)
			}
			continue
		}
		if line != fullReply {
			t.Fatalf("after %d clients served: %q, want PONG or %q", served, line, fullReply)
		}
		c.Close()
		break
	}
	if served != maxClients {
		t.Fatalf("%d clients served beside the floods, want maxclients %d", served, maxClients)
	}
	// Refused clients that stay: the server reads them to their end, as
	// many as their share holds, and closes the others at once.
	for i := range 20 {
		_, _, line := pingConn(t, p.Addr, 5*time.Second)
		watchFDs()
		if line != fullReply && line != "" {
			t.Fatalf("refused client %d: %q, want %q or the close", i, line, fullReply)
		}
	}
	if peak > nofile-2 {
		t.Fatalf("the server held %d descriptors of %d: no room for a save's two", peak, nofile)
	}

	// One leaves; the next client is served.
	ctl.Close()
	var c net.Conn
	var r *bufio.Reader
	await.True(t, 10*time.Second, "a client served once one left", func() bool {
		c, r, line = pingConn(t, p.Addr, 5*time.Second)
		if line != pong {
			c.Close()
		}
		return line == pong
	})
	// Each save renews reserve-ms (100): five are half a second of IDs.
	await.True(t, 10*time.Second, "five more reservation saves", func() bool {
		saves, _ := strconv.Atoi(infoField(t, c, r, "reservation_saves"))
		return saves >= savesBefore+5
	})
	if line := command(t, c, r, "GETID"); !strings.HasPrefix(line, ":") {
		t.Fatalf("GETID beside the floods: %q", line)
	}
	if got := infoField(t, c, r, "reservation_save_failures"); got != "0" {
		t.Fatalf("reservation_save_failures %s, want 0:\n%s", got, strings.Join(p.Lines(), "\n"))
	}
	if p.Logged("too many open files") || p.Logged("out of file descriptors") {
		t.Fatalf("out of descriptors:\n%s", strings.Join(p.Lines(), "\n"))
	}

	// The HTTP connections not yet answered wait in the backlog: their
	// clients give up; those answered are closed once idle.
	for _, hc := range httpFlood {
		hc.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if n, _ := hc.Read(make([]byte, 1)); n == 0 {
			hc.Close()
		}
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + httpAddr + "/healthz")
	if err != nil {
		t.Fatalf("/healthz after the idle connections: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz: %s", resp.Status)
	}
}

// TestTLSHandshakesCharged: TLS handshakes under way count in the
// clients' memory (32 KiB each before they read) and show in INFO
// clients; past maxmemory-clients (1 MiB here), they are closed like
// clients, counted in evicted_clients, and the total is back under it.
func TestTLSHandshakesCharged(t *testing.T) {
	pki := testpki.New(t)
	p, _ := startAllPorts(t, 4096, pki, "--maxmemory-clients", "1mb", "--tls-auth-clients", "no")
	ctl, ctlr, line := pingConn(t, p.Addr, 5*time.Second)
	if line != pong {
		t.Fatalf("first client: %q", line)
	}
	info := func(field string) int {
		v, err := strconv.Atoi(infoField(t, ctl, ctlr, field))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// Each sends its ClientHello, is answered, and never finishes.
	stall := func(n int) []net.Conn {
		conns := make([]net.Conn, n)
		for i := range conns {
			nc, err := net.Dial("tcp", p.TLSAddr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { nc.Close() })
			nc.SetDeadline(time.Now().Add(time.Second))
			err = tls.Client(&firstWriteOnly{Conn: nc}, &tls.Config{InsecureSkipVerify: true}).Handshake()
			if !errors.Is(err, errStalled) {
				t.Fatalf("handshake %d: %v, want it stalled after the ClientHello", i, err)
			}
			nc.SetDeadline(time.Time{})
			conns[i] = nc
		}
		return conns
	}

	early := stall(20) // 640 KiB
	await.True(t, 10*time.Second, "20 handshakes under way", func() bool { return info("tls_handshakes_in_progress") == 20 })
	if mem := info("mem_clients_normal"); mem < 20*32<<10 || mem > 1<<20 {
		t.Fatalf("mem_clients_normal %d with 20 handshakes under way, want at least %d", mem, 20*32<<10)
	}
	if ev := info("evicted_clients"); ev != 0 {
		t.Fatalf("evicted_clients %d under maxmemory-clients", ev)
	}

	late := stall(20) // 1.25 MiB in all
	await.True(t, 10*time.Second, "handshakes evicted", func() bool { return info("evicted_clients") > 0 })
	if mem, n := info("mem_clients_normal"), info("tls_handshakes_in_progress"); mem > 1<<20 || n > 32 || n+info("evicted_clients") != 40 {
		t.Fatalf("after evictions: mem_clients_normal %d, %d handshakes under way, %d evicted; want at most 1 MiB, 32, and 40 in all",
			mem, n, info("evicted_clients"))
	}
	closed := 0
	for _, nc := range append(early, late...) {
		nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := io.Copy(io.Discard, nc); err == nil {
			closed++ // EOF: closed by the server
		}
	}
	if ev := info("evicted_clients"); closed != ev {
		t.Fatalf("%d handshakes closed by the server, %d evicted", closed, ev)
	}
	if !p.Logged("closing a client: the clients together hold more than maxmemory-clients") {
		t.Fatalf("no eviction logged:\n%s", strings.Join(p.Lines(), "\n"))
	}
	if line := command(t, ctl, ctlr, "PING"); line != pong {
		t.Fatalf("the client beside the handshakes: %q", line)
	}
}

// firstWriteOnly is a connection that sends only its first write: a TLS
// client on it sends its ClientHello and never finishes.
type firstWriteOnly struct {
	net.Conn
	wrote bool
}

var errStalled = errors.New("stalled after the first write")

func (c *firstWriteOnly) Write(p []byte) (int, error) {
	if c.wrote {
		return 0, errStalled
	}
	c.wrote = true
	return c.Conn.Write(p)
}
