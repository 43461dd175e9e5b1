// Package seqmarks keeps the sequences' marks in etcd in cluster mode:
// each key's mark, with each server's own copy of the marks it took in
// dir (sequences.go), followed by every server so that what etcd loses
// is put back (seqwatch.go), and, on a Redis Cluster node, taken only
// for the slots it serves (seqslots.go).
package seqmarks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/idserver/idserver/etcdsession"
	"github.com/idserver/idserver/internal/ratelog"
	"github.com/idserver/idserver/sequence"
)

// Sequences keeps the sequences of every server under the prefix in
// etcd: each key's mark, <prefix>seq/<key>, is at or above every value
// any server took of it. A server takes a segment by moving the mark up
// in a transaction that compares the mark with the one it last wrote
// (or, read again, its revision), so no two servers' segments of a key
// overlap, and each server's segments of a key lie above its own earlier
// ones (Take's After). It is a sequence.Backend, a sequence.Folder (its
// copy in dir) and a sequence.Reader.
//
// Values are unique across servers; per server they strictly increase,
// across servers they only trend upward (a server hands out the rest of
// its segment while another has taken the next one). A server that has
// segments in hand serves them while etcd is unreachable, nothing past
// them.
//
// Why no value repeats when etcd loses data. A server keeps its own copy
// of every mark it took, in dir, written before it hands out a value of
// the segment: a restart resumes each key above it, so a server never
// hands out a value below one it handed out before. etcd's mark of a key
// must be at or above the copy of every server (each server's own take
// put it there, and marks only go up but at a graceful stop, which lowers
// a mark only where no server took more). So a server that finds etcd's
// mark missing or below its own copy knows etcd lost data, and the values
// other servers handed out above what is left may be lost with it: it
// writes its copy back with the key flagged lost ("<mark> lost"), and
// every server refuses new values of a flagged key (LostError) until an
// operator SETs it at or above the largest value handed out. A server
// that sees etcd go back in time (its revision, raft term or cluster id:
// a restore from an older snapshot) refuses every take until an operator
// confirms, as it claims no server-id (etcdsession.History), and writes
// back every mark it holds above etcd's, so that the servers that ran
// before the restore, each with its own copy, put back what they handed
// out. What no server can detect: etcd loses the mark of a key that no
// server which still has its copy uses again, and a server with no copy
// of it makes it anew (docs/cluster.md).
type Sequences struct {
	client func() (*clientv3.Client, error)
	// dial makes the client Follow watches with: a client of its own, so
	// that its long watch shares no connection with the member's lease
	// (with one client, a holder lost its lease when the etcd leader
	// froze, about one run in two of TestClusterEtcdLeaderLost; with
	// none, none in four).
	dial   func() (*clientv3.Client, error)
	prefix string // <etcd-prefix>seq/
	local  *sequence.File
	hist   history         // where etcd stood: an error once it went back
	table  *sequence.Table // this server's marks (Follow)
	log    zerolog.Logger
	cancel context.CancelFunc // ends Follow
	done   chan struct{}

	mu        sync.Mutex
	scans     scans
	restoring bool // writing back this server's marks after etcd went back
	// restored is the going back (history's error, the same until an
	// operator confirms) whose write-back succeeded: one per going back.
	restored error
	lossLog  ratelog.ByText
	deletes  deletes // the marks the watch saw deleted lately

	followID uint64        // this server's key among those that follow (followedKey)
	ttl      time.Duration // of the lease that key is bound to

	clustered bool      // a Redis Cluster node: takes check slots (ServeSlots)
	slots     slotTerms // of a Redis Cluster node
}

// history is what the sequences use of etcdsession.History: an
// interface, so that a test can blind its comparison of revisions and
// see the guard key alone find a restore.
type history interface {
	At() etcdsession.SentAt
	Observe(etcdsession.SentAt, *etcdserverpb.ResponseHeader) error
	Guarded() (etcdsession.Guard, error)
	SetGuard(etcdsession.Guard)
	GuardBehind(key string, g etcdsession.Guard, v int64) error
}

// takers bounds the transactions one Take runs at once.
const takers = 16

