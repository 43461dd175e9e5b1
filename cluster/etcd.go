package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/etcdsession"
	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/reservation"
)

// keys are the etcd keys of one layout and epoch under etcd-prefix:
//
//	<prefix>layout                          the layout and epoch of every server under the prefix
//	<prefix>l<I>-<S>-<R>/e<epoch>/claim/<id>    held by a server, bound to its lease
//	<prefix>l<I>-<S>-<R>/e<epoch>/reserved/<id> T of the id; no lease: it outlives its holders
//	<prefix>live/l<I>-<S>-<R>-e<epoch>/<id>     held with the claim, bound to the same lease
//
// Servers of two layouts or epochs must never hold ids at once: their
// IDs can collide whatever their ids. Two guards keep them apart, so that
// deleting any one key lets neither through (see claim): the layout key,
// which a claim compares with its own layout, and the live keys of every
// layout in one range, which a claim finds empty but for its own layout.
type keys struct {
	layout string // the layout key
	scope  string // <prefix>l<I>-<S>-<R>/e<epoch>/
	want   string // the value of the layout key for this server
	lives  string // <prefix>live/: every layout's live keys
	mine   string // <prefix>live/l<I>-<S>-<R>-e<epoch>/: this layout's
}

func newKeys(prefix string, l idgen.Layout, epoch time.Time) keys {
	return keys{
		layout: prefix + "layout",
		scope:  fmt.Sprintf("%sl%d-%d-%d/e%d/", prefix, l.IDBits, l.ShardBits, l.RandomBits, epoch.UnixMilli()),
		want:   fmt.Sprintf("id-range %d shard-range %d random-range %d epoch %d", l.IDBits, l.ShardBits, l.RandomBits, epoch.UnixMilli()),
		lives:  prefix + "live/",
		mine:   fmt.Sprintf("%slive/l%d-%d-%d-e%d/", prefix, l.IDBits, l.ShardBits, l.RandomBits, epoch.UnixMilli()),
	}
}

func (k keys) live(id int64) string { return k.mine + strconv.FormatInt(id, 10) }

// othersLive are the two ranges of the live keys of every other layout:
// before this layout's, and after it.
func (k keys) othersLive() [2][2]string {
	return [2][2]string{{k.lives, k.mine}, {clientv3.GetPrefixRangeEnd(k.mine), clientv3.GetPrefixRangeEnd(k.lives)}}
}

func (k keys) claims() string           { return k.scope + "claim/" }
func (k keys) claim(id int64) string    { return k.claims() + strconv.FormatInt(id, 10) }
func (k keys) reservations() string     { return k.scope + "reserved/" }
func (k keys) reserved(id int64) string { return k.reservations() + strconv.FormatInt(id, 10) }

// idOf is the server-id of a claim key.
func (k keys) idOf(key []byte) (int64, bool) {
	id, err := strconv.ParseInt(strings.TrimPrefix(string(key), k.claims()), 10, 64)
	return id, err == nil
}

// errLayout is the reason a server stands by when another layout or epoch
// uses the prefix: IDs of two layouts can collide.
var errLayout = errors.New("etcd-prefix is used by servers of another layout or epoch")

// errAllHeld is claim's answer when no id it may take is free.
var errAllHeld = errors.New("every server-id is held")

// checkLayout records this server's layout under the prefix if none is
// and no server of another layout holds an id (its live keys: the layout
// key may have been deleted by hand under it), and fails if another is.
// existed tells whether servers of this layout were there before: then an
// id without a reservation key was either never claimed or lost by etcd.
func checkLayout(ctx context.Context, cli *clientv3.Client, k keys) (existed bool, err error) {
	others := k.othersLive()
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k.layout), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(others[0][0]), "=", 0).WithRange(others[0][1]),
			clientv3.Compare(clientv3.CreateRevision(others[1][0]), "=", 0).WithRange(others[1][1])).
		Then(clientv3.OpPut(k.layout, k.want)).
		Else(guardReads(k)...).
		Commit()
	if err != nil {
		return false, err
	}
	if resp.Succeeded {
		return false, nil
	}
	return true, guarded(k, resp)
}

// guardReads read what guarded needs: the layout key, and a live key of
// another layout if any.
func guardReads(k keys) []clientv3.Op {
	others := k.othersLive()
	return []clientv3.Op{clientv3.OpGet(k.layout),
		clientv3.OpGet(others[0][0], clientv3.WithRange(others[0][1]), clientv3.WithLimit(1)),
		clientv3.OpGet(others[1][0], clientv3.WithRange(others[1][1]), clientv3.WithLimit(1))}
}

// claimed is a server-id this server holds, and where its reservation
// stood when it took it.
type claimed struct {
	id       int64
	reserved int64 // T stored by its holders so far (ms since the epoch); 0: none
	rev      int64 // etcd's revision of the claim
}

