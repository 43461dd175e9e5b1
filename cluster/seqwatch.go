package cluster

import (
	"context"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/sequence"
)

// Every server follows every change of the marks in etcd (follow), and
// so the losses it sees while it runs are undone at once, exactly:
//
//   - A mark deleted (a key, or the prefix, deleted by hand): the delete
//     event carries the mark it deleted, at or above every value any
//     server had reserved of the key then. The server puts it back
//     (putBack). Every server sees the event, and the first to put it
//     back wins; a key flagged lost meanwhile (a server's take found it
//     missing first) is set back plainly, since the deleted mark covers
//     every copy; the values of the key go on without an operator.
//   - A key flagged lost (by a server whose take found etcd's mark below
//     its copy): each server raises the flag to the end of what it has
//     reserved of the key, if that is higher (raiseFlag). So once the
//     servers that run have seen it, the flag is at or above every
//     segment in any server's hand, and an operator's SET at or above it
//     cannot give a value a server still holds.

// Follow has s write back t's marks where etcd lost data, and follow
// the marks in etcd until Stop.
func (s *Sequences) Follow(t *sequence.Table) {
	ctx, cancel := context.WithCancel(context.Background())
	s.table, s.cancel, s.done = t, cancel, make(chan struct{})
	go s.follow(ctx)
}

// Stop ends Follow.
func (s *Sequences) Stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
}

// follow watches every mark, from the revision of its first read on,
// and reads again when the watch breaks (etcd compacted past it, or was
// replaced).
func (s *Sequences) follow(ctx context.Context) {
	defer close(s.done)
	var backoff time.Duration
	for ctx.Err() == nil {
		backoff = min(max(2*backoff, 50*time.Millisecond), time.Second)
		cli, err := s.client()
		if err == nil {
			var resp *clientv3.GetResponse
			if resp, err = cli.Get(ctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
				backoff = 0
				s.watch(ctx, cli, resp.Header.Revision+1)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
}

// watch handles the changes of the marks from revision rev on until the
// watch ends.
func (s *Sequences) watch(ctx context.Context, cli *clientv3.Client, rev int64) {
	for wr := range cli.Watch(ctx, s.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithPrevKV()) {
		if wr.Err() != nil {
			return
		}
		for _, ev := range wr.Events {
			key := string(ev.Kv.Key[len(s.prefix):])
			switch {
			case ev.Type == clientv3.EventTypeDelete && ev.PrevKv != nil:
				s.putBack(ctx, cli, key, ev.PrevKv)
			case ev.Type == clientv3.EventTypePut:
				s.raiseFlag(ctx, cli, key, ev.Kv)
			}
		}
	}
}

// putBack puts back the mark a delete took, unless a server raised the
// key above it since.
func (s *Sequences) putBack(ctx context.Context, cli *clientv3.Client, key string, deleted *mvccpb.KeyValue) {
	was, err := s.parse(key, []*mvccpb.KeyValue{deleted})
	if err != nil {
		return
	}
	k := s.prefix + key
	for ctx.Err() == nil {
		resp, err := cli.Get(ctx, k)
		if err != nil {
			return // the next server's, or the copies', then
		}
		cur, err := s.parse(key, resp.Kvs)
		if err != nil || cur.rev != 0 && cur.mark >= was.mark && cur.lost == was.lost {
			return // put back, or taken above, already
		}
		v := strconv.FormatInt(max(cur.mark, was.mark), 10)
		if was.lost || cur.lost && cur.mark > was.mark {
			v += lostFlag
		}
		tx, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", cur.rev)).Then(clientv3.OpPut(k, v)).Commit()
		if err != nil {
			return
		}
		if tx.Succeeded {
			s.logLoss("sequences: etcd lost marks (keys deleted by hand?); put back the marks they held, from the delete events: no value repeats", key, cur.rev != 0 && !cur.lost)
			return
		}
	}
}

// raiseFlag raises a key flagged lost to the end of what this server
// has reserved of it, if that is higher.
func (s *Sequences) raiseFlag(ctx context.Context, cli *clientv3.Client, key string, kv *mvccpb.KeyValue) {
	cur, err := s.parse(key, []*mvccpb.KeyValue{kv})
	if err != nil || !cur.lost {
		return
	}
	own, ok := s.table.Reserved(key)
	if !ok || own <= cur.mark {
		return
	}
	k := s.prefix + key
	cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", cur.rev)).
		Then(clientv3.OpPut(k, strconv.FormatInt(own, 10)+lostFlag)).
		Commit() // a miss: another change, which comes as an event too
}

// logLoss logs a loss undone, once every ratelog.Every: a prefix of many
// keys deleted is many events. remade says a server made the key anew
// after the delete, below the mark put back: values it handed out then
// may repeat earlier ones (docs/cluster.md: what cannot be detected).
func (s *Sequences) logLoss(msg, key string, remade bool) {
	s.mu.Lock()
	ok, held := s.lossLog.Allow(msg, time.Now())
	s.mu.Unlock()
	if remade {
		s.log.Error().Str("key", key).Msg("sequences: a server made a key anew after etcd lost its mark, before it was put back: values it handed out then may repeat earlier ones")
	}
	if ok {
		s.log.Warn().Str("key", key).Int("same_not_logged", held).Msg(msg)
	}
}
