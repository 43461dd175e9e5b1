package sequence

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"
)

// The background writer: it takes the segments keys asked for, many keys
// in one write.

// gather is how long a take nobody waits for (a key with half its
// segment left, which lasts about SegmentTime/2 at its rate) waits for
// others to share its write: a thirtieth of SegmentTime, 100 ms at the
// default. A request that waits cuts it short. Each write costs the
// server a commit and two fsyncs (system time counts against it too), so
// writes are few and each of many keys.
func (t *Table) gather() time.Duration { return t.opts.SegmentTime / 30 }

// hurry has the takes queued written at once: a request waits for one.
func (t *Table) hurry() {
	select {
	case t.urgent <- struct{}{}:
	default:
	}
}

// ask queues e for a take; e's shard is locked.
func (t *Table) ask(e *entry) {
	e.taking = true
	t.queueMu.Lock()
	t.queue = append(t.queue, e)
	t.queueMu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// writer is what the background writer reuses from one write to the
// next. With 100,000 random keys a write holds thousands, and what it
// and the File allocated afresh for each (the list of takes, the queue,
// the record) was more than half of the server's garbage: 72 MB in a
// million INCRs, two collections of the whole heap; 31 MB since.
type writer struct {
	spare    []*entry // the queue's other buffer
	ts       []Take
	sets     []Setting
	gathered *time.Timer
}

// run takes the segments asked for, many keys in one Take, and writes
// the SETs queued, many in one write, until Stop. A SET is written at
// once (its reply waits), whatever the takes do: before them, and while
// they back off after a failure.
func (t *Table) run() {
	defer close(t.done)
	defer t.failSets()
	w := writer{gathered: time.NewTimer(time.Hour)}
	w.gathered.Stop()
	backoff := time.Duration(0)
	for {
		urgent := false
		select {
		case <-t.stop:
			return
		case <-t.wake:
		case <-t.urgent:
			urgent = true
		case <-t.setWake:
			t.sets(&w)
			continue
		}
		if !urgent && !w.gather(t) {
			return
		}
		t.sets(&w)
		batch := w.swap(t)
		if len(batch) == 0 {
			continue
		}
		if failed := t.take(batch, &w); failed {
			backoff = min(max(2*backoff, 50*time.Millisecond), time.Second)
		} else {
			backoff = 0
			t.fold()
		}
		if backoff > 0 && !w.backOff(t, backoff) {
			return
		}
	}
}

// sets writes the SETs queued, and folds after a write that succeeded.
func (t *Table) sets(w *writer) {
	if wrote, ok := t.writeSets(w); wrote && ok {
		t.fold()
	}
}

// backOff waits d before the next take, writing the SETs that come
// meanwhile; false if t stops.
func (w *writer) backOff(t *Table, d time.Duration) bool {
	w.gathered.Reset(d)
	defer w.gathered.Stop()
	for {
		select {
		case <-t.stop:
			return false
		case <-w.gathered.C:
			return true
		case <-t.setWake:
			t.sets(w)
		}
	}
}

// swap takes t's queue, up to maxWrite bytes of keys, and gives t the
// other buffer with the rest, which the next write takes at once. (What
// it takes is t's again at the next swap, when the writer is done with
// it.) A million keys asking at once, as after a restart, are so many
// writes of thousands rather than one whose record and bbolt's copy of
// it hold each key twice more.
func (w *writer) swap(t *Table) []*entry {
	t.queueMu.Lock()
	defer t.queueMu.Unlock()
	batch := t.queue
	n := writeLen(batch, func(e *entry) string { return e.key })
	t.queue, w.spare = append(w.spare[:0], batch[n:]...), batch[:0]
	if len(t.queue) > 0 {
		t.hurry()
	}
	return batch[:n]
}

// gather waits for t.gather(), or less if a request waits; false if t
// stops meanwhile.
func (w *writer) gather(t *Table) bool {
	w.gathered.Reset(t.gather())
	defer w.gathered.Stop()
	select {
	case <-t.stop:
		return false
	case <-t.urgent:
	case <-t.setWake: // written with the takes gathered so far
	case <-w.gathered.C:
	}
	return true
}

// take takes a segment for each entry of batch, and hands them over; it
// reports whether any failed.
func (t *Table) take(batch []*entry, w *writer) (failed bool) {
	now := t.opts.now().UnixNano()
	ts := slices.Grow(w.ts[:0], len(batch))
	kept := batch[:0]
	for _, e := range batch {
		sh := t.shardOfEntry(e)
		sh.mu.Lock()
		if e.has(dropped) {
			t.took(e, ErrNotServed)
			sh.mu.Unlock()
			continue
		}
		// Up to one segment ahead of what was handed out, no more: a
		// crash skips at most a segment (or one INCRBY's values). Nor
		// past the largest value: a backend refuses a segment that
		// would pass it, and a key reserved up to it has nothing to
		// take (an INCR that would pass it fails at once, ErrOverflow).
		size := t.size(e, now)
		n := min(max(size-e.left(), e.want, 1), math.MaxInt64-e.end())
		if n == 0 {
			e.bits &^= demanded
			t.took(e, nil)
			sh.mu.Unlock()
			continue
		}
		ts = append(ts, Take{Key: e.key, After: e.end(), N: n, Issued: e.issued, Born: e.born || e.has(demanded)})
		kept = append(kept, e)
		e.seg, e.asked, e.askedAt = size, e.issued, now
		e.relow()
		sh.mu.Unlock()
	}
	w.ts, batch = ts, kept
	if len(batch) == 0 {
		return false
	}
	t.write(func(ctx context.Context) { t.backend.Take(ctx, ts) })
	var storeErr error
	written := 0
	for i, e := range batch {
		sh := t.shardOfEntry(e)
		sh.mu.Lock()
		err := t.granted(e, &ts[i])
		switch {
		case err == nil:
			written++
		case !errors.Is(err, ErrNotServed): // else no store failing: no back-off
			storeErr = err
		}
		t.took(e, err)
		if e.born && !e.mayReply() && err == nil {
			t.ask(e) // born after its record was made: the next write records it
		}
		sh.mu.Unlock()
	}
	t.wrote(written, storeErr)
	if storeErr != nil {
		t.failed(ts)
	} else {
		t.lastTake.Store(t.opts.now().UnixMilli())
	}
	return storeErr != nil
}

// write runs one write of the backend, bounded by Options.Wait, and
// records while it runs that it does: a request does not wait behind a
// write that has run past Options.Wait (down).
func (t *Table) write(f func(ctx context.Context)) {
	ctx, cancel := context.WithTimeout(context.Background(), t.opts.Wait)
	defer cancel()
	t.writing.Store(t.opts.now().UnixNano())
	defer t.writing.Store(0)
	f(ctx)
	t.takes.Add(1)
}

// wrote records how the last write ended: it stored written keys, and
// err is the store's failure of the others. The store fails while its
// writes store nothing: requests do not wait for takes then (down).
func (t *Table) wrote(written int, err error) {
	if written > 0 || err == nil {
		t.failing.Store(nil)
		return
	}
	t.failing.Store(&err)
}

// granted hands e what tk took, and returns tk's error. e's shard is
// locked.
func (t *Table) granted(e *entry, tk *Take) error {
	e.bits &^= demanded
	switch {
	case tk.Err != nil:
		return tk.Err
	case e.has(dropped):
		return ErrNotServed // nothing of it is handed out, nor counted
	case tk.First <= e.issued:
		return nil // a LoadSlot put the key past it meanwhile: not to go back
	}
	e.grant(tk.First, tk.Last)
	if tk.Born {
		t.settle(e)
	}
	t.taken.Add(uint64(tk.N))
	return nil
}

// fold folds the backend's log when it keeps one and it is due, from
// the Table's marks. It runs between takes: every segment written was
// granted, so each key's mark in the Table is at least every mark
// written for it. The fold goes on while the writer does.
func (t *Table) fold() {
	f, ok := t.backend.(Folder)
	if !ok || !f.FoldDue(t.entries()) {
		return
	}
	begin, keys := t.opts.now(), t.entries()
	t.foldBegan.Store(begin.UnixNano())
	done := f.Fold(t.marks)
	go func() {
		err := <-done
		t.foldBegan.Store(0)
		switch {
		case errors.Is(err, errFoldStopped):
			return // the Table stops
		case err != nil:
			t.foldFailed(err)
			return
		}
		t.opts.Log.Info().Int("keys", keys).Dur("took", t.opts.now().Sub(begin)).Msg("sequences: the log of reservations folded into a new file")
	}()
}

// foldFailed logs a fold's error, once a while: it is tried again after
// every write.
func (t *Table) foldFailed(err error) {
	t.foldLogMu.Lock()
	ok, held := t.foldLog.Allow(err.Error(), t.opts.now())
	t.foldLogMu.Unlock()
	if ok {
		t.opts.Log.Error().Err(err).Int("same_error_not_logged", held).
			Msg("sequences: the log of reservations is kept as it is, and folded after a later write")
	}
}

// marks is the mark of every key the backend holds as born: above every
// value reserved for it, and every value a Set stored or may have (a Set
// records its value in the entry before it writes it; a failed write may
// have landed). Value is the last value handed out. A key whose
// existence is not durable is left out: no value of it was sent
// (reply.go), and the writes that record it come after the fold's
// snapshot, which carries them.
func (t *Table) marks() []Mark {
	marks := make([]Mark, 0, t.entries())
	t.each(func(e *entry) {
		if e.mayReply() {
			marks = append(marks, Mark{Key: e.key, Value: e.issued, Reserved: max(e.end(), e.setTo, e.issued), Born: true})
		}
	})
	return marks
}

// grant gives e the segment first .. last.
func (e *entry) grant(first, last int64) {
	switch {
	case first == e.limit+1:
		e.limit = last
	case e.issued == e.limit:
		e.issued, e.limit = first-1, last
	default:
		e.next = segment{first, last}
	}
	e.want = 0
	e.relow()
}

// failed counts and logs the failed takes of ts (the first of each
// error at once, then once every ratelog.Every).
func (t *Table) failed(ts []Take) {
	for _, tk := range ts {
		if tk.Err == nil {
			continue
		}
		t.failures.Add(1)
		text := tk.Err.Error()
		t.lastErr.Store(&text)
		if ok, held := t.failLog.Allow(text, t.opts.now()); ok {
			t.opts.Log.Error().Err(tk.Err).Str("key", clip(tk.Key)).Int("same_error_not_logged", held).
				Msg("sequences: cannot reserve values; INCR of keys past their segment gets -BUSY until a write succeeds")
		}
	}
}

// size is the size of the next segment of e: about SegmentTime of its
// traffic since the last one was asked for (measured over at least a
// quarter of SegmentTime, so that a segment grows at most fourfold at a
// time), at most MaxSegment; at least the last one as it fades (halving
// every fade), at least minSegment, and at least what a waiting request
// needs.
//
// Fading rather than following the rate down at once: a key that comes
// in bursts (orders at the top of the hour, a benchmark's rounds) would
// otherwise measure its rate over the quiet time before a burst, begin
// the burst with the least segment, and have the writer write it several
// times in each burst, requests waiting for it. (Leaf-segment's step
// halves likewise, when a segment lasts long.) A crash still skips at
// most one segment: about SegmentTime of the key's busiest traffic of
// the last few fades.
func (t *Table) size(e *entry, now int64) int64 {
	st := float64(t.opts.SegmentTime)
	used, dt := float64(e.issued-e.asked), float64(now-e.askedAt)
	rate := used * st / max(dt, st/4)
	faded := float64(e.seg) * math.Exp2(-dt/(fade*st))
	s := int64(math.Ceil(min(max(rate, faded), float64(t.opts.MaxSegment))))
	return max(s, minSegment, e.want)
}

// fade is, in SegmentTimes, how long a key's segment takes to fade to
// half when its traffic drops (2 minutes at the default 3 s).
const fade = 40

// minSegment is the least segment: a key that comes back every few
// seconds (one of 100,000 random keys) would otherwise have the writer
// write it again for nearly every INCR, and a new key's second INCR
// wait for a write as its first did. A crash skips at most this many of
// a slow key's values.
const minSegment = 4
