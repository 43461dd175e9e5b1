// Package respserver serves idserver's commands over the Redis protocol
// (RESP2, and RESP3 after HELLO 3): the IDs of an idgen.Generator (GETID,
// MGETID, DECODEID, IDRANGE), the sequences of a sequence.Table (INCR,
// INCRBY, GET, MGET, SET, SETNX and the key commands clients use:
// EXISTS, KEYS, SCAN, DBSIZE, ...), public strings (PUBLICID, PRIVATEID),
// transactions (MULTI, EXEC, WATCH), Redis Cluster's view (CLUSTER
// SLOTS, SHARDS, NODES, ...; -MOVED and -TRYAGAIN) or, for plain clients
// of a cluster, a key's command forwarded to its owner (forward.go),
// plus the connection-level commands redis-cli, redis-benchmark and the common
// client libraries send, so they connect and work unchanged. One command
// table (table.go, cmd_*.go) drives dispatch, arity, COMMAND and every
// HELP.
//
// Connections are served by the connection layer (internal/conns: gnet
// event loops, TLS, framing, backpressure and the accountant); this
// package gives the commands their meaning. A loop never sleeps: a
// command that may wait (command.start) returns what is left of it, a
// later, which the connection layer keeps and runs (conns.Wait): off the
// loop, and that connection's later commands wait for it, in order (a
// Block). Those that may: a GETID or MGETID at the lead bound or waiting
// for the reservation on disk; an INCR or INCRBY whose key's segment
// lacks the values (a new key, or one that outran its segment); a SET of
// a key whose take or SET is under way; either, of a key whose slot is
// being taken; an EXEC whose IDs or values would wait, and the commands
// inside it that would (after the others); KEYS and CLUSTER
// GETKEYSINSLOT, which read many keys, and DBSIZE and INFO keyspace
// where they must walk every key (this server owns only some slots);
// CLUSTER SLOTS, SHARDS and NODES until the cluster view lists slots.
//
// A reply that may go only once something else is durable or has come
// is deferred instead (deferredReply, conns.Defer; client.deferred keeps
// where each is): a SET's until its write ended, an INCR's of a key
// prepared ahead for a pipeline until the key's existence is durable
// (sequence.Pending), a forwarded command's until the owner replied
// (forward.go). The batch's replies then go out together, in order. The
// batch's later commands run meanwhile while they touch no key or the
// table orders them (besideDeferred); the first other runs after
// (behindDeferred), with all after it, so that a GET pipelined after a
// SET sees it done.
package respserver

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/forward"
	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/replyerr"
	"github.com/idserver/idserver/publicid"
	"github.com/idserver/idserver/respserver/internal/conns"
	"github.com/idserver/idserver/sequence"
	"github.com/idserver/idserver/slots"
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
	// MaxLead is max-lead-ms, the bound on the lead, shown beside it in
	// INFO idgen so that dashboards and alerts compare the two; zero
	// means idgen.DefaultMaxLead.
	MaxLead time.Duration
	Version string // idserver's own version, shown in INFO

	MGetIDMax   int        // largest MGETID count; zero means 10000
	GetIDReply  GetIDReply // how GETID replies; zero means GetIDAuto
	RequirePass string     // password for AUTH; empty means none
	// ProtectedMode serves only loopback clients while RequirePass is
	// empty; others get Redis's -DENIED reply.
	ProtectedMode bool
	// ConnOptions are the connection layer's: its Logger is the
	// server's too.
	ConnOptions

	// Config lists the configuration for CONFIG GET, beside Redis's own
	// keys that idserver answers (see redisConfig); nil means none.
	Config [][2]string
	// Persistence lists the fields of INFO persistence; nil means none.
	Persistence func() []stats.Field
	// Cluster lists the fields of INFO cluster; nil means single-server
	// mode (cluster_enabled:0).
	Cluster func() []stats.Field

	// Slots is the Redis Cluster this server is a node of
	// (cluster-enabled yes): which node serves each key's slot, for
	// the CLUSTER commands and the -MOVED, -TRYAGAIN and -CROSSSLOT
	// replies; nil: cluster-enabled no, every key served here.
	Slots slots.Source

	// Owner says who serves a slot now, with cluster-enabled no (Slots
	// nil): its owner's address, host:port as Forward dials it; self
	// when it is this server; ok false when no server is known to serve
	// it (its keys get -CLUSTERDOWN). A command with keys of another
	// server's slot is forwarded to it whole and its reply relayed (see
	// forward.go); nil: every key served here.
	Owner func(slot int) (addr string, self, ok bool)
	// Forward carries the commands Owner sends elsewhere; nil with Owner
	// set: a pool of New's own, authenticated with RequirePass, over TLS
	// with PeerTLS if set, closed with the server.
	Forward *forward.Pool
	// PeerTLS is the TLS client configuration to reach other servers'
	// cluster-port with (tls-cluster); nil: plain TCP.
	PeerTLS *tls.Config

	// PublicID encodes PUBLICID's and decodes PRIVATEID's strings; nil
	// means plain Sqids with its defaults.
	PublicID *publicid.Codec

	// Sequences are the per-key counters (INCR and the rest); nil: none,
	// and their commands are refused.
	Sequences *sequence.Table
	// SeqHandover answers a slot's new owner's pull of the slots' keys
	// (CLUSTER SEQHANDOVER), a page of about budget bytes from place from
	// of the first slot's keys (seqslots.Engine.Handover); nil: this
	// server hands none over.
	SeqHandover func(from int, slots []int, budget int) []sequence.Handed
	// SeqSeen answers a taker's question of what this server saw of the
	// records of slots etcd lost (CLUSTER SEQSEEN): each it saw, by slot;
	// nil: none.
	SeqSeen func(slots []int) map[int]string
	// SeqSettling reports whether slot, which this server let go, is
	// still on its way to its new owner (its keys not pulled yet): its
	// commands are answered -TRYAGAIN, not -MOVED, so that a cluster
	// client waits rather than bounce between this server and a new
	// owner that has not read the assignment yet; nil: none.
	SeqSettling func(slot int) bool
	// SeqMaxIncrBy is the largest INCRBY increment; zero means 1000000.
	SeqMaxIncrBy int64

	// EnableDebug is who may run DEBUG and SHUTDOWN; SHUTDOWN is also
	// allowed when RequirePass is set, to clients that authenticated.
	EnableDebug DebugAccess
	// Shutdown is called by the SHUTDOWN command; it should start the same
	// graceful stop as SIGTERM. Nil refuses SHUTDOWN.
	Shutdown func()
}

