package sequence

import (
	"errors"
	"fmt"
	"time"
)

// When a reply may go. A value leaves the server only once what makes it
// unique is durable: a reservation above it, and the key's existence, so
// that a restart brings the key back at or above the value. The first
// holds by construction: a segment is granted only once its Take
// returned. The second does not for the first values of a key prepared
// for a pipeline (Prepare): its take recorded the key as not existing,
// so that a key whose INCR never runs is forgotten. Such values are
// handed out with a Pending, and their reply goes only once Await says
// so: the key's existence is durable (mayReply, the one test of it). If
// its write fails, or the store is down, the values are skipped, never
// sent: the reply is an error, the key is not born (a restart may forget
// it, as no value of it was sent), and nothing counts it (Len, Keys and
// Get see durable keys only). A SET's reply is a Pending too, on its
// write. A transaction (IncrAll) hands out no value of a key whose
// existence is not durable: it waits for it first.
//
// Every wait is bounded. A request that must wait for a write (values
// past a segment, a key's existence, a SET behind a take) waits in
// waitForStore, the one place that does: at most Options.Wait, and not
// at all while the store is down (down: the last write stored nothing,
// and the writer backs off before it tries again; or a write has run
// past Options.Wait and may never return); TryIncr, which never waits,
// then returns the error at once rather than ErrWouldWait. So a pipeline
// of such requests gets its error replies at once, not one Options.Wait
// each, and a client gets a reply within Options.Wait of its request,
// whatever the store does.

// Pending is a reply that may go only once Await says so: of values of a
// key whose existence is not durable yet, or of a SET being written. The
// zero Pending may go at once. Await it when its batch ends: past
// Options.Wait after its key was dropped, its entry may be another key's
// (DropSlot), and reading it races with that key's requests.
type Pending struct {
	e     *entry    // the key
	round *setRound // a SET's write; nil: e's existence
	i     int       // the SET's place in round
	gen   uint16    // e's: a key dropped since is not awaited
}

// Ready reports whether p's reply may go at once, without Await.
func (p Pending) Ready() bool { return p.e == nil }

// mayReply reports whether a reply of e's values may go: its existence is
// durable. (Each value lies below a durable reservation: segments are
// granted once taken.) e's shard is locked.
func (e *entry) mayReply() bool { return e.has(durable) }

// Await waits until the reply of each of ps may go, at most Options.Wait
// for all of them, and sets errs[i] to why that of ps[i] may not: nil if
// it may. errs is as long as ps.
func (t *Table) Await(ps []Pending, errs []error) {
	d := t.deadline()
	defer d.stop()
	for i, p := range ps {
		errs[i] = t.await(&d, p)
	}
}

// deadline bounds a request's waits: Options.Wait from its start. Its
// timer is made only once a wait blocks: a context for each request that
// may wait cost about a microsecond of CPU per new key made (making
// 100,000 keys with redis-benchmark, 10.9 against 10.1 us a request).
type deadline struct {
	at    time.Time
	timer *time.Timer
}

// deadline is a request's, from now.
func (t *Table) deadline() deadline { return deadline{at: time.Now().Add(t.opts.Wait)} }

// passed reports whether d has passed.
func (d *deadline) passed() bool { return !time.Now().Before(d.at) }

// reached returns a channel that receives once d passes (once: a wait
// that gets it ends the request's waits).
func (d *deadline) reached() <-chan time.Time {
	if d.timer == nil {
		d.timer = time.NewTimer(time.Until(d.at))
	}
	return d.timer.C
}

// stop lets d's timer go.
func (d *deadline) stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
}

// await waits, until d, until p's reply may go.
func (t *Table) await(d *deadline, p Pending) error {
	switch {
	case p.e == nil:
		return nil
	case p.round != nil:
		return t.awaitSet(d, p)
	}
	e := p.e
	sh := t.shardOfEntry(e)
	for {
		sh.mu.Lock()
		if e.gen != p.gen || e.has(dropped) {
			sh.mu.Unlock()
			return ErrNotServed // these values are skipped
		}
		if e.mayReply() {
			sh.mu.Unlock()
			return nil
		}
		if !e.born {
			// A write failed, or a request for e gave up, after these
			// values were handed out: they are skipped.
			err := fmt.Errorf("%w: the key's first write was given up", ErrNotReserved)
			if e.wait != nil && e.wait.done == nil {
				err = failure(e.wait.err)
			}
			sh.mu.Unlock()
			return err
		}
		if !e.taking {
			t.ask(e)
		}
		t.hurry()
		on := e.waitOn()
		sh.mu.Unlock()
		if err := t.waitForStore(d, on, takes); err != nil {
			return err
		}
	}
}

