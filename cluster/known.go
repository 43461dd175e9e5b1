package cluster

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// known is the highest reservation T this server has seen for each id:
// the ones it stored, and every one written to etcd while it followed
// them (follow). A claim never starts below it, so that no ID repeats
// when etcd loses a reservation (keys deleted, an older snapshot
// restored) that this server saw: a standby that takes the id of a
// holder whose T was deleted starts above that T, below which alone the
// holder may still issue. It is safe for concurrent use.
type known struct {
	mu    sync.Mutex
	t     map[int64]int64
	rev   int64         // every T written up to this etcd revision is in t; 0: not following
	moved chan struct{} // closed, and replaced, when rev moves
}

func newKnown() *known { return &known{t: map[int64]int64{}, moved: make(chan struct{})} }

// raise records that id's T reached t.
func (k *known) raise(id, t int64) {
	k.mu.Lock()
	k.t[id] = max(k.t[id], t)
	k.mu.Unlock()
}

// of is the highest T seen for id; 0: none.
func (k *known) of(id int64) int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.t[id]
}

// all is a copy of every id's highest T seen.
func (k *known) all() map[int64]int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return maps.Clone(k.t)
}

// reached records that every T written up to etcd revision rev is known;
// 0 starts over (a new watch).
func (k *known) reached(rev int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if rev > k.rev || rev == 0 {
		k.rev = rev
		close(k.moved)
		k.moved = make(chan struct{})
	}
}

// upTo reports whether every T written up to rev is known, and if not,
// a channel closed when that may have changed.
func (k *known) upTo(rev int64) (bool, <-chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.rev >= rev, k.moved
}

// follow keeps m.known up to date with every reservation written to etcd
// for this layout, until ctx ends: it reads them all, then watches them.
// It watches the claims too: a claim at revision rev is an event at rev,
// so once it has come, every reservation written before it has.
func (m *Member) follow(ctx context.Context) {
	for ctx.Err() == nil {
		m.known.reached(0)
		resp, err := m.cli().Get(ctx, m.k.scope, clientv3.WithPrefix())
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(m.cfg.LeaseTTL / 10):
			}
			continue
		}
		for _, kv := range resp.Kvs {
			m.learn(kv.Key, kv.Value)
		}
		m.known.reached(resp.Header.Revision)
		for wr := range m.cli().Watch(ctx, m.k.scope, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
			if wr.Err() != nil {
				break // compacted past it, or the like: read them all again
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					m.learn(ev.Kv.Key, ev.Kv.Value)
				}
			}
			if n := len(wr.Events); n > 0 {
				m.known.reached(wr.Events[n-1].Kv.ModRevision) // events come in order
			}
		}
	}
}

// learn records a reservation key's value; other keys are ignored.
func (m *Member) learn(key, value []byte) {
	rest, ok := strings.CutPrefix(string(key), m.k.reservations())
	id, err := strconv.ParseInt(rest, 10, 64)
	t, terr := strconv.ParseInt(string(value), 10, 64)
	if ok && err == nil && terr == nil {
		m.known.raise(id, t)
	}
}

// awaitKnown waits until every reservation written up to etcd revision
// rev, that of a claim of this server's, is known: the claim read T in
// the same step, and a T deleted before it must be known too. It fails
// when ctx ends first or the watch does not get there within the dial
// timeout: the claim must not go on without it.
func (m *Member) awaitKnown(ctx context.Context, rev int64) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Etcd.DialTimeout)
	defer cancel()
	for {
		ok, moved := m.known.upTo(rev)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-moved:
		}
	}
}

// republish writes back to etcd every T this server knows that etcd no
// longer has, once it found that etcd lost data: a server with no history
// of etcd (a new one) that claims one of those ids then reads it, and
// starts above it. A key that exists is left alone: its holder wrote it.
func (m *Member) republish(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Etcd.DialTimeout)
	defer cancel()
	all := m.known.all()
	var written []int64
	for id, t := range all {
		key := m.k.reserved(id)
		resp, err := m.cli().Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, strconv.FormatInt(t, 10))).
			Commit()
		if err != nil {
			m.log.Warn().Err(err).Int64("server_id", id).Msg("cluster: could not write back a reservation etcd lost")
			return
		}
		if resp.Succeeded {
			written = append(written, id)
		}
	}
	m.log.Warn().Ints64("server_ids", written).Interface("known", all).Msg("cluster: wrote back the reservations etcd lost that this server knew")
}
