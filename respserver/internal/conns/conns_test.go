package conns

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/replyerr"
	"github.com/idserver/idserver/internal/testpki"
	"github.com/idserver/idserver/resplimit"
)

// echo is a trivial Handler: ECHO x replies x, BIG n replies n bytes,
// WAIT finishes off the loop once the test releases it, STALL blocks the
// loop itself until the test releases it, QUIT closes, and any other
// command gets an error. Its session counts the commands run, and the
// most one batch ran.
type echo struct {
	release chan struct{} // WAIT's off returns when it receives
	stalled chan struct{} // STALL sends on it, on the loop, then waits for unstall
	unstall chan struct{}
	pending atomic.Pointer[[]byte]
	overrun atomic.Bool
	closed  atomic.Int64
	// The commands whose replies were written (Sent), and the most one
	// batch ran: of a test's only client.
	sent, maxBatch atomic.Int64
	refuse         func(net.Addr) *replyerr.Error // Refuse's answer; nil admits every connection
}

type session struct {
	commands, sent int
	deferring      bool     // DEFER's wait has not ended
	log            []string // what ran: the command and its note, "behind", "then"
	peeked         []string // the commands PEEK's Ahead saw
	maxKept        int      // the most commands Ahead kept
}

func (h *echo) Refuse(addr net.Addr) *replyerr.Error {
	if h.refuse == nil {
		return nil
	}
	return h.refuse(addr)
}

func (h *echo) Open(c *Conn[*session]) *session { return &session{} }

func (h *echo) Command(c *Conn[*session], args [][]byte, note any) Wait {
	name := strings.ToUpper(string(args[0]))
	if name == "AFTER" && c.Session.deferring {
		c.Session.log = append(c.Session.log, "behind")
		return Wait{Mode: Behind}
	}
	c.Session.commands++
	c.Session.log = append(c.Session.log, fmt.Sprintf("%s %v", bytes.Join(args, []byte(" ")), note))
	switch name {
	case "AFTER":
		c.Out = redcon.AppendString(c.Out, "AFTER")
	case "DEFER":
		c.Session.deferring = true
		c.Out = redcon.AppendString(c.Out, "DEFERRED")
		return Wait{Off: func() error { <-h.release; return nil }, Then: func(error) Wait {
			c.Session.deferring = false
			c.Session.log = append(c.Session.log, "then")
			return Wait{}
		}, Mode: Defer}
	case "PEEK":
		c.Ahead(func(args [][]byte) (any, bool) {
			c.Session.peeked = append(c.Session.peeked, string(bytes.Join(args, []byte(" "))))
			return "noted", true
		})
		c.Session.maxKept = max(c.Session.maxKept, len(c.ahead.cmds))
		return Wait{Off: func() error { <-h.release; return nil }, Then: func(error) Wait {
			c.Out = redcon.AppendString(c.Out, "PEEKED")
			return Wait{}
		}, Mode: Block}
	case "ECHO":
		c.Out = redcon.AppendBulk(c.Out, args[1])
	case "BIG":
		n, _ := strconv.Atoi(string(args[1]))
		c.Out = redcon.AppendBulkString(c.Out, strings.Repeat("x", n))
	case "WAIT":
		return Wait{Off: func() error { <-h.release; return nil }, Then: func(err error) Wait {
			c.Out = redcon.AppendString(c.Out, "DONE")
			return Wait{}
		}, Mode: Block}
	case "STALL":
		h.stalled <- struct{}{}
		<-h.unstall
		c.Out = redcon.AppendString(c.Out, "OK")
	case "QUIT":
		c.Out = redcon.AppendString(c.Out, "OK")
		c.Quit()
	case "AUTH":
		c.SetAuthenticated(true)
		c.Out = redcon.AppendString(c.Out, "OK")
	default:
		c.Out = redcon.AppendError(c.Out, "ERR unknown command")
	}
	return Wait{}
}

func (h *echo) Sent(c *Conn[*session]) {
	h.maxBatch.Store(max(h.maxBatch.Load(), int64(c.Session.commands-c.Session.sent)))
	c.Session.sent = c.Session.commands
	h.sent.Store(int64(c.Session.sent))
}

func (h *echo) Closed(c *Conn[*session]) { h.closed.Add(1) }
func (h *echo) Bytes(c *Conn[*session]) int {
	if p := h.pending.Load(); p != nil {
		return len(*p)
	}
	return 0
}

