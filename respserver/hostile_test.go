package respserver

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

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/respserver/internal/conns"
)

// cpuTime is the CPU time this process has used so far.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// expectErrorThenEOF reads until the server closes c, and checks that what
// came before the close was exactly one error reply starting with want.
func expectErrorThenEOF(t *testing.T, c *rawClient, want string) {
	t.Helper()
	v, err := readReply(c.r)
	if err != nil {
		t.Fatalf("want error reply %q, got %v", want, err)
	}
	if e, ok := v.(respError); !ok || !strings.HasPrefix(string(e), want) {
		t.Fatalf("want error reply %q, got %.200v", want, v)
	}
	if _, err := c.r.ReadByte(); err != io.EOF {
		t.Fatalf("connection not closed after the error: %v", err)
	}
}

func TestHostileInput(t *testing.T) {
	s, addr := startServer(t, idgen.Settings{}, Options{})
	good := dialRaw(t, addr)
	stillServing := func() {
		t.Helper()
		if id, ok := good.do("GETID").(int64); !ok || id <= 0 {
			t.Fatalf("other client's GETID: %v", id)
		}
	}
	before := cpuTime(t)

	t.Run("garbage bytes", func(t *testing.T) {
		for _, junk := range []string{"\xff\xfe\r\n", "\x01\x02 \x03\n", "GETID extra junk\r\n"} {
			c := dialRaw(t, addr)
			c.send(junk)
			if v := c.reply(); !strings.HasPrefix(string(v.(respError)), "ERR ") {
				t.Fatalf("%q: %.200v", junk, v)
			}
			stillServing()
		}
		for _, junk := range []string{"*abc\r\n", "*1\r\n%5\r\nhello\r\n", "*1\r\n$x\r\n", "*1\r\n$3\r\nabcdef\r\n", "*-0\r\n", "*01\r\n"} {
			c := dialRaw(t, addr)
			c.send(junk)
			expectErrorThenEOF(t, c, "ERR Protocol error: ")
			stillServing()
		}
	})
	t.Run("huge array count, then slow bytes", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.send("*2147483647\r\n")
		for range 20 {
			if _, err := c.conn.Write([]byte("$")); err != nil {
				break // closed already: that is the point
			}
			time.Sleep(5 * time.Millisecond)
		}
		expectErrorThenEOF(t, c, "ERR Protocol error: invalid multibulk length")
		stillServing()
	})
	t.Run("unterminated huge bulk", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.send("*1\r\n$1000000000\r\n")
		chunk := strings.Repeat("x", 64<<10)
		for range 160 { // 10 MB, if the server keeps reading
			if _, err := io.WriteString(c.conn, chunk); err != nil {
				break
			}
		}
		expectErrorThenEOF(t, c, "ERR Protocol error: invalid bulk length")
		stillServing()
	})
	t.Run("endless inline line", func(t *testing.T) {
		c := dialRaw(t, addr)
		chunk := strings.Repeat("a ", 32<<10)
		for range 160 {
			if _, err := io.WriteString(c.conn, chunk); err != nil {
				break
			}
		}
		expectErrorThenEOF(t, c, "ERR Protocol error: too big inline request")
		stillServing()
	})
	used := cpuTime(t) - before
	t.Logf("CPU used by the whole hostile sequence: %v", used)
	if used > 3*time.Second {
		t.Errorf("hostile clients cost %v of CPU; the limits should make them cheap", used)
	}
	if s.Stats().Clients != 1 {
		t.Errorf("%d clients connected, want only the good one", s.Stats().Clients)
	}
}

// TestConnectionFlood opens far more connections than maxclients at once.
func TestConnectionFlood(t *testing.T) {
	const max, flood = 50, 400
	s, addr := startServer(t, idgen.Settings{}, Options{ConnOptions: ConnOptions{MaxClients: max}})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var served, refused int
	for range flood {
		wg.Go(func() {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				return // the kernel's backlog overflowed: also a refusal
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			io.WriteString(conn, encode("GETID"))
			v, err := readReply(bufio.NewReader(conn))
			defer time.Sleep(100 * time.Millisecond) // hold the slot a while
			mu.Lock()
			defer mu.Unlock()
			switch v := v.(type) {
			case int64:
				served++
			case respError:
				if v == "ERR max number of clients reached" {
					refused++
				}
			default:
				t.Errorf("flood client: %v, %v", v, err)
			}
		})
	}
	wg.Wait()
	if served < max || served+refused != flood {
		t.Fatalf("%d served, %d refused of %d", served, refused, flood)
	}
	c := dialRaw(t, addr)
	if id, ok := c.do("GETID").(int64); !ok || id <= 0 {
		t.Fatalf("GETID after the flood: %v", id)
	}
	// The loop sees the flood's connections close a moment after they do.
	await.True(t, time.Minute, "the flood's clients are no longer counted", func() bool { return s.Stats().Clients == 1 })
}

// testPipe is a connection without a socket, for driving the command
// layer through the connection layer's framing directly.
func testPipe(s *Server) *conns.Pipe[*client] {
	return s.conns.Pipe("127.0.0.1:1", "127.0.0.1:6551")
}

