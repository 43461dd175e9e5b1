package conns

import (
	"errors"
	"io"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/idserver/idserver/internal/replyerr"
	"github.com/idserver/idserver/resplimit"
)

// Conn is one connection: what the connection layer keeps of it, and the
// handler's Session. Its loop owns it, except that while a command waits
// off the loop (Wait), the goroutine running off owns what off touches.
type Conn[S any] struct {
	// Session is the handler's state of the connection, from Open.
	Session S
	// Out is the replies not yet written: the handler appends to it.
	Out []byte

	s      *Server[S]
	id     int64
	addr   string
	laddr  string
	born   int64        // Server.tick when it connected
	fd     atomic.Int64 // set by OnOpen
	link   link         // set by OnOpen, under Server.mu
	opened bool         // OnOpen ran, under Server.mu

	tls    *tlsConn    // nil for plain TCP
	gate   *gate       // the gate it came through: where it is counted
	authed atomic.Bool // SetAuthenticated's last word
	scan   resplimit.Scanner
	split  Splitter
	next   []byte // the whole commands after the one running, for Ahead
	ahead  ahead  // those Ahead split, for the pass that runs them
	in     []byte // read but not yet run: an unfinished command, or what came while busy
	// unscanned is what was read behind a command of a client not yet
	// authenticated, scanned once that command ran (see SetAuthenticated).
	unscanned []byte
	bad       *replyerr.Error // a framing violation, answered after the commands before it
	quit      bool            // close once the replies are out
	start     time.Time

	busy     bool // a command cannot finish on the loop: wait runs off it
	wait     Wait // that command's (Block), or the batch's deferred replies'
	deferred Wait // the batch's replies wait for it (Defer)

	paused bool // its loop does not read it: it waits (stopReading)
	pollFD int  // its loop's epoll descriptor, once found; -1 if it cannot be

	held     bool      // its unsent replies reached the soft limit: its commands wait
	heldAt   time.Time // since when
	watched  bool      // it is in Server.unsent: gnet holds replies of its unwritten
	overSoft time.Time // since when its unsent output, with Pending's, is over the soft limit

	active   atomic.Int64 // Server.tick when it last sent something
	draining atomic.Bool  // set by Shutdown: finish, flush, close
	closing  atomic.Bool  // Close was called: Conns leaves it out
	bill                  // what the accountant charged for it
}

// link is what a Conn needs of its socket: a gnet.Conn, or a Pipe's
// memory.
type link interface {
	Write(b []byte) (int, error)
	OutboundBuffered() int
	Wake(cb gnet.AsyncCallback) error
	AsyncWrite(b []byte, cb gnet.AsyncCallback) error
	Close() error
}

// keepBuf is the largest scratch buffer a connection keeps between
// requests, for its replies and for its input each (Redis's reply buffer
// and query buffer are 16 KB too); a larger one, grown for a big request
// or reply, is let go. What a connection keeps beyond what it is charged
// (Bytes) is so bounded: at 64 KiB, the 600 idle connections of the
// accountant's hostile test (respserver TestAccountantRandomClients)
// kept 14 MB of replies' buffers and 4 MB of input's beside the 4 MiB of
// contents they were charged, and the live heap passed its budget.
const keepBuf = 16 << 10

// ID is c's connection id, counting from 1 in the order they came.
func (c *Conn[S]) ID() int64 { return c.id }

// RemoteAddr is the client's address, host:port.
func (c *Conn[S]) RemoteAddr() string { return c.addr }

// LocalAddr is the address the client connected to.
func (c *Conn[S]) LocalAddr() string { return c.laddr }

// TLS reports whether the client speaks TLS.
func (c *Conn[S]) TLS() bool { return c.tls != nil }

// FD is c's file descriptor, or 0 before its loop took it.
func (c *Conn[S]) FD() int64 { return c.fd.Load() }

