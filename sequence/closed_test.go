package sequence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idserver/idserver/internal/testseed"
	"github.com/idserver/idserver/slots"
)

// TestCloseSlotIsABarrier: once CloseSlot returns, no INCR, INCRBY
// (IncrAll) or SET of a key of the slot hands out or stores a value, new
// keys included, and each key's value then is its last (what a hand-over
// sends). Keys of other slots go on; OpenSlot serves the slot again from
// there. Seeded: the keys and when the slot closes.
func TestCloseSlotIsABarrier(t *testing.T) {
	seed := testseed.Get(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	tb := newTable(t, newMem(), Options{Wait: 200 * time.Millisecond}, nil) // an INCR of the closed slot waits that long
	var in, out []string                                                    // keys of slot 0 and of other slots
	for i := 0; len(in) < 20 || len(out) < 20; i++ {
		k := fmt.Sprintf("k%d-%d", rng.IntN(1000), i)
		if slots.Of([]byte(k)) == slots.Of([]byte("{x}")) {
			in = append(in, k)
		} else if len(out) < 20 {
			out = append(out, k)
		}
		if i > 1<<22 {
			t.Fatal("no keys of the slot found")
		}
	}
	slot := slots.Of([]byte("{x}"))
	in = append(in, "{x}a", "{x}b")
	var stop atomic.Bool
	var mu sync.Mutex
	last := map[string]int64{}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(g+1)))
			for !stop.Load() {
				keys := in
				if r.IntN(3) == 0 {
					keys = out
				}
				k := keys[r.IntN(len(keys))]
				v, err := tb.Incr(k, 1)
				if errors.Is(err, ErrNotServed) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				last[k] = max(last[k], v)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Duration(20+rng.IntN(50)) * time.Millisecond) // a while under load: the slot closes at no set point
	tb.CloseSlot(slot)
	mu.Lock()
	at := map[string]int64{} // as the slot's next owner pulls them
	for from := 0; ; {
		marks, next, _ := tb.SlotMarks(slot, from, 1<<20)
		for _, m := range marks {
			at[m.Key] = m.Value
		}
		if from = next; next == 0 {
			break
		}
	}
	for _, k := range in {
		if _, _, err := tb.TryGet(k); !errors.Is(err, ErrNotServed) {
			t.Errorf("GET %s of the closed slot: %v, want ErrNotServed", k, err)
		}
		if last[k] > at[k] {
			t.Errorf("%s: %d handed out, above its value %d once closed", k, last[k], at[k])
		}
	}
	mu.Unlock()
	// The thing under test: the clients go on a while, and none of them
	// is handed a value of the closed slot (checked below).
	time.Sleep(50 * time.Millisecond)
	if err := tb.Set("{x}new", 5, Always); !errors.Is(err, ErrNotServed) {
		t.Errorf("SET of a new key of the closed slot: %v, want ErrNotServed", err)
	}
	if err := tb.IncrAll([]Want{{Key: in[0], N: 1}}); !errors.Is(err, ErrNotServed) {
		t.Errorf("IncrAll of a key of the closed slot: %v, want ErrNotServed", err)
	}
	mu.Lock()
	for _, k := range in {
		if last[k] != at[k] {
			t.Errorf("%s: %d handed out after the slot closed at %d", k, last[k], at[k])
		}
	}
	mu.Unlock()
	stop.Store(true) // before it opens: none of them INCRs in[0] before the check below
	wg.Wait()
	tb.OpenSlot(slot)
	if v, err := tb.Incr(in[0], 1); err != nil || v != at[in[0]]+1 {
		t.Errorf("INCR once open again: %d, %v; want %d", v, err, at[in[0]]+1)
	}
}

// TestClosedSlotWaits: an INCR or SET of a key of a closed slot waits
// for OpenSlot (a take under way), up to its bound, rather than fail.
func TestClosedSlotWaits(t *testing.T) {
	tb := newTable(t, newMem(), Options{Wait: 5 * time.Second}, nil)
	slot := slots.Of([]byte("{w}"))
	tb.CloseSlot(slot)
	type res struct {
		v   int64
		err error
	}
	incr, set := make(chan res, 1), make(chan error, 1)
	go func() { v, err := tb.Incr("{w}a", 1); incr <- res{v, err} }()
	go func() { set <- tb.Set("{w}b", 7, Always) }()
	time.Sleep(100 * time.Millisecond) // the thing under test: a while passes, and the INCR still waits
	select {
	case r := <-incr:
		t.Fatalf("INCR of a closed slot's key returned at once: %d, %v", r.v, r.err)
	default:
	}
	tb.OpenSlot(slot)
	if r := <-incr; r.err != nil || r.v != 1 {
		t.Errorf("INCR once the slot opened: %d, %v; want 1", r.v, r.err)
	}
	if err := <-set; err != nil {
		t.Errorf("SET once the slot opened: %v", err)
	}
}

