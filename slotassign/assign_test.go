package slotassign

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idserver/idserver/internal/testseed"
)

// TestFirstAssignment: servers that find no assignment split the slots
// into one contiguous range each, in the order of their server-ids, as
// Redis's own tools do.
func TestFirstAssignment(t *testing.T) {
	for n := 1; n <= 10; n++ {
		live := make([]int64, n)
		for i := range live {
			live[i] = int64(n - i) // any order
		}
		ranges := rangesOf(rebalance(ownersOf(nil), live))
		if len(ranges) != n {
			t.Fatalf("%d servers: %d ranges, %+v", n, len(ranges), ranges)
		}
		for i, r := range ranges {
			if r.Owner != int64(i+1) || r.Last-r.First+1 < slotCount/n {
				t.Fatalf("%d servers: range %d is %+v", n, i, r)
			}
		}
	}
}

// TestRebalance: over generated runs of servers joining and leaving (the
// seed logged), every live server owns 16384/n slots or one more, no slot
// is left without an owner or given to one not live, only the slots of
// servers gone and those past a share change hands (the fewest moves
// there can be) but when the slots are laid out anew (one range a
// server, once they averaged more than maxRanges; seldom), and every
// server computes the same.
func TestRebalance(t *testing.T) {
	seed := testseed.Get(t)
	rnd := rand.New(rand.NewPCG(seed, 1))
	owner := rebalance(make([]int64, slotCount), nil)
	var live []int64
	worst, compactions := 0.0, 0
	defer func() {
		t.Logf("worst: %.1f ranges a server; %d layouts anew in 300 steps", worst, compactions)
		if worst > maxRanges {
			t.Errorf("%.1f ranges a server at worst; want %d at most", worst, maxRanges)
		}
		if compactions > 30 {
			t.Errorf("%d layouts anew in 300 steps: each moves many slots", compactions)
		}
	}()
	for step := range 300 {
		switch {
		case len(live) == 0 || len(live) < 12 && rnd.IntN(2) == 0:
			id := int64(rnd.IntN(16))
			if !slices.Contains(live, id) {
				live = append(live, id)
			}
		default:
			i := rnd.IntN(len(live))
			live = slices.Delete(live, i, i+1)
		}
		shuffled := slices.Clone(live)
		rnd.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		next := rebalance(owner, live)
		if len(live) == 0 {
			if slices.ContainsFunc(next, func(o int64) bool { return o != -1 }) {
				t.Fatalf("step %d: slots owned with no server live", step)
			}
			owner = next
			continue
		}
		if again := rebalance(owner, shuffled); !slices.Equal(again, next) {
			t.Fatalf("step %d: the same servers in another order give another assignment", step)
		}
		count := map[int64]int{}
		least, moved := 0, 0
		for s, o := range next {
			if !slices.Contains(live, o) {
				t.Fatalf("step %d: slot %d given to %d, live %v", step, s, o, live)
			}
			count[o]++
			if o != owner[s] {
				moved++
			}
		}
		before := map[int64]int{}
		for _, o := range owner {
			before[o]++
		}
		base := slotCount / len(live)
		for _, id := range live {
			if count[id] != base && count[id] != base+1 {
				t.Fatalf("step %d: %d owns %d slots; want %d or %d", step, id, count[id], base, base+1)
			}
			least += max(0, before[id]-(base+1)) // at least what it holds past the larger share
		}
		for o, n := range before {
			if !slices.Contains(live, o) {
				least += n
			}
		}
		r := len(rangesOf(next))
		switch {
		case moved <= least+slotCount%len(live)+len(live):
		case r == len(live):
			compactions++ // laid out anew: more moves, allowed
		default:
			t.Fatalf("step %d: %d slots moved; %d at least must", step, moved, least)
		}
		worst = max(worst, float64(r)/float64(len(live)))
		owner = next
	}
}
