// Package conns serves connections that speak the Redis protocol's
// framing on gnet event loops (epoll), one per CPU the process may use,
// the way Redis serves them from one thread: a request costs one read and
// one write system call, and a pipeline's replies go out in one write.
//
// It owns everything about a connection that is not a command's meaning:
// accepting and admitting (maxclients, Handler.Refuse for protected mode,
// a spare file descriptor to refuse with), TLS in the loops, request
// framing (resplimit) and splitting (redcon's parser, inline commands as
// Redis splits them), backpressure (a client whose replies pile up waits;
// one whose command waits is not read),
// the accountant (every byte held for a client, bounded per client and
// across all of them), idle timeouts, a graceful Shutdown, and a way for a
// command that cannot finish on the loop to finish off it (Wait, the one
// value a command returns: its later commands, or only its batch's
// replies, wait for it, in order).
//
// A Handler gives the commands their meaning; each connection carries the
// handler's session state S.
package conns

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/rs/zerolog"

	"github.com/idserver/idserver/internal/replyerr"
	"github.com/idserver/idserver/resplimit"
)

// Handler is what runs on a Server's connections. Its methods run on the
// connection's event loop, one at a time per connection.
type Handler[S any] interface {
	// Refuse is asked about each new connection once it is under
	// maxclients, before Open: a reply other than nil is sent to it and
	// it is closed.
	Refuse(addr net.Addr) (reply *replyerr.Error)
	// Open returns the session state of a new connection, before any of
	// its commands run.
	Open(c *Conn[S]) S
	// Command runs one command, args valid only during the call, and
	// appends its reply to c.Out; note is what the handler's Ahead fn
	// returned for it, nil if none saw it. A command that cannot finish
	// on the loop returns what is left (Wait); one that finished, the
	// zero Wait.
	Command(c *Conn[S], args [][]byte, note any) Wait
	// Sent is called once the replies of a batch of commands (those one
	// read brought, see Conn.Start) have been written.
	Sent(c *Conn[S])
	// Closed is called once c is closed, or never served; it may come on
	// another goroutine than c's loop.
	Closed(c *Conn[S])
	// Bytes is how many bytes the session holds (a transaction queued,
	// lines pending for it), for the accountant.
	Bytes(c *Conn[S]) int
	// Pending returns what is to be written to c before its next commands
	// run, not made by its own commands (MONITOR's lines, see Conn.Wake),
	// valid until the next call; overflow means it passed the hard output
	// limit and c is to be closed.
	Pending(c *Conn[S]) (out []byte, overflow bool)
}

// Options configures a Server. Zero fields mean the documented defaults.
type Options struct {
	Logger      zerolog.Logger   // where the connection layer logs (and gnet's own lines)
	MaxClients  int              // zero means 10000; lowered to fit the open files limit
	IdleTimeout time.Duration    // close clients idle this long; zero means never
	Limits      resplimit.Limits // zero fields mean 64 KiB bulks, 1024 elements
	// Output bounds what a client that does not read its replies may
	// hold in the server. Zero fields mean no limit.
	Output OutputLimits
	// QueryBufferLimit bounds the input a client may have the server
	// hold: an unfinished command, and the commands read behind one that
	// waits (client-query-buffer-limit): a client whose command waits is
	// not read meanwhile (stopReading), so those are at most a read.
	// Zero means 1 MiB.
	QueryBufferLimit int
	// MaxMemoryClients bounds what all clients together may have the
	// server hold (maxmemory-clients); past it, those holding the most
	// are closed. Zero means no bound.
	MaxMemoryClients int
	// OtherFDs is how many descriptors the process's other listeners may
	// hold at once (metrics-maxclients): the open files limit keeps them
	// beside the clients' (see fitBudget).
	OtherFDs int
	// MaxPeers is how many connections the peers' port (ServePeers)
	// serves at once, apart from MaxClients: filling the clients' port
	// keeps no peer out. The open files limit keeps them beside the
	// clients' too, and as many for this server's own connections to the
	// others' (see fitBudget). A peer connection that has not authenticated within
	// peerAuthWait is closed, if the handler asks for a password.
	MaxPeers int
}

