// Package forward sends commands to the server that owns their keys'
// hash slot and brings back its replies as raw RESP bytes, for a server
// that answers plain clients (cluster-enabled no) for every key: the
// owner alone hands out a key's values, so every server's clients get
// the owner's per-key order.
//
// A Pool keeps, per owner address and protocol (RESP2, or RESP3 for
// clients that said HELLO 3), a fixed number of connections, each
// pipelined: many Calls in flight on one connection, replies matched to
// them in the order they were sent. A connection authenticates as the
// server's own clients must (AUTH, or HELLO 3 AUTH), speaks TLS where
// configured, and is dialled again after a failure. Everything a Pool
// holds is bounded: the connections per owner, and the commands waiting
// for a reply on each and their size (past either, a Call fails at once
// with ErrBusy).
//
// A Call's commands go out whole, on one connection, one after another:
// a MULTI ... EXEC in one Call is a transaction on the owner. Replies are
// found by radix's resp3.RawMessage, which reads exactly one RESP2 or
// RESP3 message and nothing else; they are relayed as the owner wrote
// them.
//
// When a connection fails before a Call's replies came (the owner
// stopped, the network broke, no reply within ReplyTimeout), the Call
// fails with an error naming the owner. Its commands may or may not have
// run on the owner, as for any client whose connection drops: an INCR
// that did run only ever makes the key skip a value, never repeat one.
package forward

import (
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"
)

// LibName is the library name a Pool's connections announce (CLIENT
// SETINFO LIB-NAME): a server answers a command that came this way
// itself or refuses it, and never forwards it again, so that two servers
// whose views of the owners differ for a moment cannot pass a command
// back and forth.
const LibName = "idserver-forward"

// Options configures a Pool. Zero fields mean the documented defaults.
type Options struct {
	// Username and Password authenticate each connection (AUTH); an
	// empty Password sends none, an empty Username AUTH's one-argument
	// form.
	Username, Password string
	// TLS, if not nil, is the client configuration of TLS connections;
	// nil means plain TCP.
	TLS *tls.Config
	// DialTimeout bounds a connection's dial, TLS handshake and AUTH;
	// zero means 2 s.
	DialTimeout time.Duration
	// ReplyTimeout bounds the wait for the next reply while commands
	// wait for theirs: a connection silent that long (at least half of
	// it, see conn.extend) is taken as dead. Zero means 10 s.
	ReplyTimeout time.Duration
	// Conns is the number of connections per owner and protocol; zero
	// means 2.
	Conns int
	// MaxQueued and MaxQueuedBytes bound the commands sent or waiting
	// to be sent on one connection whose replies have not come, and the
	// size of their requests; zero means 100000 and 64 MiB.
	MaxQueued, MaxQueuedBytes int
	// RetryAfter is how long a connection that could not be dialled
	// fails Calls at once before it dials again; zero means 250 ms.
	RetryAfter time.Duration
}

// ErrBusy is the error of a Call sent while its connection already has
// MaxQueued commands waiting for replies.
var ErrBusy = errors.New("too many commands wait for the owner's replies")

// ErrClosed is the error of a Call sent after Close.
var ErrClosed = errors.New("forwarding is closed")

// Pool is the connections to the owners of slots. Its methods may be
// called from any goroutine.
type Pool struct {
	opts   Options
	mu     sync.RWMutex
	owners map[ownerKey][]*conn
	closed bool
}

type ownerKey struct {
	addr  string
	resp3 bool
}

// New returns a Pool for opts. It dials nothing until a Call is sent.
func New(opts Options) *Pool {
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 2 * time.Second
	}
	if opts.ReplyTimeout == 0 {
		opts.ReplyTimeout = 10 * time.Second
	}
	if opts.Conns == 0 {
		opts.Conns = 2
	}
	if opts.MaxQueued == 0 {
		opts.MaxQueued = 100000
	}
	if opts.MaxQueuedBytes == 0 {
		opts.MaxQueuedBytes = 64 << 20
	}
	if opts.RetryAfter == 0 {
		opts.RetryAfter = 250 * time.Millisecond
	}
	return &Pool{opts: opts, owners: map[ownerKey][]*conn{}}
}

// Send sends call's commands to call.Addr, in the protocol call.RESP3
// says, without waiting: call.Wait returns once its replies came or it
// failed. call must not be changed or sent again until then.
func (p *Pool) Send(call *Call) {
	call.replies, call.ends, call.err = call.replies[:0], call.ends[:0], nil
	if call.n == 0 {
		call.done <- struct{}{}
		return
	}
	cn, err := p.conn(call)
	if err != nil {
		call.finish(err)
		return
	}
	cn.send(call)
}

// conn picks the connection for call: its owner's connections in turn.
func (p *Pool) conn(call *Call) (*conn, error) {
	k := ownerKey{call.Addr, call.RESP3}
	p.mu.RLock()
	cs, closed := p.owners[k], p.closed
	p.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if cs == nil {
		p.mu.Lock()
		if cs = p.owners[k]; cs == nil && !p.closed {
			cs = make([]*conn, p.opts.Conns)
			for i := range cs {
				cs[i] = newConn(p, k)
			}
			p.owners[k] = cs
		}
		p.mu.Unlock()
		if cs == nil {
			return nil, ErrClosed
		}
	}
	cn := cs[0]
	for _, c := range cs[1:] { // the least loaded: a slow reply holds up only those behind it
		if c.load() < cn.load() {
			cn = c
		}
	}
	return cn, nil
}

// Close closes every connection; Calls waiting for replies fail, and
// Calls sent from now on fail with ErrClosed.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	owners := p.owners
	p.owners = map[ownerKey][]*conn{}
	p.mu.Unlock()
	for _, cs := range owners {
		for _, c := range cs {
			c.close()
		}
	}
	return nil
}

// OwnerError is the error of a Call whose owner did not answer it: its
// commands may or may not have run there.
type OwnerError struct {
	Addr string // the owner's address
	Err  error  // why no reply came: the connection's failure, or ReplyTimeout
}

// Error names the owner and says the commands may have run there.
func (e *OwnerError) Error() string {
	return fmt.Sprintf("the owner %s did not answer (the command may or may not have run there): %v", e.Addr, e.Err)
}

// Unwrap is why the owner did not answer, for errors.Is and As.
func (e *OwnerError) Unwrap() error { return e.Err }