// TestClosedSlotGetWaits: a GET of a key of a closed slot (a take under
// way: the key may not be here yet, nor its last owner's value) waits
// for OpenSlot, up to its bound, rather than answer "no such key" or an
// older value.
func TestClosedSlotGetWaits(t *testing.T) {
	tb := newTable(t, newMem(), Options{Wait: 5 * time.Second}, nil)
	incr(t, tb, "{g}old", 3)
	slot := slots.Of([]byte("{g}"))
	tb.CloseSlot(slot)
	type res struct {
		v   int64
		ok  bool
		err error
	}
	got := make(chan res, 2)
	for _, k := range []string{"{g}old", "{g}new"} {
		go func() { v, ok, err := tb.Get(k); got <- res{v, ok, err} }()
	}
	time.Sleep(100 * time.Millisecond) // the thing under test: a while passes, and the GETs still wait
	select {
	case r := <-got:
		t.Fatalf("GET of a closed slot's key returned at once: %d %v %v", r.v, r.ok, r.err)
	default:
	}
	// The take loads the last owner's values, then opens the slot.
	if err := tb.LoadSlot(context.Background(), []Mark{{Key: "{g}old", Value: 10, Born: true}, {Key: "{g}new", Value: 7, Born: true}}); err != nil {
		t.Fatal(err)
	}
	tb.OpenSlot(slot)
	seen := map[int64]bool{}
	for range 2 {
		if r := <-got; r.err != nil || !r.ok {
			t.Errorf("GET once the slot opened: %d %v %v", r.v, r.ok, r.err)
		} else {
			seen[r.v] = true
		}
	}
	if !seen[10] || !seen[7] {
		t.Errorf("GETs once the slot opened saw %v; want the loaded 10 and 7", seen)
	}
	short := newTable(t, newMem(), Options{Wait: 50 * time.Millisecond}, nil)
	short.CloseSlot(slot)
	if _, _, err := short.Get("{g}x"); !errors.Is(err, ErrNotServed) {
		t.Errorf("GET of a slot closed past the wait: %v, want ErrNotServed", err)
	}
}

// TestLetGoEndsWaits: the requests waiting for a closed slot to open
// (INCR, SET, GET) fail at once, with ErrNotServed, when the slot is let
// go (it moved away: it will not open here), rather than wait out their
// bound; so do the later ones, until the slot is closed again (given
// back: they wait for its take again) or opened.
func TestLetGoEndsWaits(t *testing.T) {
	tb := newTable(t, newMem(), Options{Wait: time.Minute}, nil)
	slot := slots.Of([]byte("{l}"))
	tb.CloseSlot(slot)
	waits := []func() error{
		func() error { _, err := tb.Incr("{l}a", 1); return err },
		func() error { return tb.Set("{l}b", 7, Always) },
		func() error { _, _, err := tb.Get("{l}c"); return err },
	}
	run := func() chan error {
		done := make(chan error, len(waits))
		for _, w := range waits {
			go func() { done <- w() }()
		}
		return done
	}
	done := run()
	time.Sleep(100 * time.Millisecond) // the thing under test: they wait, then the slot is let go
	select {
	case err := <-done:
		t.Fatalf("a request of a closed slot returned before it was let go: %v", err)
	default:
	}
	tb.LetGoSlot(slot)
	for range waits {
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotServed) {
				t.Errorf("a request waiting when its slot was let go: %v, want ErrNotServed", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a request still waits, 30 s after its slot was let go")
		}
	}
	if _, err := tb.Incr("{l}a", 1); !errors.Is(err, ErrNotServed) {
		t.Errorf("INCR of a slot let go: %v, want ErrNotServed", err)
	}
	tb.CloseSlot(slot) // given back: its requests wait for its take
	done = run()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("a request of a slot given back returned before its take: %v", err)
	default:
	}
	tb.OpenSlot(slot)
	for range waits {
		if err := <-done; err != nil {
			t.Errorf("a request once the slot opened: %v", err)
		}
	}
}
