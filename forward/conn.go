package forward

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/mediocregopher/radix/v4/resp/resp3"
)

// conn is one pipelined connection to an owner. Calls are appended to
// out and queue together, under mu, so that the replies read come in the
// order of queue. The senders write out (flush); one goroutine (run)
// dials, and reads the replies.
type conn struct {
	p   *Pool
	key ownerKey

	mu     sync.Mutex
	out    []byte  // requests not yet written
	spare  []byte  // the buffer being written, given back after
	queue  []*Call // waiting for their replies, in the order sent
	head   int     // queue[head] is the next to get a reply
	queued int     // commands in queue[head:]
	// queuedBytes is the size of their requests.
	queuedBytes int
	nc          net.Conn
	live        bool // nc takes requests: a failure sets it false
	writing     bool // a goroutine writes out (flush)
	// deadline is nc's read deadline (extend; idle clears it).
	deadline time.Time
	downTo   time.Time // until then, Calls fail at once with down
	down     error
	closed   bool
	wake     chan struct{} // a Call came, or close
}

func newConn(p *Pool, k ownerKey) *conn {
	c := &conn{p: p, key: k, wake: make(chan struct{}, 1)}
	go c.run()
	return c
}

// load is the commands waiting on c: the Pool sends to the least loaded.
func (c *conn) load() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued
}

// send queues call on c, or fails it at once: c is closed, full, or
// could not be dialled a moment ago.
func (c *conn) send(call *Call) {
	c.mu.Lock()
	var err error
	switch {
	case c.closed:
		err = ErrClosed
	case c.queued+call.n > c.p.opts.MaxQueued || c.queuedBytes+len(call.req) > c.p.opts.MaxQueuedBytes:
		err = fmt.Errorf("%w (%d commands, %d bytes on a connection to %s)", ErrBusy, c.queued, c.queuedBytes, c.key.addr)
	case c.down != nil && time.Now().Before(c.downTo):
		err = c.down
	}
	if err != nil {
		c.mu.Unlock()
		call.finish(err)
		return
	}
	c.queue = append(c.queue, call)
	c.queued += call.n
	c.queuedBytes += len(call.req)
	c.out = append(c.out, call.req...)
	if c.live && !c.writing {
		c.flush()
		return
	}
	live := c.live
	c.mu.Unlock()
	if !live {
		c.signal()
	}
}

// signal wakes run.
func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// flush writes out to the connection until it is empty: the goroutine
// that finds no write under way writes what the others append meanwhile,
// so that requests sent together go out together, with no hand-over to
// another goroutine. With mu held; it returns with mu released.
func (c *conn) flush() {
	c.writing = true
	nc := c.nc
	for len(c.out) > 0 && c.live && c.nc == nc {
		buf := c.out
		c.out = c.spare[:0]
		c.extend(nc)
		c.mu.Unlock()
		_, err := nc.Write(buf)
		c.mu.Lock()
		c.spare = buf[:0]
		if err != nil {
			c.writing = false
			c.mu.Unlock()
			c.broken(nc, err)
			return
		}
	}
	c.writing = false
	c.mu.Unlock()
}

// close fails what waits and stops c's goroutines.
func (c *conn) close() {
	c.mu.Lock()
	c.closed = true
	nc := c.nc
	c.mu.Unlock()
	if nc != nil {
		nc.Close()
	}
	c.signal()
}

// run dials c whenever Calls wait and it has no connection, writes what
// waited for it, and reads the replies, until c is closed.
func (c *conn) run() {
	for {
		if !c.awaitWork() {
			c.fail(ErrClosed)
			return
		}
		nc, br, err := c.dial()
		if err != nil {
			err = fmt.Errorf("could not connect to the owner %s: %w", c.key.addr, err)
			c.mu.Lock()
			c.down, c.downTo = err, time.Now().Add(c.p.opts.RetryAfter)
			c.mu.Unlock()
			c.fail(err)
			continue
		}
		c.mu.Lock()
		c.nc, c.live, c.down, c.deadline = nc, !c.closed, nil, time.Time{}
		if c.live && !c.writing {
			c.flush()
		} else {
			c.mu.Unlock()
		}
		c.read(nc, br)
		nc.Close()
	}
}

// awaitWork waits until Calls wait for a connection; false once c is
// closed.
func (c *conn) awaitWork() bool {
	for {
		c.mu.Lock()
		closed, work, downTo := c.closed, len(c.queue) > c.head, c.downTo
		c.mu.Unlock()
		switch {
		case closed:
			return false
		case work && time.Now().After(downTo):
			return true
		case work:
			time.Sleep(time.Until(downTo))
			continue
		}
		<-c.wake
	}
}

// extend moves nc's read deadline to ReplyTimeout from now, as Calls are
// written or answered, unless it is at least half of that away already:
// a paused or cut-off owner fails the Calls waiting within ReplyTimeout
// of its last reply (and no sooner than half of it), and a busy
// connection moves its deadline a few times a ReplyTimeout, not once per
// Call. With mu held.
func (c *conn) extend(nc net.Conn) {
	now := time.Now()
	if c.deadline.Sub(now) > c.p.opts.ReplyTimeout/2 {
		return
	}
	c.deadline = now.Add(c.p.opts.ReplyTimeout)
	nc.SetReadDeadline(c.deadline)
}

