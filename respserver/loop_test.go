package respserver

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/idgen/idgentest"
	"github.com/idserver/idserver/internal/await"
)

// slowLayout issues 2 IDs per ms, so a modest MGETID reaches the lead
// bound and has to wait for the clock.
var slowLayout = idgen.Layout{IDBits: 2, ShardBits: 1, RandomBits: 18}

// oneLoop runs the server under test on a single event loop, so that its
// clients share it, and restores GOMAXPROCS after the test.
func oneLoop(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// nothingYet reports whether c has no reply waiting to be read.
func nothingYet(t *testing.T, c *rawClient) bool {
	t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	defer c.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := c.r.Peek(1)
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// checkIDs checks that v is an MGETID reply of n increasing IDs above
// after, and returns the last.
func checkIDs(t *testing.T, v any, n int, after int64) int64 {
	t.Helper()
	a, ok := v.([]any)
	if !ok || len(a) != n {
		if ok {
			t.Fatalf("want %d IDs, got %d", n, len(a))
		}
		t.Fatalf("want %d IDs, got %.200v", n, v)
	}
	for _, x := range a {
		id, ok := parseInt([]byte(x.(string)))
		if !ok || id <= after {
			t.Fatalf("id %v after %d", x, after)
		}
		after = id
	}
	return after
}

// waitSettings issue 2 IDs per ms with a 500 ms lead bound, on a clock
// that moves only when the test moves it: an MGETID 1000 borrows 500 ms
// ahead, and a second one then waits until the test advances the clock
// 500 ms.
func waitSettings(t *testing.T) (idgen.Settings, *idgentest.Clock) {
	clk := idgentest.NewClock(time.Now())
	// Whatever a test leaves waiting wakes up at its end.
	t.Cleanup(func() { clk.Advance(time.Hour) })
	return idgen.Settings{Layout: slowLayout, MaxLead: 500 * time.Millisecond, MaxWait: 5 * time.Second, Clock: clk}, clk
}

// startWaiting starts a server on waitSettings, borrows 500 ms ahead from
// client a, then sends then, which starts with a command that waits for
// the clock, and returns once it waits.
func startWaiting(t *testing.T, opts Options, then string) (s *Server, a, b *rawClient, last int64, clk *idgentest.Clock) {
	t.Helper()
	st, clk := waitSettings(t)
	s, addr := startServer(t, st, opts)
	a, b = dialRaw(t, addr), dialRaw(t, addr)
	last = checkIDs(t, a.do("MGETID", "1000"), 1000, 0)
	a.send(then)
	if !clk.AwaitSleepers(1, 10*time.Second) {
		t.Fatal("the command never waited for the clock")
	}
	return s, a, b, last, clk
}

// TestWaitOffTheLoop: a command that has to wait for the clock waits on
// its own; another client on the same event loop is answered meanwhile,
// and the waiting client's pipelined commands follow its reply in order.
func TestWaitOffTheLoop(t *testing.T) {
	oneLoop(t)
	_, a, b, last, clk := startWaiting(t, Options{}, encode("MGETID", "1000")+encode("PING")+encode("GETID"))
	if v := b.do("PING"); v != "PONG" {
		t.Fatalf("other client's PING: %v", v)
	}
	if !nothingYet(t, a) {
		t.Fatal("the waiting MGETID was answered before the clock moved")
	}
	clk.Advance(500 * time.Millisecond)
	last = checkIDs(t, a.reply(), 1000, last)
	if v := a.reply(); v != "PONG" {
		t.Fatalf("PING after the waiting MGETID: %v", v)
	}
	if id, ok := a.reply().(int64); !ok || id <= last {
		t.Fatalf("GETID after the waiting MGETID: %v, want above %d", id, last)
	}
	info := b.do("INFO", "idgen").(string)
	if !strings.Contains(info, "lead_waits:1\r\n") || !strings.Contains(info, "lead_refusals:0\r\n") {
		t.Fatalf("want one wait and no refusal:\n%s", info)
	}
}

// TestWaitRefused: a GETID that waits for the reservation on disk, which
// does not come, gets -BUSY from the goroutine that waited, and the
// connection goes on once the reservation moves.
func TestWaitRefused(t *testing.T) {
	now := time.Now().UnixMilli() - idgen.DefaultEpoch.UnixMilli()
	s, addr := startServer(t, idgen.Settings{Ceiling: now, MaxWait: 50 * time.Millisecond}, Options{})
	c := dialRaw(t, addr)
	c.send(encode("GETID") + encode("PING"))
	if e, ok := c.reply().(respError); !ok || !strings.HasPrefix(string(e), "BUSY ") || !strings.Contains(string(e), "not yet reserved") {
		t.Fatalf("GETID past the reservation: %v", e)
	}
	if v := c.reply(); v != "PONG" {
		t.Fatalf("PING after it: %v", v)
	}
	s.opts.Generator.Raise(now + 60_000)
	if id, ok := c.do("GETID").(int64); !ok || id <= 0 {
		t.Fatalf("GETID after the reservation moved: %v", id)
	}
}

// TestShutdownFinishesWaitingCommand: Shutdown lets a command that is
// waiting for the clock finish, answers what the client sent after it,
// then closes the connection.
func TestShutdownFinishesWaitingCommand(t *testing.T) {
	s, a, _, last, clk := startWaiting(t, Options{}, encode("MGETID", "1000")+encode("GETID"))
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	clk.Advance(500 * time.Millisecond)
	last = checkIDs(t, a.reply(), 1000, last)
	if id, ok := a.reply().(int64); !ok || id <= last {
		t.Fatalf("GETID sent after the waiting MGETID: %v", id)
	}
	if _, err := readReply(a.r); err == nil {
		t.Fatal("connection still open after Shutdown")
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

// TestIdleTimeout: a client that sends nothing for the timeout is closed;
// one that keeps talking is not.
func TestIdleTimeout(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{ConnOptions: ConnOptions{IdleTimeout: time.Second}})
	idle, busy := dialRaw(t, addr), dialRaw(t, addr)
	start := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		idle.r.ReadByte() // returns at the close
		closed <- time.Since(start)
	}()
	var d time.Duration
	pinged := start
	await.True(t, 10*time.Second, "the idle client closed", func() bool {
		select {
		case d = <-closed:
			return true
		default:
		}
		if time.Since(pinged) >= 200*time.Millisecond { // the busy client's pace
			if v := busy.do("PING"); v != "PONG" {
				t.Fatalf("active client, after %v: %v", time.Since(start), v)
			}
			pinged = time.Now()
		}
		return false
	})
	// The idle clock ticks once a second: between 1 and 3 s.
	if d < time.Second || d > 3*time.Second {
		t.Fatalf("idle client closed after %v, want 1-3 s", d)
	}
	if v := busy.do("PING"); v != "PONG" {
		t.Fatalf("active client: %v", v)
	}
}

// TestQuitFlushesPipeline: QUIT answers OK after the replies before it and
// closes; what came after it is not run.
func TestQuitFlushesPipeline(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{})
	c := dialRaw(t, addr)
	c.send(encode("PING") + encode("QUIT") + encode("GETID"))
	if v := c.reply(); v != "PONG" {
		t.Fatalf("PING: %v", v)
	}
	if v := c.reply(); v != "OK" {
		t.Fatalf("QUIT: %v", v)
	}
	if v, err := readReply(c.r); err == nil {
		t.Fatalf("reply after QUIT: %v", v)
	}
}

// TestBigReplySlowReader: a reply larger than the socket buffers reaches a
// client that reads it slowly, whole and in order.
func TestBigReplySlowReader(t *testing.T) {
	s, addr := startServer(t, idgen.Settings{Layout: idgen.Layout{IDBits: 2, ShardBits: 19, RandomBits: 0}},
		Options{MGetIDMax: 100000})
	c := dialRaw(t, addr)
	c.send(strings.Repeat(encode("MGETID", "100000"), 3) + encode("PING"))
	await.True(t, time.Minute, "the server fills the socket and buffers the rest", func() bool { return s.Stats().ClientMem > 0 })
	last := int64(0)
	for range 3 {
		last = checkIDs(t, c.reply(), 100000, last)
	}
	if v := c.reply(); v != "PONG" {
		t.Fatalf("after the big replies: %v", v)
	}
}

// TestInlineDollar: an inline line that starts with '$' is read as Redis
// reads it, as an inline command, not as redcon's Tile38 framing.
func TestInlineDollar(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{})
	c := dialRaw(t, addr)
	c.send("$5 x\r\nPING\r\n")
	if e, ok := c.reply().(respError); !ok || !strings.HasPrefix(string(e), "ERR unknown command '$5', with args beginning with: 'x'") {
		t.Fatalf("inline $5: %v", e)
	}
	if v := c.reply(); v != "PONG" {
		t.Fatalf("after it: %v", v)
	}
}

