package idgen

import (
	"errors"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen/idgentest"
)

// TestRangeHoldsEveryID issues IDs from generators with the smallest and
// the largest server-id, across a few milliseconds and with borrowing,
// and checks that each ID lies in the range of its own millisecond and
// outside the ranges of the milliseconds before and after it.
func TestRangeHoldsEveryID(t *testing.T) {
	epoch := time.UnixMilli(1_700_000_000_000)
	for _, l := range []Layout{DefaultLayout, {IDBits: 0, ShardBits: 21}, {IDBits: 5, ShardBits: 1, RandomBits: 15}} {
		for _, sid := range []int64{0, l.MaxServerID()} {
			clock := idgentest.NewClock(epoch) // at the epoch: the first millisecond has no unit 0
			g, err := New(Settings{Layout: l, ServerID: sid, Epoch: epoch, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			// At the epoch, then a few milliseconds on; up to three
			// milliseconds' worth at a time, borrowing ahead.
			ids := make([]int64, min(3<<l.ShardBits, 3000))
			later := make([]int64, len(ids))
			err = g.TryNextN(ids)
			clock.Advance(5 * time.Millisecond)
			if err := errors.Join(err, g.TryNextN(later)); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, later...)
			for _, id := range ids {
				p, _ := g.Decode(id)
				if lo, hi, _ := g.Range(p.Time, p.Time); id < lo || id > hi {
					t.Fatalf("layout %+v server %d: id %d outside its millisecond's range %d..%d", l, sid, id, lo, hi)
				}
				if _, hi, _ := g.Range(epoch, p.Time.Add(-time.Millisecond)); p.Time.After(epoch) && id <= hi {
					t.Fatalf("id %d within the range before its millisecond (hi %d)", id, hi)
				}
				if lo, _, _ := g.Range(p.Time.Add(time.Millisecond), p.Time.Add(time.Millisecond)); id >= lo {
					t.Fatalf("id %d within the range after its millisecond (lo %d)", id, lo)
				}
			}
		}
	}
}

// TestRangeBounds checks the exact bounds and the refusals.
func TestRangeBounds(t *testing.T) {
	epoch := DefaultEpoch
	first := epoch.Add(time.Hour)
	lo, hi, err := Range(DefaultLayout, epoch, first, first.Add(time.Millisecond))
	if want := int64(3_600_000) << Bits; err != nil || lo != want || hi != (want+2<<Bits)-1 {
		t.Fatalf("Range(1h, 1h+1ms) = %d, %d, %v; want %d, %d", lo, hi, err, want, (want+2<<Bits)-1)
	}
	if lo, _, _ := Range(DefaultLayout, epoch, epoch, epoch); lo != 1<<10 {
		t.Fatalf("the epoch's first millisecond starts at %d, want unit 1 (1<<10)", lo)
	}
	last := End(epoch).Add(-time.Millisecond)
	if _, hi, err := Range(DefaultLayout, epoch, last, last); err != nil || hi != 1<<63-1 {
		t.Fatalf("the last millisecond ends at %d (%v), want the largest int64", hi, err)
	}
	for _, w := range [][2]time.Time{{epoch.Add(-time.Millisecond), epoch}, {last, last.Add(time.Millisecond)}} {
		if _, _, err := Range(DefaultLayout, epoch, w[0], w[1]); !errors.Is(err, ErrOutsideTimeField) {
			t.Fatalf("Range(%v, %v): %v, want ErrOutsideTimeField", w[0], w[1], err)
		}
	}
	if _, _, err := Range(DefaultLayout, epoch, first, first.Add(-time.Millisecond)); err == nil {
		t.Fatal("a window that ends before it starts was accepted")
	}
}