// Server serves connections on any number of listeners, sharing its event
// loops.
type Server[S any] struct {
	opts Options
	log  zerolog.Logger
	h    Handler[S]

	loops  atomic.Int64 // event loops serving clients
	nextID atomic.Int64 // connection ids
	tick   atomic.Int64 // seconds since the loops started: the idle clock

	clients     atomic.Int64
	peers       atomic.Int64 // connections of the peers' port
	blocked     atomic.Int64 // clients whose command waits off the loop
	accepted    atomic.Uint64
	rejected    atomic.Uint64
	protoErrors [replyerr.NCodes]atomic.Uint64 // framing errors answered, by code
	limitClosed atomic.Uint64                  // clients closed at their output limits
	queryClosed atomic.Uint64                  // clients closed at client-query-buffer-limit
	queryLog    Limiter
	limitLog    Limiter
	clientMem   atomic.Int64  // bytes all clients hold, as last charged (account)
	evicted     atomic.Uint64 // clients closed at maxmemory-clients
	evictMu     sync.Mutex    // one eviction at a time
	evictLog    Limiter
	handshakes  atomic.Int64  // TLS handshakes under way
	lingering   atomic.Int64  // refused connections read to their end (turnAway)
	pending     int64         // the bound of each of handshakes and lingering: their share of the descriptors
	tlsFailed   atomic.Uint64 // TLS handshakes that failed
	handing     chan struct{} // hand-overs to the loops under way, up to handOvers (fitBudget's spares)
	tlsLog      Limiter
	heldMu      sync.Mutex
	held        map[*Conn[S]]link // clients whose commands wait for their replies to drain
	unsent      map[*Conn[S]]link // clients with replies gnet has not written (watchUnsent)
	heldSignal  chan struct{}     // a client was held

	mu      sync.Mutex
	serving bool
	served  chan struct{} // closed when serving becomes true
	closed  bool
	lns     []net.Listener
	eng     *gnet.Client // the event loops; set by Serve
	conns   map[*Conn[S]]struct{}
	shakes  map[*shake]struct{} // TLS handshakes under way, for evict
	done    chan struct{}       // closed by Close or Shutdown
	drained chan struct{}       // closed when Close or Shutdown has finished with the clients
	drainMu sync.Once
	stopMu  sync.Once
}

// ErrServerClosed is returned by Serve after Close or Shutdown.
var ErrServerClosed = errors.New("server closed")

// New returns a Server for opts whose connections h serves.
func New[S any](opts Options, h Handler[S]) *Server[S] {
	if opts.MaxClients == 0 {
		opts.MaxClients = 10000
	}
	if opts.Limits.MaxBulkLen == 0 {
		opts.Limits.MaxBulkLen = 64 << 10
	}
	if opts.Limits.MaxMultibulkLen == 0 {
		opts.Limits.MaxMultibulkLen = 1024
	}
	if opts.QueryBufferLimit == 0 {
		opts.QueryBufferLimit = 1 << 20
	}
	s := &Server[S]{
		opts:       opts,
		log:        opts.Logger,
		h:          h,
		conns:      map[*Conn[S]]struct{}{},
		shakes:     map[*shake]struct{}{},
		done:       make(chan struct{}),
		drained:    make(chan struct{}),
		served:     make(chan struct{}),
		held:       map[*Conn[S]]link{},
		unsent:     map[*Conn[S]]link{},
		heldSignal: make(chan struct{}, 1),
		handing:    make(chan struct{}, handOvers),
	}
	s.fitMaxClients()
	return s
}

// MaxClients is how many clients s serves at once: Options.MaxClients,
// lowered to fit the open files limit.
func (s *Server[S]) MaxClients() int { return s.opts.MaxClients }

// Serve answers clients on ln until Close or Shutdown. It always returns a
// non-nil error: ErrServerClosed after Close or Shutdown, once they have
// finished with the clients.
func (s *Server[S]) Serve(ln net.Listener) error { return s.serveOn(ln, nil, s.clientsGate()) }

// ServeTLS is Serve for a listener whose clients speak TLS, with cfg.
func (s *Server[S]) ServeTLS(ln net.Listener, cfg *tls.Config) error {
	return s.serveOn(ln, cfg, s.clientsGate())
}

// ServePeers is Serve (ServeTLS with cfg) for the port other servers
// reach this one on: its connections count against Options.MaxPeers, not
// maxclients, and must authenticate within peerAuthWait.
func (s *Server[S]) ServePeers(ln net.Listener, cfg *tls.Config) error {
	return s.serveOn(ln, cfg, &gate{count: &s.peers, max: s.opts.MaxPeers, peer: true})
}