// Config configures a server's sequences in cluster mode.
type Config struct {
	// Session is the server's connection to etcd (its cluster.Member's):
	// its client, and what it saw of etcd.
	Session *etcdsession.Session
	Prefix  string // etcd-prefix: the marks are under <prefix>seq/
	// LeaseTTL is that of the lease this server's followed key is bound
	// to (followOnce); 0: 10 s.
	LeaseTTL time.Duration
	// Clustered is set on a Redis Cluster node: its takes check slots
	// (ServeSlots).
	Clustered bool
	Local     *sequence.File // this server's copy of its marks; nil: none
	Log       zerolog.Logger
}

// New returns the sequences' backend cfg describes.
func New(cfg Config) *Sequences {
	return &Sequences{client: cfg.Session.Client, dial: cfg.Session.Dial, prefix: cfg.Prefix + "seq/", local: cfg.Local,
		hist: cfg.Session.History(), log: cfg.Log, clustered: cfg.Clustered, followID: rand.Uint64(), ttl: cmp.Or(cfg.LeaseTTL, 10*time.Second)}
}

// Take takes the segments of keys whose mark this server knows (After:
// a refill) and of keys it makes (born here, no delete of them seen),
// txnKeys to a transaction, and each other segment in its own, takers
// transactions at a time, then keeps what it took in this server's copy,
// in one write, before any of it is handed out. A transaction of many
// keys, each compared with its mark (or that it has none), is all or
// nothing: if any mark moved (another server took or made the key, or
// etcd lost it), each key of it is taken on its own, which finds out why.
func (s *Sequences) Take(ctx context.Context, ts []sequence.Take) {
	cli, err := s.client()
	if err != nil {
		for i := range ts {
			ts[i].Err = err
		}
		return
	}
	var g errgroup.Group
	g.SetLimit(takers)
	run := func(f func()) { g.Go(func() error { f(); return nil }) }
	var batched []*sequence.Take
	for i := range ts {
		t := &ts[i]
		switch {
		case t.After > 0 && t.After < math.MaxInt64 || t.After == 0 && t.Born && s.deletedMark(t.Key) == 0:
			if batched = append(batched, t); len(batched) == txnKeys {
				batch := batched
				run(func() { s.takeAll(ctx, cli, batch) })
				batched = nil
			}
		default:
			run(func() { s.takeServed(ctx, cli, t) })
		}
	}
	if len(batched) > 0 {
		run(func() { s.takeAll(ctx, cli, batched) })
	}
	g.Wait()
	if s.local != nil {
		s.local.Keep(ts)
	}
}

// txnKeys is how many keys' marks one transaction moves: etcd refuses a
// transaction of more than --max-txn-ops (128 by default) comparisons or
// puts.
const txnKeys = 128

// takeAll takes the segments of all, each above its After, or of a key
// made here (After 0) where etcd has none, in one transaction. If a mark
// moved (another server took the key, or this server's copy is behind
// etcd's, as after a graceful stop whose give-back did not end), the
// same transaction read every mark: the keys whose marks read as
// expected go again in one transaction, compared by revision, and only
// a key etcd lost, or one that keeps moving, is taken on its own. So a
// batch costs two round trips, not two per key, whatever moved.
func (s *Sequences) takeAll(ctx context.Context, cli *clientv3.Client, all []*sequence.Take) {
	bs := make([]batchTake, 0, len(all))
	for _, t := range all {
		b := batchTake{t: t, mark: t.After, made: t.After == 0}
		if s.clustered {
			if b.term = s.slots.begin(t.Key); !s.slots.still(t.Key, b.term) {
				t.Err = sequence.ErrNotServed
				continue
			}
		}
		bs = append(bs, b)
	}
	var alone []batchTake
	for try := 0; len(bs) > 0; try++ {
		if try == batchTries {
			alone = append(alone, bs...)
			break
		}
		cmps, puts, gets := make([]clientv3.Cmp, len(bs)), make([]clientv3.Op, len(bs)), make([]clientv3.Op, len(bs))
		for i, b := range bs {
			cmps[i], puts[i], gets[i] = b.cmp(s.prefix), clientv3.OpPut(s.prefix+b.t.Key, strconv.FormatInt(b.last(), 10)), clientv3.OpGet(s.prefix+b.t.Key)
		}
		sent := s.hist.At()
		resp, err := cli.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
		if errors.Is(err, rpctypes.ErrTooManyOps) {
			alone = append(alone, bs...)
			break
		}
		if err = s.answered(sent, resp, err); err != nil {
			for _, b := range bs {
				b.t.Err = err
			}
			break
		}
		if resp.Succeeded {
			s.granted(ctx, cli, bs, resp.Header.Revision)
			break
		}
		var again []batchTake
		for i, b := range bs {
			if b, ok := s.replan(b, resp.Responses[i].GetResponseRange().Kvs); ok {
				again = append(again, b)
			} else if b.t.Err == nil {
				alone = append(alone, b)
			}
		}
		bs = again
	}
	s.takeEach(ctx, cli, alone)
}