func (h *echo) Pending(c *Conn[*session]) ([]byte, bool) {
	if p := h.pending.Swap(nil); p != nil {
		return *p, h.overrun.Load()
	}
	return nil, h.overrun.Load()
}

// start serves h on a new loopback listener with opts, and returns the
// server and its address; the test's end closes it.
func start(t *testing.T, opts Options, h *echo) (*Server[*session], string) {
	t.Helper()
	if h.release == nil {
		h.release = make(chan struct{})
	}
	if h.stalled == nil {
		h.stalled, h.unstall = make(chan struct{}), make(chan struct{})
	}
	s := New[*session](opts, h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s, ln.Addr().String()
}

// client is a test's connection, reading replies as lines: a bulk
// string's header and its body are one reply.
type client struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	t.Cleanup(func() { nc.Close() })
	return &client{nc, bufio.NewReader(nc)}
}

// reply reads one reply: a bulk string's body, or a status or error line.
func (c *client) reply() (string, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if !strings.HasPrefix(line, "$") {
		return line, nil
	}
	n, _ := strconv.Atoi(line[1:])
	body := make([]byte, n+2)
	_, err = io.ReadFull(c.r, body)
	return string(body[:n]), err
}

func (c *client) expect(t *testing.T, want ...string) {
	t.Helper()
	for i, w := range want {
		got, err := c.reply()
		if err != nil || got != w {
			t.Fatalf("reply %d: %q, %v; want %q", i, got, err, w)
		}
	}
}

func cmd(args ...string) string {
	var b []byte
	b = redcon.AppendArray(b, len(args))
	for _, a := range args {
		b = redcon.AppendBulkString(b, a)
	}
	return string(b)
}

// TestPipelineInOrder: a pipeline of RESP and inline commands, cut at
// every byte, is answered in order, and empty commands get nothing.
func TestPipelineInOrder(t *testing.T) {
	_, addr := start(t, Options{}, &echo{})
	c := dial(t, addr)
	in := cmd("ECHO", "a") + "*0\r\n" + "ECHO \"b c\"\r\n" + "\r\n" + cmd("ECHO", "") + "*-1\r\n" + cmd("nope")
	for i := range len(in) {
		if _, err := c.Write([]byte(in[i : i+1])); err != nil {
			t.Fatal(err)
		}
	}
	c.expect(t, "a", "b c", "", "-ERR unknown command")
}

// TestFramingError: a violation of the framing limits is answered after
// the commands before it, then the connection is closed.
func TestFramingError(t *testing.T) {
	s, addr := start(t, Options{Limits: resplimitSmall}, &echo{})
	c := dial(t, addr)
	c.Write([]byte(cmd("ECHO", "a") + "*1\r\n$2000\r\n"))
	c.expect(t, "a", "-ERR Protocol error: invalid bulk length")
	if _, err := c.reply(); err != io.EOF {
		t.Fatalf("after the error: %v, want EOF", err)
	}
	if st := s.Stats(); st.ProtocolErrors != [replyerr.NCodes]uint64{replyerr.ERR: 1} {
		t.Fatalf("protocol errors %v, want 1 ERR", st.ProtocolErrors)
	}
}

// TestWaitOffTheLoop: a command that waits off the loop holds back only
// its own connection's later commands, which then run in order.
func TestWaitOffTheLoop(t *testing.T) {
	h := &echo{}
	s, addr := start(t, Options{}, h)
	a, b := dial(t, addr), dial(t, addr)
	a.Write([]byte(cmd("WAIT") + cmd("ECHO", "after")))
	await.True(t, time.Minute, "blocked", func() bool { return s.Stats().Blocked == 1 })
	b.Write([]byte(cmd("ECHO", "other")))
	b.expect(t, "other")
	h.release <- struct{}{}
	a.expect(t, "+DONE", "after")
	await.True(t, time.Minute, "unblocked", func() bool { return s.Stats().Blocked == 0 })
}

// TestQueryBufferLimit: a command left unfinished past the query buffer
// limit closes its connection without a reply.
func TestQueryBufferLimit(t *testing.T) {
	s, addr := start(t, Options{QueryBufferLimit: 32 << 10}, &echo{})
	c := dial(t, addr)
	c.Write([]byte("*2\r\n$4\r\nECHO\r\n$60000\r\n" + strings.Repeat("x", 40000)))
	if got, err := c.reply(); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("got %q, %v; want the connection closed", got, err)
	}
	if st := s.Stats(); st.QueryClosed != 1 {
		t.Fatalf("query_closed %d, want 1", st.QueryClosed)
	}
}