// FuzzCommand runs arbitrary arguments through the command layer, as a
// client library encodes them: every command gets exactly one well-formed
// reply, and IDs only increase.
func FuzzCommand(f *testing.F) {
	for _, seed := range []string{
		"GETID", "MGETID\x003", "MGETID\x00-1", "MGETID\x0099999999999", "DECODEID\x00123",
		"HELLO\x003", "HELLO\x002\x00SETNAME\x00x", "CLIENT\x00SETINFO\x00LIB-NAME\x00x",
		"COMMAND\x00DOCS", "COMMAND\x00INFO\x00getid\x00nope", "CONFIG\x00GET\x00*", "INFO\x00idgen",
		"PING\x00hi", "ECHO", "SELECT\x000", "AUTH\x00a\x00b", "TIME", "QUIT", "nope\x00\r\n",
		"MULTI", "EXEC", "DISCARD", "WATCH\x00k", "RESET", "CLIENT\x00INFO", "CLIENT\x00LIST\x00ID\x001",
		"CLIENT\x00KILL\x00127.0.0.1:1", "CLIENT\x00TRACKING\x00ON\x00OPTIN", "CLIENT\x00TRACKINGINFO", "CLIENT\x00HELP",
		"COMMAND\x00DOCS\x00client|kill", "IDRANGE\x001700000000000\x001700000000001", "SCAN\x000\x00COUNT\x001", "DBSIZE",
		"MONITOR", "ROLE", "INFO\x00replication", "info",
		"PUBLICID\x00123\x0018446744073709551615", "PUBLICID\x00-1", "PRIVATEID\x0086Rf07\x00!", "PRIVATEID",
	} {
		f.Add(seed)
	}
	g, err := idgen.New(idgen.Settings{MaxLead: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	s := New(Options{Generator: g, MGetIDMax: 100, Config: [][2]string{{"port", "6551"}}})
	var last int64
	f.Fuzz(func(t *testing.T, in string) {
		args := bytes.Split([]byte(in), []byte{0})
		p := testPipe(s)
		defer p.Close() // its connection ends: a MONITOR it ran ends too
		var strs []string
		for _, a := range args {
			strs = append(strs, string(a))
		}
		p.Send([]byte(encode(strs...)))
		out := p.Written()
		r := bufio.NewReader(bytes.NewReader(out))
		v, err := readReply(r)
		if err != nil {
			t.Fatalf("%q: reply %q does not parse: %v", in, out, err)
		}
		if rest, _ := io.ReadAll(r); len(rest) > 0 {
			t.Fatalf("%q: more than one reply: %q", in, out)
		}
		if e, ok := v.(respError); ok && (strings.ContainsAny(string(e), "\r\n") || !isErrorCode(string(e))) {
			t.Fatalf("%q: bad error reply %q", in, e)
		}
		// Every ID handed out, by GETID or MGETID, is above all earlier ones.
		var ids []any
		switch name := strings.ToLower(string(args[0])); {
		case name == "getid" && len(args) == 1:
			ids = []any{v}
		case name == "mgetid":
			ids, _ = v.([]any)
		}
		for _, x := range ids {
			id, ok := x.(int64)
			if s, isStr := x.(string); isStr {
				id, ok = parseInt([]byte(s))
			}
			if !ok || id <= last {
				t.Fatalf("%q: id %v after %d", in, x, last)
			}
			last = id
		}
	})
}

// isErrorCode reports whether an error reply starts with an upper-case
// code such as ERR or BUSY, as clients expect.
func isErrorCode(e string) bool {
	code, _, _ := strings.Cut(e, " ")
	return code != "" && strings.ToUpper(code) == code
}

// BenchmarkHandle measures the command layer alone, without sockets: one
// GETID or MGETID 100 through the framing checks, the parser, dispatch
// and the reply, as the connection layer runs one read.
func BenchmarkHandle(b *testing.B) {
	for _, args := range [][]string{{"GETID"}, {"MGETID", "100"}, {"INCR", "counter"}, {"INCRBY", "counter", "100"}, {"SET", "counter", "1000000"}, {"GET", "counter"}, {"MGET", "counter", "none"}} {
		b.Run(strings.Join(args, "_"), func(b *testing.B) {
			g, err := idgen.New(idgen.Settings{MaxLead: 24 * time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			s := New(withSequences(b, Options{Generator: g}))
			if _, err := s.opts.Sequences.Incr("counter", 1); err != nil { // its first segment
				b.Fatal(err)
			}
			p := testPipe(s)
			cmd := []byte(encode(args...))
			b.ReportAllocs()
			for b.Loop() {
				p.Send(cmd)
				p.Reset()
			}
		})
	}
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

// TestHostileClients runs the server while hostile clients try each of
// redcon's parser traps at once, and checks that each gets its error reply
// and is closed, that a well-behaved client is served throughout, and what
// it all costs. Unprotected, the first case alone takes redcon's parser
// more than a second of CPU per trickled byte, and the third buffers 10 MB.
func TestHostileClients(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{})
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

// TestLeadRefusalAllocatesNothing: the lead bound's -BUSY refusal, which
// a client flooding MGETID past max-lead-ms brings once per request, is
// written without an allocation, in the words it always had.
func TestLeadRefusalAllocatesNothing(t *testing.T) {
	s := New(Options{})
	c := testPipe(s).Conn().Session
	le := &idgen.LeadError{Lead: 5003 * time.Millisecond, Max: 5 * time.Second, RetryAfter: 3 * time.Millisecond}
	c.Out = make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { c.Out = c.Out[:0]; s.writeError(c, le) }); n != 0 {
		t.Errorf("%v allocations per refusal", n)
	}
	want := "-BUSY lead 5003ms would exceed max-lead-ms 5000 (the clock is behind IDs already issued: borrowing ahead or a backward clock step); retry in 3ms\r\n"
	if got := string(c.Out); got != want || reply(le).Reply() != want {
		t.Errorf("refusal %q (reply: %q), want %q", got, reply(le).Reply(), want)
	}
}