// batchTries bounds the transactions of one batch whose marks keep
// moving (other servers take the same keys): its keys are then taken
// one by one.
const batchTries = 3

// batchTake is a key's part in a transaction of many (takeAll).
type batchTake struct {
	t    *sequence.Take
	term uint32 // its slot's term (a Redis Cluster node)
	mark int64  // the segment lies above it
	rev  int64  // the mark's revision, as read; 0: compare its value with mark (or, made, that it has none)
	made bool   // etcd has no mark of the key: this take makes it
}

// cmp is b's condition in the transaction.
func (b batchTake) cmp(prefix string) clientv3.Cmp {
	k := prefix + b.t.Key
	switch {
	case b.rev != 0:
		return clientv3.Compare(clientv3.ModRevision(k), "=", b.rev)
	case b.made:
		return clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
	}
	return clientv3.Compare(clientv3.Value(k), "=", strconv.FormatInt(b.mark, 10))
}

// last is the end of b's segment: N above its mark, but for the largest
// value.
func (b batchTake) last() int64 { return b.mark + min(b.t.N, math.MaxInt64-b.mark) }

// replan is b again, compared with its mark as the failed transaction
// read it (kvs), if that mark is one a batch may take above: not lost,
// not below what this server took, not at the largest value, and, if
// none, not deleted lately. Otherwise b is taken on its own (take finds
// out why), or fails with the mark's error.
func (s *Sequences) replan(b batchTake, kvs []*mvccpb.KeyValue) (batchTake, bool) {
	cur, err := s.parse(b.t.Key, kvs)
	switch {
	case err != nil:
		b.t.Err = err
		return b, false
	case cur.lost || cur.mark < b.t.After || cur.mark == math.MaxInt64:
		return b, false
	case cur.rev == 0:
		made := b.t.After == 0 && s.deletedMark(b.t.Key) == 0
		return batchTake{t: b.t, term: b.term, made: true}, made
	}
	return batchTake{t: b.t, term: b.term, mark: cur.mark, rev: cur.rev}, true
}

// granted ends the takes of a batch whose transaction succeeded, at rev.
func (s *Sequences) granted(ctx context.Context, cli *clientv3.Client, bs []batchTake, rev int64) {
	for _, b := range bs {
		t := b.t
		if b.made {
			t.Err = s.madeHere(ctx, cli, t, rev)
		} else {
			t.First, t.Last, t.Born = b.mark+1, b.last(), true
		}
		if t.Err == nil && s.clustered && !s.slots.still(t.Key, b.term) {
			t.Err = sequence.ErrNotServed // its mark stays in etcd: the values are skipped
		}
	}
}

// takeEach takes each of bs on its own, a few at a time.
func (s *Sequences) takeEach(ctx context.Context, cli *clientv3.Client, bs []batchTake) {
	var g errgroup.Group
	g.SetLimit(eachTakers)
	for _, b := range bs {
		g.Go(func() error { s.takeServed(ctx, cli, b.t); return nil })
	}
	g.Wait()
}

// eachTakers bounds the keys of one batch taken on their own at once.
const eachTakers = 4

