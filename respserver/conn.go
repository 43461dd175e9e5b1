package respserver

import (
	"errors"
	"io"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/tidwall/redcon"

	"github.com/idserver/idserver/resplimit"
)

// client is the state of one connection, in three parts: the
// connection's own (the connection layer's: framing, buffers, waiting,
// backpressure, accounting), the session's (what commands set), and the
// transaction's (MULTI to EXEC). Its loop owns it, except that while
// busy, the goroutine finishing the waiting command owns what its off
// touches (the IDs scratch).
type client struct {
	connState
	session
	txState
}

// connState is what the connection layer keeps of a client.
type connState struct {
	id     int64
	addr   string
	laddr  string
	born   int64        // Server.tick when it connected
	fd     atomic.Int64 // set by OnOpen
	gc     gnet.Conn    // set by OnOpen, under Server.mu
	opened bool         // OnOpen ran, under Server.mu

	tls    *tlsConn // nil for plain TCP
	scan   resplimit.Scanner
	in     []byte   // read but not yet run: an unfinished command, or what came while busy
	out    []byte   // replies not yet written
	args   [][]byte // the parser's scratch
	inline []byte   // the unescaped bytes of an inline command's arguments
	bad    error    // a framing violation, answered after the commands before it
	quit   bool     // close once the replies are out

	busy  bool    // a command cannot finish on the loop: it runs off it
	wait  waiting // that command
	batch batch   // the commands run since the last read, for their latency

	held    bool      // its unsent replies reached the soft limit: its commands wait
	heldAt  time.Time // since when
	watched bool      // it is in Server.unsent: gnet holds replies of its unwritten

	active   atomic.Int64 // Server.tick when it last sent something
	draining atomic.Bool  // set by Shutdown: finish, flush, close
	mem      atomic.Int64 // what it holds, as last charged to Server.clientMem
	evicted  atomic.Bool  // closed at maxmemory-clients: no longer charged
}

// session is what a client's commands set and read.
type session struct {
	resp3  bool
	authed bool
	name   string

	libName, libVer  string // from CLIENT SETINFO
	stringIDs        bool   // GETID replies with a bulk string (getid-reply)
	greeted          bool   // ran a command other than connection setup
	track            tracking
	noEvict, noTouch bool
	shown            atomic.Pointer[shown] // for CLIENT LIST on other connections
	mon              *monitor              // since MONITOR

	lower [32]byte // the command name, lower-cased, without allocating
	ids   []int64  // scratch for MGETID
}

// txState is a client's transaction, from MULTI to EXEC.
type txState struct {
	tx       *transaction
	queued   atomic.Int64 // commands in tx, for CLIENT LIST
	inExec   bool         // EXEC is running tx: its commands take txIDs
	execArgs [][]byte     // scratch for the arguments of tx's commands
	txIDs    []int64      // the IDs EXEC took for the transaction, not yet used
}

// keepBuf is the largest scratch buffer a client keeps between requests;
// a larger one, grown for a rare big request, is let go.
const keepBuf = 64 << 10

// errWait is returned by a command that cannot finish on the loop (it
// would wait for its IDs); it has set client.wait, and finish completes
// it.
var errWait = errors.New("respserver: command must wait")

// waiting is a command that cannot finish on the loop: finish runs off off
// it (it may block; it owns what it touches of the client until it
// returns), then then on the loop with off's error, which writes the reply
// or returns the error reply to send. The loop knows nothing of what the
// command waits for.
type waiting struct {
	off  func() error
	then func(c *client, err error) error

	cmd   *command  // the command, for its latency
	start time.Time // when it began
}

// batch is the commands that ran on one read (or wake) of a client,
// whose replies go out in one write. Their latency is that of the batch,
// from its start to that write, as the client sees it: timing the batch,
// not each command, keeps the clock readings to two per read.
type batch struct {
	start time.Time
	ran   []ran // consecutive runs of one command
}

type ran struct {
	cmd *command
	n   uint64
}

func (b *batch) add(cmd *command) {
	if k := len(b.ran) - 1; k >= 0 && b.ran[k].cmd == cmd {
		b.ran[k].n++
		return
	}
	b.ran = append(b.ran, ran{cmd, 1})
}

