package seqmarks

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/etcdsession"
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

//   - etcd gone back in time (restored from an older snapshot): each
//     server writes a key of its own every historyCheck, whether it
//     takes or not (checkHistory), so every server that runs finds it
//     within a second or so, by that key or by etcd's revision, refuses
//     takes and writes its marks back (restore), before an operator
//     confirms. Found only by a take, a server serving from segments in
//     hand found it after the operator had confirmed on the others,
//     which could take its keys from etcd below what it had handed out.
//   - A key made anew by a server that has no copy of it (a take from
//     nothing), after a delete this server's watch had not yet brought:
//     the take waits until the watch has passed its own write, and if a
//     delete of the key came before it, takes again above the deleted
//     mark before handing out anything (madeAnew). A server's watch
//     begins where the slowest other follower stands (followOnce), so
//     it brings every delete another server saw and has yet to put
//     back, even one that came before this server began: no server
//     makes a key over a delete that a running server saw.

// Follow has s write back t's marks where etcd lost data, and follow
// the marks in etcd until Stop.
func (s *Sequences) Follow(t *sequence.Table) {
	ctx, cancel := context.WithCancel(context.Background())
	s.table, s.cancel, s.done = t, cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		var wg sync.WaitGroup
		wg.Go(func() { s.follow(ctx) })
		wg.Go(func() { s.checkHistory(ctx) })
		wg.Wait()
	}()
}

// historyCheck is how often a server asks etcd where it stands, and
// writes its guard key.
const historyCheck = time.Second

// checkHistory writes this server's guard key every historyCheck (one
// small transaction, the same at any number of keys): answered compares
// the reply's header with what this server saw before, guard the key's
// value with what it wrote. Either behind, and etcd went back: the marks
// are written back. While takes are refused it only reads the key, for
// observe to find an operator's confirmation.
func (s *Sequences) checkHistory(ctx context.Context) {
	tick := time.NewTicker(historyCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cli, err := s.client()
		if err != nil {
			continue
		}
		// Longer than a tick (the ticker drops those missed): under load
		// an answer of etcd's takes more than a second, and a check cut
		// at one never found a restore (TestGoneBackFoundWithoutTakes,
		// at a load average of 12).
		rctx, cancel := context.WithTimeout(ctx, 10*historyCheck)
		s.guard(rctx, cli)
		cancel()
	}
}

// guard writes this server's guard key one more, if etcd holds what it
// wrote last; a value found above it (the history file lagged) is taken
// as the last, one below it is etcd gone back, none is made again.
func (s *Sequences) guard(ctx context.Context, cli *clientv3.Client) {
	g, err := s.hist.Guarded()
	k, sent := s.guardKey(g), s.hist.At()
	if err != nil { // refused until confirmed: a read, for observe to find the confirmation
		if resp, err := cli.Get(ctx, k); err == nil {
			s.answered(sent, resp, nil)
		}
		return
	}
	cmp := clientv3.Compare(clientv3.Value(k), "=", strconv.FormatInt(g.Value, 10))
	if g.Value == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
	}
	resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(k, strconv.FormatInt(g.Value+1, 10))).Else(clientv3.OpGet(k)).Commit()
	if err != nil || s.answered(sent, resp, nil) != nil {
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
	s.restore(s.hist.GuardBehind(k, g, v))
}

// guardKey is g's key in etcd.
func (s *Sequences) guardKey(g etcdsession.Guard) string {
	return strings.TrimSuffix(s.prefix, "seq/") + "guard/" + strconv.FormatUint(g.ID, 16)
}

// Stop ends Follow.
func (s *Sequences) Stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
}

// follow follows the marks (followOnce) until ctx ends, again after
// each break.
func (s *Sequences) follow(ctx context.Context) {
	var backoff time.Duration
	var cli *clientv3.Client
	defer func() {
		if cli != nil {
			cli.Close()
		}
	}()
	var floor int64 // etcd compacted below it: no watch begins lower
	for ctx.Err() == nil {
		var err error
		if cli == nil {
			cli, err = s.dial()
		}
		if err == nil {
			floor, err = s.followOnce(ctx, cli, floor)
		}
		if err == nil {
			backoff = 0 // it followed, until the watch broke: again at once
		} else {
			backoff = retryPause(ctx, backoff)
		}
	}
}

// A server follows the marks from where the slowest other server that
// follows them stands, not from where etcd stands when it begins: a
// delete another server's watch brought but had not yet put back is then
// brought by this server's watch too, before it makes any key anew. (A
// server that began following after a delete made the key anew from
// nothing, below the deleted mark, before the others put it back.)
//
// Each server that follows says how far it has handled the events, in
// <prefix>seq.followed/<id>, bound to a lease of its own: "0" from before
// it reads where the others stand (it will handle every event from that
// key's revision on), then the revision it has handled (a follower). A
// delete up to that revision it has put back.

