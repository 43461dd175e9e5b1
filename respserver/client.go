package respserver

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"github.com/idserver/idserver/respserver/internal/conns"
)

// client is the state of one connection: the connection layer's (conns:
// framing, buffers, backpressure, accounting), the session's (what
// commands set), and the transaction's (MULTI to EXEC). Its loop owns it,
// except that while a command waits off the loop, the goroutine finishing
// it owns what its off touches (the IDs scratch).
type client struct {
	*conns.Conn[*client]
	session
	txState

	batch    batch    // the commands run since the last read, for their latency
	deferred deferred // what the batch's replies wait for (conns.Defer)
	fwd      fwdBatch // what the batch forwards to other owners (Options.Owner)
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
	read  keyReads // scratch for GET and MGET
}

// txState is a client's transaction, from MULTI to EXEC.
type txState struct {
	tx       *transaction
	queued   atomic.Int64 // commands in tx, for CLIENT LIST
	inExec   bool         // EXEC is running tx: its commands take txIDs and txSeq
	execArgs [][]byte     // scratch for the arguments of tx's commands
	txIDs    []int64      // the IDs EXEC took for the transaction, not yet used
	txSeq    txSeq        // the values EXEC took for the transaction's INCRs
	txLater  execLater    // its commands that finish off the loop, after the others
	watched  []watchedKey // WATCHed since the last EXEC, DISCARD or UNWATCH
	touches  *touches     // the server's, where watched are counted
}

// keepBuf is the largest scratch buffer a client keeps between requests;
// a larger one, grown for a rare big request, is let go.
const keepBuf = 64 << 10

// later is what a command leaves to finish off the loop, the one value
// it returns besides its error (command.start): the zero later, nothing
// (its reply is in c.Out); or off, run off the loop (it may block; it
// owns what it touches of the client until it returns), then then on the
// loop with off's error, which writes the reply or returns the error
// reply to send, and may return a next step; or deferredReply, or
// behindDeferred.
type later struct {
	off  func() error
	then func(c *client, err error) (later, error)
	mode conns.Mode // Block with off; else Done, Defer or Behind
}

// offLoop is the later of a command that finishes off the loop: off,
// then then.
func offLoop(off func() error, then func(c *client, err error) (later, error)) later {
	return later{off: off, then: then, mode: conns.Block}
}

var (
	// deferredReply is the later of a command whose reply is written
	// and may go only once the client's deferred says so.
	deferredReply = later{mode: conns.Defer}
	// behindDeferred is the later of a command that did not run: it
	// must see what the deferred replies before it did, and runs again
	// once they settled.
	behindDeferred = later{mode: conns.Behind}
)

// batch is the commands that ran on one read (or wake) of a client,
// whose replies go out in one write. Their latency is that of the batch,
// from its start (conns.Conn.Start) to that write, as the client sees it:
// timing the batch, not each command, keeps the clock readings to two per
// read.
type batch struct {
	ran []ran // consecutive runs of one command

	// start and at are the batch's start and the time since it when its
	// last command ended, for lap: one clock reading per command (a
	// monotonic one) counts their busy time.
	start time.Time
	at    time.Duration

	// routing is the cluster view the batch's keys are routed by, read
	// once for the batch (reading the map checks the lease, a clock
	// reading) and again when it is viewFresh old: viewStart is the batch
	// it was read for, viewAt when, since that batch's start.
	routing   view
	viewStart time.Time
	viewAt    time.Duration
}

// viewFresh is how long a batch routes by the view it read: a lease lost
// or a slot moved meanwhile is seen at most this late, as if the batch
// had run that much sooner.
const viewFresh = time.Millisecond

// view is the view to route the batch that began at start by, read
// again from read if none was read for it or it is viewFresh old.
func (b *batch) view(start time.Time, read func() view) *view {
	at := b.at // since start, as of its last command (lap)
	if b.start != start {
		at = 0 // its first command
	}
	if b.routing.m == nil || b.viewStart != start || at-b.viewAt > viewFresh {
		b.routing, b.viewStart, b.viewAt = read(), start, at
	}
	return &b.routing
}

