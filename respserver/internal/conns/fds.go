package conns

import (
	"errors"
	"net"
	"os"
	"runtime"
	"syscall"

	"github.com/idserver/idserver/internal/replyerr"
)

// The descriptor budget. Every descriptor the process may hold at once
// has its share of the open files limit, so that no listener can take
// those another needs, nor those the process needs for itself: above
// all a reservation save's temporary file and its directory, which fail
// with "too many open files" otherwise, and then GETID gets -BUSY. This
// is the one statement of the formula; the docs quote it.
//
//	own        = 32 + 2 × event loops: stdio, the listeners, the Go poller,
//	             each loop's epoll and eventfd, dir's and the state file's locks, a
//	             save's temporary file and directory, the sequences' file,
//	             etcd's connections, logs, /proc reads (at rest it uses 16)
//	spares     = 2 + 8: one per RESP listener, to refuse with when out of
//	             descriptors all the same, and one for the duplicate each
//	             hand-over of a connection to its loop makes, 8 at a time
//	budget     = RLIMIT_NOFILE − own − spares − metrics-maxclients − 2 × peers
//	             (peers: MaxPeers, cluster mode's: the peers' port's connections,
//	             and as many of this server's to the others' peers' ports)
//	pending    = min(256, max(budget / 16, 4)), twice: for connections
//	             refused and read to their end (a second at most), and for
//	             TLS handshakes under way (10 s at most)
//	maxclients = min(maxclients, budget − 2 × pending), at least 1
//
// A connection's hand-over takes one of the handOvers shares for the
// duplicate it makes until its loop has it. Past its share, a refused
// connection is closed at once, a TLS connection closed unanswered, and
// the HTTP listener accepts no more until one closes.
const (
	ownFDs     = 32
	loopFDs    = 2
	spareFDs   = 2 + handOvers
	maxPending = 256
	minPending = 4
)

// budget is how the open files limit is shared out; see above.
type budget struct {
	nofile     uint64 // RLIMIT_NOFILE; 0 if unknown
	own        int
	other      int // Options.OtherFDs + 2 × MaxPeers: metrics-maxclients, the peers' connections
	pending    int // each of the two shares
	maxClients int // fitted
}

// fitBudget shares lim (RLIMIT_NOFILE) out among the process, the other
// listeners (other descriptors), the pending connections and maxClients,
// lowering maxClients to fit, as Redis does.
func fitBudget(lim uint64, loops, other, maxClients int) budget {
	b := budget{nofile: lim, own: ownFDs + loopFDs*loops, other: other, pending: maxPending, maxClients: maxClients}
	free := int64(min(lim, 1<<40)) - int64(b.own+spareFDs+other)
	b.pending = int(min(maxPending, max(free/16, minPending)))
	b.maxClients = int(max(min(int64(maxClients), free-2*int64(b.pending)), 1))
	return b
}

// fitMaxClients shares the open files limit out (fitBudget), logs the
// shares, and warns if maxclients had to be lowered: clients past it then
// get Redis's maxclients error, and the server keeps the descriptors it
// needs to renew its reservation.
func (s *Server[S]) fitMaxClients() {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		s.log.Warn().Err(err).Msg("cannot read the open files limit: maxclients is not fitted to it")
		return
	}
	b := fitBudget(lim.Cur, max(runtime.GOMAXPROCS(0), 1), s.opts.OtherFDs+2*s.opts.MaxPeers, s.opts.MaxClients)
	s.pending = int64(b.pending)
	s.log.Info().Uint64("rlimit_nofile", b.nofile).Int("own", b.own).Int("spares", spareFDs).Int("http", s.opts.OtherFDs).Int("peers", 2*s.opts.MaxPeers).
		Int("refused", b.pending).Int("tls_handshakes", b.pending).Int("maxclients", b.maxClients).
		Msg("file descriptors: the open files limit is shared out so that no listener can take those another, or a reservation save, needs")
	if b.maxClients < s.opts.MaxClients {
		need := b.own + spareFDs + b.other + 2*b.pending + s.opts.MaxClients
		s.log.Warn().Int("maxclients", s.opts.MaxClients).Uint64("rlimit_nofile", lim.Cur).Int("fitted", b.maxClients).
			Msgf("maxclients %d needs %d open files, and the limit is %d: serving at most %d clients (raise the limit: ulimit -n, or LimitNOFILE= for systemd)",
				s.opts.MaxClients, need, lim.Cur, b.maxClients)
		s.opts.MaxClients = b.maxClients
	}
}

// errNoFDs is the reply to a connection refused for want of file
// descriptors: Redis's words for a full server, and the reason.
var errNoFDs = replyerr.New(replyerr.ERR, "max number of clients reached (the server is out of file descriptors)")

// outOfFDs reports whether err means the process or the system has no
// file descriptor left.
func outOfFDs(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// fdReserve holds one file descriptor back for the moments the process
// has no other: to let a pending connection in and refuse it with a reply,
// rather than leave it hanging. It belongs to the accepting goroutine
// (its hand-overs only log through it).
type fdReserve[S any] struct {
	s     *Server[S]
	spare *os.File // nil while released, or while none could be had
	log   Limiter
}

func newFDReserve[S any](s *Server[S]) *fdReserve[S] {
	r := &fdReserve[S]{s: s}
	r.retake()
	return r
}

// retake opens the spare if it is not held.
func (r *fdReserve[S]) retake() {
	if r.spare == nil {
		r.spare, _ = os.Open(os.DevNull)
	}
}

// release frees the spare and reports whether there was one.
func (r *fdReserve[S]) release() bool {
	if r.spare == nil {
		return false
	}
	r.spare.Close()
	r.spare = nil
	return true
}

// refusePending, when accept has just failed for want of descriptors,
// frees the spare to accept the pending connection and refuse it. It
// reports whether it did; if not, accept should back off.
func (r *fdReserve[S]) refusePending(ln net.Listener) bool {
	if !r.release() {
		return false
	}
	nc, err := ln.Accept()
	if err == nil {
		r.s.refuse(nc, nil, errNoFDs)
		r.refused()
	}
	r.retake() // after the refused socket is closed
	return err == nil
}

// handOver admits nc on a goroutine of its own, up to handOvers at once
// (accepting waits past them): a hand-over waits for its loop's round,
// and a loop busy with other clients takes one at each round, so that one
// at a time, the 20th of 20 clients connecting at once waited 20 rounds
// (see handOvers).
func (r *fdReserve[S]) handOver(nc net.Conn, id int64, g *gate) {
	r.s.handing <- struct{}{}
	go func() {
		defer func() { <-r.s.handing }()
		if err := r.s.admit(nc, nil, id, g); outOfFDs(err) {
			r.s.rejected.Add(1) // gnet has closed it already
			r.refused()
		}
	}()
}

// refused warns, at most once a second, that connections are refused.
func (r *fdReserve[S]) refused() {
	if ok, skipped := r.log.Allow(); ok {
		var lim syscall.Rlimit
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
		r.s.log.Warn().Uint64("refused", skipped+1).Uint64("rlimit_nofile", lim.Cur).
			Msg("out of file descriptors: refusing new connections with -ERR (raise the open files limit, or lower maxclients)")
	}
}
