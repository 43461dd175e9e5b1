package sequence

import (
	"encoding/binary"
	"fmt"
	"maps"

	bolt "go.etcd.io/bbolt"
)

// slotSeenBucket holds, per hash slot (2 bytes, big-endian), what the
// server saw of the slot's record in etcd (its caller's bytes, package
// seqslots): what a take starts from if etcd lost it.
var slotSeenBucket = []byte("slotseen")

// SlotSeen returns what SetSlotSeen stored of each hash slot.
func (f *File) SlotSeen() map[int][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.slotSeen)
}

// SetSlotSeen stores seen (a nil value removes its slot), durably before
// it returns, in one write, leaving the clean flag as it is: it says
// nothing of the keys' values.
func (f *File) SetSlotSeen(seen map[int][]byte) error {
	return f.putSlots(slotSeenBucket, &f.slotSeen, seen)
}

// slotTakesBucket holds, per hash slot, the record a take of it by this
// server was about to write in etcd (its caller's bytes, package
// seqslots), stored before that write: a record etcd holds that this
// store stored so is this server's own, though the store did not record
// the take's end (a full disk, a kill).
var slotTakesBucket = []byte("slottakes")

// SlotTakes returns what SetSlotTakes stored of each hash slot.
func (f *File) SlotTakes() map[int][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.slotTakes)
}

// SetSlotTakes stores takes (a nil value removes its slot), durably
// before it returns, in one write, as SetSlotSeen.
func (f *File) SetSlotTakes(takes map[int][]byte) error {
	return f.putSlots(slotTakesBucket, &f.slotTakes, takes)
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

// loadSlots reads bucket, one of the slots' buckets, of a file being
// opened into *held.
func loadSlots(w *walker, bucket []byte, held *map[int][]byte) error {
	return w.bucket(bucket, false, func(k, v []byte) error {
		if len(k) != 2 {
			return fmt.Errorf("a key of the bucket %s is %d bytes, not 2", bucket, len(k))
		}
		if *held == nil {
			*held = map[int][]byte{}
		}
		(*held)[int(binary.BigEndian.Uint16(k))] = append([]byte(nil), v...)
		return nil
	})
}