// followOnce follows the marks until the watch breaks or ctx ends: it
// says it follows, reads where the others stand, watches from below the
// slowest of them (above floor), and says where it stands until the
// watch ends. It returns the floor for the next time, and an error if it
// did not begin to watch.
func (s *Sequences) followOnce(ctx context.Context, cli *clientv3.Client, floor int64) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Nothing is written before etcd's history is checked, nor while it
	// went back until an operator confirms: a restored etcd's revision
	// moved by this server's writes hid the restore from a server that
	// checked it after (TestClusterEtcdRestored, once).
	sent := s.hist.At()
	resp, err := cli.Get(ctx, s.followedPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err := s.answered(sent, resp, err); err != nil {
		return floor, err
	}
	l, err := etcdsession.Grant(ctx, cli, s.ttl, s.ttl/3)
	if err != nil {
		return floor, err
	}
	defer l.Revoke()
	go l.Keep(ctx)
	f := &follower{s: s, cli: cli, lease: l, key: s.followedKey()}
	if err := f.say(ctx, 0); err != nil {
		return floor, err
	}
	from, at, err := s.slowest(ctx, cli, f.key)
	if err != nil {
		return floor, err
	}
	if own := s.deletes.upToNow(); own > 0 {
		from = min(from, own) // after a break: from where this server stood
	}
	from = max(from, floor)
	w := cli.Watch(ctx, s.followedPrefix(), clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.prefix)),
		clientv3.WithRev(from+1), clientv3.WithPrevKV())
	// An event past at, this key's, ends the events of before this
	// server began (a delete among them may not be put back yet).
	if err := f.say(ctx, at); err != nil {
		return floor, err
	}
	return f.follow(ctx, w, from, floor), nil
}

// A follower is one run of followOnce: its lease and key, and what it
// said last.
type follower struct {
	s      *Sequences
	cli    *clientv3.Client
	lease  *etcdsession.Lease
	key    string
	said   int64
	saidAt time.Time
	marks  bool // an event of the marks was handled since it said
}

// say says that every event up to rev was handled (0: from now on).
func (f *follower) say(ctx context.Context, rev int64) error {
	_, err := f.cli.Put(ctx, f.key, strconv.FormatInt(rev, 10), clientv3.WithLease(f.lease.ID()))
	if err == nil {
		f.said, f.saidAt, f.marks = rev, time.Now(), false
	}
	return err
}

// follow handles the events of w, and says where it stands every
// historyCheck while marks move, every followedIdle while none does
// (each saying is an event every other server's watch brings), until
// the watch ends, its lease is lost (its key went: others would follow
// from too high), or ctx ends. It returns the floor for the next time.
func (f *follower) follow(ctx context.Context, w clientv3.WatchChan, from, floor int64) int64 {
	tick := time.NewTicker(historyCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return floor
		case <-f.lease.Lost():
			return floor
		case <-tick.C:
			if now := f.s.deletes.upToNow(); now > f.said && (f.marks || time.Since(f.saidAt) >= followedIdle) {
				f.say(ctx, now) // a miss: said at the next tick
			}
		case wr, ok := <-w:
			switch {
			case !ok:
				return floor
			case wr.CompactRevision > 0:
				f.s.log.Warn().Int64("from", from+1).Int64("compacted", wr.CompactRevision).Msg("sequences: etcd compacted the history of the marks this server was to follow: a delete in it that no server put back is not seen")
				return wr.CompactRevision - 1
			case wr.Err() != nil:
				return floor
			}
			f.marks = f.s.handle(ctx, f.cli, wr.Events) || f.marks
		}
	}
}

// followedIdle is how often a server says where it stands while no mark
// moves: a server that begins then follows from at most about this far
// back.
const followedIdle = 30 * time.Second

// slowest reads where the other servers that follow stand, and returns
// the lowest revision up to which all have handled the events (their
// deletes put back), and the revision of the read: at most that.
func (s *Sequences) slowest(ctx context.Context, cli *clientv3.Client, own string) (from, at int64, err error) {
	resp, err := cli.Get(ctx, s.followedPrefix(), clientv3.WithPrefix())
	if err != nil {
		return 0, 0, err
	}
	at = resp.Header.Revision
	from = at
	for _, kv := range resp.Kvs {
		if string(kv.Key) == own {
			continue
		}
		handled, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err != nil || handled == 0 {
			handled = kv.ModRevision - 1 // beginning: it handles every event from its key's on
		}
		from = min(from, handled)
	}
	return from, at, nil
}

// handle handles events of the marks and of the servers that follow
// them, in order, and counts them handled; it reports whether any was a
// mark's.
func (s *Sequences) handle(ctx context.Context, cli *clientv3.Client, evs []*clientv3.Event) (marks bool) {
	for _, ev := range evs {
		if !strings.HasPrefix(string(ev.Kv.Key), s.prefix) {
			continue // a server saying where it stands
		}
		marks = true
		key := string(ev.Kv.Key[len(s.prefix):])
		switch {
		case ev.Type == clientv3.EventTypeDelete && ev.PrevKv != nil:
			if was, err := s.parse(key, []*mvccpb.KeyValue{ev.PrevKv}); err == nil {
				s.deletes.add(key, was.mark)
			}
			s.putBack(ctx, cli, key, ev.PrevKv, ev.Kv.ModRevision)
		case ev.Type == clientv3.EventTypePut:
			s.raiseFlag(ctx, cli, key, ev.Kv)
		}
	}
	if n := len(evs); n > 0 {
		s.deletes.reached(evs[n-1].Kv.ModRevision) // events come in order
	}
	return marks
}