// gate is how a listener's connections are admitted: counted in count,
// at most max at once.
type gate struct {
	count *atomic.Int64
	max   int
	peer  bool // the peers' port
}

// clientsGate is the clients' ports' gate: maxclients.
func (s *Server[S]) clientsGate() *gate { return &gate{count: &s.clients, max: s.opts.MaxClients} }

// peerAuthWait is how long a connection of the peers' port may stay
// unauthenticated: idle connections opened to fill it are closed.
const peerAuthWait = 2 * time.Second

func (s *Server[S]) serveOn(ln net.Listener, cfg *tls.Config, g *gate) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	if err := s.startLoops(); err != nil {
		s.mu.Unlock()
		ln.Close()
		return err
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()

	// Accepting runs on its own goroutine: handing a connection to a loop
	// waits for the loop, and a loop stopped meanwhile must not keep Serve
	// from returning.
	accepted := make(chan error, 1)
	go func() { accepted <- s.accept(ln, cfg, g) }()
	select {
	case err := <-accepted:
		if err != nil {
			return err
		}
	case <-s.done:
	}
	<-s.drained
	return ErrServerClosed
}

// readTurn is the most a loop reads of one client at a time, and so the
// most of its commands one turn runs: the rest waits in the kernel's
// socket buffer, unread, and the loop's level-triggered epoll brings it
// on its next round, after every other client ready then. Redis reads
// 16 KiB at a time too. With gnet's 64 KiB, 20 clients sending MULTI and
// then PINGs without reading made each round of the loop about 50 ms
// (20 turns of 2.5 ms queueing about 8,000 PINGs each): a PING on
// another connection waited 45 ms typically and 90-350 ms at worst; at
// 16 KiB, 14-19 ms and 60-70 ms (scripts/hostile.sh's attack, one loop).
const readTurn = 16 << 10

// handOvers is how many connections are handed to the loops at once. A
// hand-over waits for its loop to take it, which it does once per round,
// after the clients ready then: one at a time, when 20 clients sending
// MULTI and then PINGs connected at once, redis-cli --latency connecting
// beside them had its first PING answered after 1.0-1.4 s, each of the
// 22 hand-overs having waited 20-80 ms. Each takes a descriptor for the
// duplicate of the socket gnet makes (spareFDs).
const handOvers = 8

// startLoops starts the event loops, once; s.mu is held.
func (s *Server[S]) startLoops() error {
	if s.serving {
		return nil
	}
	loops := max(runtime.GOMAXPROCS(0), 1)
	eng, err := gnet.NewClient(&events[S]{s: s},
		gnet.WithNumEventLoop(loops),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithReadBufferCap(readTurn),
		gnet.WithLogger(gnetLogger{s.log}))
	if err == nil {
		err = eng.Start()
	}
	if err != nil {
		return fmt.Errorf("start event loops: %w", err)
	}
	s.serving, s.eng = true, eng
	close(s.served)
	s.loops.Store(int64(loops))
	go s.clock()
	go s.wakeHeld()
	return nil
}

// Serving is closed once the event loops run.
func (s *Server[S]) Serving() <-chan struct{} { return s.served }

// Done is closed once Close or Shutdown has begun.
func (s *Server[S]) Done() <-chan struct{} { return s.done }

// Close stops accepting and drops every open connection at once, also
// those a Shutdown in progress is still waiting for.
func (s *Server[S]) Close() error {
	s.markClosed()
	s.stopLoops()
	s.drainMu.Do(func() { close(s.drained) })
	return nil
}

// markClosed marks the server closed and closes the listener; ok is false
// if it already was closed. It returns the open connections.
func (s *Server[S]) markClosed() (conns []*Conn[S], ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	s.closed = true
	close(s.done)
	for _, ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns, true
}

// stopLoops closes the event loops and every connection still open (each
// gets what was already written to it first).
func (s *Server[S]) stopLoops() {
	s.mu.Lock()
	eng := s.eng
	s.mu.Unlock()
	if eng == nil {
		return
	}
	s.stopMu.Do(func() {
		if err := eng.Stop(); err != nil {
			s.log.Debug().Err(err).Msg("event loops stopped")
		}
	})
}

