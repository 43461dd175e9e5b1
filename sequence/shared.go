package sequence

import "context"

// Reader is a Backend other servers write too (etcd, in cluster mode):
// a Table's reads ask it, so that they see the values every server took.
type Reader interface {
	// Marks returns each key's mark, and whether it exists.
	Marks(ctx context.Context, keys []string) ([]int64, []bool, error)
	// Count is the number of keys.
	Count(ctx context.Context) (int, error)
	// Scan returns up to count keys from cursor on, and the cursor to go
	// on from: 0 after the last.
	Scan(ctx context.Context, cursor uint64, count int) ([]string, uint64, error)
}

// Shared reports whether other servers hand out values of the same keys
// (the backend is a Reader): then Lookup, Count and Scan ask it, and may
// wait, so they are called off the event loop.
func (t *Table) Shared() bool {
	_, ok := t.backend.(Reader)
	return ok
}

// Lookup returns each key's value and whether it exists: shared, the
// highest of this server's last value and the backend's mark (at or
// above every value any server took); otherwise this server's own.
func (t *Table) Lookup(keys []string) ([]int64, []bool, error) {
	vals, exist := make([]int64, len(keys)), make([]bool, len(keys))
	if r, ok := t.backend.(Reader); ok {
		ctx, cancel := context.WithTimeout(context.Background(), t.opts.Wait)
		defer cancel()
		var err error
		if vals, exist, err = r.Marks(ctx, keys); err != nil {
			return nil, nil, err
		}
	}
	for i, k := range keys {
		if v, ok := t.Get(k); ok {
			vals[i], exist[i] = max(vals[i], v), true
		}
	}
	return vals, exist, nil
}

// Count is the number of keys: shared, the backend's.
func (t *Table) Count() (int, error) {
	r, ok := t.backend.(Reader)
	if !ok {
		return t.Len(), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.opts.Wait)
	defer cancel()
	return r.Count(ctx)
}

// Scan returns up to count keys from cursor on, and the cursor to go on
// from: 0 after the last. Shared, the backend's keys; otherwise Keys.
func (t *Table) Scan(cursor uint64, count int) ([]string, uint64, error) {
	r, ok := t.backend.(Reader)
	if !ok {
		keys, next := t.Keys(cursor, count, nil)
		return keys, next, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.opts.Wait)
	defer cancel()
	return r.Scan(ctx, cursor, count)
}
