package sequence

import "context"

// Set makes v the key's value, durably before it returns, if v is at
// least its value now (else a *BelowError): the next Incr hands out
// v + 1. mode says whether the key must be new or existing.
func (t *Table) Set(key string, v int64, mode SetMode) error {
	e, err := t.hold(key, v, mode)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.opts.Wait)
	err = t.backend.Set(ctx, key, v, mode)
	cancel()
	sh := t.shardOfEntry(e)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if err == nil {
		e.issued, e.limit, e.next, e.asked = v, v, segment{}, v
		t.settle(e)
		t.bear(e)
	}
	e.taking = false
	e.bits &^= demanded
	e.wake()
	return err
}

// hold takes key for a Set of v, creating it if mode allows: no value is
// handed out meanwhile (the segment's rest is let go, and Incr waits as
// for a take), and no take runs. It waits for a take under way. (If the
// Set's write fails, the segment stays let go: the write may have landed
// below it.)
func (t *Table) hold(key string, v int64, mode SetMode) (*entry, error) {
	for {
		if t.stopped.Load() {
			return nil, ErrStopped
		}
		sh, h := t.shardOf(key)
		sh.mu.Lock()
		e := find(&sh.index, h, key)
		switch {
		case e != nil && mode == IfNew:
			sh.mu.Unlock()
			return nil, ErrExists
		case e == nil && mode == IfOld:
			sh.mu.Unlock()
			return nil, ErrMissing
		case e == nil && v < 0:
			sh.mu.Unlock()
			return nil, &BelowError{Key: key}
		case e == nil:
			var err error
			if e, err = create(t, h, key); err != nil {
				sh.mu.Unlock()
				return nil, err
			}
		case v < e.issued:
			err := &BelowError{Key: key, At: e.issued}
			sh.mu.Unlock()
			return nil, err
		}
		if !e.taking {
			e.taking, e.limit, e.next = true, e.issued, segment{}
			e.bits, e.setTo = e.bits|stored|demanded, max(e.setTo, v) // before the write: a fold keeps it
			sh.mu.Unlock()
			return e, nil
		}
		done := e.waiting()
		t.hurry()
		sh.mu.Unlock()
		<-done
	}
}
