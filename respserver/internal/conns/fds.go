package conns

import (
	"errors"
	"net"
	"os"
	"syscall"

	"github.com/idserver/idserver/internal/replyerr"
)

// reservedFDs are the file descriptors kept for the server's own use
// (listeners, event loops, the state file and its lock, metrics) when
// maxclients is fitted to the open files limit, as Redis keeps 32.
const reservedFDs = 32

// fitMaxClients lowers MaxClients, as Redis does, when the open files
// limit cannot hold that many clients beside reservedFDs: clients past it
// then get Redis's maxclients error, and the server keeps the descriptors
// it needs to renew its reservation.
func (s *Server[S]) fitMaxClients() {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || uint64(s.opts.MaxClients)+reservedFDs <= lim.Cur {
		return
	}
	fitted := max(int(lim.Cur)-reservedFDs, 1)
	s.log.Warn().Int("maxclients", s.opts.MaxClients).Uint64("rlimit_nofile", lim.Cur).Int("fitted", fitted).
		Msgf("maxclients %d needs %d open files, and the limit is %d: serving at most %d clients (raise the limit: ulimit -n, or LimitNOFILE= for systemd)",
			s.opts.MaxClients, s.opts.MaxClients+reservedFDs, lim.Cur, fitted)
	s.opts.MaxClients = fitted
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
// rather than leave it hanging, and to let gnet duplicate the socket of a
// connection it takes over. It belongs to the accepting goroutine.
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

// handOver admits nc. gnet takes a connection over by dup(2): the spare
// makes room for that.
func (r *fdReserve[S]) handOver(nc net.Conn) {
	r.release()
	if err := r.s.admit(nc, nil); outOfFDs(err) {
		r.s.rejected.Add(1) // gnet has closed it already
		r.refused()
	}
	r.retake()
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