// Server is an ID server on any number of listeners.
type Server struct {
	opts  Options
	log   zerolog.Logger
	conns *conns.Server[*client]

	src       atomic.Pointer[source] // the generator, or why there is none
	offset    atomic.Int64           // ms, DEBUG CLOCK-OFFSET, for every generator
	retiredMu sync.Mutex
	retired   idgen.Stats // counters of the generators SetGenerator replaced

	started      time.Time
	publicID     *publicid.Codec // PUBLICID's and PRIVATEID's
	replID       string          // INFO replication's master_replid, new at each start as in Redis
	config       [][2]string     // what CONFIG GET answers: Options.Config and Redis's keys (redisConfig)
	configKeyLen int             // the longest key in config
	port         atomic.Int64
	forward      *forward.Pool // Options.Forward, or New's own
	ownPool      bool          // forward is New's own: Close and Shutdown close it

	touches        touches // the writes of keys clients WATCH
	commands       atomic.Uint64
	scriptRefusals atomic.Uint64                  // calls of scriptCommands
	callStats      []calls                        // by command.id
	errorCodes     [replyerr.NCodes]atomic.Uint64 // error replies to commands, by code
	deniedLog      conns.Limiter
	monMu          sync.Mutex
	monitors       []*client    // clients that ran MONITOR
	monitoring     atomic.Int32 // len(monitors), read by every command
	watching       sync.Once
}

// DebugAccess is who may run DEBUG, and SHUTDOWN without a password
// (enable-debug-command).
type DebugAccess int

// The values of DebugAccess.
const (
	DebugNone  DebugAccess = iota // no client
	DebugAll                      // every client
	DebugLocal                    // clients on loopback
)

// ErrServerClosed is returned by Serve after Close or Shutdown.
var ErrServerClosed = conns.ErrServerClosed

// OutputLimits bounds what a client that does not read its replies may
// hold in the server: see conns.OutputLimits.
type OutputLimits = conns.OutputLimits