// Age is how many seconds ago c connected (CLIENT LIST's age).
func (c *Conn[S]) Age() int64 { return c.s.tick.Load() - c.born }

// Idle is how many seconds ago c last sent something (CLIENT LIST's
// idle, which timeout counts).
func (c *Conn[S]) Idle() int64 { return c.s.tick.Load() - c.active.Load() }

// Mem is what c holds, as last accounted for.
func (c *Conn[S]) Mem() int64 { return c.mem.Load() }

// Start is when the batch of commands running now began: the read that
// brought them.
func (c *Conn[S]) Start() time.Time { return c.start }

// SetAuthenticated tells whether c's client has authenticated: until it
// has, it is held to Redis's framing limits for such a client, and what it
// sends behind a command is not scanned until that command ran, as Redis
// reads it (resplimit.Scanner.Unauthenticated). On c's loop.
func (c *Conn[S]) SetAuthenticated(ok bool) {
	c.scan.Unauthenticated(!ok)
	c.authed.Store(ok)
}

// Quit closes c once its replies so far are written. On c's loop.
func (c *Conn[S]) Quit() { c.quit = true }

// Close closes c from any goroutine; what was written to it is sent
// first. From now on Conns leaves c out, as Redis frees a client it
// kills at once: a second CLIENT KILL finds it no more.
func (c *Conn[S]) Close() {
	c.closing.Store(true)
	if l := c.liveLink(); l != nil {
		l.Close()
	}
}

// Wake has c's loop ask the handler for Pending output, from any
// goroutine.
func (c *Conn[S]) Wake() {
	if l := c.liveLink(); l != nil {
		l.Wake(nil) // OnTraffic, with nothing read
	}
}

// gone reports whether c was closed (forget ran): its socket, and the
// descriptor's number, may be another connection's by now, so nothing
// is written to it, read from it or charged for it any more. gnet closes
// a connection inside a write that fails (its OnClose runs in that
// write), so a batch checks it after each write.
func (c *Conn[S]) gone() bool { return c.closed.Load() }

// liveLink is c's link, or nil before its loop took it.
func (c *Conn[S]) liveLink() link {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.link
}

// events is the gnet event handler: it runs on the event loops.
type events[S any] struct {
	gnet.BuiltinEventEngine
	s *Server[S]
}

func (e *events[S]) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	c := gc.Context().(*Conn[S])
	c.active.Store(e.s.tick.Load())
	c.fd.Store(int64(gc.Fd()))
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	c.link, c.opened = gc, true
	if e.s.closed { // Shutdown began after admit: it never saw this connection
		return nil, gnet.Close
	}
	if c.tls != nil {
		// Requests sent right behind the handshake may be read already:
		// nothing on the socket would trigger OnTraffic for them.
		gc.Wake(nil)
	}
	return nil, gnet.None
}

func (e *events[S]) OnClose(gc gnet.Conn, err error) gnet.Action {
	c := gc.Context().(*Conn[S])
	e.s.forget(c)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		e.s.log.Debug().Err(err).Str("client", c.addr).Msg("connection closed")
	}
	return gnet.None
}

func (e *events[S]) OnTraffic(gc gnet.Conn) gnet.Action {
	data, _ := gc.Next(-1) // gnet's read buffer, valid until we return
	return e.s.traffic(gc.Context().(*Conn[S]), data)
}

