// Package seqslots keeps, in etcd, one record per hash slot of the
// sequences: a ceiling above every value any server ever handed out of
// any key of the slot, the slot's generation (one more at every change of
// owner), its owner, and its floor. A slot's owner hands values out of
// its own durable store (package sequence) and only raises the slot's
// ceiling, ahead of use and in steps: etcd's writes follow the slots'
// growth, not the number of keys (docs/cluster.md, Sequences in cluster mode).
//
// Why no value repeats across owners. Every write of a record is a
// compare-and-swap on the revision its writer last read or wrote, and
// every change of owner rewrites the record: once a new owner has taken
// a slot, no write of the old owner's succeeds. An owner hands out a
// value only below a ceiling it stored, and a new owner that does not
// have the keys' exact values (a crash take-over) starts every key of
// the slot above the ceiling it read in the write that took the slot
// (its floor). So every value of the old owner lies below the floor, and
// every value of the new owner above it, however long the old owner was
// paused or cut off and still believed it owned the slot.
//
// The parts: Slots reads and writes the records (Take, and Cover, which
// raises a ceiling ahead of use in Steps); Gate is the sequences'
// Backend, which lets a value out only below a ceiling Slots stored; an
// Engine takes the slots the assignment gives this server, pulling their
// keys from the old owner where it can (How), and hands over those it
// loses; Known keeps the highest record seen of each slot beside the
// keys, for when etcd loses data; Guard notices etcd going back in time.
package seqslots

import (
	"encoding/json"
	"fmt"
	"math"
)

// A Record is a slot's state in etcd.
type Record struct {
	// Ceil is above every value of every key of the slot that any
	// server handed out.
	Ceil int64 `json:"ceil"`
	// Gen is one more at every change of the slot's owner: a server whose
	// store held the slot at Gen, when Gen is still the record's, holds
	// every key's value (no other server served the slot since).
	Gen int64 `json:"gen"`
	// Owner is the server-id that owns the slot at Gen, -1 if none (a
	// graceful stop let it go).
	Owner int64 `json:"owner"`
	// Floor is what every key of the slot that its owner does not know
	// exactly continues above: the ceiling at the last crash take-over.
	Floor int64 `json:"floor,omitempty"`
	// Take is a token of the take that wrote Gen (random, not 0; 0 in
	// records of earlier versions): the server that stored it before the
	// write knows the record as its own (Slots.Take).
	Take uint64 `json:"take,omitempty"`
}

func (r Record) marshal() string {
	b, _ := json.Marshal(r) // a struct of integers always marshals
	return string(b)
}

func unmarshal(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("slot record %q: %w", b, err)
	}
	if r.Ceil < 0 || r.Floor < 0 || r.Floor > r.Ceil || r.Gen < 0 {
		return Record{}, fmt.Errorf("slot record %q: out of range", b)
	}
	return r, nil
}

// How says how a server takes a slot: what its store holds of the keys.
type How int

// The ways to take a slot (docs/cluster.md: How a slot changes owner).
const (
	// Current: the server's store held the slot at the record's Gen, so
	// it holds every key's value.
	Current How = iota
	// HandedOver: the server pulled every key's exact value from the old
	// owner, which let the slot go and served it no more.
	HandedOver
	// Crashed: the server holds no key's value it can trust; every key
	// continues above the slot's ceiling.
	Crashed
)

// String is h in words: "current", "handed over" or "crashed".
func (h How) String() string { return [...]string{"current", "handed over", "crashed"}[h] }

// next is the record of a slot taken by owner from prev, the way how: one
// generation more, and after a crash take-over the floor at the ceiling
// it read. The ceiling stays: values go out only once one is raised
// above them.
func next(prev Record, owner int64, how How) Record {
	r := Record{Ceil: prev.Ceil, Gen: prev.Gen + 1, Owner: owner, Floor: prev.Floor}
	if how == Crashed {
		r.Floor = prev.Ceil
	}
	return r
}

// raised is r with its ceiling at least to: above last, and a step more.
func raised(r Record, last, step int64) Record {
	c := max(r.Ceil, last)
	if c > math.MaxInt64-step {
		c = math.MaxInt64
	} else {
		c += step
	}
	r.Ceil = c
	return r
}