// observe counts the batch's latency for each command in it, and empties it.
func (b *batch) observe() {
	if len(b.ran) == 0 {
		return
	}
	d := time.Since(b.start)
	for _, r := range b.ran {
		r.cmd.latency.ObserveN(d, r.n)
	}
	b.ran = b.ran[:0]
}

// events is the gnet event handler: it runs on the event loops.
type events struct {
	gnet.BuiltinEventEngine
	s *Server
}

func (e *events) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	c := gc.Context().(*client)
	c.active.Store(e.s.tick.Load())
	c.fd.Store(int64(gc.Fd()))
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	c.gc, c.opened = gc, true
	if e.s.closed { // Shutdown began after admit: it never saw this gc
		return nil, gnet.Close
	}
	if c.tls != nil {
		// Requests sent right behind the handshake may be read already:
		// nothing on the socket would trigger OnTraffic for them.
		gc.Wake(nil)
	}
	return nil, gnet.None
}

func (e *events) OnClose(gc gnet.Conn, err error) gnet.Action {
	c := gc.Context().(*client)
	e.s.forget(c)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		e.s.log.Debug().Err(err).Str("client", c.addr).Msg("connection closed")
	}
	return gnet.None
}

func (e *events) OnTraffic(gc gnet.Conn) gnet.Action {
	c := gc.Context().(*client)
	if c.mon != nil && e.s.flushMonitor(c, gc) == gnet.Close {
		return gnet.Close
	}
	data, _ := gc.Next(-1) // gnet's read buffer, valid until we return
	if len(data) > 0 {
		c.active.Store(e.s.tick.Load())
	}
	if c.tls != nil {
		var err error
		if data, err = c.tls.open(data); err != nil {
			// A bad record, an alert or close_notify: the stream is over.
			e.s.log.Debug().Err(err).Str("client", c.addr).Msg("TLS connection ends")
			return gnet.Close
		}
	}
	if c.bad != nil || c.quit {
		return gnet.None // what follows a violation is not read
	}
	valid, err := c.scan.Scan(data)
	data, c.bad = data[:valid], err
	if c.busy || c.held && !e.s.caughtUp(c, gc) {
		return e.s.queue(c, data)
	}
	return e.s.serve(c, gc, data)
}

// serve runs the whole commands in c.in and data, in order, and writes
// their replies in one write. It keeps an unfinished command, and
// everything after a command that must wait, in c.in.
func (s *Server) serve(c *client, gc gnet.Conn, data []byte) gnet.Action {
	c.batch.start = time.Now()
	buf := data
	if len(c.in) > 0 {
		c.in = append(c.in, data...)
		buf = c.in
	}
	whole := len(buf) - c.scan.Partial()
	rest := s.runCommands(c, buf[:whole], s.room(gc))
	if c.quit {
		c.in = c.in[:0]
	} else {
		// May move bytes of c.in to its front: append copies as memmove does.
		c.in = append(c.in[:0], buf[whole-len(rest):]...)
	}
	if cap(c.in) > keepBuf && len(c.in) == 0 {
		c.in = nil
	}
	if !c.busy && !c.quit && !c.held {
		if c.bad != nil {
			s.errors.Add(1)
			c.writeError(c.bad.Error())
			c.quit = true
		} else if c.draining.Load() {
			c.quit = true
		}
	}
	c.send(gc)
	c.batch.observe()
	if c.quit {
		return gnet.Close // gnet writes what is still buffered first
	}
	if c.busy { // accounted for when what it sends next is queued, or it runs again
		go s.finish(c, gc)
		return gnet.None
	}
	return s.account(c)
}

// send writes c.out, in one write.
func (c *client) send(gc gnet.Conn) {
	c.write(gc, c.out)
	c.out = c.out[:0]
	if cap(c.out) > keepBuf {
		c.out = nil
	}
}

// write writes out to c's socket, through TLS if c speaks it.
func (c *client) write(gc gnet.Conn, out []byte) {
	if c.tls != nil {
		out = c.tls.seal(out)
		c.tls.shrink()
	}
	if len(out) > 0 {
		gc.Write(out) // what the socket does not take at once, gnet copies
	}
}