// madeHere ends the take of a key t made anew, its mark put at rev: as
// take's, above a delete of the key this server's watch had yet to bring
// (madeAnew), if one came before.
func (s *Sequences) madeHere(ctx context.Context, cli *clientv3.Client, t *sequence.Take, rev int64) error {
	last := t.N // made: the segment is 1 .. N
	deleted, err := s.madeAnew(ctx, t.Key, rev)
	switch {
	case err != nil:
		return err
	case deleted > 0:
		cmp := clientv3.Compare(clientv3.Value(s.prefix+t.Key), "=", strconv.FormatInt(last, 10))
		return s.takeFrom(ctx, cli, t, cmp, false, max(deleted, last))
	}
	t.First, t.Last, t.Born = 1, last, true
	return nil
}

// takeServed takes t on its own; on a Redis Cluster node, only if its
// key's slot is served all the while.
func (s *Sequences) takeServed(ctx context.Context, cli *clientv3.Client, t *sequence.Take) {
	if !s.clustered {
		t.Err = s.take(ctx, cli, t)
		return
	}
	term := s.slots.begin(t.Key)
	if !s.slots.still(t.Key, term) {
		t.Err = sequence.ErrNotServed
		return
	}
	if t.Err = s.take(ctx, cli, t); t.Err == nil && !s.slots.still(t.Key, term) {
		t.Err = sequence.ErrNotServed // its mark stays in etcd: the values are skipped
	}
}

// take moves t.Key's mark up by t.N, above t.After, and sets the values
// it took: the first try compares the mark with the one this server last
// wrote (After), and on a miss it reads the mark and compares its
// revision. A key not born is made by no take: one that does not exist
// is left to the take of the request that needs it.
func (s *Sequences) take(ctx context.Context, cli *clientv3.Client, t *sequence.Take) error {
	k := s.prefix + t.Key
	var cmp clientv3.Cmp
	read := false // read the mark first: a key only prepared is made by no take
	switch {
	case t.After > 0:
		cmp = clientv3.Compare(clientv3.Value(k), "=", strconv.FormatInt(t.After, 10))
	case t.Born:
		cmp = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
	default:
		read = true
	}
	mark := t.After
	if t.After == 0 {
		mark = s.deletedMark(t.Key) // a delete seen, not yet put back: take above it
	}
	return s.takeFrom(ctx, cli, t, cmp, read, mark)
}

// takeFrom is take's loop: a transaction that puts the mark t.N above
// mark if cmp holds (or, if read, a read of the mark first), until one
// succeeds or a loss or an error ends it.
func (s *Sequences) takeFrom(ctx context.Context, cli *clientv3.Client, t *sequence.Take, cmp clientv3.Cmp, read bool, mark int64) error {
	k := s.prefix + t.Key
	for {
		var kvs []*mvccpb.KeyValue
		if !read {
			// The Table asks for no value past the largest, but other
			// servers may have taken the key nearer it: the segment is
			// cut there.
			if mark == math.MaxInt64 {
				return sequence.ErrOverflow
			}
			first := mark + 1
			last := first + min(t.N-1, math.MaxInt64-first)
			sent := s.hist.At()
			resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(k, strconv.FormatInt(last, 10))).Else(clientv3.OpGet(k)).Commit()
			if err = s.answered(sent, resp, err); err != nil {
				return err
			}
			if resp.Succeeded && t.After == 0 && mark == 0 {
				// Made anew: a delete of the key this server has yet to
				// see may have come before (below).
				if deleted, err := s.madeAnew(ctx, t.Key, resp.Header.Revision); err != nil {
					return err
				} else if deleted > 0 {
					mark, cmp = max(deleted, last), clientv3.Compare(clientv3.Value(k), "=", strconv.FormatInt(last, 10))
					continue
				}
			}
			if resp.Succeeded {
				t.First, t.Last, t.Born = first, last, true
				return nil
			}
			kvs = resp.Responses[0].GetResponseRange().Kvs
		} else {
			sent := s.hist.At()
			resp, err := cli.Get(ctx, k)
			if err = s.answered(sent, resp, err); err != nil {
				return err
			}
			kvs = resp.Kvs
		}
		cur, err := s.parse(t.Key, kvs)
		switch {
		case err != nil:
			return err
		case cur.lost || cur.rev == 0 && t.After > 0 || cur.mark < t.After:
			return s.lose(ctx, cli, t.Key, cur, t.After)
		case cur.rev == 0 && !t.Born:
			return sequence.ErrNotCreated
		}
		mark, cmp, read = cur.mark, clientv3.Compare(clientv3.ModRevision(k), "=", cur.rev), false
	}
}

