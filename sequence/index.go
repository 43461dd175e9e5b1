package sequence

// index finds a shard's entries by key: open addressing over slots of
// (hash, entry), probed in order. A lookup of one of many keys costs a
// cache miss for its slot and one for its entry, where a Go map of string
// keys costs four (control word, slot, the key's bytes, the entry): with
// 100,000 random keys those misses were a quarter of INCR's CPU. A key
// removed (a hash slot dropped) leaves no tombstone: the slots after it
// in its run shift back (remove), so a lookup still stops at the first
// empty slot and its cost does not grow with keys dropped and made.
type index struct {
	slots []slot // a power of two long; nil until the first key
	n     int
}

type slot struct {
	h uint64 // the key's hash; the shard was chosen by its low bits
	e *entry // nil: empty
}

// find returns the entry of key, whose hash is h, or nil.
func find[K string | []byte](x *index, h uint64, key K) *entry {
	if x.n == 0 {
		return nil
	}
	mask := uint64(len(x.slots) - 1)
	for i := (h >> shardBits) & mask; ; i = (i + 1) & mask {
		s := &x.slots[i]
		if s.e == nil {
			return nil
		}
		if s.h == h && is(s.e, key) {
			return s.e
		}
	}
}

// is reports whether e is key's entry. A key of up to 16 bytes is
// compared in the entry's first cache line, which the INCR reads next.
func is[K string | []byte](e *entry, key K) bool {
	if len(key) <= len(e.short) {
		return int(e.klen) == len(key) && string(e.short[:len(key)]) == string(key)
	}
	return e.key == string(key)
}

// add adds e, a key not in x, whose hash is h, taking slots from mem
// when x grows.
func (x *index) add(h uint64, e *entry, mem *slab[slot]) {
	if (x.n+1)*4 > len(x.slots)*3 { // at most three quarters full
		x.grow(mem)
	}
	x.put(h, e)
	x.n++
}

// fit grows x, while empty, to hold n keys without growing again: a
// restart's keys, put in at once, would otherwise grow it a dozen times
// over (rehashing each time, and keeping the slots outgrown).
func (x *index) fit(n int, mem *slab[slot]) {
	size := 8
	for n*4 > size*3 {
		size *= 2
	}
	if x.n == 0 && size > len(x.slots) {
		x.slots = mem.take(size)
	}
}

func (x *index) put(h uint64, e *entry) {
	mask := uint64(len(x.slots) - 1)
	i := (h >> shardBits) & mask
	for x.slots[i].e != nil {
		i = (i + 1) & mask
	}
	x.slots[i] = slot{h, e}
}

func (x *index) grow(mem *slab[slot]) {
	old := x.slots
	x.slots = mem.take(max(2*len(old), 8))
	for _, s := range old {
		if s.e != nil {
			x.put(s.h, s.e)
		}
	}
}

// remove takes e, whose hash is h, out of x: backward-shift deletion.
// Each slot after e's in its run moves back into the hole if the hole
// lies between the slot's home and where it is (cyclically), so every
// key stays reachable from its home without passing an empty slot.
func (x *index) remove(h uint64, e *entry) {
	mask := uint64(len(x.slots) - 1)
	hole := (h >> shardBits) & mask
	for x.slots[hole].e != e {
		hole = (hole + 1) & mask
	}
	for i := (hole + 1) & mask; x.slots[i].e != nil; i = (i + 1) & mask {
		home := (x.slots[i].h >> shardBits) & mask
		if (i-home)&mask >= (i-hole)&mask { // the hole is on its way from home
			x.slots[hole] = x.slots[i]
			hole = i
		}
	}
	x.slots[hole] = slot{}
	x.n--
}

// each calls f for every entry.
func (x *index) each(f func(*entry)) {
	for _, s := range x.slots {
		if s.e != nil {
			f(s.e)
		}
	}
}
