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

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/reservation"
)

// keys are the etcd keys of one layout and epoch under etcd-prefix:
//
//	<prefix>layout                          the layout and epoch of every server under the prefix
//	<prefix>l<I>-<S>-<R>/e<epoch>/claim/<id>    held by a server, bound to its lease
//	<prefix>l<I>-<S>-<R>/e<epoch>/reserved/<id> T of the id; no lease: it outlives its holders
type keys struct {
	layout string // the layout key
	scope  string // <prefix>l<I>-<S>-<R>/e<epoch>/
	want   string // the value of the layout key for this server
}

func newKeys(prefix string, l idgen.Layout, epoch time.Time) keys {
	return keys{
		layout: prefix + "layout",
		scope:  fmt.Sprintf("%sl%d-%d-%d/e%d/", prefix, l.IDBits, l.ShardBits, l.RandomBits, epoch.UnixMilli()),
		want:   fmt.Sprintf("id-range %d shard-range %d random-range %d epoch %d", l.IDBits, l.ShardBits, l.RandomBits, epoch.UnixMilli()),
	}
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

// checkLayout records this server's layout under the prefix if none is,
// and fails if another is. existed tells whether servers of this layout
// were there before: then an id without a reservation key was either
// never claimed or lost by etcd.
func checkLayout(ctx context.Context, cli *clientv3.Client, k keys) (existed bool, err error) {
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k.layout), "=", 0)).
		Then(clientv3.OpPut(k.layout, k.want)).
		Else(clientv3.OpGet(k.layout)).
		Commit()
	if err != nil {
		return false, err
	}
	if resp.Succeeded {
		return false, nil
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 && string(kvs[0].Value) != k.want {
		return true, fmt.Errorf("%w (%s has %q, this server %q): use another etcd-prefix", errLayout, k.layout, kvs[0].Value, k.want)
	}
	return true, nil
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
func claim(ctx context.Context, cli *clientv3.Client, k keys, lease clientv3.LeaseID, holder string, candidates []int64) (claimed, int64, error) {
	held, rev, err := holders(ctx, cli, k)
	if err != nil {
		return claimed{}, 0, err
	}
	for _, id := range candidates {
		if _, ok := held[id]; ok {
			continue
		}
		resp, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(k.claim(id)), "=", 0)).
			Then(clientv3.OpPut(k.claim(id), holder, clientv3.WithLease(lease)), clientv3.OpGet(k.reserved(id))).
			Commit()
		if err != nil {
			return claimed{}, 0, err
		}
		if !resp.Succeeded {
			continue // taken meanwhile
		}
		c := claimed{id: id, rev: resp.Header.Revision}
		if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
			if c.reserved, err = strconv.ParseInt(string(kvs[0].Value), 10, 64); err != nil {
				return claimed{}, 0, fmt.Errorf("%s: %q is not a reservation", k.reserved(id), kvs[0].Value)
			}
		}
		return c, resp.Header.Revision, nil
	}
	return claimed{}, rev, errAllHeld
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
		return etcdError(err)
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
