// Package respserver serves an idgen.Generator over the Redis protocol
// (RESP2, and RESP3 after HELLO 3): GETID, MGETID and DECODEID, plus the
// connection-level commands redis-cli, redis-benchmark and the common
// client libraries send, so they connect and work unchanged.
//
// Connections are served by gnet event loops (epoll), one per CPU the
// process may use, the way Redis serves them from one thread: a request
// costs one read and one write system call, where a goroutine per
// connection costs a third read that finds nothing, and a pipeline's
// replies go out in one write. resplimit checks the framing of what is
// read, then redcon's parser splits whole commands. A GETID or MGETID
// that would wait (at the lead bound, or for the reservation on disk) is
// finished on a goroutine, so a loop never sleeps; that connection's later
// commands wait for it, in order.
package respserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/rs/zerolog"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/resplimit"
	"github.com/idserver/idserver/stats"
)

// RedisVersion is the Redis version idserver reports in HELLO and INFO:
// clients pick features by it, and idserver speaks Redis 7's protocol.
const RedisVersion = "7.0.0"

// Options configures a Server. Zero fields mean the documented defaults.
type Options struct {
	// Generator issues the IDs; nil starts the server standing by (see
	// SetGenerator and Standby), with Layout and Epoch for DECODEID,
	// IDRANGE and INFO.
	Generator *idgen.Generator
	Layout    idgen.Layout
	Epoch     time.Time
	// ClockOffset shifts the clock of every generator SetGenerator sets
	// (see DEBUG CLOCK-OFFSET); with Generator set, its own is kept.
	ClockOffset time.Duration
	Logger      zerolog.Logger
	Version     string // idserver's own version, shown in INFO

	MGetIDMax   int        // largest MGETID count; zero means 10000
	GetIDReply  GetIDReply // how GETID replies; zero means GetIDAuto
	RequirePass string     // password for AUTH; empty means none
	// ProtectedMode serves only loopback clients while RequirePass is
	// empty; others get Redis's -DENIED reply.
	ProtectedMode bool
	MaxClients    int              // zero means 10000; lowered to fit the open files limit
	IdleTimeout   time.Duration    // close clients idle this long; zero means never
	Limits        resplimit.Limits // zero fields mean 64 KiB bulks, 1024 elements
	// Output bounds what a client that does not read its replies may
	// hold in the server. Zero fields mean no limit.
	Output OutputLimits
	// QueryBufferLimit bounds the input a client may have the server
	// hold: an unfinished command, and the commands waiting behind one
	// that waits (client-query-buffer-limit). Zero means 1 MiB.
	QueryBufferLimit int
	// MaxMemoryClients bounds what all clients together may have the
	// server hold (maxmemory-clients); past it, those holding the most
	// are closed. Zero means no bound.
	MaxMemoryClients int

	// Config lists the configuration for CONFIG GET, beside Redis's own
	// keys that idserver answers (see redisConfig); nil means none.
	Config [][2]string
	// Persistence lists the fields of INFO persistence; nil means none.
	Persistence func() []stats.Field
	// Cluster lists the fields of INFO cluster; nil means single-server
	// mode (cluster_enabled:0).
	Cluster func() []stats.Field

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
	log  zerolog.Logger

	src       atomic.Pointer[source] // the generator, or why there is none
	offset    atomic.Int64           // ms, DEBUG CLOCK-OFFSET, for every generator
	retiredMu sync.Mutex
	retired   idgen.Stats // counters of the generators SetGenerator replaced

	started      time.Time
	replID       string      // INFO replication's master_replid, new at each start as in Redis
	config       [][2]string // what CONFIG GET answers: Options.Config and Redis's keys (redisConfig)
	configKeyLen int         // the longest key in config
	port         atomic.Int64
	loops        atomic.Int64 // event loops serving clients
	nextID       atomic.Int64 // client ids, as CLIENT ID shows
	tick         atomic.Int64 // seconds since started, moved by watch: the idle clock

	clients     atomic.Int64
	blocked     atomic.Int64 // clients whose command waits for its IDs off the loop
	accepted    atomic.Uint64
	rejected    atomic.Uint64
	commands    atomic.Uint64
	errors      atomic.Uint64
	limitClosed atomic.Uint64 // clients closed at their output limits
	queryClosed atomic.Uint64 // clients closed at client-query-buffer-limit
	queryLog    limiter
	limitLog    limiter
	clientMem   atomic.Int64  // bytes all clients hold, as last charged (account)
	evicted     atomic.Uint64 // clients closed at maxmemory-clients
	evictMu     sync.Mutex    // one eviction at a time
	evictLog    limiter
	handshakes  atomic.Int64  // TLS handshakes under way
	lingering   atomic.Int64  // refused connections read to their end (turnAway)
	tlsFailed   atomic.Uint64 // TLS handshakes that failed
	tlsLog      limiter
	deniedLog   limiter
	monMu       sync.Mutex
	monitors    []*client    // clients that ran MONITOR
	monitoring  atomic.Int32 // len(monitors), read by every command
	heldMu      sync.Mutex
	held        map[*client]gnet.Conn // clients whose commands wait for their replies to drain
	unsent      map[*client]gnet.Conn // clients with replies gnet has not written (watchUnsent)
	heldSignal  chan struct{}         // a client was held

	mu      sync.Mutex
	serving bool
	served  chan struct{} // closed when serving becomes true
	closed  bool
	lns     []net.Listener
	eng     *gnet.Client // the event loops; set by Serve
	conns   map[*client]struct{}
	done    chan struct{} // closed by Close or Shutdown
	drained chan struct{} // closed when Close or Shutdown has finished with the clients
	drainMu sync.Once
	stopMu  sync.Once
}

