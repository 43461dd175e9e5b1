package conns

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/idserver/idserver/internal/replyerr"
	"github.com/idserver/idserver/resplimit"
)

// accept takes connections from ln until it is closed (then it returns
// nil) or fails for good. With cfg, each one's TLS handshake runs on a
// goroutine of its own before it is admitted.
func (s *Server[S]) accept(ln net.Listener, cfg *tls.Config, g *gate) error {
	fds := newFDReserve(s)
	defer fds.release()
	var backoff time.Duration
	var failedLog Limiter
	for {
		nc, err := ln.Accept()
		if outOfFDs(err) && fds.refusePending(ln) {
			continue
		}
		if err != nil {
			select {
			case <-s.done:
				return nil
			default:
			}
			if !transient(err) {
				return fmt.Errorf("accept: %w", err)
			}
			// Out of file descriptors with none in reserve, or the like:
			// wait, as net/http does, rather than spin; the clients
			// already connected go on, the new ones wait in the backlog.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			if ok, _ := failedLog.Allow(); ok {
				s.log.Warn().Err(err).Dur("retry_in", backoff).Msg("accept failed; new connections wait")
			}
			time.Sleep(backoff)
			fds.retake()
			continue
		}
		backoff = 0
		if cfg != nil {
			go s.admitTLS(nc, cfg, s.nextID.Add(1), g)
			continue
		}
		fds.handOver(nc, s.nextID.Add(1), g) // the id now: ids follow the accepts, as in Redis
	}
}

// admitTLS does nc's TLS handshake and admits it: a client past
// maxclients gets Redis's reply through TLS, as on the plain port. The
// handshakes under way have their own share of the descriptors (pending,
// see fitBudget), apart from the clients', so that a flood of handshakes
// never finished keeps no client out of the plain port. Past it, a
// connection is closed unanswered (a reply before the handshake would be
// noise to it).
func (s *Server[S]) admitTLS(nc net.Conn, cfg *tls.Config, id int64, g *gate) {
	if s.handshakes.Add(1) > s.pending {
		s.handshakes.Add(-1)
		s.rejected.Add(1)
		nc.Close()
		return
	}
	h := s.startShake(nc)
	t, err := handshake(nc, cfg, func(n int) { s.shakeRead(h, n) })
	s.endShake(h)
	s.handshakes.Add(-1)
	if err != nil && h.evicted.Load() {
		return // closed by evict, which counted and logged it
	}
	if err != nil {
		s.tlsFailed.Add(1)
		if ok, skipped := s.tlsLog.Allow(); ok {
			s.log.Warn().Err(err).Str("client", nc.RemoteAddr().String()).Uint64("also_failed", skipped).Msg("TLS handshake failed")
		}
		nc.Close()
		return
	}
	if err := s.admit(nc, t, id, g); err != nil {
		s.log.Debug().Err(err).Str("client", nc.RemoteAddr().String()).Msg("TLS connection not served")
	}
}

// transient reports whether an Accept error may go away by itself.
func transient(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// errMaxClients is Redis's reply to a connection past maxclients.
var errMaxClients = replyerr.New(replyerr.ERR, "max number of clients reached")

// refuse answers a connection it will not serve with reply (through TLS
// if t is set) and closes it at once: out of file descriptors, its socket
// is needed back.
func (s *Server[S]) refuse(nc net.Conn, t *tlsConn, reply *replyerr.Error) {
	s.answer(nc, t, reply)
	nc.Close()
}

// answer writes reply to a connection that will not be served.
func (s *Server[S]) answer(nc net.Conn, t *tlsConn, reply *replyerr.Error) {
	s.rejected.Add(1)
	nc.SetDeadline(time.Now().Add(time.Second))
	if t != nil {
		t.tc.Write(reply.Append(nil))
	} else {
		nc.Write(reply.Append(nil))
	}
}

// turnAway answers a connection it will not serve with reply and closes
// it once the client has closed its side, or a second has passed: closed
// with what the client sent unread (a TLS client's first command, right
// behind the handshake), the socket would be reset, and the reply lost
// with it. Past their share of the descriptors (pending, see fitBudget),
// it closes at once.
func (s *Server[S]) turnAway(nc net.Conn, t *tlsConn, reply *replyerr.Error) {
	s.answer(nc, t, reply)
	if s.lingering.Add(1) > s.pending {
		s.lingering.Add(-1)
		nc.Close()
		return
	}
	go func() {
		defer s.lingering.Add(-1)
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		io.Copy(io.Discard, io.LimitReader(nc, 64<<10))
		nc.Close()
	}()
}

// admit hands a new connection to an event loop, or refuses it. t is its
// TLS state, nil for plain TCP; g the gate of its listener. It returns
// the error of the hand-over, if it failed.
func (s *Server[S]) admit(nc net.Conn, t *tlsConn, id int64, g *gate) error {
	// Counted at once: hand-overs run side by side (handOvers), and
	// maxclients holds for them together.
	if g.count.Add(1) > int64(g.max) {
		g.count.Add(-1)
		s.turnAway(nc, t, errMaxClients)
		return nil
	}
	if reply := s.h.Refuse(nc.RemoteAddr()); reply != nil {
		g.count.Add(-1)
		s.turnAway(nc, t, reply)
		return nil
	}
	c := s.newConn(id, nc.RemoteAddr().String(), nc.LocalAddr().String())
	c.gate = g
	if t != nil {
		t.detach()
		c.tls = t
	}
	if !s.register(c) {
		g.count.Add(-1)
		nc.Close()
		return nil
	}
	// Counted before the loop serves it, so that its own INFO counts it,
	// as Redis counts a connection when it accepts it.
	s.accepted.Add(1)
	// The loop takes a duplicate of the socket and closes nc: the
	// duplicate takes one of the budget's handOvers spares (a plain
	// connection's listener took it for this hand-over).
	if t != nil {
		s.handing <- struct{}{}
	}
	_, err := s.eng.EnrollContext(nc, c)
	if t != nil {
		<-s.handing
	}
	s.mu.Lock()
	opened := c.opened
	s.mu.Unlock()
	if err != nil || !opened {
		// Never reached the loop (or the poller refused it): no OnClose
		// will come for it.
		s.forget(c)
		s.log.Debug().Err(err).Str("client", c.addr).Msg("connection not served")
		return err
	}
	return nil
}

// newConn is the state of connection id from addr to laddr, with its
// handler's session.
func (s *Server[S]) newConn(id int64, addr, laddr string) *Conn[S] {
	c := &Conn[S]{
		s:     s,
		id:    id,
		addr:  addr,
		laddr: laddr,
		born:  s.tick.Load(),
		scan:  resplimit.NewScanner(s.opts.Limits),
	}
	c.Session = s.h.Open(c)
	return c
}

// register adds c to the open connections, under the lock Shutdown
// takes, so that it either sees c or c's OnOpen sees the server closed.
// It reports false if the server is closed. The caller has counted c in
// s.clients.
func (s *Server[S]) register(c *Conn[S]) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// forget unregisters c; it is safe to call twice.
func (s *Server[S]) forget(c *Conn[S]) {
	s.mu.Lock()
	_, ok := s.conns[c]
	delete(s.conns, c)
	s.mu.Unlock()
	s.unhold(c)
	s.uncharge(c)
	if ok {
		c.gate.count.Add(-1)
		s.h.Closed(c)
	}
}
