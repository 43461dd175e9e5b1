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

	wait   waiting     // the command that waits off the loop
	finish func(error) // finished for c, made once: conns.Conn.Wait's then
	batch  batch       // the commands run since the last read, for their latency
	held   seqHeld     // what the batch's replies wait for (conns.Conn.Hold)
	fwd    fwdBatch    // what the batch forwards to other owners (Options.Owner)
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

// waiting is a command that cannot finish on the loop: off runs off it
// (it may block; it owns what it touches of the client until it returns),
// then then on the loop with off's error, which writes the reply or
// returns the error reply to send. then may call later again, for a
// command that finishes in more than one step.
type waiting struct {
	off  func() error
	then func(c *client, err error) error

	cmd   *command  // the command, for its latency
	start time.Time // when it began
}

// later finishes the command running now with w, off the loop: the
// connection runs w.off and then w.then (conns.Conn.Wait), and c's later
// commands wait for it; inside EXEC, the transaction does, after its
// other commands (execLater). The command returns nil: its reply, or its
// error, is then's.
func (c *client) later(w waiting) {
	if c.inExec {
		c.txLater.add(c, w)
		return
	}
	c.wait.off, c.wait.then = w.off, w.then
	c.Wait(w.off, c.finish)
}

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
	c.finish = func(err error) { h.finished(c, err) }
	c.held.await, c.held.then, c.held.waitFor = c.awaitHeld, func(err error) { h.settleHeld(c) }, c.waitsForHeld
	c.setAuthed(h.opts.RequirePass == "")
	c.stringIDs = h.opts.GetIDReply == GetIDString
	c.refreshShown()
	return c
}

// Command runs one command; one that waits has handed itself to the
// connection layer to finish (client.later). The time since the last
// command of the batch (reading its arguments, and running it) is the
// command's busy time, if it ran.
func (h handler) Command(cn *conns.Conn[*client], args [][]byte) {
	h.commands.Add(1)
	ran := h.dispatch(cn.Session, args)
	if d := cn.Session.batch.lap(cn.Start()); ran != nil {
		h.calls(ran).busy.Add(uint64(d))
	}
}

// finished ends a command that waited, on its loop again, unless its
// then has it wait again (EXEC, for the commands of the transaction that
// finish off the loop).
func (s *Server) finished(c *client, err error) {
	w := c.wait
	c.wait = waiting{}
	start := time.Now()
	if err = w.then(c, err); err != nil {
		s.fail(c, w.cmd, err)
	}
	s.calls(w.cmd).busy.Add(uint64(time.Since(start)))
	if c.wait.off != nil { // then called later: the next step
		c.wait.cmd, c.wait.start = w.cmd, w.start
		return
	}
	s.calls(w.cmd).latency.Observe(time.Since(w.start))
}

// Sent counts the latency of the batch whose replies were just written.
func (h handler) Sent(cn *conns.Conn[*client]) { cn.Session.batch.observe(h.Server, cn.Start()) }

// Closed ends what the client's session started: MONITOR, WATCH.
func (h handler) Closed(cn *conns.Conn[*client]) {
	h.unmonitor(cn.Session)
	cn.Session.unwatch()
}

// Holds is what the session holds: the queued transaction, the keys it
// WATCHes, MGETID's scratch, MONITOR's pending lines.
func (handler) Holds(cn *conns.Conn[*client]) int {
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
