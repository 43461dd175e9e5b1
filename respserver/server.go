// Package respserver serves an idgen.Generator over the Redis protocol
// (RESP2, and RESP3 after HELLO 3) with redcon: GETID, MGETID and DECODEID,
// plus the connection-level commands redis-cli, redis-benchmark and the
// common client libraries send, so they connect and work unchanged.
package respserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/redcon"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/resplimit"
)

// RedisVersion is the Redis version idserver reports in HELLO and INFO:
// clients pick features by it, and idserver speaks Redis 7's protocol.
const RedisVersion = "7.0.0"

// Options configures a Server. Zero fields mean the documented defaults.
type Options struct {
	Generator *idgen.Generator // required
	Logger    zerolog.Logger
	Version   string // idserver's own version, shown in INFO

	MGetIDMax   int              // largest MGETID count; zero means 10000
	RequirePass string           // password for AUTH; empty means none
	MaxClients  int              // zero means 10000
	IdleTimeout time.Duration    // close clients idle this long; zero means never
	Limits      resplimit.Limits // zero fields mean 64 KiB bulks, 1024 elements

	// Config lists the configuration for CONFIG GET; nil means none.
	Config [][2]string
	// Persistence lists the fields of INFO persistence; nil means none.
	Persistence func() [][2]string

	// EnableDebug allows DEBUG and SHUTDOWN: "yes", "local" (loopback
	// clients only), or "" / "no". SHUTDOWN is also allowed when
	// RequirePass is set, to clients that authenticated.
	EnableDebug string
	// Shutdown is called by the SHUTDOWN command; it should start the same
	// graceful stop as SIGTERM. Nil refuses SHUTDOWN.
	Shutdown func()
}

// Server is an ID server on one listener.
type Server struct {
	opts Options
	gen  *idgen.Generator
	log  zerolog.Logger
	rs   *redcon.Server

	started time.Time
	port    int
	nextID  atomic.Int64 // client ids, as CLIENT ID shows

	clients  atomic.Int64
	accepted atomic.Uint64
	rejected atomic.Uint64
	commands atomic.Uint64
	errors   atomic.Uint64

	mu      sync.Mutex
	serving bool
	closed  bool
	conns   map[*client]redcon.Conn
	done    chan struct{} // closed by Close or Shutdown
	drained chan struct{} // closed when connections may be dropped
	drainMu sync.Once
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("respserver: server closed")

// New returns a Server for opts.
func New(opts Options) *Server {
	if opts.MGetIDMax == 0 {
		opts.MGetIDMax = 10000
	}
	if opts.MaxClients == 0 {
		opts.MaxClients = 10000
	}
	if opts.Limits.MaxBulkLen == 0 {
		opts.Limits.MaxBulkLen = 64 << 10
	}
	if opts.Limits.MaxMultibulkLen == 0 {
		opts.Limits.MaxMultibulkLen = 1024
	}
	s := &Server{
		opts:    opts,
		gen:     opts.Generator,
		log:     opts.Logger,
		started: time.Now(),
		conns:   map[*client]redcon.Conn{},
		done:    make(chan struct{}),
		drained: make(chan struct{}),
	}
	s.rs = redcon.NewServer("", s.handle, s.accept, s.closedConn)
	s.rs.SetIdleClose(opts.IdleTimeout)
	return s
}

// Serve answers clients on ln until Close. It always returns a non-nil
// error: ErrServerClosed after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.serving = true
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		s.port = a.Port
	}
	s.mu.Unlock()
	go s.watch()
	err := s.rs.Serve(drainListener{resplimit.Listener(ln, s.opts.Limits), s.drained})
	select {
	case <-s.done:
		return ErrServerClosed
	default:
	}
	if err == nil {
		err = errors.New("respserver: listener stopped")
	}
	return err
}

// Close stops accepting and drops every open connection at once.
func (s *Server) Close() error {
	_, serving, ok := s.markClosed()
	if !ok {
		return nil
	}
	s.drainMu.Do(func() { close(s.drained) })
	if !serving {
		return nil
	}
	// Not under s.mu: redcon calls closedConn, which takes s.mu, while it
	// holds its own lock, which rs.Close takes.
	return s.rs.Close()
}

// markClosed marks the server closed; ok is false if it already was. It
// returns the open connections and whether Serve has started.
func (s *Server) markClosed() (conns []redcon.Conn, serving, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false, false
	}
	s.closed = true
	close(s.done)
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	return conns, s.serving, true
}