// runCommands runs the commands in buf, which holds whole ones only, until
// their replies fill room. It returns what is left when a command must
// wait, the replies fill room, or the client is to close.
func (s *Server) runCommands(c *client, buf []byte, room int) []byte {
	for len(buf) > 0 && !c.quit {
		if len(c.out) >= room {
			s.hold(c)
			return buf
		}
		args, rest, err := c.parse(buf)
		if err != nil {
			c.bad = err
			return nil
		}
		buf = rest
		if len(args) == 0 {
			continue // an empty line
		}
		s.commands.Add(1)
		if err := s.dispatch(c, args); err != nil {
			if err == errWait {
				c.busy = true
				s.blocked.Add(1)
				return buf
			}
			s.errors.Add(1)
			c.writeError(replyText(err))
		}
	}
	return buf
}

// parse splits the first command off buf, which holds whole commands: an
// empty array (*0, *-1) or blank line gives no arguments, as Redis skips
// them.
func (c *client) parse(buf []byte) (args [][]byte, rest []byte, err error) {
	if n, ok := resplimit.EmptyCommand(buf); ok {
		return nil, buf[n:], nil
	}
	if buf[0] != '*' {
		rest, err := c.splitInline(buf)
		return c.args, rest, err
	}
	complete, args, _, rest, err := redcon.ReadNextCommand(buf, c.args[:0])
	c.args = args
	switch {
	case err != nil:
		return nil, nil, errors.New("ERR " + err.Error())
	case !complete: // the scanner saw the end of a command here
		return nil, nil, errors.New("ERR Protocol error: incomplete command")
	}
	return args, rest, nil
}

// finish runs the part of a command that cannot run on the loop, off it,
// and then has the loop write its reply and go on with the client's
// commands.
func (s *Server) finish(c *client, gc gnet.Conn) {
	err := c.wait.off()
	gc.AsyncWrite(nil, func(gc gnet.Conn, closed error) error {
		// On the loop again.
		c.busy = false
		s.blocked.Add(-1)
		if closed != nil {
			return nil
		}
		if err := c.wait.then(c, err); err != nil {
			s.errors.Add(1)
			c.writeError(replyText(err))
		}
		c.wait.cmd.latency.Observe(time.Since(c.wait.start))
		c.wait = waiting{}
		if s.serve(c, gc, nil) == gnet.Close {
			gc.Close()
		}
		return nil
	})
}

// Replies, appended to c.out.

func (c *client) writeString(s string)     { c.out = redcon.AppendString(c.out, s) }
func (c *client) writeError(s string)      { c.out = redcon.AppendError(c.out, s) }
func (c *client) writeBulk(b []byte)       { c.out = redcon.AppendBulk(c.out, b) }
func (c *client) writeBulkString(s string) { c.out = redcon.AppendBulkString(c.out, s) }
func (c *client) writeInt(n int)           { c.out = redcon.AppendInt(c.out, int64(n)) }
func (c *client) writeInt64(n int64)       { c.out = redcon.AppendInt(c.out, n) }
func (c *client) writeArray(n int)         { c.out = redcon.AppendArray(c.out, n) }
func (c *client) writeNull()               { c.out = redcon.AppendNull(c.out) }

// writeVerbatim writes text as RESP3's verbatim string of format txt, or
// a bulk string in RESP2, as Redis replies to CLIENT LIST and INFO.
func (c *client) writeVerbatim(text []byte) {
	if !c.resp3 {
		c.writeBulk(text)
		return
	}
	c.out = append(strconv.AppendInt(append(c.out, '='), int64(len(text)+4), 10), "\r\ntxt:"...)
	c.out = append(append(c.out, text...), '\r', '\n')
}

// writeSet writes the header of a set of n elements: an array in RESP2.
func (c *client) writeSet(n int) {
	if !c.resp3 {
		c.writeArray(n)
		return
	}
	c.out = append(strconv.AppendInt(append(c.out, '~'), int64(n), 10), '\r', '\n')
}