// answered checks etcd's answer to a request (a Txn or a Get) sent when
// etcd stood at sent: its error, named, or whether etcd went back in time
// (then this server's marks are written back, once).
func (s *Sequences) answered(sent etcdsession.SentAt, resp any, err error) error {
	if err != nil {
		return etcdsession.Error(err)
	}
	var hdr *etcdserverpb.ResponseHeader
	switch r := resp.(type) {
	case *clientv3.TxnResponse:
		hdr = r.Header
	case *clientv3.GetResponse:
		hdr = r.Header
	}
	if err := s.hist.Observe(sent, hdr); err != nil {
		s.restore(err)
		return err
	}
	return nil
}

// lose flags key lost in etcd, at the highest mark known (etcd's, and
// own, this server's copy), and returns why its values are refused.
func (s *Sequences) lose(ctx context.Context, cli *clientv3.Client, key string, cur seen, own int64) error {
	why := &sequence.LostError{Key: key, Mark: max(cur.mark, own)}
	switch {
	case cur.lost && cur.mark >= own:
		why.Cause = "a server found etcd's mark below what it had taken, and flagged it"
		return why
	case cur.rev == 0:
		why.Cause = fmt.Sprintf("etcd has no mark of it, though this server took values up to %d", own)
	case cur.lost:
		why.Cause = fmt.Sprintf("etcd lost its mark before, and this server took values up to %d", own)
	default:
		why.Cause = fmt.Sprintf("etcd's mark is %d, below %d this server took", cur.mark, own)
	}
	k := s.prefix + key
	_, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", cur.rev)).
		Then(clientv3.OpPut(k, strconv.FormatInt(why.Mark, 10)+lostFlag)).
		Commit()
	if err != nil {
		return fmt.Errorf("%w; and flagging it in etcd failed: %w", why, etcdsession.Error(err))
	}
	s.log.Error().Str("key", key).Str("cause", why.Cause).Int64("flagged_at", why.Mark).
		Msg("sequences: etcd lost data (keys deleted, or etcd restored from an older snapshot?); the key is flagged lost, its values refused until an operator SETs it at or above the largest value handed out")
	return why
}

// lostFlag follows the mark of a key flagged lost in etcd.
const lostFlag = " lost"

// restore writes back, once etcd went back in time (back), every mark
// of this server's above etcd's, off the request path; again only if
// that failed, or etcd went back again after an operator confirmed.
func (s *Sequences) restore(back error) {
	s.mu.Lock()
	if s.restoring || s.table == nil || s.restored == back {
		s.mu.Unlock()
		return
	}
	s.restoring = true
	s.mu.Unlock()
	go func() {
		marks := s.table.Marks()
		raised, err := s.raise(marks)
		s.mu.Lock()
		s.restoring = false
		if err == nil {
			s.restored = back
		}
		s.mu.Unlock()
		if err != nil {
			s.log.Error().Err(err).Int("keys", len(marks)).Int("raised", raised).
				Msg("sequences: etcd went back in time; writing this server's marks back above etcd's failed, trying again; takes stay refused")
			return
		}
		s.log.Warn().Int("keys", len(marks)).Int("raised", raised).
			Msg("sequences: etcd went back in time; wrote back this server's marks above etcd's; takes stay refused until an operator confirms (docs/cluster.md)")
	}()
}

// raise puts each mark back in etcd where etcd's is lower, keeping a
// key's lost flag, and counts them.
func (s *Sequences) raise(marks []sequence.Mark) (int, error) {
	cli, err := s.client()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var raised atomic.Int64
	var g errgroup.Group
	g.SetLimit(takers)
	for _, m := range marks {
		g.Go(func() error {
			ok, err := s.raiseOne(ctx, cli, m.Key, m.Reserved)
			if ok {
				raised.Add(1)
			}
			return err
		})
	}
	err = g.Wait()
	return int(raised.Load()), err
}