// TestHardLimit: a client that asks for replies and never reads them is
// closed once they pass the hard limit; another is served throughout. (Its
// requests queue while it is held: the query buffer limit is set above
// the hard limit here, or on a busy machine, where one read brings
// megabytes of them, that limit would close it first, as it should.)
func TestHardLimit(t *testing.T) {
	s, addr := start(t, Options{Output: OutputLimits{Soft: 256 << 10, Hard: 1 << 20}, QueryBufferLimit: 64 << 20}, &echo{})
	a, b := dial(t, addr), dial(t, addr)
	go func() {
		for {
			if _, err := a.Write([]byte(strings.Repeat(cmd("BIG", "65536"), 16))); err != nil {
				return
			}
		}
	}()
	await.True(t, time.Minute, "closed at the hard limit", func() bool { return s.Stats().LimitClosed == 1 })
	b.Write([]byte(cmd("ECHO", "x")))
	b.expect(t, "x")
}

// TestMaxMemoryClients: past maxmemory-clients the client holding the
// most is closed, and the others go on.
func TestMaxMemoryClients(t *testing.T) {
	s, addr := start(t, Options{MaxMemoryClients: 2 << 20, QueryBufferLimit: 8 << 20}, &echo{})
	small, big := dial(t, addr), dial(t, addr)
	small.Write([]byte("*2\r\n$4\r\nECHO\r\n$60000\r\n" + strings.Repeat("x", 1000)))
	await.True(t, time.Minute, "charged", func() bool { return s.Stats().ClientMem > 0 })
	// An unfinished command of 2.4 MB: 40 bulks of 60000 bytes, the last
	// one short.
	bulk := "$60000\r\n" + strings.Repeat("x", 60000) + "\r\n"
	big.Write([]byte("*42\r\n$4\r\nECHO\r\n" + strings.Repeat(bulk, 40) + "$60000\r\n"))
	await.True(t, time.Minute, "evicted", func() bool { return s.Stats().Evicted == 1 })
	if _, err := big.reply(); err == nil {
		t.Fatal("the biggest client got a reply")
	}
	small.Write([]byte(strings.Repeat("x", 59000) + "\r\n"))
	if got, err := small.reply(); err != nil || len(got) != 60000 {
		t.Fatalf("the small client: %d bytes, %v", len(got), err)
	}
}

// TestPendingOverflow: a connection whose handler's pending output
// overflows is closed; pending output is written before what is read.
func TestPendingOverflow(t *testing.T) {
	h := &echo{}
	s, addr := start(t, Options{Output: OutputLimits{Hard: 1 << 20}}, h)
	c := dial(t, addr)
	c.Write([]byte(cmd("ECHO", "a")))
	c.expect(t, "a")
	conn := s.Conns()[0]
	lines := []byte("+line\r\n")
	h.pending.Store(&lines)
	conn.Wake()
	c.expect(t, "+line")
	h.overrun.Store(true)
	conn.Wake()
	if got, err := c.reply(); err == nil {
		t.Fatalf("got %q after the overflow", got)
	}
	await.True(t, time.Minute, "closed", func() bool { return s.Stats().LimitClosed == 1 && h.closed.Load() == 1 })
}

// TestMaxClients: past maxclients a connection gets Redis's reply.
func TestMaxClients(t *testing.T) {
	s, addr := start(t, Options{MaxClients: 1}, &echo{})
	a := dial(t, addr)
	a.Write([]byte(cmd("ECHO", "a")))
	a.expect(t, "a")
	b := dial(t, addr)
	b.expect(t, "-ERR max number of clients reached")
	if st := s.Stats(); st.Rejected != 1 || st.Clients != 1 {
		t.Fatalf("rejected %d, clients %d; want 1, 1", st.Rejected, st.Clients)
	}
}

