package conns

import (
	"context"
	"crypto/tls"
	"net"
	"slices"
	"time"
)

// TLS runs in the event loops like the rest of the protocol: a TLS
// request costs the same one read and one write as a plain one, and a
// pipeline's replies go out as one write of whole records. Only the
// handshake runs on a goroutine of its own, blocking, bounded by
// handshakeTimeout, before the loop takes the connection over.
//
// crypto/tls works on a net.Conn; a shim is that conn. During the
// handshake it is the socket. Then it is memory: what the loop read, and
// what TLS wrote for the loop to send. A read that finds nothing left is
// a temporary net.Error, which crypto/tls takes as "not yet", keeping a
// partial record for the next read: so whole records are decrypted as
// they arrive, and nothing blocks.

// handshakeTimeout bounds a TLS handshake, so that a client that connects
// and sends nothing holds its socket and goroutine no longer.
const handshakeTimeout = 10 * time.Second

// tlsConn is the TLS state of a connection whose handshake is done. Its
// loop owns it.
type tlsConn struct {
	tc    *tls.Conn
	shim  *shim
	plain []byte // scratch for the decrypted requests
}

// shim is the net.Conn under a tls.Conn: the socket until detach, then
// memory.
type shim struct {
	net.Conn
	detached bool
	read     func(n int) // told of each read from the socket, for the accountant
	in       []byte      // read by the loop, not yet taken by TLS
	out      []byte      // records TLS wrote, for the loop to send
}

// errNotYet is the shim's read when it holds nothing more.
var errNotYet net.Error = notYet{}

type notYet struct{}

func (notYet) Error() string   { return "conns: no more TLS input yet" }
func (notYet) Timeout() bool   { return false }
func (notYet) Temporary() bool { return true }

func (s *shim) Read(p []byte) (int, error) {
	if !s.detached {
		n, err := s.Conn.Read(p)
		s.read(n)
		return n, err
	}
	if len(s.in) == 0 {
		return 0, errNotYet
	}
	n := copy(p, s.in)
	s.in = s.in[n:]
	return n, nil
}

func (s *shim) Write(p []byte) (int, error) {
	if !s.detached {
		return s.Conn.Write(p)
	}
	s.out = append(s.out, p...)
	return len(p), nil
}

// handshake does the TLS handshake of nc and returns its state, still on
// the socket; read is told how many bytes each read from it brought.
func handshake(nc net.Conn, cfg *tls.Config, read func(n int)) (*tlsConn, error) {
	sh := &shim{Conn: nc, read: read}
	tc := tls.Server(sh, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	return &tlsConn{tc: tc, shim: sh}, nil
}

// detach moves the connection off the socket, for the loop.
func (t *tlsConn) detach() { t.shim.detached, t.shim.read = true, nil }

// open takes what the loop read and returns the plain text of every whole
// record so far, valid until the next call. An error (a bad record, an
// alert, the client's close_notify) means the connection is done.
func (t *tlsConn) open(data []byte) ([]byte, error) {
	t.shim.in = data
	defer func() { t.shim.in = nil }() // the loop's buffer is not ours to keep
	t.plain = t.plain[:0]
	for {
		if cap(t.plain)-len(t.plain) < 1<<10 {
			t.plain = slices.Grow(t.plain, 4<<10) // a read takes what fits
		}
		n, err := t.tc.Read(t.plain[len(t.plain):cap(t.plain)])
		t.plain = t.plain[:len(t.plain)+n]
		if err == errNotYet {
			return t.plain, nil
		}
		if err != nil {
			return t.plain, err
		}
	}
}

// seal encrypts p and returns the records to send, with any TLS wrote
// while reading (a key update's answer), valid until the next call.
func (t *tlsConn) seal(p []byte) []byte {
	if len(p) > 0 {
		t.tc.Write(p) // into the shim, which does not fail
	}
	out := t.shim.out
	t.shim.out = t.shim.out[:0]
	return out
}

// tlsKeep is the largest scratch buffer a TLS connection keeps between
// requests: crypto/tls keeps a record's worth of its own already.
const tlsKeep = 16 << 10

// shrink lets go of buffers grown for a large request or reply.
func (t *tlsConn) shrink() {
	if cap(t.plain) > tlsKeep {
		t.plain = nil
	}
	if cap(t.shim.out) > tlsKeep {
		t.shim.out = nil
	}
}
