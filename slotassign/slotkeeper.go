package slotassign

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/etcdsession"
)

// A slotKeeper takes part in the slot assignment (see the package doc) for a server
// while it holds server-id id under lease l: it announces the server
// (its node key), follows the assignment, publishes what it serves, lets
// go what moves from it, and, while it has the lowest server-id of the
// live nodes, makes the changes the assignment needs.
type slotKeeper struct {
	cli  *clientv3.Client
	k    slotKeys
	id   int64
	l    *etcdsession.Lease
	self Node
	ttl  time.Duration
	log  zerolog.Logger
	// publish is given what the server serves, from each view read,
	// before any of it is let go; nil when it serves nothing.
	publish func(*Serving)

	mu      sync.Mutex
	readyAt map[any]time.Time // by lease seen gone, and by node ID of a released range seen absent: when the wait ends

	handing chan chan struct{} // a hand-over asked for (handOver), closed when done
	ended   chan struct{}      // closed when run returns
}

// handOver has the keeper hand the server's slots over now (leave),
// while the server still answers, and waits for it.
func (s *slotKeeper) handOver() {
	done := make(chan struct{})
	select {
	case s.handing <- done:
		<-done
	case <-s.ended:
	}
}

// run keeps the server in the assignment until ctx ends or its lease is
// lost; it publishes then that it serves nothing.
func (s *slotKeeper) run(ctx context.Context) {
	defer close(s.ended)
	defer s.publish(nil)
	slotsW := s.cli.Watch(ctx, s.k.slots())
	nodesW := s.cli.Watch(ctx, s.k.nodes(), clientv3.WithPrefix())
	look := time.NewTimer(0) // a wait ends; a write that failed is tried again
	defer look.Stop()
	for {
		if err := s.reconcile(ctx); err != nil && ctx.Err() == nil {
			s.log.Debug().Err(err).Msg("cluster: slot assignment not read or written; trying again")
		}
		look.Reset(s.nextLook())
		select {
		case <-ctx.Done():
			select {
			case <-s.l.Lost(): // nothing to hand over: it serves nothing
			default:
				s.leave()
			}
			return
		case <-s.l.Lost():
			return
		case done := <-s.handing:
			s.leave()
			close(done)
			select { // its slots are the others' now: it answers -MOVED for them
			case <-ctx.Done():
			case <-s.l.Lost():
			}
			return
		case <-look.C:
		case _, ok := <-slotsW:
			if !ok {
				slotsW = s.cli.Watch(ctx, s.k.slots())
			}
		case _, ok := <-nodesW:
			if !ok {
				nodesW = s.cli.Watch(ctx, s.k.nodes(), clientv3.WithPrefix())
			}
		}
	}
}

// reconcile reads the assignment and acts on it once.
func (s *slotKeeper) reconcile(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, s.l.Timeout())
	defer cancel()
	v, err := readSlots(rctx, s.cli, s.k)
	if err != nil {
		return err
	}
	s.publishView(v) // first: what moves from it is served no more
	if n, ok := v.nodes[s.id]; !ok || n.Node != s.self || n.lease != int64(s.l.ID()) {
		return s.announce(rctx)
	}
	if op := v.release(s.k, s.id, int64(s.l.ID())); op != nil {
		_, err := v.commit(rctx, s.cli, s.k, *op)
		return err
	}
	if ids := slices.Sorted(maps.Keys(v.nodes)); len(ids) == 0 || ids[0] != s.id {
		return nil
	}
	s.forget(v)
	if op := v.plan(s.k, s.ready, s.waited); op != nil {
		_, err := v.commit(rctx, s.cli, s.k, *op)
		return err
	}
	return nil
}

