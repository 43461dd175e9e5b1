package slotassign

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/idserver/idserver/etcdsession"
	"github.com/idserver/idserver/slots"
)

// Source is the Redis Cluster map a server answers from
// (slots.Source), kept by its slot keeper: the assignment in etcd as last
// read, in which this server owns the slots it serves. Past its lease's
// deadline (Serving.Has) it serves none: Map checks that at each call, so
// a server paused past its lease serves no slot when it wakes, whatever
// it read before. The map lists every range of the assignment with its
// owner, whether or not the owner can serve it (slots.Down), as Redis
// lists a failing master's: clients keep a map that covers every slot.
// Before the server has read etcd, the map is the assignment it read
// last, kept in dir (Kept), serving none of it; and an assignment read
// with no range (etcd's before its first write, or lost) shows the last
// one that had some: once a map lists slots, every later one does.
type Source struct {
	self   slots.Node
	cur    atomic.Pointer[sourceMaps]
	none   *slots.Map    // before any assignment was read
	listed chan struct{} // closed once the map lists slots

	mu      sync.Mutex
	last    slotView             // the last assignment served from
	known   map[int64]slots.Node // by server-id, as last announced: owners gone stay listed
	kept    Kept
	written []byte // what the kept file holds
}

// sourceMaps are the maps of one Serving: as read, and with this
// server's slots down, for once its lease's deadline has passed.
type sourceMaps struct {
	s       *Serving
	m, lost *slots.Map
}

// NewSource returns the source of the node self, serving nothing until
// Serve gives it what it serves, showing meanwhile the assignment kept,
// if any.
func NewSource(self slots.Node, kept Kept) *Source {
	none, _ := slots.NewMap(0, []slots.Node{self}, nil)
	src := &Source{self: self, none: none, listed: make(chan struct{}), known: map[int64]slots.Node{}, kept: kept}
	if v, data, ok := kept.load(); ok {
		src.written = data
		src.Serve(&Serving{v: v, served: make([]bool, slotCount)})
	}
	return src
}

// Self is this node's ID.
func (src *Source) Self() string { return src.self.ID }

// Listed is closed once Map lists slots.
func (src *Source) Listed() <-chan struct{} { return src.listed }

// Map is the current map.
func (src *Source) Map() *slots.Map {
	c := src.cur.Load()
	switch {
	case c == nil:
		return src.none
	case !c.s.alive():
		return c.lost
	}
	return c.m
}

// Serve makes s what the source answers from; nil: nothing served, the
// last assignment read still shown, this server's slots down. The
// assignment is kept in dir when it changed.
func (src *Source) Serve(s *Serving) {
	src.mu.Lock()
	defer src.mu.Unlock()
	if s == nil || len(s.v.a.Ranges) == 0 && len(src.last.a.Ranges) > 0 {
		s = &Serving{v: src.last, served: make([]bool, slotCount)}
	}
	src.last = s.v
	for id, n := range s.v.a.Nodes { // owners as recorded; the live ones' own word below
		if _, ok := src.known[id]; !ok {
			src.known[id] = nodeOf(n, s.v.a.Version)
		}
	}
	for id, n := range s.v.nodes {
		src.known[id] = nodeOf(n.Node, s.v.a.Version)
	}
	m := s.slotMap(src.self, src.known, s.served)
	lost := s.slotMap(src.self, src.known, nil)
	if m == nil || lost == nil {
		src.cur.Store(nil) // an assignment no map can show: serve nothing
		return
	}
	src.cur.Store(&sourceMaps{s: s, m: m, lost: lost})
	if m.Assigned() > 0 {
		src.written = src.kept.save(src.kept.encode(s.v), src.written)
		select {
		case <-src.listed:
		default:
			close(src.listed)
		}
	}
}

// alive reports whether s's lease's serving horizon has time left, but
// for the margin; a standby's has none.
func (s *Serving) alive() bool {
	return s.l != nil && s.l.HorizonLeft() > etcdsession.Horizon/leaseMargin
}

// slotMap is s's assignment as a Redis Cluster map: every node live, or
// gone but owning a range (as known: as this server last saw it, else as
// the assignment recorded it; one neither names is left out), and self (a standby announces none); each range Owned by
// its owner if served says this server serves it or another live node
// holds it, Moving if it moves or its owner, announcing no node, holds
// its lease still (leaving), Down if its owner cannot serve it. Nil if a
// node's ID is not one.
func (s *Serving) slotMap(self slots.Node, known map[int64]slots.Node, served []bool) *slots.Map {
	byID := map[string]slots.Node{self.ID: self}
	for _, n := range s.v.nodes {
		byID[n.ID] = nodeOf(n.Node, s.v.a.Version)
	}
	var ranges []slots.Range
	for _, r := range s.v.a.Ranges {
		n, live := s.v.nodes[r.Owner]
		owner, state := n.ID, slots.Owned
		switch {
		case !live || n.lease != r.Lease:
			k, ok := known[r.Owner]
			if !ok {
				continue
			}
			owner, state = k.ID, slots.Down
			if s.v.alive[r.Lease] {
				// Its owner announces no node but holds the lease: it
				// is handing the range over (a graceful stop), or its
				// node key was deleted by hand and comes back.
				state = slots.Moving
			}
			if _, listed := byID[k.ID]; !listed {
				byID[k.ID] = k
			}
		case r.From >= 0:
			state = slots.Moving
		case n.ID == self.ID && (served == nil || !served[r.First]):
			state = slots.Down
		}
		ranges = append(ranges, slots.Range{First: r.First, Last: r.Last, Owner: owner, State: state})
	}
	m, err := slots.NewMap(uint64(s.v.a.Version), slices.Collect(maps.Values(byID)), ranges)
	if err != nil {
		return nil
	}
	return m
}

// nodeOf is n as clients are told of it, in an assignment of version.
func nodeOf(n Node, version int64) slots.Node {
	return slots.Node{ID: n.ID, IP: n.IP, Port: n.Port, TLSPort: n.TLSPort, BusPort: n.BusPort, Hostname: n.Hostname, ConfigEpoch: uint64(version)}
}

// Live is the server-ids of the nodes alive (holding a lease) in the
// assignment last served from, this server's among them.
func (src *Source) Live() []int64 {
	src.mu.Lock()
	defer src.mu.Unlock()
	return slices.Sorted(maps.Keys(src.last.nodes))
}

// Node is the node of server-id id as last announced or recorded, if
// this server knows it.
func (src *Source) Node(id int64) (slots.Node, bool) {
	src.mu.Lock()
	defer src.mu.Unlock()
	n, ok := src.known[id]
	return n, ok
}
