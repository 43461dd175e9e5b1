package sequence

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// A hash slot's keys, for a Redis Cluster node: what a graceful
// hand-over sends (SlotMarks, in pages) and stores (LoadSlot), what CLUSTER
// COUNTKEYSINSLOT and GETKEYSINSLOT read. Each reads the slot's one list.

// slotList is a copy of slot's list of entries.
func (t *Table) slotList(slot int) []*entry {
	t.bySlotMu.RLock()
	defer t.bySlotMu.RUnlock()
	return slices.Clone(t.bySlot[slot])
}

// SlotMarks returns the keys of hash slot slot that exist (a value of
// it was handed out, or it was set) from place from in the slot's list
// (as SCAN's places: a list only grows), Value its exact last value
// handed out, Born true: a page of what a graceful hand-over sends the
// slot's new owner, which continues each key at Value + 1. It stops once
// the keys and values given pass budget bytes (pageBytes each; at least
// one is given), and returns the place the next page starts at (0: this
// is the last) and the bytes it gave. The caller sees to it that no INCR
// or SET of the slot runs meanwhile (the slot is no longer served), or a
// value handed out after may be missing.
func (t *Table) SlotMarks(slot, from, budget int) (marks []Mark, next, used int) {
	list := t.slotList(slot)
	for i := from; i < len(list); i++ {
		if used >= budget {
			return marks, i, used
		}
		e := list[i]
		sh := t.shardOfEntry(e)
		sh.mu.Lock()
		if !e.has(dropped) && (e.born || e.mayReply()) {
			m := Mark{Key: e.key, Value: e.issued, Born: true}
			marks, used = append(marks, m), used+pageBytes(m)
		}
		sh.mu.Unlock()
	}
	return marks, 0, used
}

// pageBytes is what a mark counts against a page's budget: its key and
// its value as a reply sends them, roughly.
func pageBytes(m Mark) int { return len(m.Key) + 32 }

// LoadSlot makes each mark's key present at exactly its Value, born and
// durable, so that its next INCR gives Value + 1: a graceful hand-over's
// marks (SlotMarks of the old owner). It stores them first, durably, in
// one write (Backend.Set, mode Always), beside the writer's writes; a
// key this server holds at or above its mark keeps its own value, and is
// not written. The marks' keys should not be served while it runs.
//
// It refuses the lot, storing nothing, if a key is longer than
// MaxKeyBytes or the new keys would pass MaxKeys (a *LimitError). A key
// whose store failed is not loaded, and its error is returned (with
// every other's); the others are.
func (t *Table) LoadSlot(ctx context.Context, marks []Mark) error {
	if t.stopped.Load() {
		return ErrStopped
	}
	marks, fresh, err := t.toLoad(marks)
	if err == nil && fresh > 0 && !t.reserve(fresh) {
		err = &LimitError{Key: marks[0].Key, What: fmt.Sprintf("loading %d new keys would pass seq-max-keys %d", fresh, t.opts.MaxKeys)}
	}
	if err != nil {
		return fmt.Errorf("loading %d keys: %w", len(marks), err)
	}
	ss := make([]Setting, len(marks))
	for i, m := range marks {
		ss[i] = Setting{Key: m.Key, Value: m.Value, Mode: Always}
	}
	t.backend.Set(ctx, ss)
	var errs []error
	for i, m := range marks {
		if ss[i].Err != nil {
			errs = append(errs, fmt.Errorf("%q: %w", clip(m.Key), ss[i].Err))
			continue
		}
		if t.load(m) {
			fresh--
		}
	}
	t.reserve(-fresh) // the new keys that failed
	if len(errs) > 0 {
		return fmt.Errorf("loading %d keys: %d not stored: %w", len(marks), len(errs), errors.Join(errs...))
	}
	return nil
}

// toLoad returns the marks LoadSlot stores (those above what this server
// holds of their keys), and how many of them are keys new to it; or a
// *LimitError for a key too long.
func (t *Table) toLoad(marks []Mark) ([]Mark, int, error) {
	kept, fresh := make([]Mark, 0, len(marks)), 0
	for _, m := range marks {
		if len(m.Key) > t.opts.MaxKeyBytes {
			return nil, 0, &LimitError{Key: m.Key, What: fmt.Sprintf("the key is %d bytes, longer than seq-max-key-bytes %d", len(m.Key), t.opts.MaxKeyBytes)}
		}
		sh, h := t.shardOf(m.Key)
		sh.mu.Lock()
		e := find(&sh.index, h, m.Key)
		if e == nil || e.issued < m.Value {
			kept = append(kept, m)
		}
		if e == nil {
			fresh++
		}
		sh.mu.Unlock()
	}
	return kept, fresh, nil
}

// reserve counts n keys more against MaxKeys (fewer, if negative), for
// LoadSlot to make, and reports whether they are within it.
func (t *Table) reserve(n int) bool {
	t.bySlotMu.Lock()
	defer t.bySlotMu.Unlock()
	if n > 0 && t.made+n > t.opts.MaxKeys {
		return false
	}
	t.made += n
	return true
}

// load makes m's key, stored, present at m.Value, and reports whether it
// made it (a key counted by reserve).
func (t *Table) load(m Mark) (made bool) {
	sh, h := t.shardOf(m.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := find(&sh.index, h, m.Key)
	if e == nil {
		e, made = insert(t, h, m.Key, slotOf(m.Key), true), true
	}
	if e.issued < m.Value {
		e.issued, e.limit, e.next, e.asked = m.Value, m.Value, segment{}, m.Value
	}
	e.born, e.setTo = true, max(e.setTo, m.Value)
	t.settle(e)
	return made
}

// CountSlot is the number of keys of hash slot slot that exist (durable):
// CLUSTER COUNTKEYSINSLOT.
func (t *Table) CountSlot(slot int) int {
	n := 0
	t.existing(slot, func(string) bool { n++; return true })
	return n
}

// KeysInSlot returns up to count keys of hash slot slot that exist
// (durable), in the order they came: CLUSTER GETKEYSINSLOT.
func (t *Table) KeysInSlot(slot, count int) []string {
	var keys []string
	if count > 0 {
		t.existing(slot, func(key string) bool { keys = append(keys, key); return len(keys) < count })
	}
	return keys
}

// existing calls f with each key of slot that exists, until f returns
// false.
func (t *Table) existing(slot int, f func(key string) bool) {
	for _, e := range t.slotList(slot) {
		sh := t.shardOfEntry(e)
		sh.mu.Lock()
		ok, key := e.mayReply(), e.key
		sh.mu.Unlock()
		if ok && !f(key) {
			return
		}
	}
}
