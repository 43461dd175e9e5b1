// Package slots maps keys to Redis Cluster's 16384 hash slots and says
// which node serves each slot: the cluster's view that CLUSTER SLOTS,
// SHARDS, NODES and INFO describe and that decides, for every command
// with keys, whether this node serves it or answers -MOVED, -TRYAGAIN or
// -CROSSSLOT.
//
// A key's slot is CRC16 (XMODEM) of the key modulo 16384, or of its hash
// tag: the bytes between the first '{' and the first '}' after it, when
// there are any (Redis Cluster's specification, keyHashSlot in Redis's
// src/cluster.c). Keys that share a tag share a slot, so that one
// command or transaction may name several.
//
// A Map is one version of the assignment: the nodes, and which owns each
// slot, and whether a slot is moving between nodes (its keys get
// -TRYAGAIN until the move is done). A Map never changes once made; a
// new version replaces it whole through a Source (an atomic pointer
// swap), so that a command reads one consistent view with one load.
// Without etcd one node owns every slot (Single); with etcd the
// assignment recorded there is another Source.
package slots

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// N is the number of hash slots.
const N = 16384

// Of returns key's hash slot.
func Of(key []byte) int {
	if i := bytes.IndexByte(key, '{'); i >= 0 {
		if j := bytes.IndexByte(key[i+1:], '}'); j > 0 { // an empty tag ("{}") hashes the whole key
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) & (N - 1))
}

// State is what a range of slots is doing.
type State uint8

// The states of a range.
const (
	// Owned: its owner serves its keys.
	Owned State = iota
	// Moving: its owner is handing it to another node; no node serves
	// its keys until the move is recorded (they get -TRYAGAIN).
	Moving
	// Down: its owner cannot serve it now (its lease ran out, or it is
	// gone) and no other node may until the assignment moves it: its
	// keys get -CLUSTERDOWN. Listed with its owner all the same, as Redis
	// lists a failing master's slots: clients keep a map that covers
	// every slot (redis-py 4.3's and node-redis 6's cluster clients fail
	// every command for good after reading one that does not).
	Down
)

// Node is one server of the cluster, as clients are told to reach it.
type Node struct {
	ID       string // 40 lower-case hex digits, stable across restarts
	IP       string // announced address; "" means the one a client reached (as Redis says when it knows none)
	Port     int    // plain port; 0: none
	TLSPort  int    // TLS port; 0: none
	BusPort  int    // the port other servers reach it on (cluster-port); 0: none announced
	Hostname string // announced hostname; "" for none
	// ConfigEpoch is the version of the assignment that last gave the
	// node slots (Redis's configEpoch).
	ConfigEpoch uint64
}

// Range is the slots First to Last (inclusive), owned by the node Owner
// (its ID) in State.
type Range struct {
	First, Last int
	Owner       string
	State       State
}

// Map is one version of the cluster's assignment. Build it with NewMap;
// do not change it after (it is shared by every connection).
type Map struct {
	// Epoch is the version of the assignment (cluster_current_epoch).
	Epoch uint64
	// Nodes is every node, ordered by ID.
	Nodes []Node
	// Ranges are ordered by slot and do not overlap; slots in none are
	// unassigned.
	Ranges []Range

	owner    [N]int16 // index in Nodes of each slot's owner; -1: none
	moving   [N / 64]uint64
	down     [N / 64]uint64
	assigned int
	downs    int
}