func (s *Sequences) raiseOne(ctx context.Context, cli *clientv3.Client, key string, mark int64) (bool, error) {
	k := s.prefix + key
	for {
		resp, err := cli.Get(ctx, k)
		if err != nil {
			return false, etcdsession.Error(err)
		}
		cur, err := s.parse(key, resp.Kvs)
		if err != nil || cur.rev != 0 && cur.mark >= mark {
			return false, err
		}
		v := strconv.FormatInt(mark, 10)
		if cur.lost {
			v += lostFlag
		}
		tx, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", cur.rev)).Then(clientv3.OpPut(k, v)).Commit()
		if err != nil {
			return false, etcdsession.Error(err)
		}
		if tx.Succeeded {
			return true, nil
		}
	}
}

// seen is a key's mark as read in etcd, with its revision (0: the key
// does not exist), and whether it is flagged lost.
type seen struct {
	mark, rev int64
	lost      bool
}

// parse reads key's mark from kvs, a Get of it.
func (s *Sequences) parse(key string, kvs []*mvccpb.KeyValue) (seen, error) {
	if len(kvs) == 0 {
		return seen{}, nil
	}
	v, flag, _ := strings.Cut(string(kvs[0].Value), " ")
	mark, err := strconv.ParseInt(v, 10, 64)
	if err != nil || mark < 0 || flag != "" && " "+flag != lostFlag {
		return seen{}, fmt.Errorf("etcd: %s%s holds %q, not a sequence's mark", s.prefix, key, kvs[0].Value)
	}
	return seen{mark: mark, rev: kvs[0].ModRevision, lost: flag != ""}, nil
}

// Set stores each value of ss as its key's mark if no server took a
// value above it, with its mode's condition on the key's existence:
// txnKeys at a time, each batch a read of their marks and a transaction
// that compares each key's revision with the one read (read again and
// retried for the keys still settable, if one moved), then this
// server's copy of those stored, in one write. So a pipeline of SETs
// of many keys costs two round trips a batch, not two a key.
func (s *Sequences) Set(ctx context.Context, ss []sequence.Setting) {
	if cli, err := s.client(); err != nil {
		for i := range ss {
			ss[i].Err = err
		}
	} else {
		var g errgroup.Group
		g.SetLimit(takers)
		for i := 0; i < len(ss); i += txnKeys {
			batch := ss[i:min(len(ss), i+txnKeys)]
			g.Go(func() error { s.setAll(ctx, cli, batch); return nil })
		}
		g.Wait()
	}
	if s.local != nil {
		s.local.Set(ctx, ss) // those etcd refused keep their error
	}
}

// setAll stores ss, as Set does, in one transaction (or, if etcd allows
// fewer operations, or their marks keep moving, key by key).
func (s *Sequences) setAll(ctx context.Context, cli *clientv3.Client, ss []sequence.Setting) {
	gets := make([]clientv3.Op, len(ss))
	for i := range ss {
		gets[i] = clientv3.OpGet(s.prefix + ss[i].Key)
	}
	sent := s.hist.At()
	resp, err := cli.Txn(ctx).Then(gets...).Commit()
	pending := make([]*sequence.Setting, len(ss))
	for i := range ss {
		pending[i] = &ss[i]
	}
	for try := 0; ; try++ {
		if errors.Is(err, rpctypes.ErrTooManyOps) || err == nil && try == batchTries {
			for _, x := range pending {
				x.Err = s.set(ctx, cli, x)
			}
			return
		}
		if err = s.answered(sent, resp, err); err != nil {
			for _, x := range pending {
				x.Err = err
			}
			return
		}
		var cmps []clientv3.Cmp
		var puts []clientv3.Op
		kept := pending[:0:0]
		for i, x := range pending {
			cur, err := s.parse(x.Key, resp.Responses[i].GetResponseRange().Kvs)
			if x.Err = settable(x, cur, err); x.Err != nil {
				continue
			}
			k := s.prefix + x.Key
			kept = append(kept, x)
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", cur.rev))
			puts = append(puts, clientv3.OpPut(k, strconv.FormatInt(x.Value, 10)))
		}
		if pending = kept; len(pending) == 0 {
			return
		}
		gets = gets[:0]
		for _, x := range pending {
			gets = append(gets, clientv3.OpGet(s.prefix+x.Key))
		}
		sent = s.hist.At()
		if resp, err = cli.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit(); err == nil && resp.Succeeded {
			return
		}
	}
}

