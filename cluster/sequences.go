package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/sequence"
)

// Sequences keeps the sequences of every server under the prefix in
// etcd: each key's mark, <prefix>seq/<key>, is at or above every value
// any server took of it. A server takes a segment by moving the mark up
// in a transaction that compares the mark's revision with the one it
// read, so no two servers' segments of a key overlap, and each server's
// segments of a key lie above its own earlier ones (Take's After). It is
// a sequence.Backend and a sequence.Reader.
//
// Values are unique across servers; per server they strictly increase,
// across servers they only trend upward (a server hands out the rest of
// its segment while another has taken the next one). A server that has
// segments in hand serves them while etcd is unreachable, nothing past
// them.
type Sequences struct {
	client func() (*clientv3.Client, error)
	prefix string // <etcd-prefix>seq/

	mu    sync.Mutex
	marks map[string]seen // the mark and revision of each key as last read or written
	scans scans
}

// seen is a key's mark as this server last saw it, with its revision
// (0: the key does not exist).
type seen struct{ mark, rev int64 }

// takers bounds the transactions one Take runs at once.
const takers = 16

// Sequences returns the sequences' backend of the etcd m uses.
func (m *Member) Sequences() *Sequences {
	return &Sequences{client: m.etcd, prefix: m.cfg.Prefix + "seq/", marks: map[string]seen{}}
}

// etcd is the client, once connected.
func (m *Member) etcd() (*clientv3.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cli == nil {
		return nil, errors.New("etcd: not connected yet")
	}
	return m.cli, nil
}

// Take takes each segment in its own transaction, takers at a time.
func (s *Sequences) Take(ctx context.Context, ts []sequence.Take) {
	cli, err := s.client()
	if err != nil {
		for i := range ts {
			ts[i].Err = err
		}
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, takers)
	for i := range ts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ts[i].First, ts[i].Last, ts[i].Err = s.take(ctx, cli, ts[i].Key, ts[i].After, ts[i].N)
		})
	}
	wg.Wait()
}

// take moves key's mark up by n, above after, and returns the values it
// took: compare the revision last seen, and on a miss read it again.
func (s *Sequences) take(ctx context.Context, cli *clientv3.Client, key string, after, n int64) (first, last int64, err error) {
	k := s.prefix + key
	cur := s.lastSeen(key)
	for {
		// The Table asks for no value past the largest, but other servers
		// may have taken the key nearer it: the segment is cut there.
		if max(cur.mark, after) == math.MaxInt64 {
			return 0, 0, sequence.ErrOverflow
		}
		first = max(cur.mark, after) + 1
		last = first + min(n-1, math.MaxInt64-first)
		resp, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(k), "=", cur.rev)).
			Then(clientv3.OpPut(k, strconv.FormatInt(last, 10))).
			Else(clientv3.OpGet(k)).
			Commit()
		if err != nil {
			return 0, 0, etcdError(err)
		}
		if resp.Succeeded {
			s.saw(key, seen{last, resp.Header.Revision})
			return first, last, nil
		}
		if cur, err = s.parse(key, resp.Responses[0].GetResponseRange().Kvs); err != nil {
			return 0, 0, err
		}
	}
}

// parse reads key's mark from kvs, a Get of it, and remembers it.
func (s *Sequences) parse(key string, kvs []*mvccpb.KeyValue) (seen, error) {
	if len(kvs) == 0 {
		s.saw(key, seen{})
		return seen{}, nil
	}
	mark, err := strconv.ParseInt(string(kvs[0].Value), 10, 64)
	if err != nil || mark < 0 {
		return seen{}, fmt.Errorf("etcd: %s%s holds %q, not a sequence's mark", s.prefix, key, kvs[0].Value)
	}
	v := seen{mark, kvs[0].ModRevision}
	s.saw(key, v)
	return v, nil
}

func (s *Sequences) lastSeen(key string) seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marks[key]
}

func (s *Sequences) saw(key string, v seen) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks[key] = v
}

// Set stores v as key's mark if no server took a value above it, with
// mode's condition on the key's existence.
func (s *Sequences) Set(ctx context.Context, key string, v int64, mode sequence.SetMode) error {
	cli, err := s.client()
	if err != nil {
		return err
	}
	k := s.prefix + key
	for {
		resp, err := cli.Get(ctx, k)
		if err != nil {
			return etcdError(err)
		}
		cur, err := s.parse(key, resp.Kvs)
		switch {
		case err != nil:
			return err
		case mode == sequence.IfNew && cur.rev != 0:
			return sequence.ErrExists
		case mode == sequence.IfOld && cur.rev == 0:
			return sequence.ErrMissing
		case v < cur.mark:
			return &sequence.BelowError{Key: key, At: cur.mark}
		}
		tx, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(k), "=", cur.rev)).
			Then(clientv3.OpPut(k, strconv.FormatInt(v, 10))).
			Commit()
		if err != nil {
			return etcdError(err)
		}
		if tx.Succeeded {
			s.saw(key, seen{v, tx.Header.Revision})
			return nil
		}
	}
}

// Release gives back, at a graceful stop, what this server reserved and
// did not hand out, where no server took a segment of the key since: its
// mark goes back to the last value handed out.
func (s *Sequences) Release(ctx context.Context, marks []sequence.Mark) error {
	cli, err := s.client()
	if err != nil {
		return err
	}
	for _, m := range marks {
		cur := s.lastSeen(m.Key)
		if cur.rev == 0 || cur.mark != m.Reserved {
			continue // another server took a segment since: keep its mark
		}
		_, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(s.prefix+m.Key), "=", cur.rev)).
			Then(clientv3.OpPut(s.prefix+m.Key, strconv.FormatInt(m.Value, 10))).
			Commit()
		if err != nil {
			return etcdError(err)
		}
	}
	return nil
}

// etcdError names etcd's NOSPACE alarm, or says the error is etcd's.
func etcdError(err error) error {
	if errors.Is(err, rpctypes.ErrNoSpace) {
		return fmt.Errorf("etcd's NOSPACE alarm is raised: its database reached its quota (compact and defragment etcd, then disarm the alarm; see docs/cluster.md): %w", err)
	}
	return fmt.Errorf("etcd: %w", err)
}

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
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, nil, etcdError(err)
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
		return 0, etcdError(err)
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
		return nil, 0, etcdError(err)
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