// idle reports whether err, a read's between two replies, is only the
// read deadline passing while no Call waits, or after a Call moved it on
// (extend): then the connection is sound, and the deadline is cleared
// while none waits. A connection left idle keeps its deadline until then,
// so that a Call sent to it does not set one.
func (c *conn) idle(nc net.Conn, err error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.head == len(c.queue):
		c.deadline = time.Time{}
		nc.SetReadDeadline(c.deadline)
		return true
	case time.Now().Before(c.deadline):
		nc.SetReadDeadline(c.deadline)
		return true
	}
	return false
}

// read reads the replies on nc and gives each Call its own, until nc
// fails.
func (c *conn) read(nc net.Conn, br *bufio.Reader) {
	var msg resp3.RawMessage
	for {
		if err := msg.UnmarshalRESP(br, nil); err != nil {
			if len(msg) == 0 && c.idle(nc, err) {
				continue
			}
			c.broken(nc, err)
			return
		}
		c.mu.Lock()
		if !c.live { // broken by the writer: its Calls are failed
			c.mu.Unlock()
			return
		}
		if c.head == len(c.queue) { // a reply nothing asked for: the stream is lost
			c.mu.Unlock()
			c.broken(nc, errors.New("a reply came that no command asked for"))
			return
		}
		call := c.queue[c.head]
		call.replies = append(call.replies, msg...)
		call.ends = append(call.ends, len(call.replies))
		call.got.Store(int64(len(call.replies)))
		if len(call.ends) < call.n {
			c.mu.Unlock()
			continue
		}
		c.queue[c.head] = nil
		c.head++
		c.queued -= call.n
		c.queuedBytes -= len(call.req)
		if c.head == len(c.queue) {
			c.queue, c.head = c.queue[:0], 0 // the deadline stays: see idle
		} else {
			c.extend(nc)
		}
		c.mu.Unlock()
		call.finish(nil)
	}
}

// broken ends nc after err: every Call waiting on it fails, and what was
// not written yet is dropped with them, so that the next connection
// starts with nothing of theirs.
func (c *conn) broken(nc net.Conn, err error) {
	c.mu.Lock()
	if c.nc != nc || !c.live {
		c.mu.Unlock()
		return
	}
	c.live = false
	c.mu.Unlock()
	nc.Close()
	c.fail(&OwnerError{Addr: c.key.addr, Err: err})
}

// fail fails every Call in the queue with err and empties it.
func (c *conn) fail(err error) {
	c.mu.Lock()
	calls := c.queue[c.head:]
	c.queue, c.head, c.queued, c.queuedBytes, c.out = nil, 0, 0, 0, c.out[:0]
	c.mu.Unlock()
	for _, call := range calls {
		call.finish(err)
	}
}

// dial connects to the owner and sets the connection up: TLS, HELLO 3
// or AUTH, and LibName.
func (c *conn) dial() (net.Conn, *bufio.Reader, error) {
	o := c.p.opts
	ctx, cancel := context.WithTimeout(context.Background(), o.DialTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", c.key.addr)
	if err != nil {
		return nil, nil, err
	}
	if o.TLS != nil {
		cfg := o.TLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(c.key.addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, nil, fmt.Errorf("TLS handshake: %w", err)
		}
		nc = tc
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	if err := c.setup(nc, br, time.Now().Add(o.DialTimeout)); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, br, nil
}

// setup sends a new connection's first commands and checks their
// replies.
func (c *conn) setup(nc net.Conn, br *bufio.Reader, deadline time.Time) error {
	o := c.p.opts
	call := NewCall(c.key.addr, c.key.resp3)
	auth := o.Password != ""
	user := cmp.Or(o.Username, "default") // HELLO's AUTH names a user: Redis's is "default"
	switch {
	case c.key.resp3 && auth:
		call.Command([][]byte{[]byte("HELLO"), []byte("3"), []byte("AUTH"), []byte(user), []byte(o.Password)})
	case c.key.resp3:
		call.Command([][]byte{[]byte("HELLO"), []byte("3")})
	case auth && o.Username != "":
		call.Command([][]byte{[]byte("AUTH"), []byte(o.Username), []byte(o.Password)})
	case auth:
		call.Command([][]byte{[]byte("AUTH"), []byte(o.Password)})
	}
	call.Command([][]byte{[]byte("CLIENT"), []byte("SETINFO"), []byte("LIB-NAME"), []byte(LibName)})
	nc.SetDeadline(deadline)
	defer nc.SetDeadline(time.Time{})
	if _, err := nc.Write(call.req); err != nil {
		return err
	}
	var msg resp3.RawMessage
	for i := range call.n {
		if err := msg.UnmarshalRESP(br, nil); err != nil {
			return err
		}
		if len(msg) > 0 && (msg[0] == '-' || msg[0] == '!') {
			return fmt.Errorf("the owner refused command %d of the setup (%s): %s", i+1, setupName(c.key.resp3, auth, i), strconv.Quote(string(msg)))
		}
	}
	return nil
}

// setupName names the setup's command i, for its error.
func setupName(resp3, auth bool, i int) string {
	switch {
	case i == 0 && resp3:
		return "HELLO 3"
	case i == 0 && auth:
		return "AUTH"
	}
	return "CLIENT SETINFO"
}
