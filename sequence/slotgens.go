package sequence

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"

	bolt "go.etcd.io/bbolt"

	"github.com/idserver/idserver/slots"
)

// Per hash slot, the File keeps the generation at which it holds the
// slot's keys exactly (a Redis Cluster node's slot record in etcd counts
// its changes of owner): at a restart, a slot whose generation is still
// etcd's was served by no other server meanwhile, and its keys continue
// from the File; the keys of any other are dropped (Options.KeepSlot). The
// gens are a small bucket of their own, written in place (one
// transaction, fsynced: at most 16384 pairs of 10 bytes), copied by a
// fold into its new file (the last time under the fold's lock, so that
// none written meanwhile is lost), and read by OpenFile; a file written
// before them holds none.

// SlotGens returns the generation of each hash slot the File holds one
// for: what it held at OpenFile, and what SetSlotGens stored since.
func (f *File) SlotGens() map[int]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.gens)
}

// SetSlotGens stores gens, each a hash slot's generation (0: the slot's
// is deleted), durably before it returns, in one write. On an error
// nothing of it is stored.
func (f *File) SetSlotGens(ctx context.Context, gens map[int]int64) error {
	for slot := range gens {
		if slot < 0 || slot >= slots.N {
			return fmt.Errorf("sequence file %s: slot %d out of range 0..%d", f.path, slot, slots.N-1)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sequence file %s: %w", f.path, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.open(); err != nil {
		return err
	}
	err := f.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(slotGensBucket)
		for slot, gen := range gens {
			k := binary.BigEndian.AppendUint16(nil, uint16(slot))
			switch {
			case err != nil:
			case gen == 0:
				err = b.Delete(k)
			default:
				err = b.Put(k, binary.BigEndian.AppendUint64(nil, uint64(gen)))
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	if f.gens == nil {
		f.gens = map[int]int64{}
	}
	for slot, gen := range gens {
		if gen == 0 {
			delete(f.gens, slot)
		} else {
			f.gens[slot] = gen
		}
	}
	if err := f.inject(atWritten); err != nil {
		return fmt.Errorf("sequence file %s: %w", f.path, err)
	}
	return nil
}

// loadGens reads the slot gens bucket, if the file has one.
func loadGens(w *walker) (map[int]int64, error) {
	gens := map[int]int64{}
	err := w.bucket(slotGensBucket, false, func(k, v []byte) error {
		if len(k) != 2 || len(v) != 8 {
			return fmt.Errorf("a slot's generation is %d bytes under a key of %d, not 8 under 2", len(v), len(k))
		}
		slot := int(binary.BigEndian.Uint16(k))
		if slot >= slots.N {
			return fmt.Errorf("the generation of slot %d, past the last, %d", slot, slots.N-1)
		}
		gens[slot] = int64(binary.BigEndian.Uint64(v))
		return nil
	})
	return gens, err
}