// ErrServerClosed is returned by Serve after Close or Shutdown.
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
	if opts.QueryBufferLimit == 0 {
		opts.QueryBufferLimit = 1 << 20
	}
	s := &Server{
		opts:       opts,
		log:        opts.Logger,
		started:    time.Now(),
		replID:     replicationID(),
		conns:      map[*client]struct{}{},
		done:       make(chan struct{}),
		drained:    make(chan struct{}),
		served:     make(chan struct{}),
		held:       map[*client]gnet.Conn{},
		unsent:     map[*client]gnet.Conn{},
		heldSignal: make(chan struct{}, 1),
	}
	if g := opts.Generator; g != nil {
		s.opts.Layout, s.opts.Epoch = g.Layout(), g.Epoch()
		s.offset.Store(g.ClockOffset().Milliseconds())
		s.src.Store(&source{gen: g})
	} else {
		s.offset.Store(opts.ClockOffset.Milliseconds())
		s.src.Store(&source{why: errors.New("ERR no generator yet")})
	}
	s.config = slices.Concat(opts.Config, redisConfig())
	for _, kv := range s.config {
		s.configKeyLen = max(s.configKeyLen, len(kv[0]))
	}
	s.fitMaxClients()
	return s
}

// Serve answers clients on ln until Close or Shutdown. It always returns a
// non-nil error: ErrServerClosed after Close or Shutdown, once they have
// finished with the clients. Serve and ServeTLS may each be called for
// any number of listeners; all share the event loops.
func (s *Server) Serve(ln net.Listener) error { return s.serveOn(ln, nil) }

// ServeTLS is Serve for a listener whose clients speak TLS, with cfg.
func (s *Server) ServeTLS(ln net.Listener, cfg *tls.Config) error { return s.serveOn(ln, cfg) }