// settable is why x may not be stored over cur, its key's mark as read
// (with the read's error), or nil. A key flagged lost is set plainly:
// the operator's step that ends the refusal.
func settable(x *sequence.Setting, cur seen, err error) error {
	switch {
	case err != nil:
		return err
	case x.Mode == sequence.IfNew && cur.rev != 0:
		return sequence.ErrExists
	case x.Mode == sequence.IfOld && cur.rev == 0:
		return sequence.ErrMissing
	case x.Value < cur.mark:
		return &sequence.BelowError{Key: x.Key, At: cur.mark}
	}
	return nil
}

// set stores x in etcd, as Set does, on its own.
func (s *Sequences) set(ctx context.Context, cli *clientv3.Client, x *sequence.Setting) error {
	k := s.prefix + x.Key
	for {
		sent := s.hist.At()
		resp, err := cli.Get(ctx, k)
		if err = s.answered(sent, resp, err); err != nil {
			return err
		}
		cur, err := s.parse(x.Key, resp.Kvs)
		if err = settable(x, cur, err); err != nil {
			return err
		}
		tx, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(k), "=", cur.rev)).
			Then(clientv3.OpPut(k, strconv.FormatInt(x.Value, 10))).
			Commit()
		if err != nil {
			return etcdsession.Error(err)
		}
		if tx.Succeeded {
			return nil
		}
	}
}

// Release gives back, at a graceful stop, what this server reserved and
// did not hand out, where no server took a segment of the key since (its
// mark is still the one this server wrote): its mark goes back to the
// last value handed out. This server's copy goes back first: a copy
// above etcd's mark would read as etcd having lost data.
func (s *Sequences) Release(ctx context.Context, marks []sequence.Mark) error {
	if s.local != nil {
		// Each key's copy goes back to its last value, as its mark in
		// etcd does: other servers may take the rest.
		given := make([]sequence.Mark, len(marks))
		for i, m := range marks {
			given[i] = sequence.Mark{Key: m.Key, Value: m.Value, Reserved: m.Value, Born: m.Born}
		}
		if err := s.local.Release(ctx, given); err != nil {
			return err
		}
	}
	cli, err := s.client()
	if err != nil {
		return err
	}
	var g errgroup.Group
	g.SetLimit(takers)
	for len(marks) > 0 {
		ms := marks[:min(len(marks), txnKeys)]
		marks = marks[len(ms):]
		g.Go(func() error { return s.giveBack(ctx, cli, ms) })
	}
	return g.Wait()
}

// giveBack lowers, in one transaction, each mark of ms that is still
// what this server reserved to the last value it handed out. A mark
// that moved (another server took the key since) stays as it is; the
// others go again.
func (s *Sequences) giveBack(ctx context.Context, cli *clientv3.Client, ms []sequence.Mark) error {
	for try := 0; len(ms) > 0 && try < batchTries; try++ {
		cmps, puts, gets := make([]clientv3.Cmp, len(ms)), make([]clientv3.Op, len(ms)), make([]clientv3.Op, len(ms))
		for i, m := range ms {
			k := s.prefix + m.Key
			cmps[i] = clientv3.Compare(clientv3.Value(k), "=", strconv.FormatInt(m.Reserved, 10))
			puts[i], gets[i] = clientv3.OpPut(k, strconv.FormatInt(m.Value, 10)), clientv3.OpGet(k)
		}
		resp, err := cli.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
		switch {
		case errors.Is(err, rpctypes.ErrTooManyOps) && len(ms) > 1:
			for i := range ms {
				if err := s.giveBack(ctx, cli, ms[i:i+1]); err != nil {
					return err
				}
			}
			return nil
		case err != nil:
			return etcdsession.Error(err)
		case resp.Succeeded:
			return nil
		}
		var still []sequence.Mark
		for i, m := range ms {
			kvs := resp.Responses[i].GetResponseRange().Kvs
			if len(kvs) == 1 && string(kvs[0].Value) == strconv.FormatInt(m.Reserved, 10) {
				still = append(still, m)
			}
		}
		ms = still
	}
	return nil
}

