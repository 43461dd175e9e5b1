package seqslots

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/slots"
)

// Known is the highest record of each slot this server has seen, its own
// writes and the others' (it follows the records), kept beside its keys
// so that a restart remembers them. It is what survives etcd losing
// data: a record deleted by hand, or the whole prefix, is taken from the
// higher of etcd's and this, so that no generation and no ceiling goes
// back while a server that saw it runs or comes back with its directory
// (docs/cluster.md, When etcd loses data).
type Known struct {
	// saveMu is held across a write of the file, so that Keep, once it
	// holds it, finds every record a flush took from dirty written.
	saveMu sync.Mutex
	mu     sync.Mutex
	recs   []Record // by slot; Gen 0: none seen
	revs   []int64  // by slot: the revision the record in recs was seen at (0: from the file)
	dirty  map[int]bool
	save   func(map[int]Record) error
	log    zerolog.Logger
}

// NewKnown returns what loaded says was seen, written back with save
// (nil: kept in memory only).
func NewKnown(loaded map[int]Record, save func(map[int]Record) error, log zerolog.Logger) *Known {
	k := &Known{recs: make([]Record, slots.N), revs: make([]int64, slots.N), dirty: map[int]bool{}, save: save, log: log}
	for s, r := range loaded {
		if s >= 0 && s < slots.N {
			k.recs[s] = r
		}
	}
	return k
}

// see records r as seen for slot at revision rev, where it is above
// what was.
func (k *Known) see(slot int, r Record, rev int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if m := higher(k.recs[slot], r); m != k.recs[slot] {
		k.recs[slot], k.revs[slot] = m, max(k.revs[slot], rev)
		k.dirty[slot] = true
	}
}

// get is what this server saw of slot's record (none: Gen 0).
func (k *Known) get(slot int) Record {
	if k == nil {
		return Record{}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.recs[slot]
}

// Seen returns what this server saw of the records of list (those it saw
// any of), as a take elsewhere asks for them (Engine's Ask): a record
// deleted from etcd stays here.
func (k *Known) Seen(list []int) map[int]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[int]string{}
	for _, slot := range list {
		if slot >= 0 && slot < slots.N && k.recs[slot].Gen > 0 {
			out[slot] = k.recs[slot].marshal()
		}
	}
	return out
}

// lift returns r, read from etcd for slot at revision at, raised to what
// was seen of it, and whether etcd lost data: what was seen at or before
// at is above r. (Seen after at, it is only newer than the read, whose
// take's compare-and-swap then fails and reads again.)
func (k *Known) lift(slot int, r Record, at int64) (Record, bool) {
	if k == nil {
		return r, false
	}
	k.mu.Lock()
	seen, rev := k.recs[slot], k.revs[slot]
	k.mu.Unlock()
	m := higher(r, seen)
	return m, m != r && rev <= at
}

// higher is the higher of two records of a slot, field by field: the
// generation and the ceiling never go back, nor the floor; the owner is
// that of the later generation.
func higher(a, b Record) Record {
	if b.Gen > a.Gen {
		a.Owner = b.Owner
	}
	a.Gen, a.Ceil, a.Floor = max(a.Gen, b.Gen), max(a.Ceil, b.Ceil), max(a.Floor, b.Floor)
	return a
}

// Follow watches the slot records under prefix (as New's) until ctx
// ends, and writes what it learns back once a second.
func (k *Known) Follow(ctx context.Context, cli *clientv3.Client, prefix string) {
	prefix += "seqslot/"
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for ctx.Err() == nil {
		rev, err := k.readAll(ctx, cli, prefix)
		if err != nil {
			if !sleep(ctx, time.Second) {
				return
			}
			continue
		}
		w := cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	watching:
		for {
			select {
			case <-ctx.Done():
				k.flush()
				return
			case <-tick.C:
				k.flush()
			case resp, ok := <-w:
				if !ok || resp.Err() != nil {
					break watching // read everything again, and watch from there
				}
				var deleted []string
				for _, ev := range resp.Events {
					if ev.Type == clientv3.EventTypeDelete {
						deleted = append(deleted, string(ev.Kv.Key))
					}
					k.learn(prefix, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision)
				}
				k.writeBack(ctx, cli, prefix, deleted)
			}
		}
	}
}