// forget forgets when the leases v no longer names were seen gone, and
// the nodes of released ranges it no longer has absent.
func (s *slotKeeper) forget(v slotView) {
	named := map[any]bool{}
	for l := range v.alive {
		named[l] = true
	}
	for _, r := range v.a.Ranges {
		if r.Lease == 0 {
			named[r.Node] = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.readyAt {
		if !named[k] {
			delete(s.readyAt, k)
		}
	}
}

// nextLook is how long until the assignment is read again unless it
// changes: when the first wait under way ends, or a quarter of the
// horizon at most.
func (s *slotKeeper) nextLook() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := etcdsession.Horizon / 4
	for _, at := range s.readyAt {
		if d := time.Until(at); d > 0 {
			next = min(next, d)
		}
	}
	return next
}

// Serving is what a server serves of the hash slots: those the assignment
// gives it under its lease, while the lease's serving horizon has time
// left (etcdsession.Lease), but for leaseMargin.
type Serving struct {
	v      slotView
	served []bool
	l      leaseClock // nil: a standby's, which serves nothing
}

// leaseClock is what a Serving reads of its lease: the time its serving
// horizon has left.
type leaseClock interface {
	HorizonLeft() time.Duration
}

// Slots is which slots the assignment gives the server (by slot
// number), whether or not its lease has time left (Has says that).
func (s *Serving) Slots() []bool { return slices.Clone(s.served) }

// leaseMargin is the part of the serving horizon a server keeps back: it
// stops serving its slots that much before its horizon ends, for clocks
// that run at rates a little apart.
const leaseMargin = 10 // a tenth

// Has reports whether the server serves slot now. It is asked after a
// command's value is taken, before its reply: a value taken and then
// found unserved is not given (the slot may be another's by then).
func (s *Serving) Has(slot int) bool {
	return s != nil && s.served[slot] && s.alive()
}

// leave hands the server's slots over, at a graceful stop: it takes its
// node key away, so that the others move its slots from it, and lets
// them go as they move, until it has none, no other node is live, or a
// third of a TTL (at most 2 s) has passed; then it releases what is
// left (free), so that no lease has to be waited out for it.
func (s *slotKeeper) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), min(s.ttl/3, 2*time.Second))
	defer cancel()
	defer s.free()
	w := s.cli.Watch(ctx, s.k.slots())
	if _, err := s.cli.Delete(ctx, s.k.node(s.id)); err != nil {
		return
	}
	for {
		v, err := readSlots(ctx, s.cli, s.k)
		if err != nil {
			return
		}
		s.publishView(v)
		if op := v.release(s.k, s.id, int64(s.l.ID())); op != nil {
			v.commit(ctx, s.cli, s.k, *op)
			continue
		}
		if !v.owns(s.id) || len(v.nodes) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-w:
		}
	}
}

// free releases the ranges the server still owns under its lease (its
// last act before the lease is revoked): it stops serving them first.
// They are given again with no lease to wait out: to this server's node
// as soon as it is back (restarted on its dir), to another once it had a
// TTL to come back (waited). Without it they waited for the revoked
// lease, and a full restart of every server was CLUSTERDOWN for 24.5 s.
func (s *slotKeeper) free() {
	ctx, cancel := context.WithTimeout(context.Background(), s.l.Timeout())
	defer cancel()
	lease := int64(s.l.ID())
	for ctx.Err() == nil {
		v, err := readSlots(ctx, s.cli, s.k)
		if err != nil {
			return
		}
		next := v.freed(s.id, lease, s.self.ID)
		if next == nil {
			return
		}
		s.publish(&Serving{v: v, served: make([]bool, slotCount), l: s.l})
		if ok, err := v.commit(ctx, s.cli, s.k, *v.put(s.k, *next)); ok || err != nil {
			return
		}
	}
}

// publishView publishes what the server serves in v.
func (s *slotKeeper) publishView(v slotView) {
	s.publish(&Serving{v: v, served: v.served(s.id, int64(s.l.ID())), l: s.l})
}

// announce puts the server's node key, bound to its lease.
func (s *slotKeeper) announce(ctx context.Context) error {
	b, err := json.Marshal(s.self)
	if err == nil {
		_, err = s.cli.Put(ctx, s.k.node(s.id), string(b), clientv3.WithLease(s.l.ID()))
	}
	return err
}

// ready reports whether lease, gone from etcd, has been seen gone for the
// serving horizon: its holder stopped serving by then, even if it was
// revoked by hand before its holder's deadline (etcdsession.Lease).
func (s *slotKeeper) ready(lease int64) bool { return s.seenFor(lease, etcdsession.Horizon) }

// waited reports whether node, whose released ranges no live node holds,
// has been seen absent for a TTL: time for a server restarted on its dir
// to claim a server-id and be given its ranges back (the sequences it
// kept for them are exact), before they go to others.
func (s *slotKeeper) waited(node string) bool { return s.seenFor(node, s.ttl) }

// seenFor reports whether key has been seen (by ready or waited) for d,
// noting when its wait ends the first time.
func (s *slotKeeper) seenFor(key any, d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readyAt == nil {
		s.readyAt = map[any]time.Time{}
	}
	at, seen := s.readyAt[key]
	if !seen {
		s.readyAt[key] = time.Now().Add(d)
		return false
	}
	return !time.Now().Before(at)
}
