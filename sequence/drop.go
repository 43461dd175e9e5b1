package sequence

import (
	"errors"
	"sync"
)

// ErrNotServed is a Backend's answer to a Take of a key that this server
// does not serve now, or did not serve all the while the take ran: in a
// Redis Cluster over etcd, a key is served by its hash slot's owner only,
// and values reserved before a slot became a server's (again) may lie
// below values another server handed out meanwhile. Nothing taken is
// handed out, and no store failed. It is also the answer to a request
// that waited for a key whose slot was dropped (DropSlot).
var ErrNotServed = errors.New("the key's hash slot is not this server's")

// Handed is a hash slot's keys as their old owner hands them over to the
// slot's new owner, with the generation at which it held them (0: it
// cannot hand them over: it still serves the slot, or holds none;
// GenTaking: ask again).
type Handed struct {
	Slot  int    // the hash slot
	Gen   int64  // the slot's generation the keys are exact at
	Marks []Mark // each key's last value handed out, exactly
	// Next is the place in the slot's keys its next page starts at
	// (Table.SlotMarks); 0: Marks ends the slot's keys.
	Next int
}

// GenTaking is Handed.Gen of a slot its old owner is still taking
// itself (its keys' generation not recorded yet): the pull asks again.
const GenTaking = -1

// DropSlot removes every key of hash slot slot from the Table, and
// returns how many: a slot that moved to another server, or whose keys
// this server holds are not to be trusted (a crash take-over). They are
// gone for Get, Keys and Len, and no longer count against
// MaxKeys or in Stats' Bytes; a later Incr of one makes it anew, its
// take asking the Backend with After 0 (the Backend decides where it
// starts). The File keeps their records until its next fold, which
// leaves them out.
//
// What still names a dropped key's entry hands out and stores nothing
// for it: a take under way is discarded, a SET under way answered
// ErrNotServed, a request waiting for either, and a Pending of its
// values, get ErrNotServed. The slot's keys should not be served while
// it runs (the caller stops serving the slot first): a value handed out
// meanwhile may not be recorded anywhere.
//
// The key strings the Table hands out (Keys, KeysInSlot, SlotMarks, a
// Backend's keys) are its own bytes, not copies: a dropped key's stay as
// they were for Options.Wait after the drop, and while a fold whose
// snapshot holds them runs; then its entry may be made another key's,
// and they change. What keeps a key longer keeps a copy.
func (t *Table) DropSlot(slot int) int {
	t.bySlotMu.Lock()
	list := t.bySlot[slot]
	t.bySlot[slot] = nil
	t.made -= len(list)
	t.bySlotMu.Unlock()
	for _, e := range list {
		t.drop(e)
	}
	return len(list)
}

// drop takes e out of its shard's index, ends the waits for it, and
// puts it in limbo if no take or SET names it; else the writer does,
// once done with it.
func (t *Table) drop(e *entry) {
	_, h := t.shardOf(e.key)
	sh := t.shardOfEntry(e)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.remove(h, e)
	if e.has(durable) {
		t.keys.Add(-1)
	}
	e.bits = e.bits&^durable | dropped
	e.born = false
	e.ended(ErrNotServed)
	t.bytes.Add(-int64(len(e.key) + EntryBytes))
	if !e.taking {
		t.limbo.add(e, t.opts.now().UnixNano())
	}
}

// limbo holds the entries of dropped keys until they may be made other
// keys' (reuse): when no take or SET names them (they come here only
// then), longer ago than Options.Wait (a Pending is awaited, and a
// request waits, that long at most), and not in the snapshot of a fold
// under way (which holds their keys' strings). Until then they are
// memory the Table holds beside its keys: at most the keys dropped in
// the last Options.Wait, or during the fold under way.
type limbo struct {
	mu    sync.Mutex
	lists [classes][]resting // by class, oldest first
}

// resting is an entry in limbo since at (unix ns).
type resting struct {
	e  *entry
	at int64
}

// add puts e, of a dropped key, in limbo from at.
func (l *limbo) add(e *entry, at int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := classOf(len(e.key))
	l.lists[c] = append(l.lists[c], resting{e, at})
}

// reuse returns an entry of class from limbo that may be made another
// key's, zero but for its gen, one more; nil if none may.
func (t *Table) reuse(class int) *entry {
	l := &t.limbo
	l.mu.Lock()
	defer l.mu.Unlock()
	list := l.lists[class]
	if len(list) == 0 {
		return nil
	}
	at, fold := list[0].at, t.foldBegan.Load()
	if t.opts.now().UnixNano()-at <= int64(t.opts.Wait) || fold != 0 && fold <= at {
		return nil
	}
	e := list[0].e
	l.lists[class] = list[1:]
	*e = entry{gen: e.gen + 1}
	return e
}
