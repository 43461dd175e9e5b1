package sequence

import (
	"unsafe"

	"github.com/idserver/idserver/slots"
)

// closed, an entry's bit: its hash slot is closed (CloseSlot), so no
// value of it is handed out or SET until it is opened again. It sits on
// the entry's first cache line, which an INCR reads anyway.
const closed uint8 = 1 << 7

// CloseSlot stops handing out values of the keys of hash slot slot: once
// it returns, every INCR or SET of one of them that handed out or stored
// a value has returned, and every later one fails with ErrNotServed,
// until OpenSlot. A slot's owner closes it before it answers a pull of
// its keys (SlotMarks), so that they are exact, and keeps it closed
// until it has taken it (a Redis Cluster over etcd).
func (t *Table) CloseSlot(slot int) {
	t.openMu.Lock()
	if t.opened[slot] == nil {
		t.opened[slot] = make(chan struct{})
	}
	t.openMu.Unlock()
	if t.closedSlots[slot].Swap(true) {
		return
	}
	// A request that saw the slot open holds its shard's lock until its
	// value is handed out: taking each lock once waits it out. A later
	// one sees the slot closed (create) or its entry's bit (below).
	for i := range t.shards {
		t.shards[i].mu.Lock()
		t.shards[i].mu.Unlock() //nolint:staticcheck // the barrier is the lock itself
	}
	t.markSlot(slot, func(e *entry) { e.bits |= closed })
}

// LetGoSlot is CloseSlot of a slot that moved away: it will not open
// here, so the requests waiting for it (awaitOpen) fail now with
// ErrNotServed, and the later ones at once, rather than each wait out
// its deadline (5 s of a client's INCR, at every slot that moved as a
// cluster formed); the client is sent on to the new owner. Until
// CloseSlot (given again) or OpenSlot.
func (t *Table) LetGoSlot(slot int) {
	t.CloseSlot(slot)
	t.endWaits(slot)
}

// OpenSlot hands out values of the keys of slot again, and ends the
// waits for it (awaitOpen).
func (t *Table) OpenSlot(slot int) {
	if t.closedSlots[slot].Swap(false) {
		t.markSlot(slot, func(e *entry) { e.bits &^= closed })
	}
	t.endWaits(slot)
}

// endWaits ends the waits for slot to open (awaitOpen), and has the next
// ones not begin: each looks at the slot again, and fails if it is
// closed, until CloseSlot.
func (t *Table) endWaits(slot int) {
	t.openMu.Lock()
	defer t.openMu.Unlock()
	if ch := t.opened[slot]; ch != nil {
		close(ch)
		t.opened[slot] = nil
	}
}

// awaitOpen waits, until d, for key's slot to open if it is closed, and
// reports whether it opened: a request that found it closed (ErrNotServed)
// tries again then. A slot being taken by this server opens within a
// moment; for one that moved away (LetGoSlot) it waits no more, and the
// request fails (the server's map sends the next ones to the new owner).
func (t *Table) awaitOpen(d *deadline, key string) bool {
	slot := slotOf(key)
	if !t.closedSlots[slot].Load() {
		return true // opened since the request found it closed
	}
	t.openMu.Lock()
	ch := t.opened[slot]
	t.openMu.Unlock()
	if ch == nil { // opened just now, or let go
		return !t.closedSlots[slot].Load()
	}
	select {
	case <-ch:
		return true
	case <-d.reached():
		return false
	case <-t.stop:
		return false
	}
}

// markSlot applies mark to each key of slot, under its shard's lock.
func (t *Table) markSlot(slot int, mark func(*entry)) {
	t.bySlotMu.RLock()
	defer t.bySlotMu.RUnlock()
	for _, e := range t.bySlot[slot] {
		sh := t.shardOfEntry(e)
		sh.mu.Lock()
		mark(e)
		sh.mu.Unlock()
	}
}

// slotOf is key's hash slot, without copying it: computed once for a key
// being made (its slot's closed bit, and its slot's list).
func slotOf[K string | []byte](key K) int {
	switch k := any(key).(type) {
	case string:
		return slots.Of(unsafe.Slice(unsafe.StringData(k), len(k)))
	case []byte:
		return slots.Of(k)
	}
	panic("unreachable")
}