// followedPrefix is where the servers that follow the marks say how far
// they stand: beside the marks (<prefix>seq.followed/), so that one
// watch brings both in order, yet outside them.
func (s *Sequences) followedPrefix() string { return strings.TrimSuffix(s.prefix, "/") + ".followed/" }

// followedKey is this server's key under followedPrefix.
func (s *Sequences) followedKey() string {
	return s.followedPrefix() + strconv.FormatUint(s.followID, 16)
}

// deletes are the marks deleted that this server's watch brought lately,
// and how far it has got: for a take that makes a key anew (madeAnew).
// Only the race between a delete and its putting back needs them, so the
// last deletesKept are kept.
type deletes struct {
	mu    sync.Mutex
	mark  map[string]int64
	order []string
	rev   int64         // every event up to this revision was handled
	moved chan struct{} // closed, and replaced, when rev moves
}

// deletesKept bounds the deletes kept: each costs its key's bytes.
const deletesKept = 4096

func (d *deletes) add(key string, mark int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mark == nil {
		d.mark = map[string]int64{}
	}
	if _, ok := d.mark[key]; !ok {
		if len(d.order) >= deletesKept {
			delete(d.mark, d.order[0])
			d.order = d.order[1:]
		}
		d.order = append(d.order, key)
	}
	d.mark[key] = max(d.mark[key], mark)
}

func (d *deletes) of(key string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mark[key]
}

func (d *deletes) reached(rev int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if rev > d.rev {
		d.rev = rev
		if d.moved != nil {
			close(d.moved)
			d.moved = nil
		}
	}
}

// upToNow is the revision up to which every event was handled.
func (d *deletes) upToNow() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rev
}

// upTo reports whether every event up to rev was handled, and if not, a
// channel closed when that may have changed.
func (d *deletes) upTo(rev int64) (bool, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rev >= rev {
		return true, nil
	}
	if d.moved == nil {
		d.moved = make(chan struct{})
	}
	return false, d.moved
}

// deletedMark is the mark of key the watch saw deleted lately; 0: none.
func (s *Sequences) deletedMark(key string) int64 { return s.deletes.of(key) }

// madeAnew waits until the watch has handled every event up to rev, that
// of a take that made key anew, and returns the mark of a delete of key
// it brought meanwhile (0: none). It fails if the watch does not get
// there in time: the take must not go on without it.
func (s *Sequences) madeAnew(ctx context.Context, key string, rev int64) (int64, error) {
	if s.table == nil {
		return 0, nil // not following (tests of the backend alone)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for {
		ok, moved := s.deletes.upTo(rev)
		if ok {
			return s.deletes.of(key), nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("etcd: the watch of the marks did not bring this server's own write of %q in time (a new key is made only once it is sure no delete of it came first)", key)
		case <-moved:
		}
	}
}

// putBack puts back the mark a delete (at revision at) took, unless a
// server raised the key above it since. It tries until it has, or ctx
// ends: the delete counts as handled only then (followOnce), and a server
// that begins following trusts what the others say they handled.
func (s *Sequences) putBack(ctx context.Context, cli *clientv3.Client, key string, deleted *mvccpb.KeyValue, at int64) {
	was, err := s.parse(key, []*mvccpb.KeyValue{deleted})
	if err != nil {
		return
	}
	k := s.prefix + key
	var backoff time.Duration
	for ctx.Err() == nil {
		resp, err := cli.Get(ctx, k)
		if err != nil {
			backoff = retryPause(ctx, backoff)
			continue
		}
		cur, err := s.parse(key, resp.Kvs)
		switch {
		case err != nil:
			return
		case cur.rev != 0 && cur.mark >= was.mark && cur.lost == was.lost:
			return // put back, or taken above, already
		case cur.rev > at && cur.mark >= was.mark && !cur.lost:
			return // written at or above it since (an operator's SET, say): a delete brought again
		}
		v := strconv.FormatInt(max(cur.mark, was.mark), 10)
		if was.lost || cur.lost && cur.mark > was.mark {
			v += lostFlag
		}
		tx, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", cur.rev)).Then(clientv3.OpPut(k, v)).Commit()
		if err != nil {
			backoff = retryPause(ctx, backoff)
			continue
		}
		if tx.Succeeded {
			s.logLoss("sequences: etcd lost marks (keys deleted by hand?); put back the marks they held, from the delete events: no value repeats", key, cur.rev != 0 && !cur.lost)
			return
		}
	}
}

// retryPause waits before another try, longer each time up to a second,
// and returns the wait for the next.
func retryPause(ctx context.Context, last time.Duration) time.Duration {
	next := min(max(2*last, 50*time.Millisecond), time.Second)
	select {
	case <-ctx.Done():
	case <-time.After(next):
	}
	return next
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
