package slotassign

import (
	"cmp"
	"maps"
	"slices"

	"github.com/idserver/idserver/slots"
)

// slotCount is Redis Cluster's number of hash slots.
const slotCount = slots.N

// A slotRange is a run of hash slots with one owner: the server-id that
// serves their keys, under the lease it held when the range was given
// it. From is the server-id it is moving from (with FromLease), or -1:
// while a range moves, no one serves it (-TRYAGAIN), until its old owner
// has let it go or its lease is gone from etcd. A range with no Lease
// was released by its owner at a graceful stop (no one took it): no one
// serves it, and it goes back to Node, that owner's node ID (kept in its
// dir), when that node is live again, whatever server-id it holds then.
type slotRange struct {
	First, Last int
	Owner       int64
	Lease       int64 `json:",omitempty"`
	From        int64
	FromLease   int64  `json:",omitempty"`
	Node        string `json:",omitempty"`
}

// rebalance returns who should own each slot when the servers holding
// server-ids are live (owners) and owner[s] is slot s's owner now (-1:
// none, or one no longer live): every live server gets 16384/n slots or
// one more, and only the slots of owners gone, and those an owner has
// past its share, change hands (as few as can be). So that each owner's
// slots stay in few ranges through joins and leaves, an owner gives up
// its smallest ranges first, and an owner short of its share first
// extends its ranges into free slots beside them, then takes the
// smallest run of free slots that covers what it lacks, else the largest
// whole. Deterministic: every server computes the same.
func rebalance(owner []int64, live []int64) []int64 {
	next := slices.Clone(owner)
	isLive := map[int64]bool{}
	for _, id := range live {
		isLive[id] = true
	}
	count := map[int64]int{}
	for s, o := range next {
		if !isLive[o] {
			next[s] = -1
			continue
		}
		count[o]++
	}
	if len(live) == 0 {
		return next
	}
	share := shares(live, count)
	ids := slices.Sorted(maps.Keys(isLive))
	for _, o := range ids {
		giveUp(next, o, count[o]-share[o])
		count[o] = min(count[o], share[o])
	}
	first := firstSlots(next)
	slices.SortFunc(ids, func(a, b int64) int {
		return cmp.Or(cmp.Compare(first[a], first[b]), cmp.Compare(a, b))
	})
	for _, o := range ids {
		take(next, o, share[o]-count[o])
	}
	if len(rangesOf(next)) > maxRanges*len(live) {
		return compact(next, share)
	}
	return next
}

// maxRanges bounds the ranges a server owns on average: past it, a
// rebalance lays the slots out anew, one contiguous range a server.
// Moving the fewest slots, joins and leaves fragment them (5-15 ranges a
// server after 300 at random, TestRebalance); with the bound, about one
// rebalance in 300 lays them out anew.
const maxRanges = 8

// compact lays owner's slots out again as one contiguous range for each
// owner, of its share, the owners in the order of the middle of their
// slots now, so that much of each range stays with its owner.
func compact(owner []int64, share map[int64]int) []int64 {
	sum, n := map[int64]int{}, map[int64]int{}
	for s, o := range owner {
		sum[o] += s
		n[o]++
	}
	ids := slices.Collect(maps.Keys(share))
	slices.SortFunc(ids, func(a, b int64) int {
		return cmp.Or(cmp.Compare(sum[a]/max(n[a], 1), sum[b]/max(n[b], 1)), cmp.Compare(a, b))
	})
	next, s := make([]int64, len(owner)), 0
	for _, o := range ids {
		for range share[o] {
			next[s] = o
			s++
		}
	}
	return next
}

// giveUp frees n of o's slots, from its smallest ranges, each from its
// end.
func giveUp(owner []int64, o int64, n int) {
	var mine []slotRange
	for _, r := range rangesOf(owner) {
		if r.Owner == o {
			mine = append(mine, r)
		}
	}
	slices.SortStableFunc(mine, func(a, b slotRange) int { return cmp.Compare(a.Last-a.First, b.Last-b.First) })
	for _, r := range mine {
		for s := r.Last; s >= r.First && n > 0; s-- {
			owner[s] = -1
			n--
		}
	}
}

// take gives o n free slots: beside its ranges first, then the smallest
// run of free slots that holds what is left, else the largest run whole.
func take(owner []int64, o int64, n int) {
	for s := 1; s < len(owner) && n > 0; s++ { // after each of its ranges
		if owner[s] == -1 && owner[s-1] == o {
			owner[s] = o
			n--
		}
	}
	for s := len(owner) - 2; s >= 0 && n > 0; s-- { // before each
		if owner[s] == -1 && owner[s+1] == o {
			owner[s] = o
			n--
		}
	}
	for n > 0 {
		var runs [][2]int // first, length
		for s := 0; s < len(owner); s++ {
			if owner[s] != -1 {
				continue
			}
			start := s
			for s+1 < len(owner) && owner[s+1] == -1 {
				s++
			}
			runs = append(runs, [2]int{start, s - start + 1})
		}
		best := slices.MinFunc(runs, func(a, b [2]int) int {
			fitsA, fitsB := a[1] >= n, b[1] >= n
			switch {
			case fitsA != fitsB && fitsA:
				return -1
			case fitsA != fitsB:
				return 1
			case fitsA:
				return cmp.Or(cmp.Compare(a[1], b[1]), cmp.Compare(a[0], b[0]))
			}
			return cmp.Or(cmp.Compare(b[1], a[1]), cmp.Compare(a[0], b[0]))
		})
		for s := best[0]; s < best[0]+min(best[1], n); s++ {
			owner[s] = o
		}
		n -= min(best[1], n)
	}
}

// shares is each live owner's share of the slots: 16384/n, and one more
// for the 16384 mod n owners that hold the most now (the fewest moves),
// the lower server-id first among equals.
func shares(live []int64, count map[int64]int) map[int64]int {
	base, extra := slotCount/len(live), slotCount%len(live)
	byCount := slices.Clone(live)
	slices.SortFunc(byCount, func(a, b int64) int {
		return cmp.Or(cmp.Compare(count[b], count[a]), cmp.Compare(a, b))
	})
	share := map[int64]int{}
	for i, o := range byCount {
		share[o] = base
		if i < extra {
			share[o]++
		}
	}
	return share
}

// firstSlots is each owner's first slot in owner (slotCount if none).
func firstSlots(owner []int64) map[int64]int {
	first := map[int64]int{}
	for s := slotCount - 1; s >= 0; s-- {
		if owner[s] >= 0 {
			first[owner[s]] = s
		}
	}
	return first
}

// ownersOf is the owner of each slot in ranges (-1 where none).
func ownersOf(ranges []slotRange) []int64 {
	owner := make([]int64, slotCount)
	for s := range owner {
		owner[s] = -1
	}
	for _, r := range ranges {
		for s := r.First; s <= r.Last; s++ {
			owner[s] = r.Owner
		}
	}
	return owner
}

// rangesOf makes owner, slot by slot, into ranges (slots with none are
// left out).
func rangesOf(owner []int64) []slotRange {
	var ranges []slotRange
	for s, o := range owner {
		ranges = appendSlot(ranges, slotRange{First: s, Last: s, Owner: o, From: -1})
	}
	return ranges
}
