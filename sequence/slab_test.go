package sequence

import (
	"math/rand/v2"
	"testing"

	"github.com/idserver/idserver/internal/testseed"
)

// TestSlabTake: runs of any length, up to past the largest chunk, come
// zero, as long as asked and no longer (an append cannot reach the
// next), and never share a value with another run.
func TestSlabTake(t *testing.T) {
	seed := testseed.Get(t)
	r := rand.New(rand.NewPCG(seed, 2))
	var s slab[slot]
	var runs [][]slot
	for i := range 300 {
		n := 1 + r.IntN(1<<uint(r.IntN(21))) // up to 1M slots: 16 MiB, past maxChunk
		run := s.take(n)
		if len(run) != n || cap(run) != n {
			t.Fatalf("take(%d): len %d cap %d", n, len(run), cap(run))
		}
		for j := range run {
			if run[j] != (slot{}) {
				t.Fatalf("take(%d): slot %d not zero", n, j)
			}
			run[j].h = uint64(i + 1)
		}
		runs = append(runs, run)
	}
	for i, run := range runs {
		for j := range run {
			if run[j].h != uint64(i+1) {
				t.Fatalf("run %d slot %d holds %d: another run shares it", i, j, run[j].h)
			}
		}
	}
}
