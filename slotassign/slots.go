// Package slotassign runs Redis Cluster over etcd (cluster-enabled yes):
// the 16384 hash slots are divided among the servers that hold a
// server-id, recorded in etcd:
//
//	<prefix>slots       the assignment: its version and its ranges, each
//	                    owned by a server-id under the lease it held then
//	<prefix>node/<id>   what the holder of id announces (node id, address),
//	                    bound to its lease
//
// One owner per slot at any moment, by construction: a server serves a
// slot only while the assignment gives it to it under the lease it holds
// now, and that lease's serving horizon has time left
// (etcdsession.Lease). The assignment changes only by a transaction on its
// revision, and a slot changes hands in it only (1) by its owner, after
// it stopped serving it (a range moving from it, which no one serves
// meanwhile, is let go by the owner's own write; a range it still has at
// a graceful stop is released, written with no lease), or (2) once the
// lease the range was given under is gone from etcd (a lease never comes
// back), and has been seen gone for the serving horizon
// (etcdsession.Horizon): the owner stopped serving before, whether etcd
// expired the lease or it was revoked by hand. So a dead owner's slots
// move a TTL and the horizon after its last renewal. The node keys only
// announce: deleting one by hand moves no slot at once (its owner lets
// them go, or puts it back). The one timing assumption is the lease's
// (etcdsession.Lease); the margin kept back from its horizon is
// leaseMargin.
//
// A server takes part through a Participant, and answers clients from
// a Source, the assignment as a slots.Map.
package slotassign

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// slotKeys are the keys of the assignment under prefix.
type slotKeys struct{ prefix string }

func (k slotKeys) slots() string        { return k.prefix + "slots" }
func (k slotKeys) nodes() string        { return k.prefix + "node/" }
func (k slotKeys) node(id int64) string { return k.nodes() + strconv.FormatInt(id, 10) }

// A Node is what a server announces of itself to cluster clients.
type Node struct {
	ID       string // CLUSTER MYID: 40 hex digits, kept in dir
	IP       string // announced address; "" means the one a client reached
	Port     int    // plain port; 0: none
	TLSPort  int    `json:",omitempty"` // TLS port; 0: none
	BusPort  int    `json:",omitempty"` // cluster-port; 0: none (a server of a version before it)
	Hostname string `json:",omitempty"` // announced hostname; "" for none
}

// An assignment is the value of the slots key.
type assignment struct {
	Version int64 // Redis's config epoch: one more at each change
	Ranges  []slotRange
	// Nodes is what each owner Ranges names announced, as last seen by a
	// writer of the assignment: a server that never saw an owner alive
	// (all servers restarted, that owner not yet) still lists its ranges
	// under it, so that its map covers every slot. (An assignment written
	// before it has none.)
	Nodes map[int64]Node `json:",omitempty"`
}

// A liveNode is a node whose key exists, and the lease it is bound to.
type liveNode struct {
	Node
	lease int64
}

// A slotView is the assignment and the live nodes, as read at once, and
// which of the leases the assignment names are alive.
type slotView struct {
	rev   int64 // the slots key's mod revision, 0 if it has none
	a     assignment
	nodes map[int64]liveNode // by server-id
	alive map[int64]bool     // by lease: the nodes', and those of ranges etcd still has
}