// Shutdown stops gracefully: it stops accepting, lets each client finish
// the commands it has sent, writes their replies and closes it, and
// returns when all are closed, or when ctx is done (then the rest are
// dropped).
func (s *Server[S]) Shutdown(ctx context.Context) error {
	conns, ok := s.markClosed()
	if !ok {
		return nil
	}
	defer s.drainMu.Do(func() { close(s.drained) })
	defer s.stopLoops()
	for _, c := range conns {
		c.draining.Store(true)
		c.Wake() // on its loop: finish what was read, flush, close; else its OnOpen, still to come, sees the server closed
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

// Conns returns the open connections, in no order, but for those being
// closed (Conn.Close).
func (s *Server[S]) Conns() []*Conn[S] {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := make([]*Conn[S], 0, len(s.conns))
	for c := range s.conns {
		if !c.closing.Load() {
			all = append(all, c)
		}
	}
	return all
}

// Stats are a Server's connection counters since New.
type Stats struct {
	Loops          int64                   // event loops
	Clients        int64                   // connected now
	Peers          int64                   // connections of the peers' port now
	Blocked        int64                   // clients whose command waits off the loop
	Held           int64                   // clients whose commands wait for their replies to drain
	Accepted       uint64                  // connections accepted
	Rejected       uint64                  // connections refused at maxclients or out of file descriptors
	ProtocolErrors [replyerr.NCodes]uint64 // framing errors answered, by code (INFO errorstats)
	LimitClosed    uint64                  // clients closed at their output limits
	QueryClosed    uint64                  // clients closed at client-query-buffer-limit
	Evicted        uint64                  // clients closed at maxmemory-clients
	ClientMem      int64                   // bytes all clients and TLS handshakes under way hold now
	TLSFailed      uint64                  // TLS handshakes that failed
	Handshakes     int64                   // TLS handshakes under way
}

// Stats returns the server's counters.
func (s *Server[S]) Stats() Stats {
	s.heldMu.Lock()
	held := int64(len(s.held))
	s.heldMu.Unlock()
	var proto [replyerr.NCodes]uint64
	for i := range proto {
		proto[i] = s.protoErrors[i].Load()
	}
	return Stats{
		ProtocolErrors: proto,
		Loops:          s.loops.Load(),
		Clients:        s.clients.Load(),
		Peers:          s.peers.Load(),
		Blocked:        s.blocked.Load(),
		Held:           held,
		Accepted:       s.accepted.Load(),
		Rejected:       s.rejected.Load(),
		LimitClosed:    s.limitClosed.Load(),
		QueryClosed:    s.queryClosed.Load(),
		Evicted:        s.evicted.Load(),
		ClientMem:      s.clientMem.Load(),
		TLSFailed:      s.tlsFailed.Load(),
		Handshakes:     s.handshakes.Load(),
	}
}

// clock moves the idle clock once a second, and closes idle clients.
func (s *Server[S]) clock() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		now := s.tick.Add(1)
		if s.opts.IdleTimeout > 0 {
			s.closeIdle(now)
		}
		s.closeUnauthenticatedPeers(now)
	}
}

// closeIdle closes the clients that sent nothing for IdleTimeout. The
// clock has one-second steps, so a client gets between IdleTimeout and a
// second more, as in Redis.
func (s *Server[S]) closeIdle(now int64) {
	limit := int64((s.opts.IdleTimeout + time.Second - 1) / time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.link != nil && now-c.active.Load() > limit {
			c.link.Close()
		}
	}
}

// closeUnauthenticatedPeers closes the connections of the peers' port
// that have not authenticated within peerAuthWait (of the clock's
// one-second steps).
func (s *Server[S]) closeUnauthenticatedPeers(now int64) {
	limit := int64(peerAuthWait / time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.gate.peer && !c.authed.Load() && c.link != nil && now-c.born > limit {
			c.link.Close()
		}
	}
}

// gnetLogger sends gnet's own log lines to the server's logger. Its Info
// lines (loops starting) are debug detail here; Fatalf does not exit.
type gnetLogger struct{ log zerolog.Logger }

func (l gnetLogger) Debugf(format string, args ...any) { l.log.Debug().Msgf(format, args...) }
func (l gnetLogger) Infof(format string, args ...any)  { l.log.Debug().Msgf(format, args...) }
func (l gnetLogger) Warnf(format string, args ...any)  { l.log.Warn().Msgf(format, args...) }
func (l gnetLogger) Errorf(format string, args ...any) { l.log.Error().Msgf(format, args...) }
func (l gnetLogger) Fatalf(format string, args ...any) { l.log.Error().Msgf(format, args...) }
