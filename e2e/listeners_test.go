package e2e

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testbin"
	"github.com/idserver/idserver/internal/testpki"
)

// Every listener bounded (issue 29), on the real binary.

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