// Shutdown stops gracefully: it stops accepting, stops reading from every
// client, lets each answer the requests it has already read, and returns
// when all are closed, or when ctx is done (then the rest are dropped).
func (s *Server) Shutdown(ctx context.Context) error {
	conns, serving, ok := s.markClosed()
	if !ok {
		return nil
	}
	defer s.drainMu.Do(func() { close(s.drained) })
	if !serving {
		return nil
	}
	// Closes the listener. redcon would drop every connection as soon as
	// its accept loop ends; drainListener holds that loop until drained.
	s.rs.Close()
	for _, c := range conns {
		if cr, ok := c.NetConn().(interface{ CloseRead() error }); ok {
			cr.CloseRead() // the handler finishes its batch, flushes, then reads EOF
		}
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s.clients.Load() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("shutdown: %d clients still open: %w", s.clients.Load(), ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// drainListener keeps redcon's accept loop from ending, and so from
// dropping the open connections, until the server has drained them.
type drainListener struct {
	net.Listener
	drained <-chan struct{}
}

// Accept waits for the drain before it reports a closed listener.
func (l drainListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if errors.Is(err, net.ErrClosed) {
		<-l.drained
	}
	return c, err
}

// Stats are a Server's connection and command counters since New.
type Stats struct {
	Clients  int64  // connected now
	Accepted uint64 // connections accepted
	Rejected uint64 // connections refused at maxclients
	Commands uint64 // commands processed
	Errors   uint64 // error replies
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	return Stats{
		Clients:  s.clients.Load(),
		Accepted: s.accepted.Load(),
		Rejected: s.rejected.Load(),
		Commands: s.commands.Load(),
		Errors:   s.errors.Load(),
	}
}

// client is the state of one connection.
type client struct {
	id     int64
	resp3  bool
	authed bool
	name   string
	lower  [32]byte // the command name, lower-cased, without allocating
	num    []byte   // scratch for formatting numbers
	ids    []int64  // scratch for MGETID
	reply  []byte   // scratch for MGETID's reply
}

func (s *Server) accept(conn redcon.Conn) bool {
	if s.clients.Load() >= int64(s.opts.MaxClients) {
		s.rejected.Add(1)
		conn.NetConn().Write([]byte("-ERR max number of clients reached\r\n"))
		return false
	}
	c := &client{
		id:     s.nextID.Add(1),
		authed: s.opts.RequirePass == "",
		num:    make([]byte, 0, 32),
	}
	// Registered under the lock Shutdown takes, so it either sees this
	// client or this client sees it shutting down.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = conn
	s.clients.Add(1)
	s.accepted.Add(1)
	conn.SetContext(c)
	return true
}

func (s *Server) closedConn(conn redcon.Conn, err error) {
	c, ok := conn.Context().(*client)
	if !ok {
		return // refused in accept
	}
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.clients.Add(-1)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		s.log.Debug().Err(err).Str("client", conn.RemoteAddr()).Msg("connection closed")
	}
}

// watch logs what the generator did that an operator should know about,
// at most one line per kind per second: never a line per ID.
func (s *Server) watch() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	prev := s.gen.Stats()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		st := s.gen.Stats()
		if n := st.Borrowed - prev.Borrowed; n > 0 {
			s.log.Warn().Uint64("calls", n).Int64("lead_ms", st.Lead.Milliseconds()).
				Int64("max_lead_seen_ms", st.MaxLeadSeen.Milliseconds()).
				Msg("issuing IDs ahead of the clock: a millisecond's shard slots ran out or the clock stepped back")
		}
		if st.ClockSteps > prev.ClockSteps {
			s.log.Warn().Uint64("steps", st.ClockSteps-prev.ClockSteps).Int64("last_step_ms", st.LastStep.Milliseconds()).
				Msg("clock stepped backwards; IDs continue from the last one issued")
		}
		if n := st.Refused - prev.Refused; n > 0 {
			s.log.Error().Uint64("refused", n).Int64("lead_ms", st.Lead.Milliseconds()).
				Msg("requests refused with -BUSY: they would exceed max-lead-ms")
		}
		if n := st.Unreserved - prev.Unreserved; n > 0 {
			s.log.Error().Uint64("refused", n).Msg("requests refused with -BUSY: the reservation on disk did not advance in time (slow or failing state file writes)")
		}
		prev = st
	}
}
