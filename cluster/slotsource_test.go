package cluster

import (
	"strings"
	"testing"

	"github.com/idserver/idserver/slots"
)

// TestStandbyListsItself: a standby's map (it announces no node key)
// shows the others' slots and lists the standby itself, as CLUSTER NODES
// must ("myself"); it owns no slot.
func TestStandbyListsItself(t *testing.T) {
	self := slots.Node{ID: strings.Repeat("a", 40), IP: "127.0.0.1", Port: 7003}
	other := Node{ID: strings.Repeat("b", 40), IP: "127.0.0.1", Port: 7001}
	src := NewSlotSource(self)
	v := slotView{a: assignment{Version: 3, Ranges: []slotRange{{First: 0, Last: slotCount - 1, Owner: 1, Lease: 9, From: -1}}},
		nodes: map[int64]liveNode{1: {Node: other, lease: 9}}, alive: map[int64]bool{9: true}}
	src.Serve(&Serving{v: v, served: make([]bool, slotCount)})
	m := src.Map()
	if m.Node(self.ID) == nil || m.Owner(0) == nil || m.Owner(0).ID != other.ID || m.Owns(self.ID) != 0 {
		t.Fatalf("a standby's map: nodes %+v, slot 0's owner %+v", m.Nodes, m.Owner(0))
	}
}