// readSlots reads the assignment and the live nodes, and asks etcd which
// of the other leases the ranges name it still has.
func readSlots(ctx context.Context, cli *clientv3.Client, k slotKeys) (slotView, error) {
	resp, err := cli.Txn(ctx).Then(clientv3.OpGet(k.slots()), clientv3.OpGet(k.nodes(), clientv3.WithPrefix())).Commit()
	if err != nil {
		return slotView{}, err
	}
	v := slotView{nodes: map[int64]liveNode{}, alive: map[int64]bool{}}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		if err := json.Unmarshal(kvs[0].Value, &v.a); err != nil {
			return slotView{}, fmt.Errorf("the slot assignment in etcd (%s): %w", k.slots(), err)
		}
		v.rev = kvs[0].ModRevision
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		id, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), k.nodes()), 10, 64)
		var n Node
		if err != nil || json.Unmarshal(kv.Value, &n) != nil {
			continue // not a node of ours: ignored
		}
		v.nodes[id] = liveNode{Node: n, lease: kv.Lease}
		v.alive[kv.Lease] = true
	}
	for _, r := range v.a.Ranges {
		for _, l := range []int64{r.Lease, r.FromLease} {
			if _, known := v.alive[l]; known || l == 0 {
				continue
			}
			ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(l))
			if err != nil {
				return slotView{}, err
			}
			v.alive[l] = ttl.TTL > 0
		}
	}
	return v, nil
}

// served is the slots server id serves under lease in v.
func (v slotView) served(id, lease int64) []bool {
	out := make([]bool, slotCount)
	for _, r := range v.a.Ranges {
		if r.Owner == id && r.Lease == lease && r.From < 0 {
			for s := r.First; s <= r.Last; s++ {
				out[s] = true
			}
		}
	}
	return out
}

// owns reports whether a range of v is id's, or moves from it.
func (v slotView) owns(id int64) bool {
	return slices.ContainsFunc(v.a.Ranges, func(r slotRange) bool { return r.Owner == id || r.From == id })
}

