package forward_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idserver/idserver/forward"
	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testpki"
	"github.com/idserver/idserver/respserver"
)

// owner runs an idserver on ln (through TLS with cfg, if not nil) until
// the test ends or stop is called.
type owner struct {
	s       *respserver.Server
	served  chan error
	stopped sync.Once
}

func startOwner(t testing.TB, ln net.Listener, cfg *tls.Config, opts respserver.Options) *owner {
	t.Helper()
	g, err := idgen.New(idgen.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Generator = g
	o := &owner{s: respserver.New(opts), served: make(chan error, 1)}
	go func() {
		if cfg != nil {
			o.served <- o.s.ServeTLS(ln, cfg)
			return
		}
		o.served <- o.s.Serve(ln)
	}()
	t.Cleanup(o.stop)
	return o
}

// stop closes the server and waits for Serve to return; again, nothing.
func (o *owner) stop() {
	o.stopped.Do(func() {
		o.s.Close()
		<-o.served
	})
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// echo sends ECHOs of words in one Call and checks that each reply is
// its own word.
func echo(t testing.TB, p *forward.Pool, call *forward.Call, words ...string) error {
	t.Helper()
	for _, w := range words {
		call.Command([][]byte{[]byte("ECHO"), []byte(w)})
	}
	p.Send(call)
	if err := call.Wait(); err != nil {
		return err
	}
	for i, w := range words {
		if got, want := string(call.Reply(i)), fmt.Sprintf("$%d\r\n%s\r\n", len(w), w); got != want {
			t.Errorf("reply %d: %q, want %q", i, got, want)
		}
	}
	return nil
}

// TestPipelined: Calls sent at once from many goroutines share one
// connection, many in flight, and each gets its own replies.
func TestPipelined(t *testing.T) {
	ln := listen(t)
	o := startOwner(t, ln, nil, respserver.Options{})
	p := forward.New(forward.Options{Conns: 1})
	defer p.Close()
	var wg sync.WaitGroup
	for g := range 50 {
		wg.Go(func() {
			call := forward.NewCall(ln.Addr().String(), g%2 == 1)
			for i := range 200 {
				words := make([]string, 1+i%7)
				for j := range words {
					words[j] = fmt.Sprintf("g%d-i%d-w%d", g, i, j)
				}
				if err := echo(t, p, call, words...); err != nil {
					t.Error(err)
					return
				}
				call.Reset(call.Addr, call.RESP3)
			}
		})
	}
	wg.Wait()
	if got := o.s.Stats().Accepted; got != 2 { // one connection per protocol
		t.Errorf("the owner accepted %d connections, want 2: one per protocol (Conns 1)", got)
	}
}

// TestAuthAndTLS: connections authenticate with the owner's password, in
// RESP2 (AUTH) and RESP3 (HELLO 3 AUTH), through TLS; a wrong password
// fails the Call with the owner's reply.
func TestAuthAndTLS(t *testing.T) {
	pki := testpki.New(t)
	cert, err := tls.LoadX509KeyPair(pki.File("server.crt"), pki.File("server.key"))
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	startOwner(t, ln, &tls.Config{Certificates: []tls.Certificate{cert}}, respserver.Options{RequirePass: "s3cret"})
	addr := ln.Addr().String()
	p := forward.New(forward.Options{Password: "s3cret", TLS: &tls.Config{RootCAs: pki.Roots}})
	defer p.Close()
	for _, resp3 := range []bool{false, true} {
		if err := echo(t, p, forward.NewCall(addr, resp3), "over", "tls"); err != nil {
			t.Errorf("RESP3 %v: %v", resp3, err)
		}
	}
	wrong := forward.New(forward.Options{Password: "wrong", TLS: &tls.Config{RootCAs: pki.Roots}})
	defer wrong.Close()
	err = echo(t, wrong, forward.NewCall(addr, false), "x")
	if err == nil || !strings.Contains(err.Error(), "AUTH") || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("with a wrong password: %v, want the owner's WRONGPASS to AUTH", err)
	}
	plain := forward.New(forward.Options{Password: "s3cret"})
	defer plain.Close()
	if err := echo(t, plain, forward.NewCall(addr, false), "x"); err == nil {
		t.Error("plain TCP to a TLS port: no error")
	}
}

// TestRedial: when the owner stops, Calls fail at once rather than
// hang; once it serves again on its address, Calls go through again.
func TestRedial(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	o := startOwner(t, ln, nil, respserver.Options{})
	p := forward.New(forward.Options{RetryAfter: 50 * time.Millisecond})
	defer p.Close()
	call := forward.NewCall(addr, false)
	if err := echo(t, p, call, "before"); err != nil {
		t.Fatal(err)
	}
	o.stop()
	start := time.Now()
	call.Reset(addr, false)
	if err := echo(t, p, call, "while down"); err == nil {
		t.Fatal("the owner stopped: no error")
	} else if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the error took %v", d)
	}
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	startOwner(t, ln2, nil, respserver.Options{})
	await.True(t, 20*time.Second, "Calls go through again", func() bool {
		call.Reset(addr, false)
		return echo(t, p, call, "after") == nil
	})
}

