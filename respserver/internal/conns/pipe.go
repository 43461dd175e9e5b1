package conns

import (
	"syscall"

	"github.com/panjf2000/gnet/v2"
)

// Pipe is a connection without a socket, for testing and fuzzing a
// Handler through the whole connection layer but the loops: Send hands it
// bytes as its loop hands it a read, and what it writes collects in
// Written. It is not safe for concurrent use.
type Pipe[S any] struct {
	c *Conn[S]
	m *memLink
}

// Pipe opens a connection from addr to laddr without a socket.
func (s *Server[S]) Pipe(addr, laddr string) *Pipe[S] {
	c := s.newConn(s.nextID.Add(1), addr, laddr)
	m := &memLink{finished: make(chan gnet.AsyncCallback, 1)}
	c.link, c.opened, c.gate = m, true, s.clientsGate()
	c.gate.count.Add(1)
	s.register(c)
	return &Pipe[S]{c: c, m: m}
}

// Conn is the pipe's connection.
func (p *Pipe[S]) Conn() *Conn[S] { return p.c }

// Send runs data through the connection as one read, and whatever its
// commands' waits and wakes bring after it, and reports whether the
// connection closed.
func (p *Pipe[S]) Send(data []byte) (closed bool) {
	s := p.c.s
	closed = s.traffic(p.c, data) == gnet.Close
	for !closed && (p.c.busy || p.m.woken) {
		if p.c.busy {
			(<-p.m.finished)(nil, nil) // on "the loop": here
		}
		if p.m.woken {
			p.m.woken = false
			closed = s.traffic(p.c, nil) == gnet.Close
		}
		closed = closed || p.m.closed
	}
	return closed || p.m.closed
}

// Written is what the connection wrote since the last Reset.
func (p *Pipe[S]) Written() []byte { return p.m.out }

// Reset empties Written.
func (p *Pipe[S]) Reset() { p.m.out, p.m.writes = p.m.out[:0], 0 }

// Close ends the connection, as its loop's OnClose would.
func (p *Pipe[S]) Close() { p.c.s.forget(p.c) }

// FailWrites has the connection's next write fail as one to a reset
// socket does in gnet: the connection is closed inside the write (its
// OnClose runs there), and nothing is written. Writes after that are
// counted (WritesAfterClose): a socket's number may be another
// connection's by then.
func (p *Pipe[S]) FailWrites() { p.m.fail = p.Close }

// WritesAfterClose is how many writes came after a write closed the
// connection (FailWrites).
func (p *Pipe[S]) WritesAfterClose() int { return p.m.afterClose }

// Writes is how many writes the connection made since the last Reset.
func (p *Pipe[S]) Writes() int { return p.m.writes }

// memLink is a Pipe's link: writes collect in out, a wake is a flag, and
// the callback of a command that waited is passed back to Send.
type memLink struct {
	out        []byte
	woken      bool
	closed     bool
	finished   chan gnet.AsyncCallback
	fail       func() // the next write closes the connection with it (FailWrites)
	afterClose int    // writes after such a close
	writes     int
}

func (m *memLink) Write(b []byte) (int, error) {
	switch {
	case m.fail != nil:
		m.fail()
		m.fail, m.closed = nil, true
		return 0, syscall.ECONNRESET
	case m.closed:
		m.afterClose++
		return 0, syscall.EBADF
	}
	m.out = append(m.out, b...)
	m.writes++
	return len(b), nil
}
func (m *memLink) OutboundBuffered() int { return 0 }
func (m *memLink) Close() error          { m.closed = true; return nil }

func (m *memLink) Wake(gnet.AsyncCallback) error { m.woken = true; return nil }

func (m *memLink) AsyncWrite(_ []byte, cb gnet.AsyncCallback) error {
	m.finished <- cb
	return nil
}
