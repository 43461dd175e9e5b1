package resplimit

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/redcon"
)

// serveRedcon starts a redcon server behind Listener on a free loopback
// port, answering PING with +PONG, and returns its address.
func serveRedcon(t *testing.T, lim Limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- redcon.Serve(Listener(ln, lim), func(c redcon.Conn, cmd redcon.Command) {
			if strings.EqualFold(string(cmd.Args[0]), "ping") {
				c.WriteString("PONG")
			} else {
				c.WriteError("ERR unknown command")
			}
		}, nil, nil)
	}()
	t.Cleanup(func() {
		ln.Close() // redcon then closes the open connections
		if err := <-served; err != nil {
			t.Errorf("redcon.Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// cpuTime is the CPU time this process has used so far, server and
// clients together.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runHostile dials addr, sends with send (which stops once the server has
// closed), and checks that the client got exactly want and then the end of
// the connection. A client still sending when the server closes may see a
// reset instead of EOF (the kernel resets a socket closed with unread
// bytes); mayReset allows that, after the whole reply.
func runHostile(t *testing.T, addr, want string, mayReset bool, send func(write func([]byte) bool)) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	var got []byte
	var readErr error
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		got, readErr = io.ReadAll(c)
	}()
	send(func(b []byte) bool {
		select {
		case <-closed:
			return false
		default:
		}
		_, err := c.Write(b)
		return err == nil
	})
	<-closed
	if string(got) != want {
		t.Errorf("got %.200q, want %q", got, want)
	}
	if readErr != nil && !(mayReset && errors.Is(readErr, syscall.ECONNRESET)) {
		t.Errorf("after the reply: %v, want EOF", readErr)
	}
}

// TestHostileClients runs redcon behind Listener while hostile clients try
// each of redcon's parser traps, and checks that each gets its error reply
// and is closed, that a well-behaved client is served throughout, and what
// it all costs. Unprotected, the first case alone takes redcon more than a
// second of CPU per trickled byte, and the third buffers 10 MB.
func TestHostileClients(t *testing.T) {
	lim := Limits{MaxBulkLen: 64 << 10, MaxMultibulkLen: 1024}
	addr := serveRedcon(t, lim)
	const (
		multibulk = "-ERR Protocol error: invalid multibulk length\r\n"
		bulk      = "-ERR Protocol error: invalid bulk length\r\n"
		inline    = "-ERR Protocol error: too big inline request\r\n"
	)
	// Built before the baseline, so only the server's and the clients'
	// own allocations count.
	tenMB := bytes.Repeat([]byte("x"), 10<<20)
	spaces := []byte("PING" + strings.Repeat(" ", 60<<10) + "\r\n")
	oneKB := bytes.Repeat([]byte("x"), 1<<10)
	pipeline := []byte(strings.Repeat("*1\r\n$4\r\nPING\r\n", 3) + "PING\r\n" + "*1\r\n:")
	trickle := func(write func([]byte) bool, b []byte) {
		for range 50 {
			time.Sleep(10 * time.Millisecond)
			if !write(b) {
				return
			}
		}
	}
	cases := []struct {
		name     string
		want     string
		mayReset bool
		send     func(write func([]byte) bool)
	}{
		{"huge array count, then a byte every 10 ms", multibulk, true, func(write func([]byte) bool) {
			if write([]byte("*2147483647\r\n")) {
				trickle(write, []byte("$"))
			}
		}},
		{"bulk of 1e9 declared, data trickling in", bulk, true, func(write func([]byte) bool) {
			if write([]byte("*1\r\n$1000000000\r\n")) {
				trickle(write, oneKB)
			}
		}},
		{"10 MB inline, no newline", inline, true, func(write func([]byte) bool) {
			write(tenMB)
		}},
		{"inline line of spaces", inline, true, func(write func([]byte) bool) {
			write(spaces) // 1.8 GB of allocation for redcon unprotected
		}},
		// The violation is the last byte written, so the server has read
		// everything and its close is a clean EOF.
		{"pipeline, then a violation", strings.Repeat("+PONG\r\n", 4) + "-ERR Protocol error: expected '$', got ':'\r\n", false,
			func(write func([]byte) bool) {
				write(pipeline)
			}},
	}

	good, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	goodR := bufio.NewReader(good)
	ping := func() error {
		good.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := good.Write([]byte("PING\r\n")); err != nil {
			return err
		}
		line, err := goodR.ReadString('\n')
		if err == nil && line != "+PONG\r\n" {
			err = errors.New("got " + line)
		}
		return err
	}
	if err := ping(); err != nil {
		t.Fatal(err)
	}

	runtime.GC()
	var mem0, mem1 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	cpu0 := cpuTime(t)
	start := time.Now()

	var wg sync.WaitGroup
	for _, tc := range cases {
		wg.Go(func() {
			t.Run(tc.name, func(t *testing.T) { runHostile(t, addr, tc.want, tc.mayReset, tc.send) })
		})
	}
	hostileDone := make(chan struct{})
	go func() { wg.Wait(); close(hostileDone) }()
	pings := 0
	for done := false; !done; {
		select {
		case <-hostileDone:
			done = true
		case <-time.After(5 * time.Millisecond):
		}
		if err := ping(); err != nil {
			t.Fatalf("well-behaved client, after %d PINGs: %v", pings, err)
		}
		pings++
	}

	cpu := cpuTime(t) - cpu0
	runtime.ReadMemStats(&mem1)
	alloc := mem1.TotalAlloc - mem0.TotalAlloc
	t.Logf("%d PINGs answered meanwhile; %v elapsed, %v CPU, %d KiB allocated",
		pings, time.Since(start).Round(time.Millisecond), cpu.Round(time.Millisecond), alloc>>10)
	// Generous bounds for a noisy 2-core machine under -race; the guarded
	// run takes a few tens of milliseconds and well under 1 MiB.
	if cpu > time.Second {
		t.Errorf("hostile clients cost %v of CPU, want under 1s", cpu)
	}
	if alloc > 4<<20 {
		t.Errorf("hostile clients made the process allocate %d KiB, want under 4 MiB", alloc>>10)
	}
}
