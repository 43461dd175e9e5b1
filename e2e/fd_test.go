package e2e

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Running out of file descriptors, tried on the real binary with its open
// files limit lowered: at start with ulimit, and under a live server with
// prlimit.

// pingConn dials addr, sends PING and returns the connection and the first
// line of the reply ("" if the server closed without one, or none came
// within wait).
func pingConn(t *testing.T, addr string, wait time.Duration) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	c.SetDeadline(time.Now().Add(wait))
	c.Write([]byte("PING\r\n"))
	line, _ := r.ReadString('\n')
	return c, r, line
}

const (
	pong      = "+PONG\r\n"
	fullReply = "-ERR max number of clients reached\r\n"
	fdReply   = "-ERR max number of clients reached (the server is out of file descriptors)\r\n"
)

// TestMaxClientsFitsOpenFiles: with an open files limit of 64, maxclients
// is lowered to 12 (the process keeps 34 for itself, 10 spares, and 4 each
// for refused connections and TLS handshakes: conns' fitBudget), with a
// warning at start, and the budget logged; the clients past it get
// Redis's error, counted.
func TestMaxClientsFitsOpenFiles(t *testing.T) {
	p := startLimited(t, 64)
	if !p.Logged("serving at most 12 clients") || !p.Logged(`"rlimit_nofile":64,"own":34,"spares":10,"http":0,"peers":0,"refused":4,"tls_handshakes":4,"maxclients":12`) {
		t.Fatalf("no warning about maxclients, or no budget, at start:\n%s", strings.Join(p.Lines(), "\n"))
	}
	var served []net.Conn
	var first *bufio.Reader
	refused := 0
	for range 30 {
		c, r, line := pingConn(t, p.Addr, 5*time.Second)
		switch line {
		case pong:
			served = append(served, c)
			if first == nil {
				first = r
			}
		case fullReply:
			refused++
			c.Close() // the server reads a refused one to its end: 4 at once
		default:
			t.Fatalf("reply %q, want PONG or the maxclients error", line)
		}
	}
	if len(served) != 12 || refused != 18 {
		t.Fatalf("%d served, %d refused; want 12 and 18", len(served), refused)
	}
	if got := infoField(t, served[0], first, "maxclients"); got != "12" {
		t.Fatalf("INFO maxclients %s, want 12", got)
	}
	if got := infoField(t, served[0], first, "rejected_connections"); got != "18" {
		t.Fatalf("INFO rejected_connections %s, want 18", got)
	}
}

// openFDs counts the file descriptors pid has open.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// steadyFDs is the fewest descriptors pid has open over a tenth of a
// second: a count taken once may include a few open for a moment (a
// reservation save's temporary file and its directory), which gave
// TestOutOfFileDescriptors two clients more room than it meant, beside
// two CPU hogs.
func steadyFDs(t *testing.T, pid int) int {
	t.Helper()
	fewest := openFDs(t, pid)
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
		fewest = min(fewest, openFDs(t, pid))
	}
	return fewest
}

// setNofile sets the soft open files limit of the running pid (the hard
// one stays: raising it again needs privileges a container may lack).
func setNofile(t *testing.T, pid, n int) {
	t.Helper()
	if out, err := exec.Command("prlimit", "--pid", strconv.Itoa(pid), "--nofile="+strconv.Itoa(n)+":").CombinedOutput(); err != nil {
		t.Fatalf("prlimit: %v: %s", err, out)
	}
}

// TestOutOfFileDescriptors lowers the open files limit of a live server
// below what its clients need. While it holds a descriptor in reserve,
// each new connection is refused with a reply, counted, and warned about
// at most once a second; with none left at all, new connections wait in
// the backlog (the server backs off) and are served once descriptors are
// back. Clients already connected are served throughout.
func TestOutOfFileDescriptors(t *testing.T) {
	p := start(t, nil)
	pid := p.Cmd.Process.Pid
	c0, r0, line := pingConn(t, p.Addr, 5*time.Second)
	if line != pong {
		t.Fatalf("first client: %q", line)
	}
	began := time.Now()
	setNofile(t, pid, steadyFDs(t, pid)+2) // room for two more clients
	served, refused := 0, 0
	for range 30 {
		_, _, line := pingConn(t, p.Addr, 5*time.Second)
		switch line {
		case pong:
			served++
		case fdReply:
			refused++
		default:
			t.Fatalf("after %d served and %d refused: reply %q, want PONG or the file descriptor error", served, refused, line)
		}
	}
	// About two are served (a descriptor the server had open for a moment
	// when they were counted may make it three); every other one is
	// refused with the reply.
	if served < 1 || served > 3 || refused != 30-served {
		t.Fatalf("%d served, %d refused; want about 2 and the rest", served, refused)
	}
	if got := infoField(t, c0, r0, "rejected_connections"); got != strconv.Itoa(refused) {
		t.Fatalf("INFO rejected_connections %s, want %d", got, refused)
	}

	// No descriptor left, not even in reserve: a new connection waits.
	setNofile(t, pid, 3)
	waiting, wr, line := pingConn(t, p.Addr, 300*time.Millisecond)
	if line != "" {
		t.Fatalf("connection with no descriptor left: %q, want it to wait", line)
	}
	c0.SetDeadline(time.Now().Add(5 * time.Second))
	c0.Write([]byte("PING\r\n"))
	if line, _ := r0.ReadString('\n'); line != pong {
		t.Fatalf("connected client while out of descriptors: %q", line)
	}
	setNofile(t, pid, 4096)
	waiting.SetDeadline(time.Now().Add(5 * time.Second))
	if line, err := wr.ReadString('\n'); line != pong {
		t.Fatalf("the waiting connection, once descriptors are back: %q, %v", line, err)
	}

	warnings := 0
	for _, l := range p.Lines() {
		if strings.Contains(l, `"level":"warn"`) && (strings.Contains(l, "out of file descriptors") || strings.Contains(l, "accept failed")) {
			warnings++
		}
	}
	if limit := int(time.Since(began)/time.Second) + 2; warnings < 2 || warnings > limit {
		t.Fatalf("%d warnings in %v, want at least one per kind and at most one a second each:\n%s",
			warnings, time.Since(began), strings.Join(p.Lines(), "\n"))
	}
}