// wait is what few entries need at a time: a request's wait for the end
// of its key's take (or SET) under way; or, done nil, why the last one
// failed, kept until the next (for a reply that comes to wait after it:
// await).
type wait struct {
	done chan struct{} // closed when it ends
	err  error         // why it failed, once done
}

// waiting returns the wait for the end of e's take or SET under way (or
// asked for). e's shard is locked.
func (e *entry) waiting() *wait {
	if e.wait == nil || e.wait.done == nil {
		e.wait = &wait{done: make(chan struct{})}
	}
	return e.wait
}

// ended ends the waits for e's take or SET under way: they see err. e's
// shard is locked.
func (e *entry) ended(err error) {
	if e.wait != nil && e.wait.done != nil {
		e.wait.err = err
		close(e.wait.done)
	}
	e.wait = nil
	if err != nil {
		e.wait = &wait{err: err}
	}
}

// waitKind is what a request waits for: a take, or a SET's write.
type waitKind int

const (
	takes waitKind = iota
	sets
)

// waitForStore waits until on, the wait for a key's take or SET under
// way, ends, or d passes: the one place a request waits for the store. It
// returns why the take failed; nil for a SET, which waits only for the
// take to end (its own write says whether it succeeded), unless the key
// was dropped (ErrNotServed). A request gives up at once, without
// waiting, when the store is down (down): for a SET, only when a write
// has stalled, as the writer writes SETs at once even while its takes
// back off. A request that gives up ends the wait of every request for
// the key (giveUp).
func (t *Table) waitForStore(d *deadline, on waitOn, k waitKind) error {
	if err := t.down(k); err != nil {
		return t.giveUp(on, err)
	}
	if d.passed() {
		return t.giveUp(on, t.timedOut())
	}
	select {
	case <-on.w.done:
		if on.w.err == nil || k == sets && !errors.Is(on.w.err, ErrNotServed) {
			return nil
		}
		return failure(on.w.err)
	case <-d.reached():
		return t.giveUp(on, t.timedOut())
	case <-t.stop:
		return ErrStopped
	}
}

// failure is a request's error for a take that failed with err.
func failure(err error) error {
	if errors.Is(err, ErrNotReserved) || errors.Is(err, ErrOverflow) || errors.Is(err, ErrNotServed) {
		return err // not the store failing: nothing to retry (or already said)
	}
	return fmt.Errorf("%w: the last write failed: %w", ErrNotReserved, err)
}

// timedOut is the error of a request whose waits passed Options.Wait.
func (t *Table) timedOut() error {
	return fmt.Errorf("%w: the store did not answer within %v", ErrNotReserved, t.opts.Wait)
}

// giveUp ends on's wait with err, if it is still its key's, so that
// every request waiting with it gets err; and, unless the key's
// existence is durable, makes it not born: no value of it was sent
// (mayReply), and its next take records it as existing only if a
// request waits for it again. An entry made another key's since is left
// alone. It returns err.
func (t *Table) giveUp(on waitOn, err error) error {
	e := on.e
	sh := t.shardOfEntry(e)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e.gen != on.gen {
		return err
	}
	if e.wait == on.w {
		e.ended(err)
	}
	t.unborn(e)
	return err
}

// unborn makes e not born, and not demanded, unless its existence is
// durable. e's shard is locked.
func (t *Table) unborn(e *entry) {
	if !e.mayReply() {
		e.born = false
		e.bits &^= demanded
	}
}

// down is why a request should not wait for the store: the last write
// failed (for takes; the writer backs off before it tries again), or the
// write under way has run past Options.Wait (it may never return). nil
// if neither.
func (t *Table) down(k waitKind) error {
	if p := t.failing.Load(); p != nil && k == takes {
		return fmt.Errorf("%w: the last write failed: %w", ErrNotReserved, *p)
	}
	if began := t.writing.Load(); began != 0 {
		if d := time.Duration(t.opts.now().UnixNano() - began); d > t.opts.Wait {
			return fmt.Errorf("%w: a write has not returned for %v", ErrNotReserved, d.Round(time.Millisecond))
		}
	}
	return nil
}
