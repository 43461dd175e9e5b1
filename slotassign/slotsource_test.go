package slotassign

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idserver/idserver/slots"
)

// TestStandbyListsItself: a standby's map (it announces no node key)
// shows the others' slots and lists the standby itself, as CLUSTER NODES
// must ("myself"); it owns no slot.
func TestStandbyListsItself(t *testing.T) {
	self := slots.Node{ID: strings.Repeat("a", 40), IP: "127.0.0.1", Port: 7003}
	other := Node{ID: strings.Repeat("b", 40), IP: "127.0.0.1", Port: 7001}
	src := NewSource(self, Kept{})
	v := slotView{a: assignment{Version: 3, Ranges: []slotRange{{First: 0, Last: slotCount - 1, Owner: 1, Lease: 9, From: -1}}},
		nodes: map[int64]liveNode{1: {Node: other, lease: 9}}, alive: map[int64]bool{9: true}}
	src.Serve(&Serving{v: v, served: make([]bool, slotCount)})
	m := src.Map()
	if m.Node(self.ID) == nil || m.Owner(0) == nil || m.Owner(0).ID != other.ID || m.Owns(self.ID) != 0 {
		t.Fatalf("a standby's map: nodes %+v, slot 0's owner %+v", m.Nodes, m.Owner(0))
	}
}

// TestMapCoversEverySlot: whatever a server can serve, its map lists
// every range of the assignment with its owner, as Redis lists a failing
// master's slots: a range whose owner is gone (with the address it last
// announced), this server's own once its lease's deadline has passed,
// and every range once it serves nothing (lease lost) are Down, routed
// to -CLUSTERDOWN by every node, but listed. redis-py's and node-redis's
// cluster clients fail every command for good after reading a map with
// a hole in it.
func TestMapCoversEverySlot(t *testing.T) {
	self := slots.Node{ID: strings.Repeat("a", 40), IP: "127.0.0.1", Port: 7001}
	other := Node{ID: strings.Repeat("b", 40), IP: "127.0.0.1", Port: 7002}
	gone := Node{ID: strings.Repeat("c", 40), IP: "127.0.0.1", Port: 7003}
	a := assignment{Version: 4, Ranges: []slotRange{
		{First: 0, Last: 99, Owner: 0, Lease: 10, From: -1},
		{First: 100, Last: 199, Owner: 1, Lease: 11, From: -1},
		{First: 200, Last: slotCount - 1, Owner: 2, Lease: 12, From: -1},
	}}
	mine := Node{ID: self.ID, IP: self.IP, Port: self.Port}
	all := map[int64]liveNode{0: {Node: mine, lease: 10}, 1: {Node: other, lease: 11}, 2: {Node: gone, lease: 12}}
	src := NewSource(self, Kept{})
	l := &fakeLease{}
	l.deadline.Store(time.Now().Add(time.Minute).UnixNano())
	serve := func(nodes map[int64]liveNode, alive ...int64) {
		v := slotView{a: a, nodes: nodes, alive: map[int64]bool{}}
		for _, l := range alive {
			v.alive[l] = true
		}
		src.Serve(&Serving{v: v, served: v.served(0, 10), l: l})
	}
	check := func(what string, want map[int]slots.Verdict) {
		t.Helper()
		m := src.Map()
		if m.Assigned() != slotCount {
			t.Fatalf("%s: %d slots listed, want every one; ranges %+v", what, m.Assigned(), m.Ranges)
		}
		for slot, v := range want {
			if got, _ := m.Route(self.ID, slot); got != v {
				t.Errorf("%s: slot %d routed %d, want %d", what, slot, got, v)
			}
		}
		if owner := m.Owner(300); owner == nil || owner.ID != gone.ID || owner.Port != gone.Port {
			t.Errorf("%s: slot 300's owner %+v, want the node gone, as it announced itself", what, owner)
		}
	}
	serve(all)
	check("all live", map[int]slots.Verdict{0: slots.Serve, 100: slots.Moved, 300: slots.Moved})
	serve(map[int64]liveNode{0: all[0], 1: all[1]}, 12) // 2's node key gone, its lease not: leaving
	check("an owner leaving", map[int]slots.Verdict{0: slots.Serve, 100: slots.Moved, 300: slots.TryAgain})
	serve(map[int64]liveNode{0: all[0], 1: all[1]}) // 2's node key gone with its lease
	check("an owner gone", map[int]slots.Verdict{0: slots.Serve, 100: slots.Moved, 300: slots.Unassigned})
	l.deadline.Store(time.Now().UnixNano()) // past the margin
	check("this server past its lease's deadline", map[int]slots.Verdict{0: slots.Unassigned, 100: slots.Moved, 300: slots.Unassigned})
	src.Serve(nil) // the lease lost: the slot keeper ended
	check("serving nothing", map[int]slots.Verdict{0: slots.Unassigned, 100: slots.Moved, 300: slots.Unassigned})
}

// fakeLease is a lease's clock that a test moves.
type fakeLease struct {
	deadline atomic.Int64 // unix ns: the end of its serving horizon
}

func (l *fakeLease) HorizonLeft() time.Duration { return time.Until(time.Unix(0, l.deadline.Load())) }