// readAll learns every record under prefix, after writing back those
// etcd holds below what this server saw (raiseBehind, read and tried
// again until no other write comes first), and returns the revision read
// at.
func (k *Known) readAll(ctx context.Context, cli *clientv3.Client, prefix string) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var resp *clientv3.GetResponse
	written := 0
	for { // until no other write came first: each that did, made progress
		var err error
		if resp, err = cli.Get(rctx, prefix, clientv3.WithPrefix()); err != nil {
			return 0, err
		}
		n, behind, err := k.raiseBehind(rctx, cli, prefix, resp.Kvs)
		written += n
		if err != nil {
			k.log.Warn().Err(err).Msg("sequences: could not write back the slot records etcd holds below what this server saw")
		}
		if err != nil || !behind {
			break
		}
	}
	if written > 0 {
		k.log.Warn().Int("records", written).Msg("etcd lost data: slot records below what this server saw (or missing) written back")
	}
	for _, kv := range resp.Kvs {
		k.learn(prefix, kv.Key, kv.Value, kv.ModRevision)
	}
	return resp.Header.Revision, nil
}

// raiseBehind writes back, where no write came since, what this server
// saw of the records etcd holds (kvs) below it or not at all (lost while
// this server did not watch: etcd restored from an older snapshot, or
// records deleted while it was down), so that a server that saw less of
// them (a new dir) does not take their slots from what is left. Each
// record is compared with its revision as read (its absence with none).
// It returns how many it wrote, and whether some were not written for
// another write came first (another server writing back what it saw, say:
// read again and compare, else the lower of the two stays).
func (k *Known) raiseBehind(ctx context.Context, cli *clientv3.Client, prefix string, kvs []*mvccpb.KeyValue) (written int, behind bool, err error) {
	inEtcd := make(map[int]*mvccpb.KeyValue, len(kvs))
	for _, kv := range kvs {
		if slot, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), prefix)); err == nil {
			inEtcd[slot] = kv
		}
	}
	var cmps []clientv3.Cmp
	var puts []clientv3.Op
	k.mu.Lock()
	for slot, seen := range k.recs {
		if seen.Gen == 0 {
			continue
		}
		key := prefix + strconv.Itoa(slot)
		kv, ok := inEtcd[slot]
		if !ok {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
			puts = append(puts, clientv3.OpPut(key, seen.marshal()))
			continue
		}
		r, err := unmarshal(kv.Value)
		if m := higher(r, seen); err == nil && m != r {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision))
			puts = append(puts, clientv3.OpPut(key, m.marshal()))
		}
	}
	k.mu.Unlock()
	for from := 0; from < len(puts); from += txnOps {
		to := min(from+txnOps, len(puts))
		resp, err := cli.Txn(ctx).If(cmps[from:to]...).Then(puts[from:to]...).Commit()
		if err != nil {
			return written, behind, err
		}
		if resp.Succeeded {
			written += to - from
		} else {
			behind = true
		}
	}
	return written, behind, nil
}

// learn records the record at key, written at revision rev, if it is one (a deletion is not: it
// lowers nothing).
func (k *Known) learn(prefix string, key, value []byte, rev int64) {
	slot, err := strconv.Atoi(strings.TrimPrefix(string(key), prefix))
	if err != nil || slot < 0 || slot >= slots.N || len(value) == 0 {
		return
	}
	if r, err := unmarshal(value); err == nil {
		k.see(slot, r, rev)
	}
}

// writeBack puts back, where no record was made since, what this server
// saw of the records deleted at keys: a server that saw nothing of them
// (a new dir) may take their slots next, and would start them from
// nothing while this one knows their ceilings. Owners see their
// compare-and-swap fail and take again from the record put back.
func (k *Known) writeBack(ctx context.Context, cli *clientv3.Client, prefix string, keys []string) {
	for part := range slices.Chunk(keys, txnOps) {
		n, err := k.putBack(ctx, cli, prefix, part)
		if err != nil {
			k.log.Warn().Err(err).Msg("sequences: could not put back slot records etcd lost; a server that saw none of them may take their slots from nothing")
		} else if n > 0 {
			k.log.Warn().Int("records", n).Msg("etcd lost data: slot records were deleted; put back what this server saw of them")
		}
	}
}