// TestCloseDuringShutdown: Close drops the clients a Shutdown is still
// waiting for, and the Shutdown then returns.
func TestCloseDuringShutdown(t *testing.T) {
	s, a, _, _, _ := startWaiting(t, Options{}, encode("MGETID", "1000"))
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	await.True(t, time.Minute, "Shutdown waits for a", func() bool { return errors.Is(s.Ready(), ErrShuttingDown) })
	s.Close()
	if v, err := readReply(a.r); err == nil {
		t.Fatalf("dropped client got a reply: %.100v", v)
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("Shutdown after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown still waiting after Close dropped the clients")
	}
}

// TestWaitStopsReading: a client whose command waits is not read until
// it has run: one that floods the server meanwhile is held back by its
// socket's buffers and TCP, not by its query buffer (it was closed at
// client-query-buffer-limit, so redis-cli --pipe of new keys was), and
// the server holds little for it; other clients are served throughout;
// once the command has run, every command it sent gets its reply, in
// order. A client that sends a lot, but not while waiting, is served.
func TestWaitStopsReading(t *testing.T) {
	_, a, b, last, clk := startWaiting(t, Options{}, encode("MGETID", "1000"))
	addr := a.conn.RemoteAddr().String()
	const pings = 2 << 20 // 28 MiB: more than the socket buffers take
	flood := []byte(strings.Repeat(encode("PING"), 1<<14))
	var sent atomic.Int64
	wrote := make(chan error, 1)
	go func() {
		for range pings / (1 << 14) {
			n, err := a.conn.Write(flood)
			sent.Add(int64(n))
			if err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	var stalled int64
	await.True(t, 10*time.Second, "the flooding client's writes stall", func() bool {
		n := sent.Load()
		time.Sleep(200 * time.Millisecond)
		stalled = n
		return n == sent.Load()
	})
	if stalled >= int64(len(flood))*(pings>>14) {
		t.Fatalf("the server read all %d bytes sent while a command waited", stalled)
	}
	if v := b.do("PING"); v != "PONG" {
		t.Fatalf("other client: %v", v)
	}
	mem := fieldOf(b.do("INFO", "clients").(string), "mem_clients_normal")
	if n, err := strconv.Atoi(mem); err != nil || n > 256<<10 {
		t.Fatalf("with %d bytes sent by a waiting client, mem_clients_normal is %s, want under 256 KiB", stalled, mem)
	}
	t.Logf("a waiting client was held back at %d bytes sent; the server held %s for the clients", stalled, mem)
	// 2 million replies to read: dialRaw's 20 s from the dial ran out
	// under -race beside two CPU hogs and the rest of the suite.
	a.conn.SetDeadline(time.Now().Add(2 * time.Minute))
	clk.Advance(500 * time.Millisecond)
	checkIDs(t, a.reply(), 1000, last)
	for i := range pings {
		if v := a.reply(); v != "PONG" {
			t.Fatalf("reply %d: %v", i, v)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatalf("flood: %v", err)
	}
	c := dialRaw(t, addr)
	go c.conn.Write([]byte(strings.Repeat(encode("PING"), 1<<17))) // 1.8 MiB
	for i := range 1 << 17 {
		if v := c.reply(); v != "PONG" {
			t.Fatalf("reply %d: %v", i, v)
		}
	}
}

// fieldOf is field's value in INFO's text.
func fieldOf(info, field string) string {
	for l := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return v
		}
	}
	return ""
}
