package conns

import (
	"cmp"
	"slices"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// The accountant. Every byte the server holds on a client's behalf is
// counted in one place, Holds; account holds each client to its limits
// with it after every batch of its commands (and every read it only
// queues), and the server to maxmemory-clients: past it, the clients that
// hold the most are closed first, as Redis 7 does.

// Holds is every byte the server holds for c: input not run yet (an
// unfinished command, or what waits behind a command that waits), replies
// not written yet (gnet's buffer, and the batch being made), the
// arguments being run, TLS's buffers, and what the handler's session
// holds (Handler.Holds). It counts contents, not the capacity of the
// buffers that hold them: append may double one, and a scratch buffer of
// up to keepBuf is kept between requests, so a client may cost up to
// twice what it holds plus a few times keepBuf. On c's loop.
func (c *Conn[S]) Holds() int {
	n := len(c.in) + len(c.unscanned) + len(c.Out) + len(c.split.inline) + c.s.h.Holds(c)
	if c.link != nil {
		n += c.link.OutboundBuffered()
	}
	if c.tls != nil {
		n += len(c.tls.plain) + len(c.tls.shim.out)
	}
	return n
}

// account closes c if its input passed client-query-buffer-limit, if all
// it holds passed the hard output limit, or if it stayed held at the soft
// limit for soft-seconds; otherwise it charges what c holds to the
// server's total. On c's loop.
func (s *Server[S]) account(c *Conn[S]) gnet.Action {
	lim, held := s.opts.Output, c.Holds()
	switch {
	case len(c.in)+len(c.unscanned) > s.opts.QueryBufferLimit:
		return s.closeAtQueryLimit(c)
	case lim.Hard > 0 && held > lim.Hard:
		return s.closeAtLimit(c, held, "what it holds (unsent replies, waiting requests, queued commands) passed the hard limit")
	case c.held && lim.SoftFor > 0 && time.Since(c.heldAt) > lim.SoftFor:
		return s.closeAtLimit(c, held, "it did not read its replies below the soft limit for soft-seconds")
	}
	s.charge(c, held)
	s.watchUnsent(c)
	return gnet.None
}

// charge records that c holds n bytes, and evicts clients if the total
// passed maxmemory-clients.
func (s *Server[S]) charge(c *Conn[S], n int) {
	if c.evicted.Load() {
		return // no longer counted: its close is on its way
	}
	total := s.clientMem.Add(int64(n) - c.mem.Swap(int64(n)))
	if limit := s.opts.MaxMemoryClients; limit > 0 && total > int64(limit) {
		s.evict()
	}
}

// uncharge takes a closed client off the total.
func (s *Server[S]) uncharge(c *Conn[S]) { s.clientMem.Add(-c.mem.Swap(0)) }

// evict closes the clients that hold the most until the total is back
// under maxmemory-clients, as Redis's client eviction does. One eviction
// runs at a time; a client closed is off the total at once.
func (s *Server[S]) evict() {
	if !s.evictMu.TryLock() {
		return
	}
	defer s.evictMu.Unlock()
	type charged struct {
		c *Conn[S]
		n int64
	}
	s.mu.Lock()
	all := make([]charged, 0, len(s.conns))
	for c := range s.conns {
		if n := c.mem.Load(); n > 0 && !c.evicted.Load() {
			all = append(all, charged{c, n})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(all, func(a, b charged) int { return cmp.Compare(b.n, a.n) })
	limit := int64(s.opts.MaxMemoryClients)
	for _, e := range all {
		if s.clientMem.Load() <= limit {
			return
		}
		e.c.evicted.Store(true)
		s.uncharge(e.c)
		s.evicted.Add(1)
		if ok, skipped := s.evictLog.Allow(); ok {
			s.log.Warn().Str("client", e.c.addr).Int64("bytes", e.n).Int("maxmemory_clients", s.opts.MaxMemoryClients).
				Uint64("also_closed", skipped).Msg("closing a client: the clients together hold more than maxmemory-clients, and this one the most")
		}
		e.c.Close()
	}
}