// release lets go, in v, every range moving from id under lease: the
// caller has stopped serving them. It returns the write, or nil if none
// moves from it.
func (v slotView) release(k slotKeys, id, lease int64) *clientv3.Op {
	next := v.a
	next.Ranges = slices.Clone(v.a.Ranges)
	changed := false
	for i, r := range next.Ranges {
		if r.From == id && r.FromLease == lease {
			next.Ranges[i].From, next.Ranges[i].FromLease = -1, 0
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return v.put(k, next)
}

// plan is the leader's write, if the assignment should change. Moves
// whose old owner's lease is gone complete; else, once no range moves,
// the slots go as rebalance says: a live owner's move from it (it lets
// them go itself), those whose owner's lease is gone at once, a released
// range back to its node if it is live, else to any. A lease gone counts
// only once ready says it has been gone long enough (the serving
// horizon, see above): until then nothing changes. A released range whose
// node is not live goes to another only once waited says its node had
// time to come back: until then only released ranges whose node is live
// change, back to it.
func (v slotView) plan(k slotKeys, ready func(lease int64) bool, waited func(node string) bool) *clientv3.Op {
	ranges := slices.Clone(v.a.Ranges)
	moving, completed, waiting := false, false, false
	for i, r := range ranges {
		for _, l := range []int64{r.Lease, r.FromLease} {
			if l != 0 && !v.alive[l] && !ready(l) {
				return nil
			}
		}
		if _, back := v.liveNode(r.Node); r.Lease == 0 && !back && !waited(r.Node) {
			waiting = true
		}
		switch {
		case r.From >= 0 && !v.alive[r.FromLease]:
			ranges[i].From, ranges[i].FromLease = -1, 0
			completed = true
		case r.From >= 0:
			moving = true
		}
	}
	switch {
	case completed:
	case moving:
		return nil // a move under way: its owner lets it go
	case waiting:
		ranges = v.returned()
	default:
		ranges = v.rebalanced()
	}
	if slices.Equal(ranges, v.a.Ranges) {
		return nil
	}
	return v.put(k, assignment{Version: v.a.Version + 1, Ranges: ranges, Nodes: v.owners(ranges)})
}

// liveNode is the server-id of the live node whose node ID is node.
func (v slotView) liveNode(node string) (int64, bool) {
	for id, n := range v.nodes {
		if n.ID == node {
			return id, true
		}
	}
	return -1, false
}

// returned is v's ranges with those released given back to their node
// where it is live, under the server-id and lease it holds now.
func (v slotView) returned() []slotRange {
	ranges := slices.Clone(v.a.Ranges)
	for i, r := range ranges {
		if id, back := v.liveNode(r.Node); r.Lease == 0 && back {
			ranges[i].Owner, ranges[i].Lease, ranges[i].Node = id, v.nodes[id].lease, ""
		}
	}
	return ranges
}

// freed is v's assignment with every range id owns under lease released
// (Lease 0, its node named), and those moving from it let go: what a
// server stopping gracefully leaves when no one took its slots, so that
// a server starting can be given them at once (no lease to wait out).
// Nil if id has none.
func (v slotView) freed(id, lease int64, node string) *assignment {
	next := v.a
	next.Ranges = slices.Clone(v.a.Ranges)
	changed := false
	for i, r := range next.Ranges {
		if r.Owner == id && r.Lease == lease {
			next.Ranges[i].Lease, next.Ranges[i].Node = 0, node
			changed = true
		}
		if r.From == id && r.FromLease == lease {
			next.Ranges[i].From, next.Ranges[i].FromLease = -1, 0
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return &next
}

// owners is the node of each owner ranges name: as it announces itself
// now if it is live, else as the assignment read last recorded it.
func (v slotView) owners(ranges []slotRange) map[int64]Node {
	nodes := map[int64]Node{}
	for _, r := range ranges {
		for _, id := range []int64{r.Owner, r.From} {
			if n, live := v.nodes[id]; live {
				nodes[id] = n.Node
			} else if n, ok := v.a.Nodes[id]; ok {
				nodes[id] = n
			}
		}
	}
	return nodes
}

// rebalanced is the ranges rebalance gives the live nodes: a slot whose
// owner's lease is alive moves from it, a released one is its node's
// again if that node is live, the others are given at once.
func (v slotView) rebalanced() []slotRange {
	owner, lease := make([]int64, slotCount), make([]int64, slotCount)
	for s := range owner {
		owner[s] = -1
	}
	for _, r := range v.a.Ranges {
		o, l := r.Owner, r.Lease
		switch back, live := v.liveNode(r.Node); {
		case r.Lease == 0 && live:
			o, l = back, v.nodes[back].lease
		case !v.alive[r.Lease]:
			o, l = -1, 0
		}
		for s := r.First; s <= r.Last; s++ {
			owner[s], lease[s] = o, l
		}
	}
	var ranges []slotRange
	for s, o := range rebalance(owner, slices.Sorted(maps.Keys(v.nodes))) {
		r := slotRange{First: s, Last: s, Owner: o, Lease: v.nodes[o].lease, From: -1}
		if owner[s] >= 0 && (owner[s] != o || lease[s] != r.Lease) {
			r.From, r.FromLease = owner[s], lease[s]
		}
		ranges = appendSlot(ranges, r)
	}
	return ranges
}

// appendSlot appends r, of one slot, to ranges: to the last range if it
// is the same but for the slot; not at all if r has no owner.
func appendSlot(ranges []slotRange, r slotRange) []slotRange {
	if r.Owner < 0 {
		return ranges
	}
	if n := len(ranges); n > 0 {
		p := &ranges[n-1]
		if p.Last+1 == r.First && p.Owner == r.Owner && p.Lease == r.Lease && p.From == r.From && p.FromLease == r.FromLease && p.Node == r.Node {
			p.Last = r.Last
			return ranges
		}
	}
	return append(ranges, r)
}

// put is the write of a as the assignment.
func (v slotView) put(k slotKeys, a assignment) *clientv3.Op {
	b, _ := json.Marshal(a) // of ints and strings: it cannot fail
	op := clientv3.OpPut(k.slots(), string(b))
	return &op
}

// commit writes op if the assignment is still the one v read; it
// reports whether it did.
func (v slotView) commit(ctx context.Context, cli *clientv3.Client, k slotKeys, op clientv3.Op) (bool, error) {
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k.slots()), "=", v.rev)).Then(op).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}
