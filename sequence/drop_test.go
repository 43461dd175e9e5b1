package sequence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testseed"
)

// slotKey is the i-th key of the hash slot of tag.
func slotKey(tag string, i int) string { return fmt.Sprintf("{%s}:%d", tag, i) }

// aftersBackend is memBackend that records each key's last take's After.
type aftersBackend struct {
	*memBackend
	after map[string]int64
}

func (a *aftersBackend) Take(ctx context.Context, ts []Take) {
	a.mu.Lock()
	for _, tk := range ts {
		a.after[strings.Clone(tk.Key)] = tk.After // kept: see Backend
	}
	a.mu.Unlock()
	a.memBackend.Take(ctx, ts)
}

// TestDropSlot: DropSlot removes every key of the slot, and only those:
// GET, SCAN and DBSIZE no longer see them; the others are found
// as before (the index keeps them reachable); they no longer count
// against seq-max-keys nor in the memory count; and a dropped key's next
// INCR makes it anew, its take asking with After 0. Seeded: how many
// keys each slot holds.
func TestDropSlot(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	counts := map[string]int{"a": 1 + rng.IntN(300), "b": 1 + rng.IntN(300), "c": 1 + rng.IntN(300)}
	total := counts["a"] + counts["b"] + counts["c"]
	b := &aftersBackend{newMem(), map[string]int64{}}
	tb := newTable(t, b, Options{MaxKeys: total}, nil)
	for tag, n := range counts {
		for i := range n {
			incr(t, tb, slotKey(tag, i), int64(1+rng.IntN(5)))
		}
	}
	bytes := tb.Stats().Bytes
	if got := tb.DropSlot(slotOf(slotKey("a", 0))); got != counts["a"] {
		t.Fatalf("DropSlot returned %d; the slot held %d keys", got, counts["a"])
	}
	if n := tb.Len(); n != total-counts["a"] {
		t.Fatalf("DBSIZE %d after the drop; want %d", n, total-counts["a"])
	}
	if got, want := tb.Stats().Bytes, bytes-int64(counts["a"]*(len(slotKey("a", 0))+EntryBytes)); got > want {
		t.Fatalf("memory counted %d after the drop; want at most %d", got, want)
	}
	scanned := map[string]bool{}
	for _, k := range scanAll(tb, 1+rng.IntN(50)) {
		scanned[k] = true
	}
	for tag, n := range counts {
		for i := range n {
			k := slotKey(tag, i)
			_, ok := get(t, tb, k)
			if want := tag != "a"; ok != want || scanned[k] != want {
				t.Fatalf("%s: GET finds it %v, SCAN %v; want %v", k, ok, scanned[k], want)
			}
		}
	}
	for i := range counts["a"] { // room for as many new keys, and no more
		incr(t, tb, slotKey("new", i), 1)
	}
	if _, err := tb.Incr(slotKey("new", counts["a"]), 1); !errors.As(err, new(*LimitError)) {
		t.Fatalf("a key past seq-max-keys after the drop: %v; want a LimitError", err)
	}
	tb.DropSlot(slotOf(slotKey("new", 0)))
	k := slotKey("a", 0)
	if v := incr(t, tb, k, 1); v != 1 {
		t.Fatalf("INCR of a dropped key: %d; want 1 (memBackend takes above After)", v)
	}
	b.mu.Lock()
	after := b.after[k]
	b.mu.Unlock()
	if after != 0 {
		t.Fatalf("a dropped key's take asked with After %d; want 0", after)
	}
}

