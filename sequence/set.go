package sequence

import (
	"context"
	"fmt"
	"time"
)

// How SETs are written. A SET's reply may go out only once its value is
// durable, and a write is a commit and two fsyncs (about 1 ms here): one
// write each, redis-cli --pipe of 100,000 SETs took 84 s. So a SET is
// recorded in its key on the caller's goroutine (TrySet: the key's
// segment let go, its value in setTo for a fold) and queued in the open
// round; the writer writes a round's SETs in one write (Backend.Set), at
// once, as it takes segments, and then closes the round. The SETs that
// come while it writes fill the next round: a pipeline's, and many
// clients', share writes. AwaitSet is where a SET's reply learns that its
// value is durable, or why not: the one place that decides it.

// Setting is one SET for a Backend: Value as Key's mark, under Mode.
type Setting struct {
	Key   string
	Value int64
	Mode  SetMode
	// Err is set by the Backend: why Value was not stored (ErrExists,
	// ErrMissing, a *BelowError, or the store's failure).
	Err error
}

// setRound is the SETs one write stores, answered together when it ends.
type setRound struct {
	sets []queuedSet
	done chan struct{} // closed once every set's err is final
}

type queuedSet struct {
	e    *entry
	v    int64
	mode SetMode
	err  error
}

// PendingSet is a SET queued by TrySet: AwaitSet waits for its write.
type PendingSet struct {
	r *setRound
	i int
}

// Done reports whether p's write ended: Err is then its result.
func (p PendingSet) Done() bool {
	select {
	case <-p.r.done:
		return true
	default:
		return false
	}
}

// Err is the result of p's write, once Done: nil if its value is durable.
func (p PendingSet) Err() error { return p.r.sets[p.i].err }

// TrySet makes v key's value, as Set does, without waiting: it records
// the SET in the key (no value is handed out meanwhile, as for a take)
// and queues it for the writer, whose next write stores it with every
// other SET queued meanwhile; AwaitSet waits for that write. It fails at
// once when the SET does not apply (ErrExists, ErrMissing, a
// *BelowError, a *LimitError), and with ErrWouldWait when a take or a SET
// of key is under way: Set waits for it. (If the write fails, the
// segment stays let go: the write may have landed below it.)
func (t *Table) TrySet(key []byte, v int64, mode SetMode) (PendingSet, error) {
	p, _, err := t.trySet(key, v, mode)
	return p, err
}

func (t *Table) trySet(key []byte, v int64, mode SetMode) (PendingSet, <-chan struct{}, error) {
	if t.stopped.Load() {
		return PendingSet{}, nil, ErrStopped
	}
	sh, h := t.shardOfBytes(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := find(&sh.index, h, key)
	switch {
	case e != nil && mode == IfNew:
		return PendingSet{}, nil, ErrExists
	case e == nil && mode == IfOld:
		return PendingSet{}, nil, ErrMissing
	case e == nil && v < 0:
		return PendingSet{}, nil, &BelowError{Key: string(key)}
	case e == nil:
		var err error
		if e, err = create(t, h, key); err != nil {
			return PendingSet{}, nil, err
		}
	case v < e.issued:
		return PendingSet{}, nil, &BelowError{Key: string(key), At: e.issued}
	}
	if e.taking {
		done := e.waiting()
		t.hurry()
		return PendingSet{}, done, ErrWouldWait
	}
	e.taking, e.limit, e.next = true, e.issued, segment{}
	e.bits, e.setTo = e.bits|stored|demanded, max(e.setTo, v) // before the write: a fold keeps it
	return t.queueSet(e, v, mode), nil, nil
}

// queueSet adds a SET of e to the open round and wakes the writer; e's
// shard is locked.
func (t *Table) queueSet(e *entry, v int64, mode SetMode) PendingSet {
	t.setMu.Lock()
	r := t.round
	if r == nil {
		r = &setRound{done: make(chan struct{})}
		t.round = r
	}
	r.sets = append(r.sets, queuedSet{e: e, v: v, mode: mode})
	p := PendingSet{r, len(r.sets) - 1}
	t.setMu.Unlock()
	select {
	case t.setWake <- struct{}{}:
	default:
	}
	return p
}

// AwaitSet waits, up to Options.Wait, for p's write, and returns its
// result: nil once p's value is durable. Rounds are written in order: a
// SET's write has ended once that of a SET queued after it has.
func (t *Table) AwaitSet(p PendingSet) error {
	if p.Done() {
		return p.Err()
	}
	deadline := time.NewTimer(t.opts.Wait)
	defer deadline.Stop()
	select {
	case <-p.r.done:
		return p.Err()
	case <-deadline.C:
		return fmt.Errorf("%w: the store did not write the SET within %v", ErrNotReserved, t.opts.Wait)
	case <-t.done: // the writer ended: it answered every round it took
		if p.Done() {
			return p.Err()
		}
		return ErrStopped
	}
}

// Set makes v the key's value, durably before it returns, if v is at
// least its value now (else a *BelowError): the next Incr hands out
// v + 1. mode says whether the key must be new or existing. It waits for
// a take or SET of the key under way, then as AwaitSet does.
func (t *Table) Set(key string, v int64, mode SetMode) error {
	for {
		p, done, err := t.trySet([]byte(key), v, mode)
		if err == nil {
			return t.AwaitSet(p)
		}
		if done == nil {
			return err
		}
		select {
		case <-done:
		case <-t.stop:
			return ErrStopped
		}
	}
}

// writeSets writes the open round's SETs, in writes of maxWrite bytes of
// keys, and answers them; it reports whether it wrote, and whether every
// write succeeded. Only the writer calls it.
func (t *Table) writeSets(w *writer) (wrote, ok bool) {
	t.setMu.Lock()
	r := t.round
	t.round = nil
	t.setMu.Unlock()
	if r == nil {
		return false, true
	}
	ok = true
	for rest := r.sets; len(rest) > 0; {
		n := writeLen(rest, func(s queuedSet) string { return s.e.key })
		ss := w.sets[:0]
		for _, s := range rest[:n] {
			ss = append(ss, Setting{Key: s.e.key, Value: s.v, Mode: s.mode})
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.opts.Wait)
		t.backend.Set(ctx, ss)
		cancel()
		t.takes.Add(1) // a save, as a take's write
		for i := range rest[:n] {
			s := &rest[i]
			s.err = ss[i].Err
			ok = ok && s.err == nil
			t.setWritten(s.e, s.v, s.err)
		}
		clear(ss) // the keys and errors are not the writer's to keep
		w.sets, rest = ss, rest[n:]
	}
	close(r.done)
	return true, ok
}

// setWritten ends a SET of v to e whose write returned err: the key
// goes on from v, or from where it was (its segment let go).
func (t *Table) setWritten(e *entry, v int64, err error) {
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
}

// failSets answers the round still open when the writer ends: nothing
// writes it.
func (t *Table) failSets() {
	t.setMu.Lock()
	r := t.round
	t.round = nil
	t.setMu.Unlock()
	if r == nil {
		return
	}
	for i := range r.sets {
		r.sets[i].err = ErrStopped
	}
	close(r.done)
}