// TestPeersPort: the peers' port admits its own MaxPeers connections
// while maxclients is reached on the clients' port, refuses past them,
// and closes those that do not authenticate within peerAuthWait; one
// that did stays.
func TestPeersPort(t *testing.T) {
	s, addr := start(t, Options{MaxClients: 1, MaxPeers: 2}, &echo{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.ServePeers(ln, nil)
	client := dial(t, addr)
	client.Write([]byte(cmd("ECHO", "c")))
	client.expect(t, "c")
	dial(t, addr).expect(t, "-ERR max number of clients reached")
	authed, idle := dial(t, ln.Addr().String()), dial(t, ln.Addr().String())
	authed.Write([]byte(cmd("AUTH") + cmd("ECHO", "p")))
	authed.expect(t, "+OK", "p")
	// Both admitted, then one more at once: the idle one is closed only
	// once it has been unauthenticated for peerAuthWait (of the clock's
	// one-second steps), which a slow machine may reach if the third
	// waits for anything else.
	await.True(t, time.Minute, "both peers admitted", func() bool { return s.Stats().Peers == 2 })
	dial(t, ln.Addr().String()).expect(t, "-ERR max number of clients reached")
	if st := s.Stats(); st.Clients != 1 {
		t.Fatalf("%d clients; want 1", st.Clients)
	}
	idle.SetDeadline(time.Now().Add(time.Minute))
	if got, err := idle.reply(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the peer that did not authenticate: %q, %v; want it closed", got, err)
	}
	authed.Write([]byte(cmd("ECHO", "still")))
	authed.expect(t, "still")
	await.True(t, time.Minute, "the closed peer uncounted", func() bool { return s.Stats().Peers == 1 })
}

// TestPeersNotEvicted: past maxmemory-clients, a client is closed and a
// peer connection holding more is not.
func TestPeersNotEvicted(t *testing.T) {
	s, addr := start(t, Options{MaxMemoryClients: 1 << 20, QueryBufferLimit: 8 << 20, MaxPeers: 1}, &echo{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.ServePeers(ln, nil)
	peer, client := dial(t, ln.Addr().String()), dial(t, addr)
	peer.Write([]byte(cmd("AUTH")))
	peer.expect(t, "+OK")
	// Unfinished commands of 60,000-byte bulks: 1.2 MB on the peer's
	// connection, then 0.12 MB on the client's, which takes the total
	// past the bound.
	bulk := "$60000\r\n" + strings.Repeat("x", 60000) + "\r\n"
	peer.Write([]byte("*42\r\n$4\r\nECHO\r\n" + strings.Repeat(bulk, 20)))
	await.True(t, time.Minute, "the peer charged", func() bool { return s.Stats().ClientMem > 1<<20 })
	client.Write([]byte("*42\r\n$4\r\nECHO\r\n" + strings.Repeat(bulk, 2)))
	await.True(t, time.Minute, "a client evicted", func() bool { return s.Stats().Evicted == 1 })
	peer.Write([]byte(strings.Repeat(bulk, 21)))
	if got, err := peer.reply(); err != nil || len(got) != 60000 {
		t.Fatalf("the peer: %d bytes, %v", len(got), err)
	}
}

// TestFitBudget: the open files limit is shared out as fitBudget's
// formula says, and whatever the limit, the shares add up to at most it
// (unless even one client does not fit).
func TestFitBudget(t *testing.T) {
	for _, tt := range []struct {
		nofile                uint64
		loops, other, clients int
		wantPending, wantFit  int
	}{
		{64, 1, 0, 10000, 4, 64 - 34 - 10 - 2*4},
		{1024, 1, 16, 10000, 60, 1024 - 34 - 10 - 16 - 2*60},
		{1024, 8, 16, 100, 59, 100},
		{1 << 20, 2, 16, 10000, 256, 10000},
		{1 << 62, 1, 0, 10000, 256, 10000}, // RLIM_INFINITY
		{40, 1, 16, 10000, 4, 1},           // not even one fits
	} {
		b := fitBudget(tt.nofile, tt.loops, tt.other, tt.clients)
		if b.pending != tt.wantPending || b.maxClients != tt.wantFit {
			t.Errorf("fitBudget(%d, %d loops, %d other, maxclients %d): pending %d, maxclients %d; want %d, %d",
				tt.nofile, tt.loops, tt.other, tt.clients, b.pending, b.maxClients, tt.wantPending, tt.wantFit)
		}
		if sum := b.own + spareFDs + b.other + 2*b.pending + b.maxClients; uint64(sum) > tt.nofile && b.maxClients > 1 {
			t.Errorf("fitBudget(%d, ...): the shares add up to %d", tt.nofile, sum)
		}
	}
}

// TestRefuse: a connection Refuse answers gets the reply and is closed.
func TestRefuse(t *testing.T) {
	refuse := func(net.Addr) *replyerr.Error { return replyerr.New(replyerr.DENIED, "go away") }
	_, addr := start(t, Options{}, &echo{refuse: refuse})
	c := dial(t, addr)
	c.expect(t, "-DENIED go away")
}

// TestShutdownDrains: Shutdown lets a waiting command finish and its
// reply, and the commands behind it, go out before the close.
func TestShutdownDrains(t *testing.T) {
	h := &echo{}
	s, addr := start(t, Options{}, h)
	c := dial(t, addr)
	c.Write([]byte(cmd("WAIT") + cmd("ECHO", "last")))
	await.True(t, time.Minute, "blocked", func() bool { return s.Stats().Blocked == 1 })
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	h.release <- struct{}{}
	c.expect(t, "+DONE", "last")
	if _, err := c.reply(); err != io.EOF {
		t.Fatalf("after the last reply: %v, want EOF", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h.closed.Load() != 1 {
		t.Fatalf("Closed called %d times, want 1", h.closed.Load())
	}
}

// TestPipe: a Pipe runs bytes through the layer as a read does,
// finishing a command that waits before Send returns.
func TestPipe(t *testing.T) {
	h := &echo{release: make(chan struct{}, 1)}
	s := New[*session](Options{}, h)
	p := s.Pipe("127.0.0.1:1", "127.0.0.1:2")
	h.release <- struct{}{}
	for _, chunk := range []string{"*2\r\n$4\r\nEC", "HO\r\n$1\r\na\r\n" + cmd("WAIT") + cmd("ECHO", "b"), cmd("QUIT") + cmd("ECHO", "c")} {
		if p.Send([]byte(chunk)) {
			break
		}
	}
	if got, want := string(p.Written()), "$1\r\na\r\n+DONE\r\n$1\r\nb\r\n+OK\r\n"; got != want {
		t.Fatalf("written %q, want %q", got, want)
	}
	if n := p.Conn().Session.commands; n != 4 {
		t.Fatalf("%d commands ran, want 4", n)
	}
	p.Close()
	if st := s.Stats(); st.Clients != 0 || h.closed.Load() != 1 {
		t.Fatalf("after Close: %d clients, Closed %d times", st.Clients, h.closed.Load())
	}
}

// TestClosedInAWrite: a connection that gnet closes inside a write of its
// replies (a reset socket) is touched no more: not written to again (its
// descriptor's number may be another connection's), nor charged. Both
// writes of a read: the handler's pending output, and the batch's
// replies.
func TestClosedInAWrite(t *testing.T) {
	for _, at := range []string{"pending", "replies"} {
		t.Run(at, func(t *testing.T) {
			h := &echo{}
			s := New[*session](Options{MaxMemoryClients: 64 << 20}, h)
			p := s.Pipe("127.0.0.1:1", "127.0.0.1:2")
			p.Send([]byte(cmd("ECHO", "a")))
			p.FailWrites()
			if at == "pending" {
				lines := []byte("+line\r\n")
				h.pending.Store(&lines)
			}
			// A reply, and an unfinished command the connection would be
			// charged for.
			p.Send([]byte(cmd("ECHO", strings.Repeat("b", 1000)) + "*2\r\n$4\r\nECHO\r\n$60000\r\n" + strings.Repeat("c", 5000)))
			if n := p.WritesAfterClose(); n != 0 {
				t.Errorf("%d writes after the write that closed the connection", n)
			}
			if st := s.Stats(); st.ClientMem != 0 || st.Clients != 0 {
				t.Errorf("after it closed: %d bytes charged, %d clients", st.ClientMem, st.Clients)
			}
		})
	}
}

// TestBigRepliesFlushed: a batch of big replies is written as it goes,
// each time they pass flushAt, in order, and the connection keeps no big
// buffer after; behind a deferred reply (which holds its place in them
// until it settles), the batch is written in one write at its end.
func TestBigRepliesFlushed(t *testing.T) {
	const n, size = 20, 100000
	big := strings.Repeat(cmd("BIG", strconv.Itoa(size)), n)
	want := strings.Repeat("$100000\r\n"+strings.Repeat("x", size)+"\r\n", n)
	for _, tt := range []struct {
		name, first, reply string
		writes             func(int) bool
	}{
		{"alone", "", "", func(w int) bool { return w >= n*size/flushAt && w < n }},
		{"behind a deferred reply", cmd("DEFER"), "+DEFERRED\r\n", func(w int) bool { return w == 1 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &echo{release: make(chan struct{}, 1)}
			s := New[*session](Options{}, h)
			p := s.Pipe("127.0.0.1:1", "127.0.0.1:2")
			h.release <- struct{}{}
			p.Send([]byte(tt.first + big))
			if got := string(p.Written()); got != tt.reply+want {
				t.Fatalf("written %d bytes, not the %d replies in order", len(got), n)
			}
			if w := p.Writes(); !tt.writes(w) {
				t.Errorf("%d replies of %d bytes in %d writes", n, size, w)
			}
			if c := cap(p.Conn().Out); c > keepBuf {
				t.Errorf("the connection keeps a buffer of %d bytes", c)
			}
		})
	}
}

// TestDeferBehind: a Defer has the batch's replies wait for it while
// the commands behind it run, but for one that returns Behind: it, and
// those after it, run once the Defer's Then ran, and nothing is written
// before.
func TestDeferBehind(t *testing.T) {
	h := &echo{release: make(chan struct{}, 1)}
	s := New[*session](Options{}, h)
	p := s.Pipe("127.0.0.1:1", "127.0.0.1:2")
	h.release <- struct{}{}
	p.Send([]byte(cmd("DEFER") + cmd("ECHO", "a") + cmd("AFTER") + cmd("ECHO", "b")))
	if got, want := string(p.Written()), "+DEFERRED\r\n$1\r\na\r\n+AFTER\r\n$1\r\nb\r\n"; got != want {
		t.Fatalf("written %q, want %q", got, want)
	}
	want := []string{"DEFER <nil>", "ECHO a <nil>", "behind", "then", "AFTER <nil>", "ECHO b <nil>"}
	if got := p.Conn().Session.log; !slices.Equal(got, want) {
		t.Fatalf("ran %q, want %q", got, want)
	}
}

// TestAheadSplitsOnce: the commands a command's Ahead saw run with the
// note it left on each, split once: a second Ahead, in the pass that
// runs them, sees only those no Ahead saw, inline commands included.
func TestAheadSplitsOnce(t *testing.T) {
	h := &echo{release: make(chan struct{}, 2)}
	s := New[*session](Options{}, h)
	p := s.Pipe("127.0.0.1:1", "127.0.0.1:2")
	h.release <- struct{}{}
	h.release <- struct{}{}
	p.Send([]byte(cmd("PEEK") + cmd("ECHO", "a") + "ECHO \"b c\"\r\n" + cmd("PEEK") + "*0\r\n" + cmd("ECHO", "d")))
	p.Send([]byte(cmd("ECHO", "e")))
	if got, want := string(p.Written()), "+PEEKED\r\n$1\r\na\r\n$3\r\nb c\r\n+PEEKED\r\n$1\r\nd\r\n$1\r\ne\r\n"; got != want {
		t.Fatalf("written %q, want %q", got, want)
	}
	if got, want := p.Conn().Session.peeked, []string{"ECHO a", "ECHO b c", "PEEK", "ECHO d"}; !slices.Equal(got, want) {
		t.Fatalf("Ahead saw %q, want each command behind the first PEEK once: %q", got, want)
	}
	want := []string{"PEEK <nil>", "ECHO a noted", "ECHO b c noted", "PEEK noted", "ECHO d noted", "ECHO e <nil>"}
	if got := p.Conn().Session.log; !slices.Equal(got, want) {
		t.Fatalf("ran %q, want %q", got, want)
	}
}

// TestAheadBounded: in a pipeline far longer than aheadMax of commands
// that each wait and look ahead, Ahead keeps at most aheadMax commands
// behind the running one, and sees each command once.
func TestAheadBounded(t *testing.T) {
	const n = 3 * aheadMax
	h := &echo{release: make(chan struct{}, n)}
	s := New[*session](Options{}, h)
	p := s.Pipe("127.0.0.1:1", "127.0.0.1:2")
	for range n {
		h.release <- struct{}{}
	}
	p.Send([]byte(strings.Repeat(cmd("PEEK"), n)))
	if got, want := string(p.Written()), strings.Repeat("+PEEKED\r\n", n); got != want {
		t.Fatalf("%d bytes written, want %d", len(got), len(want))
	}
	ses := p.Conn().Session
	if len(ses.peeked) != n-1 || ses.maxKept > aheadMax+1 {
		t.Fatalf("Ahead saw %d commands, want %d; kept up to %d, want at most %d", len(ses.peeked), n-1, ses.maxKept, aheadMax+1)
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// resplimitSmall are framing limits small enough to pass in a test.
var resplimitSmall = resplimit.Limits{MaxBulkLen: 1024, MaxMultibulkLen: 16}

// TestTLS: over TLS, a pipeline sent right behind the handshake is
// answered in order, with a large reply, and past maxclients a client
// gets Redis's reply through TLS.
func TestTLS(t *testing.T) {
	pki := testpki.New(t)
	cert, err := tls.LoadX509KeyPair(pki.File("server.crt"), pki.File("server.key"))
	if err != nil {
		t.Fatal(err)
	}
	s := New[*session](Options{MaxClients: 1}, &echo{release: make(chan struct{})})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.ServeTLS(ln, &tls.Config{Certificates: []tls.Certificate{cert}})
	t.Cleanup(func() { s.Close() })
	dialTLS := func() *client {
		nc, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(60 * time.Second))
		t.Cleanup(func() { nc.Close() })
		return &client{nc, bufio.NewReader(nc)}
	}
	a := dialTLS()
	a.Write([]byte(cmd("ECHO", "a") + cmd("BIG", "100000") + cmd("ECHO", "b")))
	a.expect(t, "a", strings.Repeat("x", 100000), "b")
	b := dialTLS()
	b.expect(t, "-ERR max number of clients reached")
}

// TestReadTurnsBounded: a client's commands run at most readTurn bytes
// of them at a time, whatever it has sent, so that the loop serves its
// other clients in between: 64 KiB of commands sent while the loop was
// stalled (all of them waiting in the socket) run in batches of at most
// 16 KiB, every one answered, in order.
func TestReadTurnsBounded(t *testing.T) {
	h := &echo{}
	_, addr := start(t, Options{}, h)
	a := dial(t, addr)
	a.Write([]byte(cmd("STALL")))
	<-h.stalled
	one := cmd("ECHO", "0000")
	n := 64 << 10 / len(one)
	var in []byte
	for i := range n {
		in = fmt.Appendf(in, "*2\r\n$4\r\nECHO\r\n$4\r\n%04d\r\n", i%10000)
	}
	if _, err := a.Write(in); err != nil {
		t.Fatal(err)
	}
	h.unstall <- struct{}{}
	a.expect(t, "+OK")
	for i := range n {
		a.expect(t, fmt.Sprintf("%04d", i%10000))
	}
	await.True(t, time.Minute, "every batch sent", func() bool { return h.sent.Load() == int64(n+1) })
	if most := (readTurn + len(one) - 1) / len(one); h.maxBatch.Load() > int64(most) {
		t.Fatalf("one batch ran %d commands of %d bytes, want at most %d (%d bytes read at a time)", h.maxBatch.Load(), len(one), most, readTurn)
	}
}

// TestHandOversAtOnce: connections are handed to the loops several at a
// time, not one after the other: with the one loop stalled, 8 new
// connections are all accepted and on their way to it (one at a time,
// the second would wait for the loop, and the others in the backlog), and
// each is served once the loop goes on.
func TestHandOversAtOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one loop
	h := &echo{}
	s, addr := start(t, Options{}, h)
	a := dial(t, addr)
	a.Write([]byte(cmd("STALL")))
	<-h.stalled
	var cs []*client
	for range handOvers {
		cs = append(cs, dial(t, addr))
	}
	all := await.Within(30*time.Second, func() bool { return s.Stats().Accepted == 1+handOvers })
	h.unstall <- struct{}{}
	if !all {
		t.Fatalf("%d connections accepted while the loop is stalled, want %d", s.Stats().Accepted, 1+handOvers)
	}
	a.expect(t, "+OK")
	for i, c := range cs {
		c.Write([]byte(cmd("ECHO", strconv.Itoa(i))))
		c.expect(t, strconv.Itoa(i))
	}
}