// ConnOptions configures the connections (conns.Options, where each
// field is documented): the logger, maxclients, the idle timeout, the
// framing limits, what one client and all of them together may have the
// server hold, and the descriptors the process's other listeners take.
// Zero fields mean the documented defaults.
type ConnOptions = conns.Options

// New returns a Server for opts.
func New(opts Options) *Server {
	if opts.MGetIDMax == 0 {
		opts.MGetIDMax = 10000
	}
	if opts.SeqMaxIncrBy == 0 {
		opts.SeqMaxIncrBy = 1000000
	}
	s := &Server{
		opts:      opts,
		publicID:  cmp.Or(opts.PublicID, defaultPublicID),
		log:       opts.Logger,
		started:   time.Now(),
		replID:    replicationID(),
		callStats: make([]calls, numCommands),
	}
	s.forward, s.ownPool = opts.Forward, opts.Forward == nil && opts.Owner != nil
	if s.ownPool {
		s.forward = forward.New(forward.Options{Password: opts.RequirePass, TLS: opts.PeerTLS})
	}
	s.conns = conns.New(opts.ConnOptions, handler{s})
	s.opts.MaxClients = s.conns.MaxClients()
	if g := opts.Generator; g != nil {
		s.opts.Layout, s.opts.Epoch = g.Layout(), g.Epoch()
		s.offset.Store(g.ClockOffset().Milliseconds())
		s.src.Store(&source{gen: g})
	} else {
		s.offset.Store(opts.ClockOffset.Milliseconds())
		s.src.Store(&source{why: replyerr.New(replyerr.ERR, "no generator yet")})
	}
	s.config = slices.Clone(opts.Config)
	for _, kv := range redisConfig() { // the configuration's own value, where it has the key (cluster-enabled)
		if !slices.ContainsFunc(opts.Config, func(o [2]string) bool { return o[0] == kv[0] }) {
			if kv[0] == "cluster-enabled" && opts.Slots != nil {
				kv[1] = "yes"
			}
			s.config = append(s.config, kv)
		}
	}
	for _, kv := range s.config {
		s.configKeyLen = max(s.configKeyLen, len(kv[0]))
	}
	return s
}

// Serve answers clients on ln until Close or Shutdown. It always returns a
// non-nil error: ErrServerClosed after Close or Shutdown, once they have
// finished with the clients. Serve and ServeTLS may each be called for
// any number of listeners; all share the event loops.
func (s *Server) Serve(ln net.Listener) error {
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		s.port.CompareAndSwap(0, int64(a.Port))
	}
	s.startWatch()
	return s.conns.Serve(ln)
}

// ServeTLS is Serve for a listener whose clients speak TLS, with cfg.
func (s *Server) ServeTLS(ln net.Listener, cfg *tls.Config) error {
	s.startWatch()
	return s.conns.ServeTLS(ln, cfg)
}

// ServePeers serves the port other servers of a cluster reach this one
// on (cluster-port: handovers' pulls, the asks of slot records,
// forwarded commands), ServeTLS's way if cfg is set: its connections
// count against ConnOptions.MaxPeers rather than maxclients, so that
// clients filling the clients' ports keep no server out, and each must
// authenticate (requirepass) within two seconds.
func (s *Server) ServePeers(ln net.Listener, cfg *tls.Config) error {
	s.startWatch()
	return s.conns.ServePeers(ln, cfg)
}

// startWatch starts watch, once the server serves.
func (s *Server) startWatch() {
	s.watching.Do(func() {
		go func() {
			select {
			case <-s.conns.Serving():
				s.watch()
			case <-s.conns.Done():
			}
		}()
	})
}

// errDenied is Redis 7's protected-mode reply, with the remedies idserver
// has (it has no CONFIG SET).
var errDenied = replyerr.New(replyerr.DENIED, "idserver is running in protected mode because protected mode is enabled and no password is set for the default user. "+
	"In this mode connections are only accepted from the loopback interface. "+
	"If you want to connect from external computers to idserver you may adopt one of the following solutions: "+
	"1) Just disable protected mode by editing the idserver configuration file, and setting the protected mode option to 'no', and then restarting the server, "+
	"however MAKE SURE idserver is not publicly accessible from internet if you do so. "+
	"2) If you started the server manually just for testing, restart it with the '--protected-mode no' option. "+
	"3) Set up an authentication password for the default user (requirepass). "+
	"NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.")

