package sequence

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"

	bolt "go.etcd.io/bbolt"
)

// What the File keeps of each hash slot beside the keys, for a Redis
// Cluster node over etcd (package seqslots): in a bucket each, keyed by
// the slot (2 bytes, big-endian).
var (
	// slotGensBucket holds the generation at which the file holds the
	// slot's keys exactly (8 bytes): a restart keeps them only if it is
	// still etcd's.
	slotGensBucket = []byte("slotgens")
	// slotSeenBucket holds what the server saw of the slot's record in
	// etcd (its caller's bytes): what a take starts from if etcd lost it.
	slotSeenBucket = []byte("slotseen")
)

// SlotGens returns the generation at which the file holds each hash
// slot's keys, as stored (slots at 0 are left out).
func (f *File) SlotGens() map[int]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[int]int64, len(f.slotGens))
	for s, b := range f.slotGens {
		out[s] = int64(binary.BigEndian.Uint64(b))
	}
	return out
}

// SetSlotGens stores gens (a slot at 0 is removed), durably before it
// returns, in one write. It leaves the file's clean flag as it is: it
// says nothing of the keys' values.
func (f *File) SetSlotGens(ctx context.Context, gens map[int]int64) error {
	vals := make(map[int][]byte, len(gens))
	for s, g := range gens {
		if g != 0 {
			vals[s] = binary.BigEndian.AppendUint64(nil, uint64(g))
		} else {
			vals[s] = nil
		}
	}
	return f.putSlots(slotGensBucket, &f.slotGens, vals)
}

// SlotSeen returns what SetSlotSeen stored of each hash slot.
func (f *File) SlotSeen() map[int][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.slotSeen)
}

// SetSlotSeen stores seen (a nil value removes its slot), durably before
// it returns, in one write, leaving the clean flag as it is.
func (f *File) SetSlotSeen(seen map[int][]byte) error {
	return f.putSlots(slotSeenBucket, &f.slotSeen, seen)
}

// putSlots writes vals into bucket, and into *held once written.
func (f *File) putSlots(bucket []byte, held *map[int][]byte, vals map[int][]byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.open(); err != nil {
		return err
	}
	err := f.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		for s, v := range vals {
			k := binary.BigEndian.AppendUint16(nil, uint16(s))
			if v == nil {
				err = b.Delete(k)
			} else {
				err = b.Put(k, v)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if *held == nil {
		*held = map[int][]byte{}
	}
	for s, v := range vals {
		if v == nil {
			delete(*held, s)
		} else {
			(*held)[s] = v
		}
	}
	return nil
}

// loadSlots reads the slots' buckets of a file being opened.
func (f *File) loadSlots(w *walker) error {
	for _, b := range []struct {
		name []byte
		into *map[int][]byte
	}{{slotGensBucket, &f.slotGens}, {slotSeenBucket, &f.slotSeen}} {
		err := w.bucket(b.name, false, func(k, v []byte) error {
			if len(k) != 2 {
				return fmt.Errorf("a key of the bucket %s is %d bytes, not 2", b.name, len(k))
			}
			if *b.into == nil {
				*b.into = map[int][]byte{}
			}
			(*b.into)[int(binary.BigEndian.Uint16(k))] = append([]byte(nil), v...)
			return nil
		})
		if err != nil {
			return err
		}
	}
	if g := f.slotGens; g != nil {
		for s, v := range g {
			if len(v) != 8 {
				return fmt.Errorf("the generation of slot %d is %d bytes, not 8", s, len(v))
			}
		}
	}
	return nil
}

// copySlots copies the slots' buckets of old into tx (a fold's new
// file), under the File's lock: no write of them comes between.
func copySlots(old, tx *bolt.Tx) error {
	for _, name := range [][]byte{slotGensBucket, slotSeenBucket} {
		src := old.Bucket(name)
		if src == nil {
			continue
		}
		dst, err := tx.CreateBucketIfNotExists(name)
		if err != nil {
			return err
		}
		if err := src.ForEach(func(k, v []byte) error { return dst.Put(k, v) }); err != nil {
			return err
		}
	}
	return nil
}