// TestDropSlotInFlight: what names a dropped key's entry after the drop
// hands out nothing, stores nothing in the Table and counts nothing: an
// INCR waiting for its first take gets ErrNotServed at once, and that
// take, ending after, leaves DBSIZE at 0; a SET being written is
// answered ErrNotServed; a pending reply of a key whose existence is not
// durable yet is not sent (ErrNotServed).
func TestDropSlotInFlight(t *testing.T) {
	f, _, _, err := OpenFile(t.TempDir() + "/idserver.seq")
	if err != nil {
		t.Fatal(err)
	}
	fz := &freezable{File: f}
	tb := newTable(t, fz, Options{Wait: time.Minute}, nil)
	slot := slotOf(slotKey("x", 0))

	entered := fz.hold()
	done := make(chan error, 1)
	go func() { _, err := tb.Incr(slotKey("x", 0), 1); done <- err }()
	<-entered
	tb.DropSlot(slot)
	if err := <-done; !errors.Is(err, ErrNotServed) {
		t.Fatalf("an INCR waiting for a dropped key's take: %v; want ErrNotServed", err)
	}
	fz.release()
	await.True(t, time.Minute, "the dropped key's take ended", func() bool { return limboLen(tb) == 1 })
	if n := tb.Len(); n != 0 {
		t.Fatalf("DBSIZE %d once the dropped key's take ended; want 0", n)
	}

	entered = fz.hold()
	p, err := tb.TrySet([]byte(slotKey("x", 1)), 10, Always)
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	tb.DropSlot(slot)
	fz.release()
	if err := awaitOne(tb, p); !errors.Is(err, ErrNotServed) {
		t.Fatalf("a SET of a key dropped while it was written: %v; want ErrNotServed", err)
	}
	if _, ok := get(t, tb, slotKey("x", 1)); ok || tb.Len() != 0 {
		t.Fatalf("a SET of a dropped key made it: GET %v, DBSIZE %d", ok, tb.Len())
	}

	k := slotKey("x", 2)
	tb.Prepare([]byte(k), 1)
	waitIdle(t, tb, k)
	entered = fz.hold()
	_, p, err = tb.TryIncr([]byte(k), 1)
	if err != nil || p.Ready() {
		t.Fatalf("INCR of a prepared key: %v, ready %v; want its reply pending", err, p.Ready())
	}
	<-entered
	tb.DropSlot(slot)
	fz.release()
	if err := awaitOne(tb, p); !errors.Is(err, ErrNotServed) {
		t.Fatalf("the pending reply of a dropped key: %v; want ErrNotServed", err)
	}
}

// limboLen is how many entries tb's limbo holds.
func limboLen(tb *Table) int {
	tb.limbo.mu.Lock()
	defer tb.limbo.mu.Unlock()
	n := 0
	for _, l := range tb.limbo.lists {
		n += len(l)
	}
	return n
}

// testClock is a clock a test moves.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *testClock) add(d time.Duration) { c.offset.Add(int64(d)) }

// entriesOf returns the entries of keys.
func entriesOf(tb *Table, keys []string) map[*entry]bool {
	es := map[*entry]bool{}
	for _, k := range keys {
		sh, h := tb.shardOf(k)
		sh.mu.Lock()
		if e := find(&sh.index, h, k); e != nil {
			es[e] = true
		}
		sh.mu.Unlock()
	}
	return es
}

