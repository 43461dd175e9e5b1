package seqslots

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/sequence"
)

// The previous version kept a mark per key in etcd, under
// <etcd-prefix>seq/<key> ("<mark>" or "<mark> lost"), every value of
// the key at or below it, and each of its servers said how far it
// followed them under <etcd-prefix>seq.followed/<server-id>, bound to a
// lease (docs/cluster.md, Upgrading from per-key marks).
const (
	oldMarks    = "seq/"
	oldFollowed = "seq.followed/"
	oldLostFlag = " lost"
)

// oldServers returns how many servers of the previous version run on
// this etcd prefix: each keeps a key under seq.followed/ while it runs.
func (s *Slots) oldServers(ctx context.Context) (int64, error) {
	resp, err := s.cli.Get(ctx, s.root+oldFollowed, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("look for servers of the previous version: %w", err)
	}
	return resp.Count, nil
}

// readOldMarks returns the previous version's marks, by hash slot, read
// a page at a time.
func (s *Slots) readOldMarks(ctx context.Context) (map[int][]sequence.Mark, error) {
	prefix := s.root + oldMarks
	out := map[int][]sequence.Mark{}
	from, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	for {
		resp, err := s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(1000))
		if err != nil {
			return nil, fmt.Errorf("read the previous version's marks: %w", err)
		}
		for _, kv := range resp.Kvs {
			key := strings.TrimPrefix(string(kv.Key), prefix)
			v, _, _ := strings.Cut(string(kv.Value), " ")
			mark, err := strconv.ParseInt(v, 10, 64)
			if err != nil || mark < 0 {
				return nil, fmt.Errorf("the previous version's mark %s holds %q", kv.Key, kv.Value)
			}
			slot := slotOf(key)
			out[slot] = append(out[slot], sequence.Mark{Key: key, Value: mark, Born: true})
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// flagOldMarks writes each of marks back flagged lost: a server of the previous version started again by mistake
// refuses those keys rather than hand out values this version may have
// handed out.
func (s *Slots) flagOldMarks(ctx context.Context, marks []sequence.Mark) error {
	for from := 0; from < len(marks); from += txnOps {
		part := marks[from:min(from+txnOps, len(marks))]
		ops := make([]clientv3.Op, len(part))
		for i, m := range part {
			ops[i] = clientv3.OpPut(s.root+oldMarks+m.Key, strconv.FormatInt(m.Value, 10)+oldLostFlag)
		}
		if _, err := s.txn(ctx, nil, ops); err != nil {
			return fmt.Errorf("flag the previous version's marks: %w", err)
		}
	}
	return nil
}
