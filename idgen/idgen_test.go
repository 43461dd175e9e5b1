package idgen

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen/idgentest"
	"github.com/idserver/idserver/internal/await"
)

// testEpoch keeps fake clock readings small and readable.
var testEpoch = time.UnixMilli(1_700_000_000_000)

// newFake is a generator for st on a clock at startMs past testEpoch,
// whose Sleep returns at once (see idgentest.SleepReturns).
func newFake(t testing.TB, st Settings, startMs int64) (*Generator, *idgentest.Clock) {
	t.Helper()
	c := idgentest.NewClock(time.UnixMilli(testEpoch.UnixMilli() + startMs))
	c.SetSleep(idgentest.SleepReturns)
	if st.Epoch.IsZero() {
		st.Epoch = testEpoch
	}
	st.Clock = c
	g, err := New(st)
	if err != nil {
		t.Fatal(err)
	}
	return g, c
}

func mustNext(t testing.TB, g *Generator) int64 {
	t.Helper()
	id, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustDecode(t testing.TB, g *Generator, id int64) Parts {
	t.Helper()
	p, err := g.Decode(id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ms returns the time field of p relative to testEpoch.
func ms(p Parts) int64 { return p.Time.UnixMilli() - testEpoch.UnixMilli() }

func TestUniqueAndIncreasingConcurrent(t *testing.T) {
	const goroutines = 8
	tests := []struct {
		name string
		st   Settings
		perG int
	}{
		// The default layout holds 512 IDs per ms, far fewer than this
		// test asks for: it borrows ahead the whole time. 10M IDs in all.
		{"default layout borrowing", Settings{MaxLead: time.Hour}, 1_250_000},
		{"wide shard field", Settings{Layout: Layout{IDBits: 2, ShardBits: 16, RandomBits: 3}, ServerID: 3}, 250_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := New(tt.st)
			if err != nil {
				t.Fatal(err)
			}
			perG := tt.perG
			got := make([][]int64, goroutines)
			var wg sync.WaitGroup
			for w := range goroutines {
				wg.Go(func() {
					ids := make([]int64, perG)
					for i := 0; i < perG; {
						// Mix single IDs and batches, as GETID and MGETID do.
						if n := min(1+i%7, perG-i); n > 1 {
							if err := g.NextN(ids[i : i+n]); err != nil {
								t.Error(err)
								return
							}
							i += n
						} else {
							id, err := g.Next()
							if err != nil {
								t.Error(err)
								return
							}
							ids[i] = id
							i++
						}
					}
					got[w] = ids
				})
			}
			wg.Wait()
			all := make([]int64, 0, goroutines*perG)
			for w, ids := range got {
				for i := 1; i < len(ids); i++ {
					if ids[i] <= ids[i-1] {
						t.Fatalf("goroutine %d: id[%d]=%d not above id[%d]=%d", w, i, ids[i], i-1, ids[i-1])
					}
				}
				all = append(all, ids...)
			}
			slices.Sort(all)
			for i := 1; i < len(all); i++ {
				if all[i] == all[i-1] {
					t.Fatalf("duplicate id %d", all[i])
				}
			}
			if all[0] <= 0 {
				t.Fatalf("non-positive id %d", all[0])
			}
			if s := g.Stats(); s.Issued != uint64(goroutines*perG) {
				t.Fatalf("Stats().Issued = %d, want %d", s.Issued, goroutines*perG)
			}
		})
	}
}

func TestBorrowAheadFrozenClock(t *testing.T) {
	g, _ := newFake(t, Settings{MaxLead: time.Second}, 1000)
	shards := int64(1) << DefaultLayout.ShardBits
	prev := int64(-1)
	for i := range 5 * shards {
		id := mustNext(t, g)
		if id <= prev {
			t.Fatalf("id %d: %d not above previous %d", i, id, prev)
		}
		prev = id
		p := mustDecode(t, g, id)
		// The time field advances every 2^S IDs although the clock is frozen.
		if want := 1000 + i/shards; ms(p) != want {
			t.Fatalf("id %d: time field %d, want %d", i, ms(p), want)
		}
		if p.Shard != i%shards {
			t.Fatalf("id %d: shard %d, want %d", i, p.Shard, i%shards)
		}
	}
	s := g.Stats()
	if s.Lead != 4*time.Millisecond || s.Borrowed == 0 || s.MaxLeadSeen != 4*time.Millisecond {
		t.Fatalf("stats after borrowing 4ms: %+v", s)
	}
}

func TestClockStepBack(t *testing.T) {
	g, c := newFake(t, Settings{}, 10_000)
	prev := int64(-1)
	seen := map[int64]bool{}
	for i := range 4000 {
		if i == 2000 {
			c.Advance(-time.Second) // NTP or an operator sets the clock back 1 s
		} else {
			c.Advance(time.Millisecond)
		}
		id, err := g.Next()
		if err != nil {
			t.Fatalf("id %d after step back: %v", i, err)
		}
		if id <= prev || seen[id] {
			t.Fatalf("id %d: %d repeats or is below %d", i, id, prev)
		}
		seen[id] = true
		prev = id
	}
	s := g.Stats()
	if s.ClockSteps != 1 || s.LastStep != time.Second {
		t.Fatalf("ClockSteps=%d LastStep=%v, want 1 step of 1s", s.ClockSteps, s.LastStep)
	}
	if s.Refused != 0 {
		t.Fatalf("%d requests refused for a 1s step", s.Refused)
	}
}

// fill issues IDs one by one until the lead is exactly maxLeadMs.
func fillToLead(t *testing.T, g *Generator, maxLeadMs int64) int64 {
	t.Helper()
	shards := int64(1) << g.layout.ShardBits
	var last int64
	for range (maxLeadMs + 1) * shards {
		last = mustNext(t, g)
	}
	if s := g.Stats(); s.Lead != time.Duration(maxLeadMs)*time.Millisecond {
		t.Fatalf("lead %v after filling, want %dms", s.Lead, maxLeadMs)
	}
	return last
}

func TestLeadBound(t *testing.T) {
	l := Layout{IDBits: 2, ShardBits: 4, RandomBits: 15}
	t.Run("frozen clock: waits, then errors", func(t *testing.T) {
		g, c := newFake(t, Settings{Layout: l, MaxLead: 10 * time.Millisecond, MaxWait: 5 * time.Millisecond}, 1000)
		last := fillToLead(t, g, 10)
		_, err := g.Next()
		var le *LeadError
		if !errors.As(err, &le) || !errors.Is(err, ErrLeadExceeded) {
			t.Fatalf("Next at the bound: err %v, want *LeadError", err)
		}
		if le.Lead != 11*time.Millisecond || le.Max != 10*time.Millisecond || le.RetryAfter != time.Millisecond {
			t.Fatalf("LeadError %+v", le)
		}
		if got := c.Slept().Milliseconds(); got != 5 {
			t.Fatalf("waited %dms in all, want max-wait 5ms", got)
		}
		// Nothing was consumed by the refused request.
		c.Advance(time.Millisecond)
		if id := mustNext(t, g); id>>Bits != last>>Bits+1 {
			t.Fatalf("after the clock moved: time field %d, want %d", id>>Bits, last>>Bits+1)
		}
		if s := g.Stats(); s.Refused != 1 || s.Waits != 1 {
			t.Fatalf("stats %+v, want 1 refused after 1 wait", s)
		}
	})
	t.Run("clock moves while waiting: succeeds", func(t *testing.T) {
		g, c := newFake(t, Settings{Layout: l, MaxLead: 10 * time.Millisecond, MaxWait: 5 * time.Millisecond}, 1000)
		c.SetSleep(idgentest.SleepAdvances)
		last := fillToLead(t, g, 10)
		id := mustNext(t, g)
		if id <= last || c.Slept().Milliseconds() != 1 {
			t.Fatalf("id %d after %d, slept %dms; want a 1ms wait then a larger id", id, last, c.Slept().Milliseconds())
		}
	})
	t.Run("negative max wait: refuses at once", func(t *testing.T) {
		g, c := newFake(t, Settings{Layout: l, MaxLead: 10 * time.Millisecond, MaxWait: -1}, 1000)
		fillToLead(t, g, 10)
		if _, err := g.Next(); !errors.Is(err, ErrLeadExceeded) || c.Slept().Milliseconds() != 0 {
			t.Fatalf("err %v after %dms, want ErrLeadExceeded without waiting", err, c.Slept().Milliseconds())
		}
	})
	t.Run("batch too large for the bound: refused whole", func(t *testing.T) {
		g, c := newFake(t, Settings{Layout: l, MaxLead: 10 * time.Millisecond, MaxWait: 5 * time.Millisecond}, 1000)
		c.SetSleep(idgentest.SleepAdvances)
		first := mustNext(t, g)
		// 16 units per ms: 500 IDs need a lead of 31ms, more than waiting can fix.
		buf := make([]int64, 500)
		if err := g.NextN(buf); !errors.Is(err, ErrLeadExceeded) {
			t.Fatalf("NextN(500): %v, want ErrLeadExceeded", err)
		}
		if c.Slept().Milliseconds() != 0 {
			t.Fatalf("slept %dms for a wait longer than max-wait", c.Slept().Milliseconds())
		}
		second := mustNext(t, g)
		if p1, p2 := mustDecode(t, g, first), mustDecode(t, g, second); ms(p2) != ms(p1) || p2.Shard != p1.Shard+1 {
			t.Fatalf("refused batch consumed units: %+v then %+v", p1, p2)
		}
	})
	t.Run("batch spanning more than the bound: refused without waiting", func(t *testing.T) {
		// Waiting cannot help: the batch starts where the clock is. The
		// wait it would seem to need (21ms) fits in max-wait, so a
		// generator that waited would sleep and then refuse anyway.
		g, c := newFake(t, Settings{Layout: l, MaxLead: 10 * time.Millisecond, MaxWait: time.Second}, 1000)
		c.SetSleep(idgentest.SleepAdvances)
		for _, try := range []func([]int64) error{g.NextN, g.TryNextN} {
			err := try(make([]int64, 16*11+1)) // 11ms of slots and one more
			if !errors.Is(err, ErrLeadExceeded) || !strings.Contains(err.Error(), "ask for fewer") {
				t.Fatalf("%v, want ErrLeadExceeded asking for fewer", err)
			}
		}
		if c.Slept().Milliseconds() != 0 {
			t.Fatalf("slept %dms for a batch no wait can help", c.Slept().Milliseconds())
		}
		// The largest batch the bound allows is issued at once.
		if err := g.NextN(make([]int64, 16*11)); err != nil || c.Slept().Milliseconds() != 0 {
			t.Fatalf("NextN(176): %v after %dms; want it at once", err, c.Slept().Milliseconds())
		}
	})
}

func TestEvenSpread(t *testing.T) {
	l := DefaultLayout
	size := 1 << l.RandomBits
	patterns := []struct {
		name string
		tick int64 // ms the clock moves before each ID
	}{
		{"burst", 0},
		{"one per ms", 1},
		{"one per 3 ms", 3},
	}
	for _, p := range patterns {
		t.Run(p.name, func(t *testing.T) {
			g, c := newFake(t, Settings{Layout: l, MaxLead: time.Hour}, 0)
			for range 37 { // start anywhere in the table
				mustNext(t, g)
			}
			const cycles = 1000
			ids := make([]int64, size*cycles)
			for i := range ids {
				c.Advance(time.Duration(p.tick) * time.Millisecond)
				ids[i] = mustNext(t, g)
			}
			// Exactly even for every power of two up to 2^R, in every window
			// of 2^R consecutive IDs.
			for k := 1; k <= l.RandomBits; k++ {
				mod := int64(1) << k
				for w := 0; w < len(ids); w += size * 97 {
					counts := make([]int, mod)
					for _, id := range ids[w : w+size] {
						counts[id%mod]++
					}
					for r, n := range counts {
						if n != size/int(mod) {
							t.Fatalf("window %d, id mod %d == %d: %d times, want %d", w, mod, r, n, size/int(mod))
						}
					}
				}
			}
			// Near-even for a modulus that is not a power of two.
			const mod = 1000
			counts := make([]int, mod)
			for _, id := range ids {
				counts[id%mod]++
			}
			mean := float64(len(ids)) / mod
			for r, n := range counts {
				if math.Abs(float64(n)-mean) > 0.15*mean {
					t.Fatalf("id mod %d == %d: %d times, mean %.0f", mod, r, n, mean)
				}
			}
		})
	}
}

// allLayouts lists every valid layout.
func allLayouts() []Layout {
	var ls []Layout
	for i := 0; i <= Bits-1; i++ {
		for s := 1; i+s <= Bits; s++ {
			ls = append(ls, Layout{IDBits: i, ShardBits: s, RandomBits: Bits - i - s})
		}
	}
	return ls
}

func TestFieldsStayInWidth(t *testing.T) {
	for _, l := range allLayouts() {
		for _, sid := range []int64{0, l.MaxServerID() / 2, l.MaxServerID()} {
			checkFields(t, l, sid, []int64{0, 5, -3, 0, 7, 1 << 20})
		}
	}
}

// checkFields issues IDs under clock moves and checks every field of every
// ID against the unit counter rule.
func checkFields(t *testing.T, l Layout, serverID int64, moves []int64) {
	t.Helper()
	g, c := newFake(t, Settings{Layout: l, ServerID: serverID, MaxLead: time.Hour}, 1<<30)
	prev := int64(-1)
	buf := make([]int64, 3)
	for _, mv := range moves {
		c.Advance(time.Duration(mv) * time.Millisecond)
		// Enough IDs to cross a millisecond for every shard width.
		n := min(1<<l.ShardBits+2, 600)
		for i := 0; i < n; i += len(buf) {
			if err := g.NextN(buf); err != nil {
				t.Fatalf("layout %+v: %v", l, err)
			}
			for _, id := range buf {
				p := mustDecode(t, g, id)
				if id <= prev || p.ServerID != serverID || p.Shard>>l.ShardBits != 0 || p.Random>>l.RandomBits != 0 {
					t.Fatalf("layout %+v server %d: id %d (prev %d) decodes to %+v", l, serverID, id, prev, p)
				}
				if back := ms(p)<<Bits | serverID<<(l.ShardBits+l.RandomBits) | p.Shard<<l.RandomBits | p.Random; back != id {
					t.Fatalf("layout %+v: fields of %d recompose to %d", l, id, back)
				}
				prev = id
			}
		}
	}
}

func FuzzFields(f *testing.F) {
	f.Add(uint8(2), uint8(9), int64(3), int64(5), int64(-7))
	f.Add(uint8(0), uint8(21), int64(0), int64(-1<<20), int64(1))
	f.Add(uint8(20), uint8(1), int64(1<<20-1), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, idBits, shardBits uint8, serverID, move1, move2 int64) {
		i, s := int(idBits%Bits), int(shardBits%Bits)+1
		if i+s > Bits {
			return
		}
		l := Layout{IDBits: i, ShardBits: s, RandomBits: Bits - i - s}
		serverID &= l.MaxServerID()
		checkFields(t, l, serverID, []int64{move1 % (1 << 30), move2 % (1 << 30)})
	})
}

func TestSettingsErrors(t *testing.T) {
	tests := []struct {
		st   Settings
		want string
	}{
		{Settings{Layout: Layout{IDBits: 3, ShardBits: 9, RandomBits: 10}}, "id-range 3 + shard-range 9 + random-range 10 = 22, must be 21"},
		{Settings{Layout: Layout{IDBits: 11, ShardBits: 0, RandomBits: 10}}, "shard-range 0 out of range 1..21"},
		{Settings{Layout: Layout{IDBits: -1, ShardBits: 12, RandomBits: 10}}, "id-range -1 out of range 0..20"},
		{Settings{ServerID: 4}, "server-id 4 out of range 0..3 (id-range 2)"},
		{Settings{ServerID: -1}, "server-id -1 out of range 0..3 (id-range 2)"},
		{Settings{Layout: Layout{ShardBits: 21}, ServerID: 1}, "server-id 1 out of range 0..0 (id-range 0)"},
		{Settings{MaxLead: time.Microsecond}, "max lead 1µs must be at least 1ms"},
	}
	for _, tt := range tests {
		_, err := New(tt.st)
		if err == nil || err.Error() != tt.want {
			t.Errorf("New(%+v) = %v, want %q", tt.st, err, tt.want)
		}
	}
}

func TestOverflow(t *testing.T) {
	g, _ := newFake(t, Settings{}, 1<<TimeBits-1)
	if _, err := g.Next(); err != nil {
		t.Fatalf("last millisecond: %v", err)
	}
	buf := make([]int64, 1<<DefaultLayout.ShardBits)
	if err := g.NextN(buf); !errors.Is(err, ErrOverflow) {
		t.Fatalf("past the last millisecond: %v, want ErrOverflow", err)
	}
}

func TestDecode(t *testing.T) {
	g, _ := newFake(t, Settings{ServerID: 2}, 123_456)
	id := mustNext(t, g)
	p := mustDecode(t, g, id)
	want := Parts{Time: time.UnixMilli(testEpoch.UnixMilli() + 123_456), ServerID: 2, Shard: 0, Random: p.Random}
	if p != want {
		t.Fatalf("Decode(%d) = %+v, want %+v", id, p, want)
	}
	if _, err := g.Decode(-1); err == nil {
		t.Fatal("Decode(-1) succeeded")
	}
}

func BenchmarkNext(b *testing.B) {
	for _, goroutines := range []int{1, 2} {
		b.Run(map[int]string{1: "1goroutine", 2: "2goroutines"}[goroutines], func(b *testing.B) {
			benchParallel(b, goroutines, func(g *Generator, _ []int64) error {
				_, err := g.Next()
				return err
			})
		})
	}
}

func BenchmarkNextN100(b *testing.B) {
	for _, goroutines := range []int{1, 2} {
		b.Run(map[int]string{1: "1goroutine", 2: "2goroutines"}[goroutines], func(b *testing.B) {
			benchParallel(b, goroutines, func(g *Generator, buf []int64) error {
				return g.NextN(buf)
			})
		})
	}
}

// benchParallel runs call from the benchmark goroutine and goroutines-1
// others sharing one Generator, as concurrent clients of a server do.
func benchParallel(b *testing.B, goroutines int, call func(*Generator, []int64) error) {
	// The default layout caps a server at 512 IDs per ms; a long lead keeps
	// the benchmark measuring the hot path rather than the lead bound.
	g, err := New(Settings{MaxLead: 24 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range goroutines - 1 {
		wg.Go(func() {
			buf := make([]int64, 100)
			for !stop.Load() {
				if err := call(g, buf); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	buf := make([]int64, 100)
	b.ReportAllocs()
	for b.Loop() {
		if err := call(g, buf); err != nil {
			b.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
}

func TestFloorCountsLeadFromReservation(t *testing.T) {
	// A restart whose reservation is 10 s ahead of the clock (the previous
	// run borrowed ahead, or the clock was set back while it was down).
	g, c := newFake(t, Settings{Floor: 10_000, MaxLead: 100 * time.Millisecond, MaxWait: -1}, 0)
	shards := int64(1) << DefaultLayout.ShardBits
	for i := range 50 * shards {
		id, err := g.Next()
		if err != nil {
			t.Fatalf("id %d after the restart: %v", i, err)
		}
		if p := mustDecode(t, g, id); ms(p) != 10_000+i/shards {
			t.Fatalf("id %d: time field %d, want %d", i, ms(p), 10_000+i/shards)
		}
	}
	// Borrowing beyond the floor is still bounded.
	buf := make([]int64, 60*shards)
	if err := g.NextN(buf); !errors.Is(err, ErrLeadExceeded) {
		t.Fatalf("borrowing 110ms past the floor: %v", err)
	}
	// The 49 ms past the floor were borrowed with the clock behind it,
	// which the log tells apart from a burst.
	if st := g.Stats(); st.Borrowed != 49*uint64(shards) || st.BehindFloor != 10*time.Second {
		t.Fatalf("stats %+v: want 49 ms of slots borrowed, the clock 10 s behind the floor", st)
	}
	c.Advance(10_001 * time.Millisecond)
	if st := g.Stats(); st.BehindFloor != 0 {
		t.Fatalf("stats %+v with the clock past the floor: want BehindFloor 0", st)
	}
}

// TestCeiling: no ID reaches the ceiling; a call past it signals Demand
// and waits up to MaxWait for Raise (then ErrNotReserved), and Raise
// wakes it; a lower Raise is ignored.
func TestCeiling(t *testing.T) {
	g, _ := newFake(t, Settings{Ceiling: 1003, MaxWait: 30 * time.Millisecond}, 1000)
	shards := 1 << DefaultLayout.ShardBits
	buf := make([]int64, 3*shards)
	if err := g.NextN(buf); err != nil {
		t.Fatal(err)
	}
	if err := g.NextN(buf[:1]); !errors.Is(err, ErrNotReserved) {
		t.Fatalf("past the ceiling: %v, want ErrNotReserved", err)
	}
	select {
	case <-g.Demand():
	default:
		t.Fatal("no demand signalled for a larger ceiling")
	}
	if s := g.Stats(); s.Unreserved != 1 {
		t.Fatalf("stats %+v: want Unreserved 1", s)
	}

	// Raise while a call waits (it has signalled Demand), one given long
	// enough to wait that a busy machine cannot make it give up first.
	g, _ = newFake(t, Settings{Ceiling: 1003, MaxWait: time.Minute}, 1000)
	if err := g.NextN(buf); err != nil {
		t.Fatal(err)
	}
	type result struct {
		id  int64
		err error
	}
	next := make(chan result, 1)
	go func() {
		id, err := g.Next()
		next <- result{id, err}
	}()
	await.True(t, time.Minute, "a call past the ceiling signals Demand", func() bool {
		select {
		case <-g.Demand():
			return true
		default:
			return false
		}
	})
	g.Raise(1010)
	r := <-next
	if r.err != nil || r.id>>Bits != 1003 {
		t.Fatalf("after Raise: id %d (ms %d), %v; want ms 1003", r.id, r.id>>Bits, r.err)
	}
	if s := g.Stats(); s.Ceiling != 1010 || s.Unreserved != 0 {
		t.Fatalf("stats %+v", s)
	}
	g.Raise(1005) // lower: ignored
	if s := g.Stats(); s.Ceiling != 1010 {
		t.Fatalf("ceiling lowered to %d", s.Ceiling)
	}
}

func TestClockOffsetAndClose(t *testing.T) {
	g, _ := newFake(t, Settings{ClockOffset: 2 * time.Second}, 0)
	if p := mustDecode(t, g, mustNext(t, g)); ms(p) != 2000 {
		t.Fatalf("time field %d with a 2s offset", ms(p))
	}
	g.SetClockOffset(time.Second)
	last := mustNext(t, g)
	if s := g.Stats(); s.ClockSteps != 1 || s.LastStep != time.Second || g.ClockOffset() != time.Second {
		t.Fatalf("offset change not seen as one 1s step: %+v", s)
	}
	if next := g.Stop(); next != last>>Bits+1 {
		t.Fatalf("Close() = %d, want %d", next, last>>Bits+1)
	}
	if _, err := g.Next(); !errors.Is(err, ErrStopped) {
		t.Fatalf("Next after Close: %v", err)
	}
}

// TestTryNext checks that TryNext and TryNextN return ErrWouldWait exactly
// where Next and NextN would wait, without waiting, issuing or counting,
// and otherwise behave like them.
func TestTryNext(t *testing.T) {
	l := Layout{IDBits: 2, ShardBits: 4, RandomBits: 15}
	t.Run("at the lead bound", func(t *testing.T) {
		g, c := newFake(t, Settings{Layout: l, MaxLead: 10 * time.Millisecond, MaxWait: 5 * time.Millisecond}, 1000)
		last := fillToLead(t, g, 10)
		before := g.Stats()
		if _, err := g.TryNext(); !errors.Is(err, ErrWouldWait) {
			t.Fatalf("TryNext at the bound: %v, want ErrWouldWait", err)
		}
		buf := []int64{-1, -1}
		if err := g.TryNextN(buf); !errors.Is(err, ErrWouldWait) || buf[0] != -1 || buf[1] != -1 {
			t.Fatalf("TryNextN at the bound: %v, dst %v; want ErrWouldWait, dst untouched", err, buf)
		}
		if after := g.Stats(); after != before || c.Slept().Milliseconds() != 0 {
			t.Fatalf("stats %+v -> %+v, slept %dms: want no change and no sleep", before, after, c.Slept().Milliseconds())
		}
		// A batch no wait could fix is refused at once, as NextN refuses it.
		if err := g.TryNextN(make([]int64, 500)); !errors.Is(err, ErrLeadExceeded) {
			t.Fatalf("TryNextN(500): %v, want ErrLeadExceeded", err)
		}
		c.Advance(time.Millisecond)
		id, err := g.TryNext()
		if err != nil || id>>Bits != last>>Bits+1 {
			t.Fatalf("after the clock moved: id %d, %v; want time field %d", id, err, last>>Bits+1)
		}
	})
	t.Run("at the ceiling", func(t *testing.T) {
		g, _ := newFake(t, Settings{Layout: l, Ceiling: 1002, MaxWait: 30 * time.Millisecond}, 1000)
		if err := g.TryNextN(make([]int64, 2<<l.ShardBits)); err != nil {
			t.Fatal(err)
		}
		if _, err := g.TryNext(); !errors.Is(err, ErrWouldWait) {
			t.Fatalf("TryNext past the ceiling: %v, want ErrWouldWait", err)
		}
		select {
		case <-g.Demand():
		default:
			t.Fatal("TryNext did not ask for a larger ceiling")
		}
		if s := g.Stats(); s.Unreserved != 0 {
			t.Fatalf("Unreserved %d, want 0: nothing was refused", s.Unreserved)
		}
		g.Raise(1003)
		if id, err := g.TryNext(); err != nil || id>>Bits != 1002 {
			t.Fatalf("after Raise: id %d (ms %d), %v; want ms 1002", id, id>>Bits, err)
		}
	})
	t.Run("never waiting anyway", func(t *testing.T) {
		g, _ := newFake(t, Settings{Layout: l, MaxLead: 10 * time.Millisecond, MaxWait: -1}, 1000)
		fillToLead(t, g, 10)
		if _, err := g.TryNext(); !errors.Is(err, ErrLeadExceeded) {
			t.Fatalf("TryNext with MaxWait < 0: %v, want ErrLeadExceeded", err)
		}
	})
}

// TestNeverZero: with the clock at or before the epoch, the first IDs are
// still positive. Unit 0 would be ID 0 in a layout without random bits,
// and in any layout whose shuffled table starts at 0.
func TestNeverZero(t *testing.T) {
	for _, l := range []Layout{{IDBits: 0, ShardBits: 21, RandomBits: 0}, DefaultLayout, {IDBits: 0, ShardBits: 1, RandomBits: 20}} {
		for _, startMs := range []int64{0, -5000} { // at the epoch; 5 s before it
			g, _ := newFake(t, Settings{Layout: l}, startMs)
			buf := make([]int64, 3)
			if err := g.NextN(buf); err != nil {
				t.Fatal(err)
			}
			if buf[0] <= 0 || buf[1] <= buf[0] || buf[2] <= buf[1] {
				t.Fatalf("layout %+v, clock %dms from the epoch: first IDs %v, want positive and increasing", l, startMs, buf)
			}
		}
	}
}

// TestEndOfTimeField: the last millisecond the time field holds is used
// in full, and then every request is refused; nothing wraps round to
// repeat IDs, not even at shard-range 21 where the last unit is the
// largest int64.
func TestEndOfTimeField(t *testing.T) {
	l := Layout{IDBits: 0, ShardBits: 21, RandomBits: 0}
	last := int64(1)<<TimeBits - 1
	g, _ := newFake(t, Settings{Layout: l}, last)
	buf := make([]int64, 1<<l.ShardBits)
	if err := g.NextN(buf); err != nil {
		t.Fatalf("the last millisecond's IDs: %v", err)
	}
	if buf[len(buf)-1] != math.MaxInt64 {
		t.Fatalf("last ID %d, want %d", buf[len(buf)-1], int64(math.MaxInt64))
	}
	for _, try := range []func() error{
		func() error { _, err := g.Next(); return err },
		func() error { _, err := g.TryNext(); return err },
		func() error { return g.NextN(buf[:2]) },
	} {
		if err := try(); !errors.Is(err, ErrOverflow) || !strings.Contains(err.Error(), End(testEpoch).UTC().Format(time.RFC3339)) {
			t.Fatalf("past the end: %v, want ErrOverflow naming the end date", err)
		}
	}
	if r := g.Reach(); r != 1<<TimeBits {
		t.Fatalf("Reach() = %d past the last unit, want %d", r, int64(1)<<TimeBits)
	}
	if next := g.Stop(); next != 1<<TimeBits {
		t.Fatalf("Close() = %d, want %d", next, int64(1)<<TimeBits)
	}

	// A batch that would cross the end is refused whole, in any layout.
	g, _ = newFake(t, Settings{}, last)
	if err := g.NextN(make([]int64, 1<<DefaultLayout.ShardBits+1)); !errors.Is(err, ErrOverflow) {
		t.Fatalf("batch crossing the end: %v, want ErrOverflow", err)
	}
	if id := mustNext(t, g); id>>Bits != last {
		t.Fatalf("after the refused batch: time field %d, want %d", id>>Bits, last)
	}
}

// TestNewRefusesPastTheEnd: a reservation or a clock at the end of the
// time field stops New with an error naming the date, rather than an
// overflowing counter.
func TestNewRefusesPastTheEnd(t *testing.T) {
	l := Layout{IDBits: 0, ShardBits: 21, RandomBits: 0}
	for _, tt := range []struct {
		floor, clock int64
		want         string
	}{
		{floor: 1 << TimeBits, want: "reservation of an earlier run is at its end"},
		{floor: 1<<TimeBits + 5000, want: "reservation of an earlier run is at its end"},
		{clock: 1 << TimeBits, want: "the clock is past its end"},
	} {
		c := idgentest.NewClock(time.UnixMilli(testEpoch.UnixMilli() + tt.clock))
		_, err := New(Settings{Layout: l, Epoch: testEpoch, Floor: tt.floor, Clock: c})
		if !errors.Is(err, ErrOverflow) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), End(testEpoch).UTC().Format(time.RFC3339)) {
			t.Errorf("floor %d, clock %d: %v; want ErrOverflow saying %q and the end date", tt.floor, tt.clock, err, tt.want)
		}
	}
	if _, err := New(Settings{Layout: l, Epoch: testEpoch, Floor: 1<<TimeBits - 1, Clock: idgentest.NewClock(time.UnixMilli(0))}); err != nil {
		t.Fatalf("a reservation in the last millisecond: %v", err)
	}
	if end := End(DefaultEpoch).UTC(); end.Year() != 2154 {
		t.Fatalf("the default epoch's time field ends %v, want in 2154", end)
	}
}

// TestRetryAfterBehindTheFloor: with the clock a day behind a restart's
// floor, a request past the lead bound is told to retry when the clock
// gets there, a day later, and it does not wait max-wait for nothing.
func TestRetryAfterBehindTheFloor(t *testing.T) {
	const day = 24 * 3600 * 1000
	l := Layout{IDBits: 2, ShardBits: 4, RandomBits: 15}
	g, c := newFake(t, Settings{Layout: l, Floor: 1000 + day, MaxLead: 10 * time.Millisecond, MaxWait: time.Second}, 1000)
	if err := g.NextN(make([]int64, 11<<l.ShardBits)); err != nil { // up to the bound, counted from the floor
		t.Fatal(err)
	}
	_, err := g.Next()
	var le *LeadError
	if !errors.As(err, &le) || le.RetryAfter != (day+1)*time.Millisecond {
		t.Fatalf("past the bound a day behind the floor: %v, want a LeadError with RetryAfter %dms", err, day+1)
	}
	if c.Slept().Milliseconds() != 0 {
		t.Fatalf("slept %dms: no wait within max-wait can help", c.Slept().Milliseconds())
	}
}

// TestReadyAgreesWithNext: Ready says a call for one ID would be answered
// exactly when one is, and with the error it gets: behind a floor at the
// lead bound, at the ceiling, at the end of the time field, after Close.
func TestReadyAgreesWithNext(t *testing.T) {
	l := Layout{IDBits: 2, ShardBits: 4, RandomBits: 15}
	g, c := newFake(t, Settings{Layout: l, Floor: 60_000, Ceiling: 60_020, MaxLead: 10 * time.Millisecond, MaxWait: -1}, 0)
	check := func(what string, want error) {
		t.Helper()
		ready := g.Ready()
		if !errors.Is(ready, want) && !(want == nil && ready == nil) {
			t.Fatalf("%s: Ready() = %v, want %v", what, ready, want)
		}
		_, err := g.TryNext()
		if (err == nil) != (ready == nil) || err != nil && err.Error() != ready.Error() {
			t.Fatalf("%s: Ready() = %v but TryNext() = %v", what, ready, err)
		}
	}
	check("a restart 60 s ahead, within the lead bound", nil)
	if err := g.NextN(make([]int64, 11<<l.ShardBits-2)); err != nil { // the rest of the budget but one
		t.Fatal(err)
	}
	check("the last ID of the budget", nil)
	check("past the budget, 60 s ahead of the clock", ErrLeadExceeded)
	var le *LeadError
	if errors.As(g.Ready(), &le); le == nil || le.RetryAfter != 60_001*time.Millisecond {
		t.Fatalf("Ready() = %v, want a LeadError with RetryAfter 60001ms", g.Ready())
	}

	c.Advance(60_020 * time.Millisecond)
	check("the clock at the ceiling", ErrNotReserved)
	g.Raise(70_000)
	check("ceiling raised", nil)

	c.Set(time.UnixMilli(testEpoch.UnixMilli() + 1<<TimeBits))
	check("clock at the end of the time field", ErrOverflow)
	g.Stop()
	if err := g.Ready(); !errors.Is(err, ErrStopped) {
		t.Fatalf("after Close: Ready() = %v", err)
	}
}