// traffic takes what c's loop read (nothing, when woken): it writes
// Pending output, decrypts, checks the framing, and runs or queues the
// commands.
func (s *Server[S]) traffic(c *Conn[S], data []byte) gnet.Action {
	if out, overflow := s.h.Pending(c); out != nil || overflow || !c.overSoft.IsZero() {
		if s.flushPending(c, out, overflow) == gnet.Close {
			return gnet.Close
		}
		if c.gone() { // closed in that write
			return gnet.None
		}
	}
	if len(data) > 0 {
		c.active.Store(s.tick.Load())
		c.paused = false // gnet reads it again after writing replies out: see stopReading
	}
	if c.tls != nil {
		var err error
		if data, err = c.tls.open(data); err != nil {
			// A bad record, an alert or close_notify: the stream is over.
			s.log.Debug().Err(err).Str("client", c.addr).Msg("TLS connection ends")
			return gnet.Close
		}
	}
	if c.bad != nil || c.quit {
		return gnet.None // what follows a violation is not read
	}
	if len(c.unscanned) > 0 { // behind a command not run yet: see rescan
		c.unscanned = append(c.unscanned, data...)
		data = nil
	} else {
		valid, err := c.scan.Scan(data)
		if err == nil && valid < len(data) {
			c.unscanned = append(c.unscanned, data[valid:]...)
		}
		data, c.bad = data[:valid], err
	}
	if c.busy || c.held && !s.caughtUp(c) {
		return s.queue(c, data)
	}
	return s.runBatch(c, data)
}

// runBatch runs the whole commands in c.in and data, in order, and writes
// their replies in one write. It keeps an unfinished command, and
// everything after a command that must wait, in c.in.
func (s *Server[S]) runBatch(c *Conn[S], data []byte) gnet.Action {
	c.start = time.Now()
	for run := true; run; run = data != nil {
		s.runIn(c, data)
		data = s.rescan(c)
	}
	if c.deferred.Mode == Defer {
		// The replies so far wait for it; then this runs again, and
		// sends them with what follows. A command that waits (one the
		// batch ran into after it deferred) runs its part off the loop
		// after the deferred one, its reply after theirs.
		s.waitDeferred(c)
		s.stopReading(c)
		go s.finish(c)
		return gnet.None
	}
	if !c.busy && !c.quit && !c.held {
		if c.bad != nil {
			s.protoErrors[c.bad.Code].Add(1)
			c.Out = c.bad.Append(c.Out)
			c.quit = true
		} else if c.draining.Load() {
			c.quit = true
		}
	}
	c.send()
	if c.gone() { // closed in that write
		return gnet.None
	}
	s.h.Sent(c)
	if c.quit {
		return gnet.Close // gnet writes what is still buffered first
	}
	if c.busy { // accounted for when what it sends next is queued, or it runs again
		s.stopReading(c)
		go s.finish(c)
		return gnet.None
	}
	s.startReading(c)
	return s.account(c)
}

// runIn runs the whole commands in c.in and data, in order, and keeps an
// unfinished command, and everything after a command that must wait, in
// c.in.
func (s *Server[S]) runIn(c *Conn[S], data []byte) {
	buf := data
	if len(c.in) > 0 {
		c.in = append(c.in, data...)
		buf = c.in
	}
	whole := len(buf) - c.scan.Partial()
	rest := s.runCommands(c, buf[:whole], s.room(c))
	switch ran := whole - len(rest); {
	case c.quit:
		c.in = c.in[:0]
		c.ahead.reset()
	case ran == 0 && len(c.in) > 0:
		// c.in is buf, as it stays: copied onto itself at every read, a
		// command of 4 MB cost 115 ms of its loop's CPU (memmove, 92%).
	default:
		// May move bytes of c.in to its front: append copies as memmove does.
		c.in = append(c.in[:0], buf[ran:]...)
	}
	if cap(c.in) > keepBuf && len(c.in) == 0 {
		c.in = nil
	}
}

// rescan scans what waited behind a command of a client not yet
// authenticated, now that the commands before it ran (the client may have
// authenticated): up to the next command while it still has not, else
// all of it. It returns what is valid to run, nil if nothing is to run
// now.
func (s *Server[S]) rescan(c *Conn[S]) []byte {
	if c.busy || c.quit || c.held || c.bad != nil || len(c.unscanned) == 0 {
		return nil
	}
	p := c.unscanned
	valid, err := c.scan.Scan(p)
	c.bad = err
	switch {
	case err == nil && valid < len(p):
		c.unscanned = p[valid:] // appends go on at its end: p[:valid] stays as is
	case cap(p) > keepBuf:
		c.unscanned = nil // p's bytes are run, or copied to c.in, before any read
	default:
		c.unscanned = p[:0]
	}
	if valid == 0 {
		return nil
	}
	return p[:valid]
}

