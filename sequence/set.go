package sequence

import (
	"context"
	"errors"
)

// How SETs are written. A SET's reply may go out only once its value is
// durable, and a write is a commit and two fsyncs (about 1 ms here): one
// write each, redis-cli --pipe of 100,000 SETs took 84 s. So a SET is
// recorded in its key on the caller's goroutine (TrySet: the key's
// segment let go, its value in setTo for a fold) and queued in the open
// round; the writer writes a round's SETs in one write (Backend.Set), at
// once, as it takes segments, and then closes the round. The SETs that
// come while it writes fill the next round: a pipeline's, and many
// clients', share writes. A SET's reply is a Pending on its write: Await
// tells it that its value is durable, or why not (reply.go).

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

// setDone reports whether the write of p, a SET, ended: its err is then
// final.
func (p Pending) setDone() bool {
	select {
	case <-p.round.done:
		return true
	default:
		return false
	}
}

// setErr is the result of p's write, once setDone: nil if its value is
// durable.
func (p Pending) setErr() error { return p.round.sets[p.i].err }

// TrySet makes v key's value, as Set does, without waiting: it records
// the SET in the key (no value is handed out meanwhile, as for a take)
// and queues it for the writer, whose next write stores it with every
// other SET queued meanwhile; its reply waits for that write (Await). It fails at
// once when the SET does not apply (ErrExists, ErrMissing, a
// *BelowError, a *LimitError), and with ErrWouldWait when a take or a SET
// of key is under way: Set waits for it. (If the write fails, the
// segment stays let go: the write may have landed below it.)
func (t *Table) TrySet(key []byte, v int64, mode SetMode) (Pending, error) {
	p, _, err := t.trySet(key, v, mode)
	return p, err
}

// trySet is TrySet that also returns, with ErrWouldWait, the wait for
// the take or SET of key under way.
func (t *Table) trySet(key []byte, v int64, mode SetMode) (Pending, waitOn, error) {
	if t.stopped.Load() {
		return Pending{}, waitOn{}, ErrStopped
	}
	sh, h := t.shardOfBytes(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := find(&sh.index, h, key)
	if e != nil && e.has(closed) {
		return Pending{}, waitOn{}, ErrNotServed
	}
	// A key exists once a value of it was handed out (its reply may
	// wait for its existence to be durable) or SET (the SET's may), or
	// is durable; one only prepared for a pipeline does not.
	exists := e != nil && (e.born || e.mayReply() || e.has(setting))
	switch {
	case exists && mode == IfNew:
		return Pending{}, waitOn{}, ErrExists
	case !exists && mode == IfOld:
		return Pending{}, waitOn{}, ErrMissing
	case e == nil && v < 0:
		return Pending{}, waitOn{}, &BelowError{Key: string(key)}
	case e == nil:
		var err error
		if e, err = create(t, h, key); err != nil {
			return Pending{}, waitOn{}, err
		}
	case v < e.issued:
		return Pending{}, waitOn{}, &BelowError{Key: string(key), At: e.issued}
	}
	if e.taking {
		w := e.waiting()
		t.hurry()
		return Pending{}, waitOn{e, w, e.gen}, ErrWouldWait
	}
	e.taking, e.limit, e.next = true, e.issued, segment{}
	e.bits, e.setTo = e.bits|setting, max(e.setTo, v) // before the write: a fold of a durable key keeps it
	return t.queueSet(e, v, mode), waitOn{}, nil
}

// queueSet adds a SET of e to the open round and wakes the writer; e's
// shard is locked.
func (t *Table) queueSet(e *entry, v int64, mode SetMode) Pending {
	t.setMu.Lock()
	r := t.round
	if r == nil {
		r = &setRound{done: make(chan struct{})}
		t.round = r
	}
	r.sets = append(r.sets, queuedSet{e: e, v: v, mode: mode})
	p := Pending{e: e, round: r, i: len(r.sets) - 1}
	t.setMu.Unlock()
	select {
	case t.setWake <- struct{}{}:
	default:
	}
	return p
}

// awaitSet waits, until d, for the write of p, a SET, and returns its
// result: nil once p's value is durable. It gives up at once when a
// write has stalled (down): the SET's is behind it.
func (t *Table) awaitSet(d *deadline, p Pending) error {
	if p.setDone() {
		return p.setErr()
	}
	if err := t.down(sets); err != nil {
		return err
	}
	if d.passed() {
		return t.timedOut()
	}
	select {
	case <-p.round.done:
		return p.setErr()
	case <-d.reached():
		return t.timedOut()
	case <-t.done: // the writer ended: it answered every round it took
		if p.setDone() {
			return p.setErr()
		}
		return ErrStopped
	}
}

// Set makes v the key's value, durably before it returns, if v is at
// least its value now (else a *BelowError): the next Incr hands out
// v + 1. mode says whether the key must be new or existing. It waits for
// a take or SET of the key under way, then for its write, Options.Wait
// in all at most.
func (t *Table) Set(key string, v int64, mode SetMode) error {
	d := t.deadline()
	defer d.stop()
	for {
		p, on, err := t.trySet([]byte(key), v, mode)
		if err == nil {
			return t.await(&d, p)
		}
		if errors.Is(err, ErrNotServed) && t.awaitOpen(&d, key) {
			continue
		}
		if on.w == nil {
			return err
		}
		if err := t.waitForStore(&d, on, sets); err != nil {
			return err
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
		t.write(func(ctx context.Context) { t.backend.Set(ctx, ss) })
		var storeErr error
		written := 0
		for i := range rest[:n] {
			s := &rest[i]
			s.err = t.setWritten(s.e, s.v, ss[i].Err)
			ok = ok && s.err == nil
			switch {
			case s.err == nil:
				written++
			case !notApplied(s.err):
				storeErr = s.err
			}
		}
		t.wrote(written, storeErr)
		clear(ss) // the keys and errors are not the writer's to keep
		w.sets, rest = ss, rest[n:]
	}
	close(r.done)
	return true, ok
}

// notApplied reports whether err is a Backend's refusal of a SET, not the
// store failing.
func notApplied(err error) bool {
	return errors.Is(err, ErrExists) || errors.Is(err, ErrMissing) || errors.As(err, new(*BelowError)) ||
		errors.Is(err, ErrNotServed)
}

// setWritten ends a SET of v to e whose write returned err, and returns
// the SET's result: the key goes on from v, or from where it was (its
// segment let go); a key dropped meanwhile is not set (ErrNotServed).
func (t *Table) setWritten(e *entry, v int64, err error) error {
	sh := t.shardOfEntry(e)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e.has(dropped) {
		err = ErrNotServed
	}
	if err == nil {
		e.issued, e.limit, e.next, e.asked = v, v, segment{}, v
		e.born = true
		t.settle(e)
	}
	e.bits &^= setting
	t.took(e, nil) // a SET waiting for it tries again, and sees it
	return err
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
