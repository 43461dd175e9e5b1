package conns

import (
	"math"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// OutputLimits bounds what a client that does not read its replies may
// hold in the server: redis.conf's client-output-buffer-limit for normal
// clients, except that the soft limit holds a client back instead of
// closing it. Zero fields mean no limit.
//
// gnet reads every socket it serves whatever the server does with the
// bytes, so a held client's requests are kept, unrun, and count toward
// Hard: a client that goes on sending without reading is closed.
type OutputLimits struct {
	// Soft is how many bytes of unsent replies a client may have before
	// its commands stop running; they run again once it has read them
	// down to half.
	Soft int
	// Hard is how many bytes of unsent replies and waiting requests a
	// client may have; past it, the client is closed.
	Hard int
	// SoftFor is how long a client may stay held at Soft before it is
	// closed.
	SoftFor time.Duration
}

// heldPoll is how often held clients are woken to see whether their
// replies have drained, and unsentEvery how many of those polls a client
// with replies unsent but not held waits between wakes (250 ms): it is
// woken only to be accounted for again, and a client that never reads
// must not cost the loops a wake every heldPoll.
const (
	heldPoll    = 2 * time.Millisecond
	unsentEvery = 125
)

// room is how many more bytes of replies c may have before its commands
// stop running.
func (s *Server[S]) room(c *Conn[S]) int {
	if s.opts.Output.Soft == 0 {
		return math.MaxInt
	}
	return s.opts.Output.Soft - c.link.OutboundBuffered()
}

// hold stops running c's commands until its replies drain.
func (s *Server[S]) hold(c *Conn[S]) {
	c.held, c.heldAt = true, time.Now()
	s.heldMu.Lock()
	s.held[c] = c.link
	s.heldMu.Unlock()
	s.wakeSoon()
}

// caughtUp reports whether held c's unsent replies are down to half the
// soft limit, and if they are, runs its commands again from now on.
func (s *Server[S]) caughtUp(c *Conn[S]) bool {
	if c.link.OutboundBuffered() > s.opts.Output.Soft/2 {
		return false
	}
	c.held = false
	s.unhold(c)
	return true
}

// unhold forgets that c is held; it is safe to call for any client.
func (s *Server[S]) unhold(c *Conn[S]) {
	s.heldMu.Lock()
	delete(s.held, c)
	delete(s.unsent, c)
	s.heldMu.Unlock()
}

// watchUnsent has c woken every heldPoll while gnet holds replies of its
// that it has not written, and stops once there are none, so that what c
// holds is accounted for again as they drain: a client charged for replies
// long since written could be evicted in another's place. On c's loop; it
// takes the lock only when that changes.
func (s *Server[S]) watchUnsent(c *Conn[S]) {
	unsent := c.link != nil && c.link.OutboundBuffered() > 0
	if unsent == c.watched {
		return
	}
	c.watched = unsent
	s.heldMu.Lock()
	if unsent {
		s.unsent[c] = c.link
	} else {
		delete(s.unsent, c)
	}
	s.heldMu.Unlock()
	if unsent {
		s.wakeSoon()
	}
}

// wakeSoon has wakeHeld run, if it is not running.
func (s *Server[S]) wakeSoon() {
	select {
	case s.heldSignal <- struct{}{}:
	default: // wakeHeld is already awake
	}
}

// wakeHeld wakes every held client every heldPoll, and every client with
// replies unsent (watchUnsent) every unsentEvery polls, while there are
// any, so that each one's loop sees whether its replies have drained:
// gnet tells nobody when it has written a connection's buffer out.
func (s *Server[S]) wakeHeld() {
	var links []link
	polls := 0
	for {
		select {
		case <-s.done:
			return
		case <-s.heldSignal:
		}
		for {
			s.heldMu.Lock()
			links = links[:0]
			for _, l := range s.held {
				links = append(links, l)
			}
			if polls++; polls%unsentEvery == 0 {
				for c, l := range s.unsent {
					if _, held := s.held[c]; !held {
						links = append(links, l)
					}
				}
			}
			waiting := len(s.held) + len(s.unsent)
			s.heldMu.Unlock()
			if waiting == 0 {
				break
			}
			for _, l := range links {
				l.Wake(nil) // OnTraffic, with nothing read
			}
			time.Sleep(heldPoll)
		}
	}
}

// queue keeps data, which c sent while its commands wait (for the clock,
// or for its replies to drain), to run later, and holds c to its limits
// (account).
func (s *Server[S]) queue(c *Conn[S], data []byte) gnet.Action {
	c.in = append(c.in, data...)
	if c.busy {
		s.stopReading(c)
	}
	return s.account(c)
}

// closeAtLimit closes c, which has reached one of its output limits
// holding n bytes, as Redis closes a client at
// client-output-buffer-limit.
func (s *Server[S]) closeAtLimit(c *Conn[S], n int, why string) gnet.Action {
	c.quit = true
	s.limitClosed.Add(1)
	if ok, skipped := s.limitLog.Allow(); ok {
		s.log.Warn().Str("client", c.addr).Int("bytes", n).Int("waiting_request_bytes", len(c.in)).
			Uint64("also_closed", skipped).Msg("closing a client at client-output-buffer-limit: " + why)
	}
	return gnet.Close
}

// closeAtQueryLimit closes c, whose input held in the server passed
// client-query-buffer-limit, as Redis closes a client at its max query
// buffer length: without a reply.
func (s *Server[S]) closeAtQueryLimit(c *Conn[S]) gnet.Action {
	c.quit = true
	s.queryClosed.Add(1)
	if ok, skipped := s.queryLog.Allow(); ok {
		s.log.Warn().Str("client", c.addr).Int("input_bytes", len(c.in)).Int("limit", s.opts.QueryBufferLimit).
			Uint64("also_closed", skipped).Msg("closing a client that reached client-query-buffer-limit")
	}
	return gnet.Close
}

// flushPending writes out, the handler's Pending output for c, or closes c
// if it overflowed, or if it and c's unsent output passed the hard limit,
// or stayed over the soft limit for soft-seconds. On c's loop.
func (s *Server[S]) flushPending(c *Conn[S], out []byte, overflow bool) gnet.Action {
	lim, unsent := s.opts.Output, c.link.OutboundBuffered()
	switch {
	case overflow || lim.Hard > 0 && len(out)+unsent > lim.Hard:
		return s.closeAtLimit(c, len(out)+unsent, "its unsent output (MONITOR's) passed the hard limit")
	case lim.Soft == 0 || unsent <= lim.Soft:
		c.overSoft = time.Time{}
	case c.overSoft.IsZero():
		c.overSoft = time.Now()
	case lim.SoftFor > 0 && time.Since(c.overSoft) > lim.SoftFor:
		return s.closeAtLimit(c, len(out)+unsent, "it did not read its output (MONITOR's) below the soft limit for soft-seconds")
	}
	c.write(out)
	return gnet.None
}

// Limiter lets a log line through at most once a second, and counts the
// ones it held back. It is safe for concurrent use.
type Limiter struct {
	mu      sync.Mutex
	last    time.Time
	skipped uint64
}

// Allow reports whether a line may be logged now and, if so, how many
// were held back since the last one.
func (l *Limiter) Allow() (ok bool, skipped uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.last) < time.Second {
		l.skipped++
		return false, 0
	}
	skipped, l.skipped, l.last = l.skipped, 0, time.Now()
	return true, skipped
}