// FoldDue and Fold fold this server's copy of its marks (sequence.File).
func (s *Sequences) FoldDue(keys int) bool { return s.local != nil && s.local.FoldDue(keys) }

// Fold: see FoldDue.
func (s *Sequences) Fold(snapshot func() []sequence.Mark) <-chan error { return s.local.Fold(snapshot) }

// Marks reads the mark of each key, in transactions of up to 100 reads
// (etcd's limit of operations in one is 128 by default).
func (s *Sequences) Marks(ctx context.Context, keys []string) ([]int64, []bool, error) {
	cli, err := s.client()
	if err != nil {
		return nil, nil, err
	}
	marks, exist := make([]int64, len(keys)), make([]bool, len(keys))
	for at := 0; at < len(keys); at += 100 {
		chunk := keys[at:min(at+100, len(keys))]
		ops := make([]clientv3.Op, len(chunk))
		for i, k := range chunk {
			ops[i] = clientv3.OpGet(s.prefix + k)
		}
		sent := s.hist.At()
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err = s.answered(sent, resp, err); err != nil {
			return nil, nil, err
		}
		for i, r := range resp.Responses {
			v, err := s.parse(chunk[i], r.GetResponseRange().Kvs)
			if err != nil {
				return nil, nil, err
			}
			marks[at+i], exist[at+i] = v.mark, v.rev != 0
		}
	}
	return marks, exist, nil
}

// Count is the number of keys.
func (s *Sequences) Count(ctx context.Context) (int, error) {
	cli, err := s.client()
	if err != nil {
		return 0, err
	}
	resp, err := cli.Get(ctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, etcdsession.Error(err)
	}
	return int(resp.Count), nil
}

// Scan returns up to count keys in etcd's order from cursor on, and the
// cursor to go on from: 0 after the last. A cursor names the last key a
// scan returned, kept here (scans), so that the scan goes on after it
// whatever was added meanwhile.
func (s *Sequences) Scan(ctx context.Context, cursor uint64, count int) ([]string, uint64, error) {
	cli, err := s.client()
	if err != nil {
		return nil, 0, err
	}
	from := s.prefix
	if cursor != 0 {
		s.mu.Lock()
		last, ok := s.scans.at(cursor)
		s.mu.Unlock()
		if !ok {
			return nil, 0, errors.New("invalid cursor: not one this server returned, or one of over 1024 scans ago")
		}
		from = s.prefix + last + "\x00"
	}
	resp, err := cli.Get(ctx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.prefix)), clientv3.WithKeysOnly(), clientv3.WithLimit(int64(count)))
	if err != nil {
		return nil, 0, etcdsession.Error(err)
	}
	keys := make([]string, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		keys[i] = string(kv.Key[len(s.prefix):])
	}
	if !resp.More || len(keys) == 0 {
		return keys, 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return keys, s.scans.add(keys[len(keys)-1]), nil
}

// scans are the cursors of the SCANs under way: each names the last key
// returned. The oldest are forgotten past 1024.
type scans struct {
	last  map[uint64]string
	order []uint64
}

func (sc *scans) add(key string) uint64 {
	if sc.last == nil {
		sc.last = map[uint64]string{}
	}
	if len(sc.order) >= 1024 {
		delete(sc.last, sc.order[0])
		sc.order = sc.order[1:]
	}
	id := 1 + rand.Uint64N(1<<53-1) // exact in a JavaScript Number
	sc.last[id] = key
	sc.order = append(sc.order, id)
	return id
}

func (sc *scans) at(id uint64) (string, bool) {
	key, ok := sc.last[id]
	return key, ok
}