// lap is the time since the last command of the batch that began at
// start ended, or since start for its first.
func (b *batch) lap(start time.Time) time.Duration {
	if start != b.start {
		b.start, b.at = start, 0
	}
	at := time.Since(start)
	d := at - b.at
	b.at = at
	return d
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

// observe counts the batch's latency on s, since start, for each command
// in it, and empties it (its view too: an idle client keeps no old map).
func (b *batch) observe(s *Server, start time.Time) {
	b.routing = view{}
	if len(b.ran) == 0 {
		return
	}
	d := time.Since(start)
	for _, r := range b.ran {
		s.calls(r.cmd).latency.ObserveN(d, r.n)
	}
	b.ran = b.ran[:0]
}

// handler runs the commands of the connections conns serves.
type handler struct{ *Server }

// Open is a new connection's client.
func (h handler) Open(cn *conns.Conn[*client]) *client {
	c := &client{Conn: cn}
	c.touches = &h.touches
	c.fwd.pool = h.forward
	c.deferred.wait = conns.Wait{Off: c.awaitDeferred, Then: func(error) conns.Wait { h.settleDeferred(c); return conns.Wait{} }, Mode: conns.Defer}
	c.setAuthed(h.opts.RequirePass == "")
	c.stringIDs = h.opts.GetIDReply == GetIDString
	c.refreshShown()
	return c
}

// Command runs one command and returns what is left of it to the
// connection (conns.Wait). The time since the last command of the batch
// (reading its arguments, and running it) is the command's busy time, if
// it ran; a command that finishes off the loop is observed once it has
// its reply (finished).
func (h handler) Command(cn *conns.Conn[*client], args [][]byte, note any) conns.Wait {
	c := cn.Session
	ran, l := h.dispatch(c, args, note)
	if l.mode != conns.Behind { // it runs again
		h.commands.Add(1)
	}
	if d := c.batch.lap(cn.Start()); ran != nil {
		h.calls(ran).busy.Add(uint64(d))
	}
	switch l.mode {
	case conns.Block:
		return h.connWait(c, ran, cn.Start(), l)
	case conns.Defer:
		return c.deferred.wait
	}
	return conns.Wait{Mode: l.mode}
}

// connWait is the connection's Wait for l, the later of cmd, which began
// at start.
func (s *Server) connWait(c *client, cmd *command, start time.Time, l later) conns.Wait {
	return conns.Wait{Off: l.off, Mode: conns.Block, Then: func(err error) conns.Wait {
		return s.finished(c, cmd, start, l.then, err)
	}}
}

// finished ends a command that waited, on its loop again, unless its
// then has it wait again (EXEC, for the commands of the transaction that
// finish off the loop): the next step's Wait.
func (s *Server) finished(c *client, cmd *command, start time.Time, then func(*client, error) (later, error), err error) conns.Wait {
	t := time.Now()
	next, err := then(c, err)
	if err != nil {
		s.fail(c, cmd, err)
	}
	s.calls(cmd).busy.Add(uint64(time.Since(t)))
	if next.mode == conns.Block {
		return s.connWait(c, cmd, start, next)
	}
	s.calls(cmd).latency.Observe(time.Since(start))
	return conns.Wait{}
}

// Sent counts the latency of the batch whose replies were just written.
func (h handler) Sent(cn *conns.Conn[*client]) { cn.Session.batch.observe(h.Server, cn.Start()) }

// Closed ends what the client's session started: MONITOR, WATCH.
func (h handler) Closed(cn *conns.Conn[*client]) {
	h.unmonitor(cn.Session)
	cn.Session.unwatch()
}

// Bytes is what the session holds: the queued transaction, the keys it
// WATCHes, MGETID's scratch, MONITOR's pending lines.
func (handler) Bytes(cn *conns.Conn[*client]) int {
	c := cn.Session
	n := c.tx.bytes() + len(c.ids)*8 + c.fwd.bytes()
	for _, w := range c.watched {
		n += len(w.key) + watchedBytes
	}
	if c.mon != nil {
		n += c.mon.bytes()
	}
	return n
}

// Pending is the MONITOR lines waiting for a monitor.
func (handler) Pending(cn *conns.Conn[*client]) ([]byte, bool) {
	if m := cn.Session.mon; m != nil {
		return m.take()
	}
	return nil, false
}

// setAuthed records whether c authenticated, for its commands and for
// the framing limits the connection layer holds it to until it has.
func (c *client) setAuthed(ok bool) {
	c.authed = ok
	c.SetAuthenticated(ok)
}

// Replies, appended to c.Out.

func (c *client) writeString(s string)     { c.Out = redcon.AppendString(c.Out, s) }
func (c *client) writeBulk(b []byte)       { c.Out = redcon.AppendBulk(c.Out, b) }
func (c *client) writeBulkString(s string) { c.Out = redcon.AppendBulkString(c.Out, s) }
func (c *client) writeInt(n int)           { c.Out = redcon.AppendInt(c.Out, int64(n)) }
func (c *client) writeInt64(n int64)       { c.Out = redcon.AppendInt(c.Out, n) }
func (c *client) writeArray(n int)         { c.Out = redcon.AppendArray(c.Out, n) }

// writeStrings writes an array of simple strings: a HELP's lines.
func (c *client) writeStrings(lines []string) {
	c.writeArray(len(lines))
	for _, l := range lines {
		c.writeString(l)
	}
}

// writeNull writes a nil: a null bulk string in RESP2, RESP3's null.
func (c *client) writeNull() {
	if c.resp3 {
		c.Out = append(c.Out, "_\r\n"...)
		return
	}
	c.Out = redcon.AppendNull(c.Out)
}

// writeNullArray writes EXEC's nil: a null array in RESP2, RESP3's null.
func (c *client) writeNullArray() {
	if c.resp3 {
		c.Out = append(c.Out, "_\r\n"...)
		return
	}
	c.Out = append(c.Out, "*-1\r\n"...)
}

// writeVerbatim writes text as RESP3's verbatim string of format txt, or
// a bulk string in RESP2, as Redis replies to CLIENT LIST and INFO.
func (c *client) writeVerbatim(text []byte) {
	if !c.resp3 {
		c.writeBulk(text)
		return
	}
	c.Out = append(strconv.AppendInt(append(c.Out, '='), int64(len(text)+4), 10), "\r\ntxt:"...)
	c.Out = append(append(c.Out, text...), '\r', '\n')
}

// writeSet writes the header of a set of n elements: an array in RESP2.
func (c *client) writeSet(n int) {
	if !c.resp3 {
		c.writeArray(n)
		return
	}
	c.Out = append(strconv.AppendInt(append(c.Out, '~'), int64(n), 10), '\r', '\n')
}
