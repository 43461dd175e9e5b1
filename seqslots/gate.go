package seqslots

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/idserver/idserver/sequence"
	"github.com/idserver/idserver/slots"
)

// Gate is the sequences' Backend of a slot owner: its local File, under
// the slots' ceilings in etcd. The one rule it enforces: a value goes out
// (a segment is reserved, a SET stored) only below a ceiling this server
// stored, by compare-and-swap, as the slot's owner (Slots.Cover), and a
// key the File does not know starts above the slot's floor.
type Gate struct {
	*sequence.File // folds, graceful stops and resumes as one server's
	cur            atomic.Pointer[Slots]
}

// NewGate returns the gate of file, which owns no slot until Use.
func NewGate(file *sequence.File) *Gate { return &Gate{File: file} }

// Use makes s the slots the gate checks (nil: none, while the server
// holds no server-id).
func (g *Gate) Use(s *Slots) { g.cur.Store(s) }

// owned is the record of slot if this server owns it now.
func (g *Gate) owned(slot int) (Record, bool) {
	if s := g.cur.Load(); s != nil {
		return s.Owned(slot)
	}
	return Record{}, false
}

// Take reserves each segment in the File once its slot's ceiling covers
// it. A key of a slot this server does not own gets sequence.ErrNotServed.
func (g *Gate) Take(ctx context.Context, ts []sequence.Take) {
	list := make([]int, len(ts))
	for i := range ts {
		list[i] = slotOf(ts[i].Key)
	}
	recs, owned := g.ownedEach(list)
	need := map[int]int64{} // by slot, the highest last value to cover
	for i := range ts {
		t, s := &ts[i], list[i]
		if !owned[i] {
			t.Err = sequence.ErrNotServed
			continue
		}
		t.After = max(t.After, recs[i].Floor)
		if t.After > maxValue-t.N {
			continue // the File refuses it: ErrOverflow
		}
		need[s] = max(need[s], t.After+t.N)
	}
	g.cover(ctx, need, func(slot int, err error) {
		for i := range ts {
			if ts[i].Err == nil && list[i] == slot {
				ts[i].Err = err
			}
		}
	})
	g.File.Take(ctx, ts)
}

// Set stores each value once its slot's ceiling covers it, and refuses a
// value below the slot's floor: a key this server does not know may have
// had any value up to it under an owner before a crash take-over.
func (g *Gate) Set(ctx context.Context, ss []sequence.Setting) {
	list := make([]int, len(ss))
	for i := range ss {
		list[i] = slotOf(ss[i].Key)
	}
	recs, owned := g.ownedEach(list)
	need := map[int]int64{}
	for i := range ss {
		s, slot := &ss[i], list[i]
		switch {
		case !owned[i]:
			s.Err = sequence.ErrNotServed
		case s.Value < recs[i].Floor:
			s.Err = &sequence.BelowError{Key: s.Key, At: recs[i].Floor}
		default:
			need[slot] = max(need[slot], s.Value)
		}
	}
	g.cover(ctx, need, func(slot int, err error) {
		for i := range ss {
			if ss[i].Err == nil && list[i] == slot {
				ss[i].Err = err
			}
		}
	})
	g.File.Set(ctx, ss)
}

// ownedEach is the record of each slot of list if this server owns it
// now: recs[i] and ok[i] are list[i]'s.
func (g *Gate) ownedEach(list []int) (recs []Record, ok []bool) {
	if s := g.cur.Load(); s != nil {
		return s.ownedEach(list)
	}
	return make([]Record, len(list)), make([]bool, len(list))
}

// cover waits, for every slot of need, for a stored ceiling above its
// value (the raises of many slots share a transaction); failed is called
// for each slot that could not be covered.
func (g *Gate) cover(ctx context.Context, need map[int]int64, failed func(slot int, err error)) {
	fail := func(slot int, err error) {
		if errors.Is(err, ErrNotOwner) {
			failed(slot, fmt.Errorf("%w: %w", sequence.ErrNotServed, err))
		} else {
			failed(slot, fmt.Errorf("%w: %w", sequence.ErrNotReserved, err))
		}
	}
	cur := g.cur.Load()
	if cur == nil {
		for slot := range need {
			fail(slot, fmt.Errorf("slot %d: %w", slot, ErrNotOwner))
		}
		return
	}
	waits, asked := cur.askEach(need) // every raise asked before any is waited for
	for slot, err := range asked {
		fail(slot, err)
	}
	for slot, done := range waits {
		if err := cur.await(ctx, slot, need[slot], done); err != nil {
			fail(slot, err)
		}
	}
}

const maxValue = 1<<63 - 1

func slotOf(key string) int { return slots.Of([]byte(key)) }

// drop has the slots in use forget slot.
func (g *Gate) drop(slot int) {
	if s := g.cur.Load(); s != nil {
		s.Drop(slot)
	}
}
