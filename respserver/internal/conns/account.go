package conns

import (
	"cmp"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// The accountant. Every byte the server holds on a client's behalf is
// counted in one place, Conn.Bytes; account holds each client to its limits
// with it after every batch of its commands (and every read it only
// queues), and the server to maxmemory-clients: past it, the clients that
// hold the most are closed first, as Redis 7 does. A TLS handshake under
// way is charged too (handshakeBytes), and may be closed the same way.

// Bytes is every byte the server holds for c: input not run yet (an
// unfinished command, or what waits behind a command that waits), replies
// not written yet (gnet's buffer, and the batch being made), the
// arguments being run, the commands Ahead split, TLS's buffers, and what the handler's session
// holds (Handler.Bytes). It counts contents, not the capacity of the
// buffers that hold them: append may double one, and a scratch buffer of
// up to keepBuf is kept between requests, so a client may cost up to
// twice what it holds plus a few times keepBuf. On c's loop.
func (c *Conn[S]) Bytes() int {
	n := len(c.in) + len(c.unscanned) + len(c.Out) + len(c.split.inline) + c.ahead.bytes() + c.s.h.Bytes(c)
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
	lim, n := s.opts.Output, c.Bytes()
	switch {
	case len(c.in)+len(c.unscanned) > s.opts.QueryBufferLimit:
		return s.closeAtQueryLimit(c)
	case lim.Hard > 0 && n > lim.Hard:
		return s.closeAtLimit(c, n, "what it holds (unsent replies, waiting requests, queued commands) passed the hard limit")
	case c.held && lim.SoftFor > 0 && time.Since(c.heldAt) > lim.SoftFor:
		return s.closeAtLimit(c, n, "it did not read its replies below the soft limit for soft-seconds")
	}
	s.charge(c, n)
	s.watchUnsent(c)
	return gnet.None
}

// bill is what the accountant has charged for one client, or one TLS
// handshake under way.
type bill struct {
	mem     atomic.Int64 // what it holds, as last charged to Server.clientMem
	evicted atomic.Bool  // closed at maxmemory-clients: no longer charged
	closed  atomic.Bool  // its holder is gone: never charged again
}

// off reports whether b is no longer charged.
func (b *bill) off() bool { return b.evicted.Load() || b.closed.Load() }

// charge records that c holds n bytes, and evicts clients if the total
// passed maxmemory-clients.
func (s *Server[S]) charge(c *Conn[S], n int) { s.chargeBill(&c.bill, n) }

// chargeBill records that b's holder holds n bytes, and evicts if the total
// passed maxmemory-clients.
//
// A closed client's bill is charged no more: one that gnet closed inside
// a write of its replies (OnClose, and so uncharge, ran in that write)
// would otherwise keep the charge of what follows for good, and the
// total, growing with every such client, evict the others without end.
func (s *Server[S]) chargeBill(b *bill, n int) {
	if b.off() {
		return // no longer counted: closed, or its close is on its way
	}
	total := s.clientMem.Add(int64(n) - b.mem.Swap(int64(n)))
	if limit := s.opts.MaxMemoryClients; limit > 0 && total > int64(limit) {
		s.evict()
	}
}

// uncharge takes a closed client off the total, for good.
func (s *Server[S]) uncharge(c *Conn[S]) {
	c.closed.Store(true)
	s.clearBill(&c.bill)
}

// clearBill takes b off the total.
func (s *Server[S]) clearBill(b *bill) { s.clientMem.Add(-b.mem.Swap(0)) }

// evict closes the clients and TLS handshakes that hold the most until
// the total is back under maxmemory-clients, as Redis's client eviction
// does. One eviction runs at a time; one closed is off the total at once.
// The peers' port's connections (a slot's keys pulled at a handover) are
// not closed, as Redis does not evict its replicas' links: clients
// flooding the server with replies they never read would otherwise have
// a handover's pull closed in their place. They are at most MaxPeers,
// each held to the output limits.
func (s *Server[S]) evict() {
	if !s.evictMu.TryLock() {
		return
	}
	defer s.evictMu.Unlock()
	type charged struct {
		b     *bill
		n     int64
		addr  string
		close func()
	}
	s.mu.Lock()
	all := make([]charged, 0, len(s.conns)+len(s.shakes))
	for c := range s.conns {
		if n := c.mem.Load(); n > 0 && !c.evicted.Load() && !c.gate.peer {
			all = append(all, charged{&c.bill, n, c.addr, c.Close})
		}
	}
	for h := range s.shakes {
		if n := h.mem.Load(); n > 0 && !h.evicted.Load() {
			all = append(all, charged{&h.bill, n, h.addr, func() { h.nc.Close() }})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(all, func(a, b charged) int { return cmp.Compare(b.n, a.n) })
	limit := int64(s.opts.MaxMemoryClients)
	for _, e := range all {
		if s.clientMem.Load() <= limit {
			return
		}
		e.b.evicted.Store(true)
		s.clearBill(e.b)
		s.evicted.Add(1)
		if ok, skipped := s.evictLog.Allow(); ok {
			s.log.Warn().Str("client", e.addr).Int64("bytes", e.n).Int("maxmemory_clients", s.opts.MaxMemoryClients).
				Uint64("also_closed", skipped).Msg("closing a client: the clients together hold more than maxmemory-clients, and this one the most")
		}
		e.close()
	}
}

// handshakeBytes is what a TLS handshake under way is charged before
// what it has read: crypto/tls's state, the goroutine running it, and its
// socket. Measured with runtime.MemStats over 1,000 handshakes held open
// by another process: 7.5 KB each before the client sent anything, 25 KB
// once the server has answered a ClientHello (17 KB of heap, 8 KB of
// stack), rounded up. crypto/tls gathers a handshake message of up to
// 64 KiB in a buffer that append grows, beside the record being read:
// each byte read is charged twice (a 64,000-byte ClientHello never
// finished held 120 KB; it is charged 157 KB).
const handshakeBytes = 32 << 10

// shake is a TLS handshake under way, charged to the accountant from its
// start until it ends, so that maxmemory-clients bounds handshakes too
// and can close them.
type shake struct {
	bill
	nc   net.Conn
	addr string
	read int // bytes the handshake read; its goroutine's
}

// startShake charges a new handshake on nc.
func (s *Server[S]) startShake(nc net.Conn) *shake {
	h := &shake{nc: nc, addr: nc.RemoteAddr().String()}
	s.mu.Lock()
	s.shakes[h] = struct{}{}
	s.mu.Unlock()
	s.chargeBill(&h.bill, handshakeBytes)
	return h
}

// shakeRead charges h for n more bytes read. On h's goroutine.
func (s *Server[S]) shakeRead(h *shake, n int) {
	h.read += n
	s.chargeBill(&h.bill, handshakeBytes+2*h.read)
}

// endShake takes h off the total: the client it becomes, if any, is
// charged for what it holds from its first read on.
func (s *Server[S]) endShake(h *shake) {
	s.mu.Lock()
	delete(s.shakes, h)
	s.mu.Unlock()
	s.clearBill(&h.bill)
}