// NewMap checks and indexes an assignment: ranges within 0..N-1 that do
// not overlap, each owned by one of nodes, node IDs unique and 40 hex
// digits. It keeps copies of nodes and ranges, sorted.
func NewMap(epoch uint64, nodes []Node, ranges []Range) (*Map, error) {
	m := &Map{Epoch: epoch, Nodes: slices.Clone(nodes), Ranges: slices.Clone(ranges)}
	slices.SortFunc(m.Nodes, func(a, b Node) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(m.Ranges, func(a, b Range) int { return a.First - b.First })
	if len(m.Nodes) > 1<<15-1 {
		return nil, errors.New("slots: too many nodes")
	}
	for i, n := range m.Nodes {
		if !ValidID(n.ID) {
			return nil, fmt.Errorf("slots: node id %q is not 40 hex digits", n.ID)
		}
		if i > 0 && m.Nodes[i-1].ID == n.ID {
			return nil, fmt.Errorf("slots: node %s listed twice", n.ID)
		}
	}
	for i := range m.owner {
		m.owner[i] = -1
	}
	for i, r := range m.Ranges {
		if r.First < 0 || r.Last >= N || r.First > r.Last {
			return nil, fmt.Errorf("slots: range %d-%d out of 0-%d", r.First, r.Last, N-1)
		}
		if i > 0 && m.Ranges[i-1].Last >= r.First {
			return nil, fmt.Errorf("slots: ranges %d-%d and %d-%d overlap", m.Ranges[i-1].First, m.Ranges[i-1].Last, r.First, r.Last)
		}
		owner := m.node(r.Owner)
		if owner < 0 {
			return nil, fmt.Errorf("slots: range %d-%d owned by unknown node %q", r.First, r.Last, r.Owner)
		}
		for s := r.First; s <= r.Last; s++ {
			m.owner[s] = int16(owner)
			switch r.State {
			case Moving:
				m.moving[s/64] |= 1 << (s % 64)
			case Down:
				m.down[s/64] |= 1 << (s % 64)
			}
		}
		m.assigned += r.Last - r.First + 1
		if r.State == Down {
			m.downs += r.Last - r.First + 1
		}
	}
	return m, nil
}

// Single is the Map of a cluster of one node that owns every slot.
func Single(self Node) *Map {
	m, err := NewMap(0, []Node{self}, []Range{{First: 0, Last: N - 1, Owner: self.ID}})
	if err != nil {
		panic(err) // only an invalid ID: the caller's bug
	}
	return m
}

// node is the index of the node id in m.Nodes, or -1.
func (m *Map) node(id string) int {
	i, ok := slices.BinarySearchFunc(m.Nodes, id, func(n Node, id string) int { return strings.Compare(n.ID, id) })
	if !ok {
		return -1
	}
	return i
}

// Node returns the node id, or nil.
func (m *Map) Node(id string) *Node {
	if i := m.node(id); i >= 0 {
		return &m.Nodes[i]
	}
	return nil
}

// Owner returns the node that owns slot, or nil if none does.
func (m *Map) Owner(slot int) *Node {
	if i := m.owner[slot]; i >= 0 {
		return &m.Nodes[i]
	}
	return nil
}

// Moving reports whether slot is moving between nodes.
func (m *Map) Moving(slot int) bool { return m.moving[slot/64]&(1<<(slot%64)) != 0 }

// Assigned is how many slots have an owner.
func (m *Map) Assigned() int { return m.assigned }

// Downs is how many slots are Down.
func (m *Map) Downs() int { return m.downs }

// Serving is how many nodes own at least one slot (cluster_size).
func (m *Map) Serving() int {
	n := 0
	for _, node := range m.Nodes {
		if m.Owns(node.ID) > 0 {
			n++
		}
	}
	return n
}

// Owns is how many slots node id owns.
func (m *Map) Owns(id string) int {
	n := 0
	for _, r := range m.Ranges {
		if r.Owner == id {
			n += r.Last - r.First + 1
		}
	}
	return n
}

// OwnsAll reports whether node id owns every slot, none moving: then
// it serves every key (a cluster of one).
func (m *Map) OwnsAll(id string) bool {
	return len(m.Ranges) == 1 && m.Ranges[0].Owner == id && m.Ranges[0].State == Owned && m.assigned == N
}

// Verdict is what a node does with a command whose keys are in one slot.
type Verdict uint8

// The verdicts.
const (
	Serve      Verdict = iota // this node owns the slot: run it
	Moved                     // another node owns it: -MOVED to it
	TryAgain                  // the slot is moving: -TRYAGAIN
	Unassigned                // no node owns it, or its owner is down: -CLUSTERDOWN Hash slot not served
)

// Route says what node self does with a command on slot, and for Moved,
// where the slot is.
func (m *Map) Route(self string, slot int) (Verdict, *Node) { return m.RouteNode(m.Node(self), slot) }

// RouteNode is Route for self given as its node in m (Node: nil if m
// does not list it), for a caller that routes many commands by one map:
// nodes are then told apart by address, not by ID.
func (m *Map) RouteNode(self *Node, slot int) (Verdict, *Node) {
	owner := m.Owner(slot)
	switch {
	case owner == nil || m.down[slot/64]&(1<<(slot%64)) != 0:
		return Unassigned, nil
	case m.Moving(slot):
		return TryAgain, owner
	case owner != self:
		return Moved, owner
	}
	return Serve, owner
}

// ValidID reports whether id is a node id: 40 lower-case hex digits, as
// Redis makes them.
func ValidID(id string) bool {
	if len(id) != 40 {
		return false
	}
	for _, c := range []byte(id) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Source is where a server reads the current Map from, and which node
// it is. Map is called by every command with keys: it must be one atomic
// load, never a wait. Listed is closed once Map lists slots (Assigned):
// a node that has read no assignment yet has none to tell, and once it
// has, every later Map lists slots too.
type Source interface {
	Map() *Map
	Self() string // this node's ID
	Listed() <-chan struct{}
}

// Static is a Source whose Map changes only by Set: a cluster of one
// node (Single), or tests. Its maps are the caller's: Listed is closed
// from the start.
type Static struct {
	self string
	m    atomic.Pointer[Map]
}

// NewStatic returns a Source of m for node self.
func NewStatic(self string, m *Map) *Static {
	s := &Static{self: self}
	s.m.Store(m)
	return s
}

// listed is Static's Listed: closed.
var listed = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Listed returns a closed channel.
func (s *Static) Listed() <-chan struct{} { return listed }

// Map returns the current Map.
func (s *Static) Map() *Map { return s.m.Load() }

// Self returns this node's ID.
func (s *Static) Self() string { return s.self }

// Set makes m the current Map.
func (s *Static) Set(m *Map) { s.m.Store(m) }
