package forward

import (
	"sync/atomic"

	"github.com/tidwall/redcon"
)

// Call is one request to an owner: commands sent together, in order, on
// one connection, and their replies. A Call is made once and reused
// (Reset): sending one allocates nothing once its buffers have grown.
type Call struct {
	Addr  string // the owner, host:port
	RESP3 bool   // the connection speaks RESP3 (HELLO 3)

	req     []byte // the commands, as RESP arrays
	n       int    // commands in req
	replies []byte // their replies, one after another: the reader's until done
	ends    []int  // where each reply in replies ends
	// got is len(replies), for Size: the client's accounting reads it
	// on its event loop while the connection's reader appends.
	got  atomic.Int64
	err  error
	done chan struct{}
}

// NewCall returns an empty Call to addr.
func NewCall(addr string, resp3 bool) *Call {
	return &Call{Addr: addr, RESP3: resp3, done: make(chan struct{}, 1)}
}

// Command adds a command, its name and arguments in args, and returns
// the index of its reply.
func (c *Call) Command(args [][]byte) int {
	c.req = redcon.AppendArray(c.req, len(args))
	for _, a := range args {
		c.req = redcon.AppendBulk(c.req, a)
	}
	c.n++
	return c.n - 1
}

// Len is the number of commands in c.
func (c *Call) Len() int { return c.n }

// Size is what c holds, in bytes: its commands and the replies so far,
// for the accounting of the client it is for.
func (c *Call) Size() int { return len(c.req) + int(c.got.Load()) }

// Wait waits until c's replies came, or c failed, and returns why it
// failed. Its wait is bounded by the Pool's DialTimeout and
// ReplyTimeout.
func (c *Call) Wait() error {
	<-c.done
	return c.err
}

// Err is why c failed, once Wait returned; nil if its replies came.
func (c *Call) Err() error { return c.err }

// Reply is the raw reply of the command of index i, once Wait returned
// nil. It is valid until c is Reset.
func (c *Call) Reply(i int) []byte {
	start := 0
	if i > 0 {
		start = c.ends[i-1]
	}
	return c.replies[start:c.ends[i]]
}

// Reset empties c for new commands to addr, keeping its buffers.
func (c *Call) Reset(addr string, resp3 bool) {
	c.Addr, c.RESP3 = addr, resp3
	c.req, c.n, c.replies, c.ends, c.err = c.req[:0], 0, c.replies[:0], c.ends[:0], nil
	c.got.Store(0)
}

// finish ends c with err (nil: its replies came).
func (c *Call) finish(err error) {
	c.err = err
	c.done <- struct{}{}
}
