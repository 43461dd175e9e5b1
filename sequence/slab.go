package sequence

import (
	"sync"
	"unsafe"
)

// slab hands out values of T, one at a time (entries) or side by side
// (an index's slots), from chunks that grow with the table, the large
// ones backed by huge pages. With 100,000 random keys nearly every INCR
// reads an index slot and an entry no cache holds, and on a virtual
// machine a miss in the TLB as well costs a walk of two page tables: 2
// MiB pages cover them with a few TLB entries (measured: about 8% less
// user CPU at INCR -P 16 over 100,000 keys, for the entries). Values are
// never given back: the entries of dropped keys are made new keys'
// (limbo), and an index outgrows its slots once per doubling (what it
// outgrew adds up to less than it).
type slab[T any] struct {
	mu    sync.Mutex
	free  []T
	chunk uintptr // the bytes of the last chunk
}

// Chunks double from minChunk to maxChunk. Every chunk is a large object
// of the Go heap (over 32 KiB), which begins at a page's boundary: a
// small one begins with the allocator's 8-byte header, and entries, 64
// bytes apart, would then straddle cache lines. A chunk of hugePage or
// more begins at a huge page's boundary, so that all of it can be huge
// pages: it over-allocates by a page, which stays virtual (the Go heap
// does not touch fresh memory), and it comes only once the table
// already holds as much.
const (
	minChunk = 64 << 10
	hugePage = 2 << 20
	maxChunk = 16 << 20
)

func (s *slab[T]) new() *T { return &s.take(1)[0] }

// take returns n values side by side, zero. What is left of a chunk too
// short for them is not used.
func (s *slab[T]) take(n int) []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.free) < n {
		s.grow(n)
	}
	p := s.free[:n:n]
	s.free = s.free[n:]
	return p
}

func (s *slab[T]) grow(n int) {
	var zero T
	size := unsafe.Sizeof(zero)
	s.chunk = min(max(2*s.chunk, minChunk), maxChunk)
	if need := uintptr(n) * size; need > s.chunk {
		s.chunk = (need + hugePage - 1) / hugePage * hugePage
	}
	if s.chunk < hugePage {
		s.free = make([]T, s.chunk/size)
		return
	}
	all := make([]T, (s.chunk+hugePage)/size)
	start := unsafe.Pointer(&all[0])
	skip := (hugePage - uintptr(start)%hugePage) % hugePage
	s.free = all[(skip+size-1)/size:][:s.chunk/size]
	hugePages(unsafe.Slice((*byte)(unsafe.Add(start, skip)), s.chunk))
}