// send writes c.Out, in one write.
func (c *Conn[S]) send() {
	c.write(c.Out)
	c.Out = c.Out[:0]
	if cap(c.Out) > keepBuf {
		c.Out = nil
	}
}

// write writes out to c's socket, through TLS if c speaks it.
func (c *Conn[S]) write(out []byte) {
	if c.gone() {
		return
	}
	if c.tls != nil {
		out = c.tls.seal(out)
		c.tls.shrink()
	}
	if len(out) > 0 {
		c.link.Write(out) // what the socket does not take at once, gnet copies
	}
}

// runCommands runs the commands in buf, which holds whole ones only, until
// their replies fill room. It returns what is left when a command must
// wait, the replies fill room, or the client is to close. Replies past
// flushAt are written at once (flush).
func (s *Server[S]) runCommands(c *Conn[S], buf []byte, room int) []byte {
	for len(buf) > 0 && !c.quit && !c.busy {
		if len(c.Out) >= room {
			s.hold(c)
			return buf
		}
		if s.flush(c) {
			if c.gone() { // closed in that write
				return nil
			}
			room = s.room(c) // what the socket did not take is gnet's now
		}
		args, note, rest, err := c.nextCommand(buf)
		if err != nil {
			c.bad = err
			c.ahead.reset()
			return nil
		}
		if len(args) == 0 {
			c.ahead.consumed()
			buf = rest
			continue // an empty line
		}
		c.next = rest
		w := s.h.Command(c, args, note)
		c.next = nil
		switch w.Mode {
		case Behind:
			// It runs once the deferred replies settled, as a command
			// that waited; it is not consumed.
			c.busy, c.wait = true, Wait{Off: nop, Then: nothen, Mode: Block}
			s.blocked.Add(1)
			return buf
		case Defer:
			c.deferred = w
		case Block:
			c.busy, c.wait = true, w
			s.blocked.Add(1)
		}
		c.ahead.consumed()
		buf = rest
	}
	return buf
}

// flushAt is how many bytes of replies a batch gathers before it writes
// them, rather than at its end: a client pipelining big replies it never
// reads (MGETID 10000, 210 KB each) had c.Out grow by doubling up to the
// soft output limit at each batch, then dropped, and the garbage
// collector that cost was the worst wait a PING on another connection
// saw (2.5 GB allocated in 4 s of such a flood).
const flushAt = 256 << 10

// flush writes c's replies so far if they passed flushAt, and reports
// whether it did: never while a deferred reply holds its place among
// them (Defer: settling rewrites c.Out from there).
func (s *Server[S]) flush(c *Conn[S]) bool {
	if len(c.Out) < flushAt || c.deferred.Mode == Defer {
		return false
	}
	c.write(c.Out)
	c.Out = c.Out[:0]
	return true
}

func nop() error        { return nil }
func nothen(error) Wait { return Wait{} }

// finish runs the part of a command that cannot run on the loop, off it,
// and then has the loop end it and go on with the client's commands.
func (s *Server[S]) finish(c *Conn[S]) {
	err := c.wait.Off()
	c.link.AsyncWrite(nil, func(_ gnet.Conn, closed error) error {
		// On the loop again.
		then := c.wait.Then
		c.busy, c.wait = false, Wait{}
		s.blocked.Add(-1)
		if closed != nil {
			return nil
		}
		if next := then(err); next.Mode == Block { // it waits again: runBatch goes on with it
			c.busy, c.wait = true, next
			s.blocked.Add(1)
		}
		if s.runBatch(c, nil) == gnet.Close {
			c.link.Close()
		}
		return nil
	})
}
