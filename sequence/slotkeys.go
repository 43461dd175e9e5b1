package sequence

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// slotEntries is a copy of slot's list of entries.
func (t *Table) slotEntries(slot int) []*entry {
	t.bySlotMu.RLock()
	defer t.bySlotMu.RUnlock()
	return slices.Clone(t.bySlot[slot])
}

// SlotMarks returns each key of hash slot slot that exists, with its
// last value handed out, exactly: what a slot's old owner hands to the
// new one. The caller has closed the slot (CloseSlot), so that no value
// of it is handed out meanwhile.
func (t *Table) SlotMarks(slot int) []Mark {
	var marks []Mark
	for _, e := range t.slotEntries(slot) {
		sh := t.shardOfEntry(e)
		sh.mu.Lock()
		if e.mayReply() {
			marks = append(marks, Mark{Key: e.key, Value: e.issued, Born: true})
		}
		sh.mu.Unlock()
	}
	return marks
}

// CountSlot is how many keys of slot exist here.
func (t *Table) CountSlot(slot int) int {
	n := 0
	for _, e := range t.slotEntries(slot) {
		sh := t.shardOfEntry(e)
		sh.mu.Lock()
		if e.mayReply() {
			n++
		}
		sh.mu.Unlock()
	}
	return n
}

// KeysInSlot returns up to count keys of slot that exist here.
func (t *Table) KeysInSlot(slot, count int) []string {
	var keys []string
	for _, e := range t.slotEntries(slot) {
		if len(keys) >= count {
			break
		}
		sh := t.shardOfEntry(e)
		sh.mu.Lock()
		if e.mayReply() {
			keys = append(keys, e.key)
		}
		sh.mu.Unlock()
	}
	return keys
}

// LoadSlot stores marks, keys this server does not hold (a slot handed
// over: DropSlot first), durably through the backend in one write, and
// then holds each at exactly its value: its next INCR gives Value + 1.
// Nothing is loaded if the write fails, or a key is past the bounds.
func (t *Table) LoadSlot(ctx context.Context, marks []Mark) error {
	if t.entries()+len(marks) > t.opts.MaxKeys {
		return &LimitError{Key: marks[0].Key, What: fmt.Sprintf("%d keys handed over would pass seq-max-keys %d", len(marks), t.opts.MaxKeys)}
	}
	ss := make([]Setting, len(marks))
	for i, m := range marks {
		if len(m.Key) > t.opts.MaxKeyBytes {
			return &LimitError{Key: m.Key, What: fmt.Sprintf("the key is %d bytes, longer than seq-max-key-bytes %d", len(m.Key), t.opts.MaxKeyBytes)}
		}
		ss[i] = Setting{Key: m.Key, Value: m.Value, Mode: Always}
	}
	if len(ss) > 0 {
		t.backend.Set(ctx, ss)
	}
	var errs []error
	for _, s := range ss {
		if s.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", clip(s.Key), s.Err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store the keys handed over: %w", err)
	}
	for _, m := range marks {
		sh, h := t.shardOf(m.Key)
		sh.mu.Lock()
		e := find(&sh.index, h, m.Key)
		if e == nil {
			e = insert(t, h, m.Key)
		}
		e.issued, e.born = max(e.issued, m.Value), true
		e.limit, e.next = e.issued, segment{}
		t.settle(e)
		sh.mu.Unlock()
	}
	return nil
}