// TestMapCoversEverySlotAfterRestart: every server restarted, this one
// first: it never saw the other owners alive, yet its map lists every
// range under the owner the assignment recorded (Down), not a map with
// holes (a node-redis cluster client that read one failed every command
// for good: "Cannot read properties of undefined (reading 'master')").
// And the leader's write records every owner its ranges name.
func TestMapCoversEverySlotAfterRestart(t *testing.T) {
	self := slots.Node{ID: strings.Repeat("a", 40), IP: "127.0.0.1", Port: 7001}
	mine := Node{ID: self.ID, IP: self.IP, Port: self.Port}
	other := Node{ID: strings.Repeat("b", 40), IP: "127.0.0.1", Port: 7002}
	gone := Node{ID: strings.Repeat("c", 40), IP: "127.0.0.1", Port: 7003}
	ranges := []slotRange{
		{First: 0, Last: 99, Owner: 0, Lease: 10, From: -1},
		{First: 100, Last: 199, Owner: 1, Lease: 11, From: -1},
		{First: 200, Last: slotCount - 1, Owner: 2, Lease: 12, From: -1},
	}
	a := assignment{Version: 4, Ranges: ranges, Nodes: map[int64]Node{0: mine, 1: other, 2: gone}}
	src := NewSource(self, Kept{})
	v := slotView{a: a, nodes: map[int64]liveNode{0: {Node: mine, lease: 20}}, alive: map[int64]bool{}}
	src.Serve(&Serving{v: v, served: make([]bool, slotCount)})
	m := src.Map()
	if m.Assigned() != slotCount {
		t.Fatalf("%d slots listed after a restart, want every one; ranges %+v", m.Assigned(), m.Ranges)
	}
	if owner := m.Owner(300); owner == nil || owner.ID != gone.ID || owner.Port != gone.Port {
		t.Fatalf("slot 300's owner %+v, want the node the assignment recorded", owner)
	}

	v = slotView{a: assignment{Version: 4, Ranges: ranges, Nodes: map[int64]Node{2: gone}},
		nodes: map[int64]liveNode{0: {Node: mine, lease: 10}, 1: {Node: other, lease: 11}}, alive: map[int64]bool{10: true, 11: true, 12: true}}
	op := v.plan(slotKeys{prefix: "/t/"}, func(int64) bool { return true }, func(string) bool { return true })
	if op == nil {
		t.Fatal("no write: the owner gone's slots should move")
	}
	var next assignment
	if err := json.Unmarshal(op.ValueBytes(), &next); err != nil {
		t.Fatal(err)
	}
	for _, r := range next.Ranges {
		for _, id := range []int64{r.Owner, r.From} {
			if n, ok := next.Nodes[id]; id >= 0 && (!ok || n.ID == "") {
				t.Fatalf("the assignment written names server-id %d in %+v without its node: %+v", id, r, next.Nodes)
			}
		}
	}
}

// TestKeptAssignment: the assignment a node read is kept in dir, and a
// node started again on it shows that map at once, before it reads etcd:
// every slot listed, the owners live then as live (-MOVED to them), its
// own slots down (it serves none yet). An assignment read with no range
// shows the last one with some; one kept under another etcd-prefix is
// not shown.
func TestKeptAssignment(t *testing.T) {
	self := slots.Node{ID: strings.Repeat("a", 40), IP: "127.0.0.1", Port: 7001}
	mine := Node{ID: self.ID, IP: self.IP, Port: self.Port}
	other := Node{ID: strings.Repeat("b", 40), IP: "127.0.0.1", Port: 7002}
	kept := Kept{Path: filepath.Join(t.TempDir(), KeptFile), Prefix: "/t/"}
	src := NewSource(self, kept)
	if m := src.Map(); m.Assigned() != 0 || isClosed(src.Listed()) {
		t.Fatalf("a first start lists %d slots (listed %v), want none", m.Assigned(), isClosed(src.Listed()))
	}
	ranges := []slotRange{{First: 0, Last: 99, Owner: 0, Lease: 10, From: -1}, {First: 100, Last: slotCount - 1, Owner: 1, Lease: 11, From: -1}}
	v := slotView{rev: 7, a: assignment{Version: 4, Ranges: ranges, Nodes: map[int64]Node{0: mine, 1: other}},
		nodes: map[int64]liveNode{0: {Node: mine, lease: 10}, 1: {Node: other, lease: 11}}, alive: map[int64]bool{10: true, 11: true}}
	src.Serve(&Serving{v: v, served: make([]bool, slotCount)})
	if !isClosed(src.Listed()) {
		t.Fatal("Listed not closed once the map lists slots")
	}
	src.Serve(&Serving{v: slotView{a: assignment{Version: 5}}, served: make([]bool, slotCount)})
	if m := src.Map(); m.Assigned() != slotCount {
		t.Fatalf("after an assignment with no range: %d slots listed, want the last map's %d", m.Assigned(), slotCount)
	}

	again := NewSource(self, kept)
	if !isClosed(again.Listed()) {
		t.Fatal("restarted: Listed not closed")
	}
	m := again.Map()
	if m.Assigned() != slotCount || m.Epoch != 4 {
		t.Fatalf("restarted: %d slots listed, epoch %d; want every one, 4", m.Assigned(), m.Epoch)
	}
	for slot, want := range map[int]slots.Verdict{0: slots.Unassigned, 100: slots.Moved} {
		if got, n := m.Route(self.ID, slot); got != want || slot == 100 && n.Port != other.Port {
			t.Errorf("restarted: slot %d routed %d to %+v, want %d", slot, got, n, want)
		}
	}
	if m := NewSource(self, Kept{Path: kept.Path, Prefix: "/other/"}).Map(); m.Assigned() != 0 {
		t.Fatalf("another prefix's start lists %d slots, want none", m.Assigned())
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