// TestDroppedEntriesReused: the entries of dropped keys are made new
// keys' only once Options.Wait has passed since, and none while a take
// names it; then they are, rather than new memory.
func TestDroppedEntriesReused(t *testing.T) {
	clock := &testClock{}
	m := newMem()
	tb := newTable(t, m, Options{Wait: time.Minute, now: clock.now}, nil)
	var old, fresh, later []string
	for i := range 40 { // keys of each class
		old = append(old, slotKey("old", i)+string(make([]byte, i*4)))
		fresh = append(fresh, slotKey("frs", i)+string(make([]byte, i*4)))
		later = append(later, slotKey("lat", i)+string(make([]byte, i*4)))
	}
	for _, k := range old {
		incr(t, tb, k, 1)
	}
	dropped := entriesOf(tb, old)
	tb.DropSlot(slotOf(old[0]))
	for _, k := range fresh {
		incr(t, tb, k, 1)
	}
	for e := range entriesOf(tb, fresh) {
		if dropped[e] {
			t.Fatalf("a new key %q was given a dropped key's entry at once", e.key)
		}
	}
	tb.DropSlot(slotOf(fresh[0]))
	clock.add(time.Minute + time.Second)
	for _, k := range later {
		incr(t, tb, k, 1)
	}
	reused := 0
	for e := range entriesOf(tb, later) {
		if dropped[e] {
			reused++
		}
	}
	if reused != len(later) {
		t.Fatalf("%d of %d new keys were given a dropped key's entry, a minute after the drop", reused, len(later))
	}
	for i, k := range later {
		if v, ok := get(t, tb, k); !ok || v != 1 {
			t.Fatalf("%s: GET %d %v", k, v, ok)
		}
		if v := incr(t, tb, k, int64(i+1)); v != int64(i+2) {
			t.Fatalf("%s: INCRBY %d gave %d", k, i+1, v)
		}
	}

	// A key dropped while its take is under way stays out of reach
	// until the take ends.
	slow := make(chan struct{})
	t.Cleanup(func() { close(slow) }) // before the Table stops: its writer waits
	m.mu.Lock()
	m.slow = slow
	m.mu.Unlock()
	go tb.Incr("{taking}", 1)
	waitTaking(t, tb, "{taking}")
	taking := entriesOf(tb, []string{"{taking}"})
	tb.DropSlot(slotOf("{taking}"))
	clock.add(time.Hour)
	tb.DropSlot(slotOf(later[0])) // a minute ago, by the clock
	clock.add(2 * time.Minute)
	for i := range 60 { // made, not served: the held take blocks the writer
		if _, err := tryIncr(tb, []byte(slotKey("new", i)), 1); err == nil {
			t.Fatal("a new key served while the writer is held")
		}
		for e := range entriesOf(tb, []string{slotKey("new", i)}) {
			if taking[e] {
				t.Fatal("the entry of a key whose take is under way was given to a new key")
			}
		}
	}
}

// segmentsBackend takes each key's segments above its own mark as well
// as After (as the gate does for a dropped key made anew), and records
// every segment it granted each key.
type segmentsBackend struct {
	mu       sync.Mutex
	marks    map[string]int64
	segments map[string][]segment
}

func (s *segmentsBackend) Take(ctx context.Context, ts []Take) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range ts {
		tk := &ts[i]
		k := strings.Clone(tk.Key) // kept: see Backend
		tk.First = max(tk.After, s.marks[k]) + 1
		tk.Last = tk.First + tk.N - 1
		s.marks[k] = tk.Last
		s.segments[k] = append(s.segments[k], segment{tk.First, tk.Last})
	}
}

func (s *segmentsBackend) Set(ctx context.Context, ss []Setting) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range ss {
		st := &ss[i]
		if st.Value < s.marks[st.Key] {
			st.Err = &BelowError{Key: st.Key, At: s.marks[st.Key]}
			continue
		}
		k := strings.Clone(st.Key)
		s.marks[k] = st.Value
		s.segments[k] = append(s.segments[k], segment{st.Value, st.Value})
	}
}

func (s *segmentsBackend) Release(ctx context.Context, marks []Mark) error { return nil }

// granted reports whether v of key lies in a segment granted for key.
func (s *segmentsBackend) granted(key string, v int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.segments[key], func(g segment) bool { return g.first <= v && v <= g.last })
}

// TestDropSlotUnderLoad: slots dropped again and again while clients
// INCR (one-shot, pipelined with Prepare and Await, in transactions) and
// SET keys of them, their entries made other keys' once Options.Wait has
// passed: every value a client receives of a key lies in a segment the
// backend granted that key (no entry carries one key's values to
// another), and none is received twice. Seeded: keys, commands, drops.
func TestDropSlotUnderLoad(t *testing.T) {
	seed := testseed.Get(t)
	b := &segmentsBackend{marks: map[string]int64{}, segments: map[string][]segment{}}
	tb := newTable(t, b, Options{Wait: 20 * time.Millisecond, SegmentTime: 30 * time.Millisecond}, nil)
	tags := []string{"p", "q", "r", "s"}
	key := func(rng *rand.Rand) string { return slotKey(tags[rng.IntN(len(tags))], rng.IntN(50)) }
	var mu sync.Mutex
	received := map[string]map[int64]bool{}
	var problems []string
	got := func(k string, v int64) {
		mu.Lock()
		defer mu.Unlock()
		if received[k] == nil {
			received[k] = map[int64]bool{}
		}
		if received[k][v] {
			problems = append(problems, fmt.Sprintf("%s: %d received twice", k, v))
		}
		received[k][v] = true
		if !b.granted(k, v) {
			problems = append(problems, fmt.Sprintf("%s: %d in no segment granted it", k, v))
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 4 {
		rng := rand.New(rand.NewPCG(seed, uint64(c)+1))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				loadStep(tb, rng, key, got)
			}
		})
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	dropped := 0
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond) // under load, a drop at no set point
		dropped += tb.DropSlot(slotOf(slotKey(tags[rng.IntN(len(tags))], 0)))
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("%d problems: %v", len(problems), problems[:min(len(problems), 10)])
	}
	t.Logf("%d keys dropped, %d received values of", dropped, len(received))
}