func (s *Server) serveOn(ln net.Listener, cfg *tls.Config) error {
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
	if a, ok := ln.Addr().(*net.TCPAddr); ok && cfg == nil {
		s.port.Store(int64(a.Port))
	}
	s.mu.Unlock()

	// Accepting runs on its own goroutine: handing a connection to a loop
	// waits for the loop, and a loop stopped meanwhile must not keep Serve
	// from returning.
	accepted := make(chan error, 1)
	go func() { accepted <- s.accept(ln, cfg) }()
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

// startLoops starts the event loops, once; s.mu is held.
func (s *Server) startLoops() error {
	if s.serving {
		return nil
	}
	loops := max(runtime.GOMAXPROCS(0), 1)
	eng, err := gnet.NewClient(&events{s: s},
		gnet.WithNumEventLoop(loops),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(gnetLogger{s.log}))
	if err == nil {
		err = eng.Start()
	}
	if err != nil {
		return fmt.Errorf("respserver: start event loops: %w", err)
	}
	s.serving, s.eng = true, eng
	close(s.served)
	s.loops.Store(int64(loops))
	go s.watch()
	go s.wakeHeld()
	return nil
}

// accept takes connections from ln until it is closed (then it returns
// nil) or fails for good. With cfg, each one's TLS handshake runs on a
// goroutine of its own before it is admitted.
func (s *Server) accept(ln net.Listener, cfg *tls.Config) error {
	fds := newFDReserve(s)
	defer fds.release()
	var backoff time.Duration
	var failedLog limiter
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
				return fmt.Errorf("respserver: accept: %w", err)
			}
			// Out of file descriptors with none in reserve, or the like:
			// wait, as net/http does, rather than spin; the clients
			// already connected go on, the new ones wait in the backlog.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			if ok, _ := failedLog.allow(); ok {
				s.log.Warn().Err(err).Dur("retry_in", backoff).Msg("accept failed; new connections wait")
			}
			time.Sleep(backoff)
			fds.retake()
			continue
		}
		backoff = 0
		if cfg != nil {
			go s.admitTLS(nc, cfg)
			continue
		}
		fds.handOver(nc)
	}
}

