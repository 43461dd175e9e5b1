package cluster

import (
	"sync/atomic"

	"github.com/idserver/idserver/slots"
)

// SlotSource is the Redis Cluster map a server answers from
// (slots.Source), kept by its slot keeper: the assignment in etcd as last
// read, in which this server owns the slots it serves. Past its lease's
// deadline (Serving.Has) it owns none: Map checks that at each call, so a
// server paused past its lease serves no slot when it wakes, whatever it
// read before.
type SlotSource struct {
	self slots.Node
	cur  atomic.Pointer[sourceMaps]
	none *slots.Map // while it serves nothing: no slot assigned
}

// sourceMaps are the maps of one Serving: as read, and without this
// server's slots, for once its lease's deadline has passed.
type sourceMaps struct {
	s       *Serving
	m, lost *slots.Map
}

// NewSlotSource returns the source of the node self, serving nothing
// until Serve gives it what it serves.
func NewSlotSource(self slots.Node) *SlotSource {
	none, _ := slots.NewMap(0, []slots.Node{self}, nil)
	return &SlotSource{self: self, none: none}
}

// Self is this node's ID.
func (src *SlotSource) Self() string { return src.self.ID }

// Map is the current map.
func (src *SlotSource) Map() *slots.Map {
	c := src.cur.Load()
	switch {
	case c == nil:
		return src.none
	case !c.s.alive():
		return c.lost
	}
	return c.m
}

// Serve makes s what the source answers from (nil: nothing served).
func (src *SlotSource) Serve(s *Serving) {
	if s == nil {
		src.cur.Store(nil)
		return
	}
	m := s.slotMap(src.self, func(id int64) bool { return true })
	lost := s.slotMap(src.self, func(id int64) bool { return s.v.nodes[id].ID != src.self.ID })
	if m == nil || lost == nil {
		src.cur.Store(nil) // an assignment no map can show: serve nothing
		return
	}
	src.cur.Store(&sourceMaps{s: s, m: m, lost: lost})
}

// alive reports whether s's lease has time left by its holder's deadline,
// but for the margin; a standby's has none.
func (s *Serving) alive() bool { return s.l != nil && s.l.left() > s.l.ttl/leaseMargin }

// slotMap is s's assignment as a Redis Cluster map, with the ranges of the
// owners keep accepts: every live node, and self (a standby announces
// none), and the ranges of live owners; a range moving is shown moving,
// one whose owner is gone not at all. Nil if a node's ID is not one.
func (s *Serving) slotMap(self slots.Node, keep func(id int64) bool) *slots.Map {
	var nodes []slots.Node
	listed := false
	for _, n := range s.v.nodes {
		nodes = append(nodes, slots.Node{ID: n.ID, IP: n.IP, Port: n.Port, TLSPort: n.TLSPort,
			Hostname: n.Hostname, ConfigEpoch: uint64(s.v.a.Version)})
		listed = listed || n.ID == self.ID
	}
	if !listed {
		nodes = append(nodes, self)
	}
	var ranges []slots.Range
	for _, r := range s.v.a.Ranges {
		n, live := s.v.nodes[r.Owner]
		if !live || n.lease != r.Lease || !keep(r.Owner) {
			continue
		}
		state := slots.Owned
		if r.From >= 0 {
			state = slots.Moving
		}
		ranges = append(ranges, slots.Range{First: r.First, Last: r.Last, Owner: n.ID, State: state})
	}
	m, err := slots.NewMap(uint64(s.v.a.Version), nodes, ranges)
	if err != nil {
		return nil
	}
	return m
}
