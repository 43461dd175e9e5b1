package respserver

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"github.com/idserver/idserver/idgen"
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
		for _, junk := range []string{"\x00\xff\xfe\r\n", "\x01\x02 \x03\n", "GETID extra junk\r\n"} {
			c := dialRaw(t, addr)
			c.send(junk)
			if v := c.reply(); !strings.HasPrefix(string(v.(respError)), "ERR ") {
				t.Fatalf("%q: %.200v", junk, v)
			}
			stillServing()
		}
		for _, junk := range []string{"*abc\r\n", "*1\r\n%5\r\nhello\r\n", "*1\r\n$x\r\n", "*1\r\n$3\r\nabcdef\r\n", "*-5\r\n"} {
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
	if s.clients.Load() != 1 {
		t.Errorf("%d clients connected, want only the good one", s.clients.Load())
	}
}

// TestConnectionFlood opens far more connections than maxclients at once.
func TestConnectionFlood(t *testing.T) {
	const max, flood = 50, 400
	s, addr := startServer(t, idgen.Settings{}, Options{MaxClients: max})
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
	if s.clients.Load() != 1 {
		t.Fatalf("%d clients still counted after the flood", s.clients.Load())
	}
}

// fakeConn is a redcon.Conn that writes replies into a buffer, so the
// command layer can be fuzzed without sockets.
type fakeConn struct {
	redcon.Conn // nil: a method not overridden here panics, failing the fuzz
	w           *redcon.Writer
	buf         bytes.Buffer
	ctx         any
	closed      bool
}

func newFakeConn() *fakeConn {
	c := &fakeConn{}
	c.w = redcon.NewWriter(&c.buf)
	return c
}

func (c *fakeConn) RemoteAddr() string             { return "127.0.0.1:1" }
func (c *fakeConn) Close() error                   { c.closed = true; return nil }
func (c *fakeConn) Context() any                   { return c.ctx }
func (c *fakeConn) SetContext(v any)               { c.ctx = v }
func (c *fakeConn) WriteError(msg string)          { c.w.WriteError(msg) }
func (c *fakeConn) WriteString(s string)           { c.w.WriteString(s) }
func (c *fakeConn) WriteBulk(b []byte)             { c.w.WriteBulk(b) }
func (c *fakeConn) WriteBulkString(s string)       { c.w.WriteBulkString(s) }
func (c *fakeConn) WriteInt(n int)                 { c.w.WriteInt(n) }
func (c *fakeConn) WriteInt64(n int64)             { c.w.WriteInt64(n) }
func (c *fakeConn) WriteArray(n int)               { c.w.WriteArray(n) }
func (c *fakeConn) WriteNull()                     { c.w.WriteNull() }
func (c *fakeConn) WriteRaw(b []byte)              { c.w.WriteRaw(b) }
func (c *fakeConn) flush() ([]byte, error)         { err := c.w.Flush(); return c.buf.Bytes(), err }
func (c *fakeConn) NetConn() net.Conn              { return nil }
func (c *fakeConn) WriteUint64(n uint64)           { c.w.WriteUint64(n) }
func (c *fakeConn) WriteAny(v any)                 { c.w.WriteAny(v) }
func (c *fakeConn) ReadPipeline() []redcon.Command { return nil }

// FuzzCommand runs arbitrary arguments through the command layer: every
// command gets exactly one well-formed reply, and IDs only increase.
func FuzzCommand(f *testing.F) {
	for _, seed := range []string{
		"GETID", "MGETID\x003", "MGETID\x00-1", "MGETID\x0099999999999", "DECODEID\x00123",
		"HELLO\x003", "HELLO\x002\x00SETNAME\x00x", "CLIENT\x00SETINFO\x00LIB-NAME\x00x",
		"COMMAND\x00DOCS", "COMMAND\x00INFO\x00getid\x00nope", "CONFIG\x00GET\x00*", "INFO\x00idgen",
		"PING\x00hi", "ECHO", "SELECT\x000", "AUTH\x00a\x00b", "TIME", "QUIT", "nope\x00\r\n",
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
		conn := newFakeConn()
		conn.SetContext(&client{id: 1, authed: true})
		s.handle(conn, redcon.Command{Args: args})
		out, err := conn.flush()
		if err != nil {
			t.Fatal(err)
		}
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
// GETID or MGETID 100 through dispatch and the reply writer.
func BenchmarkHandle(b *testing.B) {
	for _, args := range [][]string{{"GETID"}, {"MGETID", "100"}} {
		b.Run(strings.Join(args, "_"), func(b *testing.B) {
			g, err := idgen.New(idgen.Settings{MaxLead: 24 * time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			s := New(Options{Generator: g})
			conn := newFakeConn()
			conn.SetContext(&client{id: 1, authed: true})
			cmd := redcon.Command{}
			for _, a := range args {
				cmd.Args = append(cmd.Args, []byte(a))
			}
			b.ReportAllocs()
			for b.Loop() {
				s.handle(conn, cmd)
				conn.w.Flush()
				conn.buf.Reset()
			}
		})
	}
}