// loadStep runs one of the commands of TestDropSlotUnderLoad.
func loadStep(tb *Table, rng *rand.Rand, key func(*rand.Rand) string, got func(string, int64)) {
	switch rng.IntN(4) {
	case 0:
		k, n := key(rng), int64(1+rng.IntN(3))
		if v, err := tb.Incr(k, n); err == nil {
			for i := range n {
				got(k, v-i)
			}
		}
	case 1:
		ks := []string{key(rng), key(rng), key(rng)}
		for _, k := range ks {
			tb.Prepare([]byte(k), 1)
		}
		var ps []Pending
		var vs []int64
		var kept []string
		for _, k := range ks {
			if v, p, err := tb.TryIncr([]byte(k), 1); err == nil {
				ps, vs, kept = append(ps, p), append(vs, v), append(kept, k)
			}
		}
		errs := make([]error, len(ps))
		tb.Await(ps, errs)
		for i, err := range errs {
			if err == nil {
				got(kept[i], vs[i])
			}
		}
	case 2:
		a, b := key(rng), key(rng)
		if a == b {
			return
		}
		ws := []Want{{Key: a, N: 1}, {Key: b, N: 2}}
		if tb.IncrAll(ws) == nil {
			got(a, ws[0].Last)
			got(b, ws[1].Last)
			got(b, ws[1].Last-1)
		}
	default:
		k := key(rng)
		v, _, _ := tb.Get(k) // its slot may be dropped meanwhile: SET finds out
		tb.Set(k, v+int64(rng.IntN(100)), Always)
	}
}

// heldFold is memBackend as a Folder whose one fold, once armed, holds
// its snapshot until released.
type heldFold struct {
	*memBackend
	armed   atomic.Bool
	began   chan struct{} // closed once the fold took its snapshot
	release chan struct{}
}

func (h *heldFold) FoldDue(keys int) bool { return h.armed.Load() }

func (h *heldFold) Fold(snapshot func() []Mark) <-chan error {
	h.armed.Store(false)
	snapshot()
	close(h.began)
	done := make(chan error, 1)
	go func() { <-h.release; done <- nil }()
	return done
}

// TestFoldHoldsDroppedEntries: the entry of a key a fold's snapshot
// holds is not made another key's while the fold runs, however long
// after the drop; once it ended, it is.
func TestFoldHoldsDroppedEntries(t *testing.T) {
	clock := &testClock{}
	h := &heldFold{memBackend: newMem(), began: make(chan struct{}), release: make(chan struct{})}
	tb := newTable(t, h, Options{Wait: time.Second, now: clock.now}, nil)
	h.armed.Store(true)
	incr(t, tb, "{a}", 1)
	<-h.began
	held := entriesOf(tb, []string{"{a}"})
	tb.DropSlot(slotOf("{a}"))
	clock.add(time.Minute)
	tryIncr(tb, []byte("{b}"), 1)
	for e := range entriesOf(tb, []string{"{b}"}) {
		if held[e] {
			t.Fatal("a new key was given the entry of a key the fold under way holds")
		}
	}
	close(h.release)
	await.True(t, time.Minute, "the fold ended", func() bool { return tb.foldBegan.Load() == 0 })
	tryIncr(tb, []byte("{c}"), 1)
	for e := range entriesOf(tb, []string{"{c}"}) {
		if !held[e] {
			t.Fatal("once the fold ended, a new key was not given the dropped key's entry")
		}
	}
}
