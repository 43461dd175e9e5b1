package respserver

import (
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/replyerr"
)

// In cluster mode the generator changes: none while the server stands by
// (every server-id is held by another server, or its lease was lost), a
// new one for each server-id it claims. ID commands read the current one
// through an atomic pointer, which costs them one load.

// source is the generator ID commands use now, or why there is none.
type source struct {
	gen *idgen.Generator
	why error // with gen nil: the reply to ID commands
}

// SetGenerator makes g issue the IDs from now on, with the clock offset
// DEBUG CLOCK-OFFSET set. The counters of the one it replaces are kept in
// INFO's totals.
func (s *Server) SetGenerator(g *idgen.Generator) {
	g.SetClockOffset(time.Duration(s.offset.Load()) * time.Millisecond)
	s.swap(&source{gen: g})
}

// Standby stops issuing IDs, in cluster mode: ID commands get
// -CLUSTERDOWN with why, as Redis Cluster replies while it cannot serve,
// until SetGenerator.
func (s *Server) Standby(why error) {
	s.swap(&source{why: replyerr.New(replyerr.CLUSTERDOWN, why.Error())})
}

func (s *Server) swap(next *source) {
	s.retiredMu.Lock()
	defer s.retiredMu.Unlock()
	if old := s.src.Swap(next); old != nil && old.gen != nil && old.gen != next.gen {
		s.retired = addStats(s.retired, old.gen.Stats())
	}
}

// generator returns the generator that issues IDs now, or the error ID
// commands get instead.
func (s *Server) generator() (*idgen.Generator, error) {
	src := s.src.Load()
	return src.gen, src.why
}

// addStats adds the counters of b to a; the gauges stay a's.
func addStats(a, b idgen.Stats) idgen.Stats {
	a.Issued += b.Issued
	a.Borrowed += b.Borrowed
	a.ClockSteps += b.ClockSteps
	a.ForwardSteps += b.ForwardSteps
	a.Refused += b.Refused
	a.Waits += b.Waits
	a.Unreserved += b.Unreserved
	return a
}

// genStats are the generator counters since the server started, over
// every generator it had, and the gauges of the current one.
func (s *Server) genStats() idgen.Stats {
	s.retiredMu.Lock()
	defer s.retiredMu.Unlock()
	st := s.retired
	if g, _ := s.generator(); g != nil {
		cur := g.Stats()
		st = addStats(cur, st)
	}
	return st
}

// serverID is the held server-id, or -1 while standing by.
func (s *Server) serverID() int64 {
	if g, _ := s.generator(); g != nil {
		return g.ServerID()
	}
	return -1
}