// admitTLS does nc's TLS handshake and admits it: a client past
// maxclients gets Redis's reply through TLS, as on the plain port. The
// handshakes under way are bounded by maxclients too: each holds a
// goroutine and its buffers. Past that, a connection is closed unanswered
// (a reply before the handshake would be noise to it).
func (s *Server) admitTLS(nc net.Conn, cfg *tls.Config) {
	if s.handshakes.Add(1) > int64(s.opts.MaxClients) {
		s.handshakes.Add(-1)
		s.rejected.Add(1)
		nc.Close()
		return
	}
	t, err := handshake(nc, cfg)
	s.handshakes.Add(-1)
	if err != nil {
		s.tlsFailed.Add(1)
		if ok, skipped := s.tlsLog.allow(); ok {
			s.log.Warn().Err(err).Str("client", nc.RemoteAddr().String()).Uint64("also_failed", skipped).Msg("TLS handshake failed")
		}
		nc.Close()
		return
	}
	if err := s.admit(nc, t); err != nil {
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

// Replies to connections refused before they are served.
const (
	errMaxClients = "-ERR max number of clients reached\r\n"
	// errDenied is Redis 7's protected-mode reply, with the remedies
	// idserver has (it has no CONFIG SET).
	errDenied = "-DENIED idserver is running in protected mode because protected mode is enabled and no password is set for the default user. " +
		"In this mode connections are only accepted from the loopback interface. " +
		"If you want to connect from external computers to idserver you may adopt one of the following solutions: " +
		"1) Just disable protected mode by editing the idserver configuration file, and setting the protected mode option to 'no', and then restarting the server, " +
		"however MAKE SURE idserver is not publicly accessible from internet if you do so. " +
		"2) If you started the server manually just for testing, restart it with the '--protected-mode no' option. " +
		"3) Set up an authentication password for the default user (requirepass). " +
		"NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n"
)

// refuse answers a connection it will not serve with reply (through TLS
// if t is set) and closes it at once: out of file descriptors, its socket
// is needed back.
func (s *Server) refuse(nc net.Conn, t *tlsConn, reply string) {
	s.answer(nc, t, reply)
	nc.Close()
}

// answer writes reply to a connection that will not be served.
func (s *Server) answer(nc net.Conn, t *tlsConn, reply string) {
	s.rejected.Add(1)
	nc.SetDeadline(time.Now().Add(time.Second))
	if t != nil {
		t.tc.Write([]byte(reply))
	} else {
		nc.Write([]byte(reply))
	}
}

// maxLingering bounds the refused connections read to their end at once.
const maxLingering = 256

// turnAway answers a connection it will not serve with reply and closes
// it once the client has closed its side, or a second has passed: closed
// with what the client sent unread (a TLS client's first command, right
// behind the handshake), the socket would be reset, and the reply lost
// with it. Past maxLingering such, it closes at once.
func (s *Server) turnAway(nc net.Conn, t *tlsConn, reply string) {
	s.answer(nc, t, reply)
	if s.lingering.Add(1) > maxLingering {
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

// denied reports whether protected mode refuses a client from addr: no
// password is set and the client is not on loopback, as in Redis.
func (s *Server) denied(addr net.Addr) bool {
	if !s.opts.ProtectedMode || s.opts.RequirePass != "" {
		return false
	}
	a, ok := addr.(*net.TCPAddr)
	return ok && !a.IP.IsLoopback()
}

// admit hands a new connection to an event loop, or refuses it. t is its
// TLS state, nil for plain TCP. It returns the error of the hand-over, if
// it failed.
func (s *Server) admit(nc net.Conn, t *tlsConn) error {
	switch {
	case s.clients.Load() >= int64(s.opts.MaxClients):
		s.turnAway(nc, t, errMaxClients)
		return nil
	case s.denied(nc.RemoteAddr()):
		s.turnAway(nc, t, errDenied)
		if ok, skipped := s.deniedLog.allow(); ok {
			s.log.Warn().Str("client", nc.RemoteAddr().String()).Uint64("also_denied", skipped).
				Msg("protected mode: refused a client that is not on loopback (set requirepass, or protected-mode no)")
		}
		return nil
	}
	c := s.newClient(nc.RemoteAddr().String(), nc.LocalAddr().String())
	if t != nil {
		t.detach()
		c.tls = t
	}
	// Registered under the lock Shutdown takes, so it either sees this
	// client or the client's OnOpen sees the server closed.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return nil
	}
	s.conns[c] = struct{}{}
	s.clients.Add(1)
	s.mu.Unlock()
	// Counted before the loop serves it, so that its own INFO counts it,
	// as Redis counts a connection when it accepts it.
	s.accepted.Add(1)
	// The loop takes a duplicate of the socket and closes nc.
	_, err := s.eng.EnrollContext(nc, c)
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

// newClient is the state of a new connection from addr to laddr.
func (s *Server) newClient(addr, laddr string) *client {
	c := &client{}
	c.connState = connState{
		id:    s.nextID.Add(1),
		addr:  addr,
		laddr: laddr,
		born:  s.tick.Load(),
		scan:  resplimit.NewScanner(s.opts.Limits),
	}
	c.authed, c.stringIDs = s.opts.RequirePass == "", s.opts.GetIDReply == GetIDString
	c.publish()
	return c
}

// forget unregisters c; it is safe to call twice.
func (s *Server) forget(c *client) {
	s.mu.Lock()
	_, ok := s.conns[c]
	delete(s.conns, c)
	s.mu.Unlock()
	s.unhold(c)
	s.unmonitor(c)
	s.uncharge(c)
	if ok {
		s.clients.Add(-1)
	}
}

// Close stops accepting and drops every open connection at once, also
// those a Shutdown in progress is still waiting for.
func (s *Server) Close() error {
	s.markClosed()
	s.stopLoops()
	s.drainMu.Do(func() { close(s.drained) })
	return nil
}

// markClosed marks the server closed and closes the listener; ok is false
// if it already was closed. It returns the open connections.
func (s *Server) markClosed() (conns []*client, ok bool) {
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
func (s *Server) stopLoops() {
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
func (s *Server) Shutdown(ctx context.Context) error {
	conns, ok := s.markClosed()
	if !ok {
		return nil
	}
	defer s.drainMu.Do(func() { close(s.drained) })
	defer s.stopLoops()
	for _, c := range conns {
		c.draining.Store(true)
		s.mu.Lock()
		gc := c.gc
		s.mu.Unlock()
		if gc != nil { // else its OnOpen, still to come, sees the server closed
			gc.Wake(nil) // on its loop: finish what was read, flush, close
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

// Serving is closed once the server serves: its event loops run, and
// Ready answers for the generator rather than "not serving yet".
func (s *Server) Serving() <-chan struct{} { return s.served }

// ErrShuttingDown is Ready's answer once Close or Shutdown has begun.
var ErrShuttingDown = errors.New("shutting down")

// Ready reports whether a GETID would be answered now: nil, or why not
// (not serving yet, shutting down, or the generator's reason).
func (s *Server) Ready() error {
	s.mu.Lock()
	serving, closed := s.serving, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return ErrShuttingDown
	case !serving:
		return errors.New("not serving yet")
	}
	g, err := s.generator()
	if err == nil {
		err = g.Ready()
	}
	if err != nil {
		return fmt.Errorf("GETID would get -%s", replyText(err))
	}
	return nil
}

// Stats are a Server's connection and command counters since New.
type Stats struct {
	Clients     int64  // connected now
	Blocked     int64  // clients whose command waits for its IDs off the loop
	Held        int64  // clients whose commands wait for their replies to drain
	Accepted    uint64 // connections accepted
	Rejected    uint64 // connections refused at maxclients or out of file descriptors
	Commands    uint64 // commands processed
	Errors      uint64 // error replies
	LimitClosed uint64 // clients closed at their output limits
	QueryClosed uint64 // clients closed at client-query-buffer-limit
	Evicted     uint64 // clients closed at maxmemory-clients
	ClientMem   int64  // bytes all clients hold now
	TLSFailed   uint64 // TLS handshakes that failed
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	s.heldMu.Lock()
	held := int64(len(s.held))
	s.heldMu.Unlock()
	return Stats{
		Clients:     s.clients.Load(),
		Blocked:     s.blocked.Load(),
		Held:        held,
		Accepted:    s.accepted.Load(),
		Rejected:    s.rejected.Load(),
		Commands:    s.commands.Load(),
		Errors:      s.errors.Load(),
		LimitClosed: s.limitClosed.Load(),
		QueryClosed: s.queryClosed.Load(),
		Evicted:     s.evicted.Load(),
		ClientMem:   s.clientMem.Load(),
		TLSFailed:   s.tlsFailed.Load(),
	}
}

// watch moves the idle clock, closes idle clients, and logs what the
// generator did that an operator should know about, at most one line per
// kind per second: never a line per ID.
func (s *Server) watch() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	prev := s.genStats()
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
		st := s.genStats()
		if n := st.Borrowed - prev.Borrowed; n > 0 {
			s.log.Warn().Uint64("calls", n).Int64("lead_ms", st.Lead.Milliseconds()).
				Int64("max_lead_seen_ms", st.MaxLeadSeen.Milliseconds()).Msg(borrowedWhy(st))
		}
		if st.ForwardSteps > prev.ForwardSteps {
			s.log.Warn().Uint64("steps", st.ForwardSteps-prev.ForwardSteps).Int64("last_step_ms", st.LastForwardStep.Milliseconds()).
				Msg("clock stepped forward by more than max-lead-ms; IDs keep to the monotonic clock until the new time has held for a minute (a step put right before then costs nothing)")
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
			ev := s.log.Error().Uint64("refused", n)
			if g, _ := s.generator(); g != nil && g.ReserveFailure() != "" {
				ev = ev.Str("cause", g.ReserveFailure())
			}
			ev.Msg("requests refused with -BUSY: the reservation did not advance in time (slow or failing writes of the state file, or of etcd in cluster mode)")
		}
		prev = st
	}
}

// borrowedWhy says why IDs run ahead of the clock.
func borrowedWhy(st idgen.Stats) string {
	if st.BehindFloor > 0 {
		return fmt.Sprintf("issuing IDs ahead of the clock: this server started from a reservation %d ms ahead of its clock "+
			"(a takeover, or a restart after IDs ran ahead) and more than that millisecond's shard slots were asked for", st.BehindFloor.Milliseconds())
	}
	return "issuing IDs ahead of the clock: more IDs were asked for in a millisecond than its shard slots, or the clock stepped back"
}

// closeIdle closes the clients that sent nothing for IdleTimeout. The
// clock has one-second steps, so a client gets between IdleTimeout and a
// second more, as in Redis.
func (s *Server) closeIdle(now int64) {
	limit := int64((s.opts.IdleTimeout + time.Second - 1) / time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.gc != nil && now-c.active.Load() > limit {
			c.gc.Close()
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