// silent accepts connections and reads what they send, and answers
// only as answer says, until the test ends.
func silent(t *testing.T, answer func(c net.Conn, r *bufio.Reader)) string {
	t.Helper()
	ln := listen(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { answer(c, bufio.NewReader(c)) })
		}
	})
	return ln.Addr().String()
}

// setup reads a connection's setup without a password (CLIENT SETINFO
// LIB-NAME: *4 and four bulks, nine lines) and answers it.
func setup(c net.Conn, r *bufio.Reader) {
	for range 9 {
		r.ReadString('\n')
	}
	c.Write([]byte("+OK\r\n"))
}

// TestBounded: against an owner that never answers, a connection takes
// MaxQueued commands, or MaxQueuedBytes of them, and fails the next Call
// at once with ErrBusy; the Calls waiting fail after ReplyTimeout, naming
// the owner.
func TestBounded(t *testing.T) {
	addr := silent(t, func(c net.Conn, r *bufio.Reader) {
		setup(c, r) // then nothing
		io.Copy(io.Discard, r)
	})
	p := forward.New(forward.Options{Conns: 1, MaxQueued: 10, ReplyTimeout: 500 * time.Millisecond})
	defer p.Close()
	first := forward.NewCall(addr, false)
	for range 10 {
		first.Command([][]byte{[]byte("PING")})
	}
	start := time.Now()
	p.Send(first)
	over := forward.NewCall(addr, false)
	over.Command([][]byte{[]byte("PING")})
	p.Send(over)
	if err := over.Wait(); !errors.Is(err, forward.ErrBusy) {
		t.Errorf("the 11th command: %v, want ErrBusy", err)
	}
	big := forward.New(forward.Options{Conns: 1, MaxQueuedBytes: 1000})
	defer big.Close()
	for i, n := range []int{900, 200} { // the second passes the bound with the first
		call := forward.NewCall(addr, false)
		call.Command([][]byte{[]byte("ECHO"), make([]byte, n)})
		big.Send(call)
		if i == 1 {
			if err := call.Wait(); !errors.Is(err, forward.ErrBusy) {
				t.Errorf("past MaxQueuedBytes: %v, want ErrBusy", err)
			}
		}
	}
	err := first.Wait()
	var oe *forward.OwnerError
	if !errors.As(err, &oe) || oe.Addr != addr {
		t.Errorf("the 10 commands: %v, want an OwnerError of %s", err, addr)
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 10*time.Second {
		t.Errorf("they failed after %v, want about ReplyTimeout (500ms)", d)
	}
	t.Log(err)
}

// TestOwnerDiesMidStream: an owner that closes the connection after
// some replies: the Calls answered keep their replies, the others fail,
// none hangs.
func TestOwnerDiesMidStream(t *testing.T) {
	addr := silent(t, func(c net.Conn, r *bufio.Reader) {
		setup(c, r)
		for range 3 { // three PINGs
			r.ReadString('\n')
			r.ReadString('\n')
			r.ReadString('\n')
			c.Write([]byte("+PONG\r\n"))
		}
		c.Close()
	})
	p := forward.New(forward.Options{Conns: 1})
	defer p.Close()
	calls := make([]*forward.Call, 6)
	for i := range calls {
		calls[i] = forward.NewCall(addr, false)
		calls[i].Command([][]byte{[]byte("PING")})
		p.Send(calls[i])
	}
	for i, call := range calls {
		err := call.Wait()
		switch {
		case i < 3 && (err != nil || string(call.Reply(0)) != "+PONG\r\n"):
			t.Errorf("call %d: %v, want its PONG", i, err)
		case i >= 3 && err == nil:
			t.Errorf("call %d: no error from an owner that closed", i)
		}
	}
}

// BenchmarkCall is one forwarded PING, sent and awaited, on a Call
// reused as respserver reuses them: no allocation per Call.
func BenchmarkCall(b *testing.B) {
	ln := listen(b)
	startOwner(b, ln, nil, respserver.Options{})
	p := forward.New(forward.Options{})
	defer p.Close()
	call := forward.NewCall(ln.Addr().String(), false)
	ping := [][]byte{[]byte("PING")}
	b.ReportAllocs()
	for b.Loop() {
		call.Reset(call.Addr, false)
		call.Command(ping)
		p.Send(call)
		if err := call.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestIdleKeepsConnection: a connection idle for longer than
// ReplyTimeout is not taken as dead: the next Call goes on it.
func TestIdleKeepsConnection(t *testing.T) {
	ln := listen(t)
	o := startOwner(t, ln, nil, respserver.Options{})
	p := forward.New(forward.Options{Conns: 1, ReplyTimeout: 200 * time.Millisecond})
	defer p.Close()
	call := forward.NewCall(ln.Addr().String(), false)
	for i := range 3 {
		if i > 0 {
			time.Sleep(500 * time.Millisecond) // idle past the deadline the last Call left
		}
		call.Reset(call.Addr, false)
		if err := echo(t, p, call, "x"); err != nil {
			t.Fatalf("Call %d: %v", i, err)
		}
	}
	if got := o.s.Stats().Accepted; got != 1 {
		t.Errorf("the owner accepted %d connections, want 1", got)
	}
}
