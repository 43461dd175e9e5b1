package sequence

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/idserver/idserver/internal/testseed"
)

// TestIndex: every key added is found, under its own hash, and no other
// key is, through growth and through hashes that collide (whole, or in
// the bits that choose a slot), against a map as the oracle.
func TestIndex(t *testing.T) {
	seed := testseed.Get(t)
	r := rand.New(rand.NewPCG(seed, 1))
	for _, hashes := range []int{1, 7, 1 << 62} { // how many hashes the keys share
		var x index
		var alloc entries
		added := map[string]uint64{}
		for i := range 5000 {
			key := fmt.Sprintf("k%d", r.IntN(20000))
			h := r.Uint64N(uint64(hashes)) << shardBits
			if _, ok := added[key]; ok {
				continue
			}
			if e := find(&x, h, key); e != nil {
				t.Fatalf("%d hashes: %q found before it was added (as %q)", hashes, key, e.key)
			}
			x.add(h, newEntry(&alloc, key), &alloc.slots)
			added[key] = h
			if i%97 == 0 {
				for k, h := range added {
					if e := find(&x, h, []byte(k)); e == nil || e.key != k {
						t.Fatalf("%d hashes: %q not found after %d keys", hashes, k, len(added))
					}
				}
			}
		}
		n := 0
		x.each(func(e *entry) {
			if _, ok := added[e.key]; !ok {
				t.Fatalf("%d hashes: each gave %q, never added", hashes, e.key)
			}
			n++
		})
		if n != len(added) || x.n != n {
			t.Fatalf("%d hashes: each gave %d entries, n %d, added %d", hashes, n, x.n, len(added))
		}
	}
}

// TestIndexRemove: keys added and removed at random, with hashes that
// collide (whole, or in the bits that choose a slot) so that runs are
// long and wrap around the end, leave every key present found and no
// removed one, against a map as the oracle; and the index leaves no
// tombstone: emptied, every slot is empty.
func TestIndexRemove(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Get(t), 2))
	for _, hashes := range []int{1, 7, 64, 1 << 62} {
		var x index
		var alloc entries
		present := map[string]*entry{}
		hashOf := map[string]uint64{}
		check := func(step int) {
			for k, e := range present {
				if got := find(&x, hashOf[k], k); got != e {
					t.Fatalf("%d hashes, step %d: %q not found among %d keys", hashes, step, k, len(present))
				}
			}
		}
		for step := range 20000 {
			key := fmt.Sprintf("k%d", r.IntN(300))
			h, ok := hashOf[key]
			if !ok {
				h = r.Uint64N(uint64(hashes))<<shardBits | uint64(r.IntN(4))<<(shardBits+4) // some keys share a home
				hashOf[key] = h
			}
			if e, ok := present[key]; ok {
				x.remove(h, e)
				delete(present, key)
				if got := find(&x, h, key); got != nil {
					t.Fatalf("%d hashes, step %d: %q found after its removal", hashes, step, key)
				}
			} else {
				e := newEntry(&alloc, key)
				x.add(h, e, &alloc.slots)
				present[key] = e
			}
			if x.n != len(present) {
				t.Fatalf("%d hashes, step %d: n %d, %d keys present", hashes, step, x.n, len(present))
			}
			if step%101 == 0 {
				check(step)
			}
		}
		check(-1)
		for k, e := range present {
			x.remove(hashOf[k], e)
		}
		for i, s := range x.slots {
			if s.e != nil || s.h != 0 {
				t.Fatalf("%d hashes: slot %d not empty once every key was removed", hashes, i)
			}
		}
	}
}

// TestNewEntry: a key of any length, inline or not, reads back as it
// was, does not change when the bytes it was made from do, and is told
// from keys one byte longer, shorter or different; every entry begins a
// cache line.
func TestNewEntry(t *testing.T) {
	var alloc entries
	for n := range 600 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + (n+i)%26)
		}
		want := string(b)
		e := newEntry(&alloc, b)
		clear(b)
		if e.key != want {
			t.Fatalf("len %d: key %q, want %q", n, e.key, want)
		}
		if e := newEntry(&alloc, want); e.key != want {
			t.Fatalf("len %d from a string: key %q", n, e.key)
		}
		if !is(e, want) || !is(e, []byte(want)) || is(e, want+"a") {
			t.Fatalf("len %d: is(%q) wrong for itself or one byte longer", n, want)
		}
		if n > 0 && (is(e, want[:n-1]) || is(e, want[:n-1]+"!")) {
			t.Fatalf("len %d: is(%q) holds for a shorter or different key", n, want)
		}
		if p := uintptr(unsafe.Pointer(e)); p%64 != 0 {
			t.Fatalf("len %d: the entry is at %#x, not at the start of a cache line", n, p)
		}
	}
}

// TestEntryLayout: what an INCR reads (the counts, when to ask, the
// flags and a short key) is in an entry's first 64 bytes, and an entry
// is two cache lines.
func TestEntryLayout(t *testing.T) {
	var e entry
	if size, key := unsafe.Sizeof(e), unsafe.Offsetof(e.key); size != 128 || key != 64 {
		t.Fatalf("an entry is %d bytes with the cold part at %d; want 128 and 64", size, key)
	}
	if end := unsafe.Offsetof(e.short) + unsafe.Sizeof(e.short); end > 64 {
		t.Fatalf("the short key ends at byte %d, past the first cache line", end)
	}
}