// Refuse is protected mode, as in Redis: while no password is set, a
// client not on loopback gets -DENIED.
func (h handler) Refuse(addr net.Addr) *replyerr.Error {
	s := h.Server
	if !s.opts.ProtectedMode || s.opts.RequirePass != "" {
		return nil
	}
	if a, ok := addr.(*net.TCPAddr); !ok || a.IP.IsLoopback() {
		return nil
	}
	if ok, skipped := s.deniedLog.Allow(); ok {
		s.log.Warn().Str("client", addr.String()).Uint64("also_denied", skipped).
			Msg("protected mode: refused a client that is not on loopback (set requirepass, or protected-mode no)")
	}
	return errDenied
}

// Close stops accepting and drops every open connection at once, also
// those a Shutdown in progress is still waiting for.
func (s *Server) Close() error {
	defer s.closePool()
	return s.conns.Close()
}

// closePool closes the forwarding pool, if it is the server's own.
func (s *Server) closePool() {
	if s.ownPool {
		s.forward.Close()
	}
}

// Shutdown stops gracefully: it stops accepting, lets each client finish
// the commands it has sent, writes their replies and closes it, and
// returns when all are closed, or when ctx is done (then the rest are
// dropped).
func (s *Server) Shutdown(ctx context.Context) error {
	defer s.closePool() // after: the clients' forwarded commands get their replies
	return s.conns.Shutdown(ctx)
}

// Serving is closed once the server serves: its event loops run, and
// Ready answers for the generator rather than "not serving yet".
func (s *Server) Serving() <-chan struct{} { return s.conns.Serving() }

// ErrShuttingDown is Ready's answer once Close or Shutdown has begun.
var ErrShuttingDown = errors.New("shutting down")

// Ready reports whether a GETID would be answered now: nil, or why not
// (not serving yet, shutting down, or the generator's reason).
func (s *Server) Ready() error {
	select {
	case <-s.conns.Done():
		return ErrShuttingDown
	default:
	}
	select {
	case <-s.conns.Serving():
	default:
		return errors.New("not serving yet")
	}
	g, err := s.generator()
	if err == nil {
		err = g.Ready()
	}
	if err != nil {
		return fmt.Errorf("GETID would get -%v", reply(err))
	}
	return nil
}

// Stats are a Server's connection and command counters since New.
type Stats struct {
	Clients     int64  // connected now
	Peers       int64  // connections of cluster-port now (ServePeers)
	Blocked     int64  // clients whose command waits for its IDs off the loop
	Held        int64  // clients whose commands wait for their replies to drain
	Accepted    uint64 // connections accepted
	Rejected    uint64 // connections refused at maxclients or out of file descriptors
	Commands    uint64 // commands processed
	Errors      uint64 // error replies
	LimitClosed uint64 // clients closed at their output limits
	QueryClosed uint64 // clients closed at client-query-buffer-limit
	Evicted     uint64 // clients and TLS handshakes closed at maxmemory-clients
	ClientMem   int64  // bytes all clients and TLS handshakes under way hold now
	TLSFailed   uint64 // TLS handshakes that failed
	Handshakes  int64  // TLS handshakes under way
	Scripts     uint64 // scripting commands refused (scriptCommands)
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	st := s.conns.Stats()
	return Stats{
		Clients:     st.Clients,
		Peers:       st.Peers,
		Blocked:     st.Blocked,
		Held:        st.Held,
		Accepted:    st.Accepted,
		Rejected:    st.Rejected,
		Commands:    s.commands.Load(),
		Errors:      s.errorReplies(),
		LimitClosed: st.LimitClosed,
		QueryClosed: st.QueryClosed,
		Evicted:     st.Evicted,
		ClientMem:   st.ClientMem,
		TLSFailed:   st.TLSFailed,
		Handshakes:  st.Handshakes,
		Scripts:     s.scriptRefusals.Load(),
	}
}

// errorReplies is how many error replies were sent.
func (s *Server) errorReplies() uint64 {
	var n uint64
	for _, c := range s.ErrorReplies() {
		n += c.N
	}
	return n
}

// watch logs what the generator did that an operator should know about, at most one line per
// kind per second: never a line per ID.
func (s *Server) watch() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	prev := s.genStats()
	for {
		select {
		case <-s.conns.Done():
			return
		case <-t.C:
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