// putBack writes the records seen of the slots at keys whose keys do
// not exist, in one transaction, and returns how many it wrote. Keys
// made again meanwhile (by another server putting back, or an owner) are
// left out, and the rest tried again.
func (k *Known) putBack(ctx context.Context, cli *clientv3.Client, prefix string, keys []string) (int, error) {
	for range 3 {
		var cmps []clientv3.Cmp
		var puts []clientv3.Op
		k.mu.Lock()
		for _, key := range keys {
			slot, err := strconv.Atoi(strings.TrimPrefix(key, prefix))
			if err == nil && slot >= 0 && slot < slots.N && k.recs[slot].Gen > 0 {
				cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
				puts = append(puts, clientv3.OpPut(key, k.recs[slot].marshal()))
			}
		}
		k.mu.Unlock()
		if len(puts) == 0 {
			return 0, nil
		}
		resp, err := cli.Txn(ctx).If(cmps...).Then(puts...).Commit()
		if err != nil || resp.Succeeded {
			return len(puts), err
		}
		now, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return 0, err
		}
		made := map[string]bool{}
		for _, kv := range now.Kvs {
			made[string(kv.Key)] = true
		}
		keys = slices.DeleteFunc(keys, func(key string) bool { return made[key] })
	}
	return 0, nil
}

// flush writes what was learnt since the last flush.
func (k *Known) flush() {
	if err := k.write(nil); err != nil {
		k.log.Warn().Err(err).Msg("sequences: could not keep the slot records seen; a restart remembers those kept before")
	}
}

// Keep writes the records of list not written yet, now. An owner keeps
// its own takes and raises so before it hands out a value below them:
// its directory then remembers every ceiling it handed values out below,
// whatever etcd loses while it is down (the once-a-second flush alone
// lost a raise made just before a kill -9, and a value was handed out
// twice after the prefix was deleted while every server was down).
func (k *Known) Keep(list []int) error {
	if k == nil || len(list) == 0 {
		return nil
	}
	return k.write(list)
}

// write writes the records of list (nil: every one) not written yet.
func (k *Known) write(list []int) error {
	k.saveMu.Lock()
	defer k.saveMu.Unlock()
	k.mu.Lock()
	if len(k.dirty) == 0 || k.save == nil {
		k.mu.Unlock()
		return nil
	}
	out := map[int]Record{}
	if list == nil {
		for s := range k.dirty {
			out[s] = k.recs[s]
		}
	}
	for _, s := range list {
		if k.dirty[s] {
			out[s] = k.recs[s]
		}
	}
	for s := range out {
		delete(k.dirty, s)
	}
	k.mu.Unlock()
	if len(out) == 0 {
		return nil
	}
	if err := k.save(out); err != nil {
		k.mu.Lock()
		for s := range out {
			k.dirty[s] = true
		}
		k.mu.Unlock()
		return err
	}
	return nil
}

// sleep waits d, and reports false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// A SeenStore keeps what a server saw of the slot records, beside its
// keys (the sequence File).
type SeenStore interface {
	SlotSeen() map[int][]byte
	SetSlotSeen(map[int][]byte) error
}

// KnownIn returns what store kept, written back to it; a record it
// cannot read is left out (and logged).
func KnownIn(store SeenStore, log zerolog.Logger) *Known {
	loaded := map[int]Record{}
	for s, b := range store.SlotSeen() {
		r, err := unmarshal(b)
		if err != nil {
			log.Warn().Err(err).Int("slot", s).Msg("sequences: a slot record kept in the file is unreadable; left out")
			continue
		}
		loaded[s] = r
	}
	save := func(recs map[int]Record) error {
		out := make(map[int][]byte, len(recs))
		for s, r := range recs {
			out[s] = []byte(r.marshal())
		}
		return store.SetSlotSeen(out)
	}
	return NewKnown(loaded, save, log)
}
