package seqslots

import (
	"context"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/etcdsession"
)

// guardEvery is how often a server writes its guard key: so it finds
// etcd restored from a snapshot older than that within that, where the
// revision alone may not show it (other servers' writes to the restored
// etcd move its revision past what this server saw).
const guardEvery = time.Second

// Guard writes this server's guard key (etcdsession.Guard,
// <etcd-prefix>guard/<id>) one more every guardEvery until ctx ends,
// one small transaction whatever the number of slots and keys: a value
// found below the last it wrote is etcd gone back, and every take and
// raise is then refused (the history's Observe) until an operator
// confirms. While refused, it only reads the key, for Observe to find
// the confirmation.
func (s *Slots) Guard(ctx context.Context) {
	if s.hist == nil {
		return
	}
	tick := time.NewTicker(guardEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// Longer than a tick: under load an answer of etcd's can take
		// more than a second.
		gctx, cancel := context.WithTimeout(ctx, 10*guardEvery)
		s.guard(gctx)
		cancel()
	}
}

// guard writes the guard key one more, if etcd holds what this server
// wrote last; a value found above it (the history file lagged) is taken
// as the last, one below it is etcd gone back, none is made again.
func (s *Slots) guard(ctx context.Context) {
	g, err := s.hist.Guarded()
	k := s.root + "guard/" + strconv.FormatUint(g.ID, 16)
	if err != nil { // refused until confirmed: a read, for Observe to find the confirmation
		s.txn(ctx, nil, []clientv3.Op{clientv3.OpGet(k)})
		return
	}
	cmp := clientv3.Compare(clientv3.Value(k), "=", strconv.FormatInt(g.Value, 10))
	if g.Value == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
	}
	sent := s.hist.At()
	resp, err := s.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(k, strconv.FormatInt(g.Value+1, 10))).Else(clientv3.OpGet(k)).Commit()
	if err != nil || s.hist.Observe(sent, resp.Header) != nil {
		return
	}
	if resp.Succeeded {
		s.hist.SetGuard(etcdsession.Guard{ID: g.ID, Value: g.Value + 1})
		return
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		// Deleted by hand (the prefix, say), or etcd restored from
		// before this server's first write: the revision judges that.
		// Made again at the next tick.
		s.hist.SetGuard(etcdsession.Guard{ID: g.ID})
		return
	}
	v, _ := strconv.ParseInt(string(kvs[0].Value), 10, 64)
	if v > g.Value {
		s.hist.SetGuard(etcdsession.Guard{ID: g.ID, Value: v})
		return
	}
	if err := s.hist.GuardBehind(k, g, v); err != nil {
		s.log.Error().Err(err).Msg("sequences: etcd went back in time; no slot is taken nor raised until an operator confirms (docs/cluster.md, After restoring etcd from a snapshot)")
	}
}