// holders lists the held server-ids and their holders, and the revision
// to watch from.
func holders(ctx context.Context, cli *clientv3.Client, k keys) (map[int64]string, int64, error) {
	resp, err := cli.Get(ctx, k.claims(), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	held := map[int64]string{}
	for _, kv := range resp.Kvs {
		if id, ok := k.idOf(kv.Key); ok {
			held[id] = string(kv.Value)
		}
	}
	return held, resp.Header.Revision, nil
}

// claim takes the first free id of candidates for lease, in one
// transaction with reading its reservation. It returns errAllHeld, and
// the revision to watch from, when none is free.
//
// The transaction claims an id only if its claim key and live key are
// free, the layout key holds this server's layout, and no live key of
// another layout exists: two guards of different keys against a server
// of another layout or epoch holding ids at once, so that one key deleted
// by hand (the layout key, a live key) lets no second layout in.
func claim(ctx context.Context, cli *clientv3.Client, k keys, lease clientv3.LeaseID, holder string, candidates []int64) (claimed, int64, error) {
	held, rev, err := holders(ctx, cli, k)
	if err != nil {
		return claimed{}, 0, err
	}
	others := k.othersLive()
	for _, id := range candidates {
		if _, ok := held[id]; ok {
			continue
		}
		resp, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(k.claim(id)), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(k.live(id)), "=", 0),
				clientv3.Compare(clientv3.Value(k.layout), "=", k.want),
				clientv3.Compare(clientv3.CreateRevision(others[0][0]), "=", 0).WithRange(others[0][1]),
				clientv3.Compare(clientv3.CreateRevision(others[1][0]), "=", 0).WithRange(others[1][1])).
			Then(clientv3.OpPut(k.claim(id), holder, clientv3.WithLease(lease)),
				clientv3.OpPut(k.live(id), holder, clientv3.WithLease(lease)),
				clientv3.OpGet(k.reserved(id))).
			Else(guardReads(k)...).
			Commit()
		if err != nil {
			return claimed{}, 0, err
		}
		if !resp.Succeeded {
			if err := guarded(k, resp); err != nil {
				return claimed{}, resp.Header.Revision, err
			}
			continue // taken meanwhile
		}
		c := claimed{id: id, rev: resp.Header.Revision}
		if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) == 1 {
			if c.reserved, err = strconv.ParseInt(string(kvs[0].Value), 10, 64); err != nil {
				return claimed{}, 0, fmt.Errorf("%s: %q is not a reservation", k.reserved(id), kvs[0].Value)
			}
		}
		return c, resp.Header.Revision, nil
	}
	return claimed{}, rev, errAllHeld
}

// guarded says why a transaction of checkLayout or claim failed on a
// guard against another layout, from guardReads's answers: nil if none
// stopped it (for a claim, the id was taken meanwhile).
func guarded(k keys, resp *clientv3.TxnResponse) error {
	for _, r := range resp.Responses[1:] {
		if kvs := r.GetResponseRange().Kvs; len(kvs) > 0 {
			return fmt.Errorf("%w (%s is held by %s): use another etcd-prefix", errLayout, kvs[0].Key, kvs[0].Value)
		}
	}
	layout := resp.Responses[0].GetResponseRange().Kvs
	switch {
	case len(layout) == 0:
		return fmt.Errorf("%w (%s is gone: it is written again at the next claim)", errLayout, k.layout)
	case string(layout[0].Value) != k.want:
		return fmt.Errorf("%w (%s has %q, this server %q): use another etcd-prefix", errLayout, k.layout, layout[0].Value, k.want)
	}
	return nil
}

// errFenced is a save refused because the claim is no longer this
// server's: its lease expired or was revoked, or the key was deleted.
var errFenced = errors.New("the claim is no longer this server's")

// store keeps the reservation of a claimed id in etcd, fenced by the
// claim: a save succeeds only while the claim key carries this server's
// lease. It implements reservation.Store.
type store struct {
	cli     *clientv3.Client
	k       keys
	id      int64
	lease   clientv3.LeaseID
	timeout time.Duration
	fenced  chan struct{}                      // signalled when a save is refused by the fence
	last    func(int64)                        // told every T stored
	seen    func(*etcdserverpb.ResponseHeader) // told where etcd stood at each save; nil: no one
	local   reservation.Store                  // the copy in dir, written first; nil: none
}

// Save stores s.Reserved as the id's T, if the claim is still ours: in
// the local copy first, then in etcd. A T in the local copy that etcd
// refused is only ever a floor, and a higher floor is safe.
func (s *store) Save(ctx context.Context, st reservation.State) error {
	if s.local != nil {
		if err := s.local.Save(ctx, st); err != nil {
			return fmt.Errorf("local copy: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(s.k.claim(s.id)), "=", s.lease)).
		Then(clientv3.OpPut(s.k.reserved(s.id), strconv.FormatInt(st.Reserved, 10))).
		Commit()
	switch {
	case err != nil:
		return etcdsession.Error(err)
	case !resp.Succeeded:
		select {
		case s.fenced <- struct{}{}:
		default:
		}
		return errFenced
	}
	s.last(st.Reserved)
	if s.seen != nil {
		s.seen(resp.Header)
	}
	return nil
}
