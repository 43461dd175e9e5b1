package sequence

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testseed"
)

// memBackend is a Backend in memory: marks as a durable store would keep
// them, and every segment it gave.
type memBackend struct {
	mu     sync.Mutex
	marks  map[string]int64
	borns  map[string]bool // keys held as born
	writes int
	// setWrites counts the calls of Set: writes of SETs, each of many.
	setWrites int
	setsHeld  int           // the SETs of writes that waited for slow
	fail      error         // every write fails with it while set
	slow      chan struct{} // writes wait for it while set
}

func newMem() *memBackend { return &memBackend{marks: map[string]int64{}, borns: map[string]bool{}} }

func (m *memBackend) Take(ctx context.Context, ts []Take) {
	m.mu.Lock()
	slow, fail := m.slow, m.fail
	m.mu.Unlock()
	if slow != nil {
		<-slow
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	for i := range ts {
		t := &ts[i]
		if fail != nil {
			t.Err = fail
			continue
		}
		if t.After > math.MaxInt64-t.N { // as the File refuses it
			t.Err = ErrOverflow
			continue
		}
		t.First, t.Last = t.After+1, t.After+t.N
		m.marks[t.Key] = t.Last
		m.borns[t.Key] = m.borns[t.Key] || t.Born
	}
}

// born reports whether m holds key as born: a restart brings it back.
func (m *memBackend) born(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.borns[key]
}

func (m *memBackend) Set(ctx context.Context, ss []Setting) {
	m.mu.Lock()
	slow := m.slow
	if slow != nil {
		m.setsHeld += len(ss)
	}
	m.mu.Unlock()
	if slow != nil {
		<-slow
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setWrites++
	for i := range ss {
		if m.fail != nil {
			ss[i].Err = m.fail
			continue
		}
		m.marks[ss[i].Key], m.borns[ss[i].Key] = ss[i].Value, true
	}
	if m.fail == nil {
		m.writes++
	}
}

func (m *memBackend) Release(ctx context.Context, marks []Mark) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mk := range marks {
		m.marks[mk.Key] = mk.Value
		m.borns[mk.Key] = m.borns[mk.Key] || mk.Born
	}
	return nil
}

// known is what a restart reads: the keys held as born (one only
// prepared is forgotten, as the File forgets it).
func (m *memBackend) known() []Mark {
	m.mu.Lock()
	defer m.mu.Unlock()
	var marks []Mark
	for k, v := range m.marks {
		if m.borns[k] {
			marks = append(marks, Mark{Key: k, Value: v, Born: true})
		}
	}
	return marks
}

func newTable(t *testing.T, b Backend, opts Options, known []Mark) *Table {
	t.Helper()
	tb := New(opts, b, known)
	t.Cleanup(func() { tb.Stop(context.Background()) })
	return tb
}

// tryIncr is TryIncr for a test of keys whose existence is durable: their
// replies may go at once.
func tryIncr(tb *Table, key []byte, n int64) (int64, error) {
	v, _, err := tb.TryIncr(key, n)
	return v, err
}

// awaitOne is Await of one reply.
func awaitOne(tb *Table, p Pending) error {
	errs := make([]error, 1)
	tb.Await([]Pending{p}, errs)
	return errs[0]
}

func incr(t *testing.T, tb *Table, key string, n int64) int64 {
	t.Helper()
	v, err := tb.Incr(key, n)
	if err != nil {
		t.Fatalf("INCRBY %s %d: %v", key, n, err)
	}
	return v
}

// TestIncrLikeRedis: a new key starts at 1, INCRBY returns the last of
// its values, GET the last value handed out, SET only goes up.
func TestIncrLikeRedis(t *testing.T) {
	tb := newTable(t, newMem(), Options{}, nil)
	if _, ok := get(t, tb, "orders"); ok {
		t.Fatal("GET of a new key: exists")
	}
	for want := int64(1); want <= 3; want++ {
		if v := incr(t, tb, "orders", 1); v != want {
			t.Fatalf("INCR: %d, want %d", v, want)
		}
	}
	if v := incr(t, tb, "orders", 100); v != 103 {
		t.Fatalf("INCRBY 100: %d, want 103", v)
	}
	if v, ok := get(t, tb, "orders"); !ok || v != 103 {
		t.Fatalf("GET: %d %v, want 103", v, ok)
	}
	if err := tb.Set("orders", 5000, Always); err != nil {
		t.Fatal(err)
	}
	if v := incr(t, tb, "orders", 1); v != 5001 {
		t.Fatalf("INCR after SET 5000: %d", v)
	}
	var below *BelowError
	if err := tb.Set("orders", 4000, Always); !errors.As(err, &below) || below.At != 5001 {
		t.Fatalf("SET below: %v", err)
	}
	if err := tb.Set("orders", 5001, Always); err != nil {
		t.Fatalf("SET to the value itself: %v", err)
	}
	if err := tb.Set("orders", 9, IfNew); !errors.Is(err, ErrExists) {
		t.Fatalf("SET NX of an existing key: %v", err)
	}
	if err := tb.Set("new", 9, IfOld); !errors.Is(err, ErrMissing) {
		t.Fatalf("SET XX of a new key: %v", err)
	}
	if err := tb.Set("new", 9, IfNew); err != nil {
		t.Fatalf("SET NX of a new key: %v", err)
	}
	if v := incr(t, tb, "new", 1); v != 10 {
		t.Fatalf("INCR after SET NX 9: %d", v)
	}
	if err := tb.Set("big", math.MaxInt64-1, Always); err != nil {
		t.Fatal(err)
	}
	incr(t, tb, "big", 1)
	if _, err := tb.Incr("big", 1); !errors.Is(err, ErrOverflow) {
		t.Fatalf("INCR past the largest integer: %v", err)
	}
}

// TestValuesIssuedCounted: Stats counts every value handed out, INCRBY n
// as n and each key of an IncrAll (MSET-like batches of INCRBYs), across
// shards; SETs and refused INCRs hand out none.
func TestValuesIssuedCounted(t *testing.T) {
	tb := newTable(t, newMem(), Options{}, nil)
	for range 3 {
		incr(t, tb, "orders", 1)
	}
	incr(t, tb, "orders", 100)
	if err := tb.IncrAll([]Want{{Key: "a", N: 2}, {Key: "b", N: 5}}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Set("big", math.MaxInt64, Always); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Incr("big", 1); !errors.Is(err, ErrOverflow) {
		t.Fatalf("INCR past the largest integer: %v", err)
	}
	for i := range 64 { // keys over every shard
		incr(t, tb, "k"+strconv.Itoa(i), 1)
	}
	if got, want := tb.Stats().Issued, uint64(3+100+2+5+64); got != want {
		t.Fatalf("Stats().Issued = %d, want %d", got, want)
	}
}

// TestBounds: a key longer than MaxKeyBytes, and a new key past MaxKeys,
// are refused with the key named; existing keys keep working.
func TestBounds(t *testing.T) {
	tb := newTable(t, newMem(), Options{MaxKeys: 3, MaxKeyBytes: 8}, nil)
	var limit *LimitError
	if _, err := tb.Incr("123456789", 1); !errors.As(err, &limit) || limit.Key != "123456789" {
		t.Fatalf("a 9-byte key: %v", err)
	}
	for _, k := range []string{"a", "b", "c"} {
		incr(t, tb, k, 1)
	}
	if _, err := tb.Incr("d", 1); !errors.As(err, &limit) || limit.Key != "d" {
		t.Fatalf("a 4th key: %v", err)
	}
	if err := tb.Set("d", 5, Always); !errors.As(err, &limit) {
		t.Fatalf("SET of a 4th key: %v", err)
	}
	if v := incr(t, tb, "a", 1); v != 2 || tb.Len() != 3 {
		t.Fatalf("an existing key after the refusal: %d, %d keys", v, tb.Len())
	}
}

// TestNoRepeat is the oracle, over generated inputs (the seed logged):
// clients incrementing random keys by random amounts, SETs, crashes (the
// table dropped without Stop) and graceful stops. Per key, no value is
// handed out twice in all the runs, every value of a run is above every
// value of the runs before it, and each client's values go up.
func TestNoRepeat(t *testing.T) {
	seed := testseed.Get(t)
	rnd := rand.New(rand.NewPCG(seed, 0))
	b := newMem()
	before := map[string]int64{}      // per key, the largest value of the runs before
	handed := map[string][][2]int64{} // per key, every range handed out
	var mu sync.Mutex
	for run := range 30 {
		tb := New(Options{SegmentTime: time.Duration(1+rnd.IntN(50)) * time.Millisecond, MaxSegment: int64(1 + rnd.IntN(1000))}, b, b.known())
		keys := 1 + rnd.IntN(20)
		var wg sync.WaitGroup
		for c := range 4 {
			crnd := rand.New(rand.NewPCG(seed, uint64(run*10+c+1)))
			wg.Go(func() {
				mine := map[string]int64{} // this client's last value per key
				for range 500 {
					key := fmt.Sprintf("k%d", crnd.IntN(keys))
					if crnd.IntN(50) == 0 {
						v, _ := get(t, tb, key)
						if err := tb.Set(key, v+int64(crnd.IntN(1000)), Always); err != nil && !errors.As(err, new(*BelowError)) {
							t.Error(err)
							return
						}
						continue
					}
					n := int64(1 + crnd.IntN(3)*crnd.IntN(200))
					v, err := tb.Incr(key, n)
					if err != nil {
						t.Error(err)
						return
					}
					if v-n+1 <= before[key] || v <= mine[key] {
						t.Errorf("run %d: %s got %d..%d, not above %d of earlier runs or %d of this client", run, key, v-n+1, v, before[key], mine[key])
					}
					mine[key] = v
					mu.Lock()
					handed[key] = append(handed[key], [2]int64{v - n + 1, v})
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if rnd.IntN(2) == 0 {
			tb.Stop(context.Background()) // graceful: releases the rest of each segment
		} else {
			tb.stopped.Store(true) // a crash: nothing released
			close(tb.stop)
			<-tb.done
		}
		for key, rs := range handed {
			for _, r := range rs {
				before[key] = max(before[key], r[1])
			}
		}
	}
	for key, rs := range handed {
		slices.SortFunc(rs, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
		for i := 1; i < len(rs); i++ {
			if rs[i][0] <= rs[i-1][1] {
				t.Fatalf("%s: %v and %v handed out both", key, rs[i-1], rs[i])
			}
		}
	}
}

// TestSetRacesIncr: SETs and INCRs of one key from many goroutines; every
// INCR's value is above the SET it follows, and no value repeats.
func TestSetRacesIncr(t *testing.T) {
	tb := newTable(t, newMem(), Options{SegmentTime: time.Millisecond}, nil)
	seen := map[int64]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				if g == 0 && i%10 == 0 {
					v, _ := get(t, tb, "k")
					if err := tb.Set("k", v+1000, Always); err != nil && !errors.As(err, new(*BelowError)) {
						t.Error(err)
					}
					continue
				}
				v, err := tb.Incr("k", 1)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[v] {
					t.Errorf("value %d handed out twice", v)
				}
				seen[v] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestSegmentsFollowTheRate: a key incremented steadily is written about
// once a SegmentTime, and its segments hold about that much of its
// traffic; a key used once holds a small one.
func TestSegmentsFollowTheRate(t *testing.T) {
	clock := time.Unix(1e9, 0)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	b := newMem()
	tb := newTable(t, b, Options{SegmentTime: time.Second, now: now}, nil)
	// 1000 INCRs per (fake) second for 20 seconds.
	for range 20_000 {
		incr(t, tb, "hot", 1)
		mu.Lock()
		clock = clock.Add(time.Millisecond)
		mu.Unlock()
	}
	incr(t, tb, "once", 1)
	await.True(t, 30*time.Second, "the queue of takes drained", func() bool {
		tb.queueMu.Lock()
		defer tb.queueMu.Unlock()
		return len(tb.queue) == 0
	})
	waitIdle(t, tb, "hot", "once")
	b.mu.Lock()
	hot, once, writes := b.marks["hot"], b.marks["once"], b.writes
	b.mu.Unlock()
	if hot-20_000 > 2000 || hot < 20_000 {
		t.Errorf("hot key reserved up to %d after 20,000 values at 1000/s: want at most one segment (about 1 s, 1000, as the rate is measured: up to 2000) more", hot)
	}
	if once > 5 {
		t.Errorf("a key used once reserved up to %d", once)
	}
	if writes > 80 { // about 20 s of traffic at one write a half segment, plus the ramp-up
		t.Errorf("%d writes for 20 s of one key's traffic", writes)
	}
	t.Logf("hot key: %d writes, reserved to %d; once: %d", writes, hot, once)
}

// waitIdle waits until no take of keys is under way.
func waitIdle(t *testing.T, tb *Table, keys ...string) {
	t.Helper()
	await.True(t, 30*time.Second, "no take of the keys under way", func() bool {
		for _, k := range keys {
			sh, h := tb.shardOf(k)
			sh.mu.Lock()
			e := find(&sh.index, h, k)
			busy := e != nil && e.taking
			sh.mu.Unlock()
			if busy {
				return false
			}
		}
		return true
	})
}

// TestFailingBackend: while writes fail, a key past its segment gets
// ErrNotReserved naming the cause, and so does a new key, at once; values
// in hand go on; once writes succeed (the writer tries again after its
// back-off), INCR goes on above everything before.
func TestFailingBackend(t *testing.T) {
	b := newMem()
	tb := newTable(t, b, Options{SegmentTime: time.Hour}, nil)
	incr(t, tb, "k", 1)
	waitIdle(t, tb, "k")
	b.mu.Lock()
	b.fail = errors.New("no space left on device")
	b.mu.Unlock()
	var last int64
	for {
		v, err := tb.Incr("k", 1)
		if err != nil {
			if !errors.Is(err, ErrNotReserved) || !strings.Contains(err.Error(), "no space left on device") {
				t.Fatalf("INCR with failing writes: %v", err)
			}
			break
		}
		last = v
	}
	if _, err := tb.Incr("fresh", 1); !errors.Is(err, ErrNotReserved) {
		t.Fatalf("INCR of a new key with failing writes: %v", err)
	}
	if s := tb.Stats(); s.Failures == 0 || s.LastError != "no space left on device" {
		t.Fatalf("stats: %+v", s)
	}
	b.mu.Lock()
	b.fail = nil
	b.mu.Unlock()
	var v int64
	await.True(t, time.Minute, "INCR works again once writes succeed", func() bool {
		var err error
		v, err = tb.Incr("k", 1)
		return err == nil
	})
	if v != last+1 {
		t.Fatalf("after recovery: %d, want %d", v, last+1)
	}
}

// TestTryIncrDoesNotWait: a key past its segment gets ErrWouldWait and
// nothing handed out, while its take is under way.
func TestTryIncrDoesNotWait(t *testing.T) {
	b := newMem()
	b.slow = make(chan struct{})
	tb := newTable(t, b, Options{}, nil)
	if _, err := tryIncr(tb, []byte("k"), 1); !errors.Is(err, ErrWouldWait) {
		t.Fatalf("TryIncr of a new key: %v", err)
	}
	got := make(chan int64)
	go func() { v, _ := tb.Incr("k", 1); got <- v }()
	close(b.slow)
	if v := <-got; v != 1 {
		t.Fatalf("Incr after the take: %d", v)
	}
	b.mu.Lock()
	b.slow = nil
	b.mu.Unlock()
}

// TestKeysInOrder: SCAN's cursor walks every key once, slot by slot, a
// slot's keys in the order they came (keys of one hash tag share a slot).
func TestKeysInOrder(t *testing.T) {
	tb := newTable(t, newMem(), Options{}, []Mark{{Key: "a", Value: 5}, {Key: "b", Value: 7}, {Key: "{t}2", Value: 1}})
	incr(t, tb, "c", 1)
	incr(t, tb, "{t}1", 1)
	all := scanAll(tb, 2)
	if !slices.Equal(slices.Sorted(slices.Values(all)), []string{"a", "b", "c", "{t}1", "{t}2"}) {
		t.Fatalf("keys: %v", all)
	}
	if i := slices.Index(all, "{t}2"); i < 0 || i+1 >= len(all) || all[i+1] != "{t}1" {
		t.Fatalf("keys: %v; want {t}2, then {t}1, which came after it", all)
	}
	if v, _ := get(t, tb, "b"); v != 7 {
		t.Fatalf("GET of a stored key: %d", v)
	}
	if v := incr(t, tb, "b", 1); v != 8 {
		t.Fatalf("INCR of a stored key: %d", v)
	}
}

// TestStopReleases: a graceful stop stores each key's last value, so a
// restart continues with the next one.
func TestStopReleases(t *testing.T) {
	b := newMem()
	tb := New(Options{}, b, nil)
	for range 100 {
		incr(t, tb, "k", 1)
	}
	if err := tb.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Incr("k", 1); !errors.Is(err, ErrStopped) {
		t.Fatalf("INCR after Stop: %v", err)
	}
	tb = newTable(t, b, Options{}, b.known())
	if v := incr(t, tb, "k", 1); v != 101 {
		t.Fatalf("after a graceful restart: %d, want 101", v)
	}
}

func BenchmarkTryIncr(b *testing.B) {
	tb := New(Options{}, newMem(), nil)
	defer tb.Stop(context.Background())
	hot := []byte("counter:hot")
	tb.Incr(string(hot), 1)
	b.Run("hot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := tb.TryIncr(hot, 1); err != nil && !errors.Is(err, ErrWouldWait) {
				b.Fatal(err)
			}
		}
	})
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key:%012d", i)
		tb.Incr(string(keys[i]), 1)
	}
	b.Run("1000 keys", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, _, err := tb.TryIncr(keys[i%len(keys)], 1); err != nil && !errors.Is(err, ErrWouldWait) {
				b.Fatal(err)
			}
			i++
		}
	})
	// As redis-benchmark -r 100000: each request a random one of 100,000
	// keys, so that nearly every lookup misses the CPU's caches.
	many := make([][]byte, 100000)
	for i := range many {
		many[i] = fmt.Appendf(nil, "key:%012d", i)
		tb.Incr(string(many[i]), 1)
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(1 << 20)
	b.Run("100000 random keys", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, _, err := tb.TryIncr(many[order[i%len(order)]%len(many)], 1); err != nil && !errors.Is(err, ErrWouldWait) {
				b.Fatal(err)
			}
			i++
		}
	})
}

// TestPrepareIsInvisible: a key made only to prepare its segment (a
// pipelined INCR not run yet) does not exist for GET, DBSIZE or SCAN; its
// first INCR returns 1 at once with a reply that may go only once the
// key's existence is durable (a Pending), and it exists from then on.
func TestPrepareIsInvisible(t *testing.T) {
	b := newMem()
	tb := newTable(t, b, Options{}, nil)
	tb.Prepare([]byte("p"), 1)
	waitIdle(t, tb, "p")
	if _, ok := get(t, tb, "p"); ok || tb.Len() != 0 {
		t.Fatalf("a prepared key exists: %v, %d keys", ok, tb.Len())
	}
	if keys, _ := tb.Keys(0, 10, nil); len(keys) != 0 {
		t.Fatalf("SCAN sees %v", keys)
	}
	if b.born("p") {
		t.Fatal("the backend holds a prepared key as born")
	}
	v, p, err := tb.TryIncr([]byte("p"), 1)
	if err != nil || v != 1 || p.Ready() {
		t.Fatalf("INCR of a prepared key: %d, %v, ready %v (want 1 without waiting, its reply pending)", v, err, p.Ready())
	}
	if err := awaitOne(tb, p); err != nil || !b.born("p") {
		t.Fatalf("Await: %v; the backend holds it as born: %v", err, b.born("p"))
	}
	if v, ok := get(t, tb, "p"); !ok || v != 1 || tb.Len() != 1 {
		t.Fatalf("after INCR: %d %v, %d keys", v, ok, tb.Len())
	}
	if v, err := tryIncr(tb, []byte("p"), 1); err != nil || v != 2 {
		t.Fatalf("the second INCR: %d, %v", v, err)
	}
}

// TestBurstsWrittenOnce: a key that comes in bursts (ten INCRs in two
// seconds, then a minute's quiet with two more in it) is written once a
// burst, and never waits, once its segments have grown; not once for
// every few INCRs, as its rate measured over the quiet time would have
// it.
func TestBurstsWrittenOnce(t *testing.T) {
	clock := time.Unix(1e9, 0)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	step := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	b := newMem()
	tb := newTable(t, b, Options{SegmentTime: 3 * time.Second, now: now}, nil)
	writes := func() int { b.mu.Lock(); defer b.mu.Unlock(); return b.writes }
	waits := 0
	one := func() {
		if _, err := tryIncr(tb, []byte("bursty"), 1); errors.Is(err, ErrWouldWait) {
			waits++
			incr(t, tb, "bursty", 1)
		} else if err != nil {
			t.Fatal(err)
		}
		waitIdle(t, tb, "bursty")
	}
	var inBursts []int
	for cycle := range 12 {
		if cycle == 4 {
			waits = 0
		}
		before := writes()
		for range 10 {
			one()
			step(200 * time.Millisecond)
		}
		inBursts = append(inBursts, writes()-before)
		step(25 * time.Second)
		one()
		step(time.Second)
		one()
		step(35 * time.Second)
	}
	total := 0
	for _, w := range inBursts[4:] {
		total += w
	}
	// Following the rate down at once: 14 writes (segments of 4 at each
	// burst's start); fading: 11.
	if total > 12 || waits > 0 {
		t.Fatalf("writes in each burst %v, %d in the last 8, %d INCRs waited: want about one write a burst once grown, and no waits", inBursts, total, waits)
	}
	t.Logf("writes in each burst: %v", inBursts)
}

// TestSegmentSize: for any key's state, a segment is within its bounds:
// at least minSegment, what a waiting request needs, and the last
// segment as it fades; at most MaxSegment (but for a waiting request)
// and four times the rate measured (or the faded last one).
func TestSegmentSize(t *testing.T) {
	seed := testseed.Get(t)
	r := rand.New(rand.NewPCG(seed, 3))
	for range 100000 {
		st := time.Duration(1+r.IntN(10)) * time.Second
		tb := &Table{opts: Options{SegmentTime: st, MaxSegment: 1 + r.Int64N(1e6)}}
		e := &entry{asked: r.Int64N(1000), seg: r.Int64N(2e6), askedAt: r.Int64N(1e9)}
		e.issued = e.asked + r.Int64N(1e5)
		if r.IntN(4) == 0 {
			e.want = r.Int64N(2e6)
		}
		now := e.askedAt + r.Int64N(int64(10*time.Minute))
		got := tb.size(e, now)
		dt := float64(now - e.askedAt)
		faded := float64(e.seg) * math.Exp2(-dt/(fade*float64(st)))
		rate := float64(e.issued-e.asked) * float64(st) / max(dt, float64(st)/4)
		switch {
		case got < minSegment || got < e.want:
			t.Fatalf("%+v at %d: %d, below minSegment or want", *e, now, got)
		case got > max(tb.opts.MaxSegment, e.want, minSegment):
			t.Fatalf("%+v at %d: %d, above MaxSegment %d", *e, now, got, tb.opts.MaxSegment)
		case float64(got) < min(faded, float64(tb.opts.MaxSegment))-1:
			t.Fatalf("%+v at %d: %d, below the last segment faded, %.0f", *e, now, got, faded)
		case got > max(int64(math.Ceil(max(rate, faded))), e.want, minSegment):
			t.Fatalf("%+v at %d: %d, above the rate %.0f and the faded last segment %.0f", *e, now, got, rate, faded)
		}
	}
}

// foldingMem is a memBackend that is a Folder, due after every write;
// every third fold fails. Each fold checks its snapshot against what the
// clients were handed and every SET written before it (seen): a fold
// must never drop below those. (It may drop below the store: a SET under
// way lets go of its key's segment, and writes a lower mark itself.)
type foldingMem struct {
	*memBackend
	seenMu        sync.Mutex
	seen          map[string]int64
	folds, failed int
	below         []string // keys a snapshot held below what was seen
}

func (m *foldingMem) FoldDue(keys int) bool { return true }

// Set counts a SET as seen once it is written, before the Table applies
// it: a fold between its write and the Table's answer must keep it. It
// takes a while, as a disk's write does, so that folds queue behind it.
func (m *foldingMem) Set(ctx context.Context, ss []Setting) {
	m.mu.Lock()
	defer m.mu.Unlock()
	time.Sleep(100 * time.Microsecond)
	m.seenMu.Lock()
	defer m.seenMu.Unlock()
	for _, s := range ss {
		m.marks[s.Key] = s.Value
		m.seen[s.Key] = max(m.seen[s.Key], s.Value)
	}
}

func (m *foldingMem) Fold(snapshot func() []Mark) <-chan error {
	done := make(chan error, 1)
	done <- m.fold(snapshot)
	return done
}

func (m *foldingMem) fold(snapshot func() []Mark) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	got := map[string]int64{}
	for _, mk := range snapshot() {
		got[mk.Key] = mk.Reserved
	}
	m.seenMu.Lock()
	for k, v := range m.seen {
		if got[k] < v {
			m.below = append(m.below, fmt.Sprintf("%s: %d, %d seen", k, got[k], v))
		}
	}
	m.seenMu.Unlock()
	if m.folds++; m.folds%3 == 0 {
		m.failed++
		return errors.New("no space left on device")
	}
	clear(m.marks)
	maps.Copy(m.marks, got)
	return nil
}

// TestFoldSnapshots: under INCR, INCRBY and SET of random keys from four
// clients, every fold's snapshot holds each key at or above every value
// handed out or SET before it; a failed fold is logged once (not once a
// write), and the Table goes on.
func TestFoldSnapshots(t *testing.T) {
	seed := testseed.Get(t)
	var log bytes.Buffer
	logw := &syncWriter{w: &log}
	b := &foldingMem{memBackend: newMem(), seen: map[string]int64{}}
	tb := newTable(t, b, Options{SegmentTime: 5 * time.Millisecond, Log: zerolog.New(logw)}, nil)
	traffic(t, tb, seed, 40, 1000, func(key string, v int64) {
		b.seenMu.Lock()
		b.seen[key] = max(b.seen[key], v)
		b.seenMu.Unlock()
	}).Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.below) > 0 || b.folds < 30 {
		t.Fatalf("%d folds; snapshots below what was seen: %v", b.folds, b.below[:min(5, len(b.below))])
	}
	logw.mu.Lock() // a fold's end is logged on a goroutine of its own
	defer logw.mu.Unlock()
	if lines := strings.Count(log.String(), "folded after a later write"); b.failed < 10 || lines != 1 {
		t.Fatalf("%d folds failed, logged %d times; want at least 10, logged once:\n%s", b.failed, lines, log.String())
	}
}

// traffic runs INCR, INCRBY and SET of random ones of keys keys (one of
// them empty) on tb, ops of them from each of four clients (seeded),
// calling seen with each value handed out or SET. The WaitGroup is done
// when they are.
func traffic(t *testing.T, tb *Table, seed uint64, keys, ops int, seen func(key string, v int64)) *sync.WaitGroup {
	var wg sync.WaitGroup
	for c := range 4 {
		rnd := rand.New(rand.NewPCG(seed, uint64(c)))
		wg.Go(func() {
			for range ops {
				key := fmt.Sprintf("k%d", rnd.IntN(keys))
				if key == "k0" {
					key = "" // a key as any other, that bbolt cannot hold as a key
				}
				var v int64
				var err error
				if rnd.IntN(20) == 0 {
					v, _ = get(t, tb, key)
					v += int64(rnd.IntN(100))
					if err = tb.Set(key, v, Always); errors.As(err, new(*BelowError)) {
						continue
					}
				} else {
					v, err = tb.Incr(key, int64(1+rnd.IntN(3)))
				}
				if err != nil {
					t.Error(err)
					return
				}
				seen(key, v)
			}
		})
	}
	return &wg
}

// syncWriter is a writer safe for the Table's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestWriterReuses: once it has written as many keys, a write of
// thousands allocates nothing of the writer's own per key: its list of
// takes is reused. (Allocated afresh, it and the File's record were most
// of the server's garbage with 100,000 random keys.)
func TestWriterReuses(t *testing.T) {
	tb := newTable(t, newMem(), Options{}, nil)
	const keys, writes = 2000, 10
	for i := range keys {
		incr(t, tb, "key:"+strconv.Itoa(i), 1)
	}
	var batch []*entry
	tb.each(func(e *entry) { batch = append(batch, e) })
	var w writer
	tb.take(batch, &w)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range writes {
		tb.take(batch, &w)
	}
	runtime.ReadMemStats(&after)
	if perKey := float64(after.TotalAlloc-before.TotalAlloc) / (writes * keys); perKey > 4 {
		t.Errorf("a write allocated %.1f bytes a key", perKey)
	}
}

// TestOverflowAtOnce: near the largest integer a key's segment is cut at
// it, so INCR and INCRBY reach it exactly, as in Redis; past it they fail
// with ErrOverflow at once (TryIncr does not ask to wait), with no write,
// and so does a transaction's IncrAll.
func TestOverflowAtOnce(t *testing.T) {
	b := newMem()
	tb := newTable(t, b, Options{}, nil)
	if err := tb.Set("k", math.MaxInt64-3, Always); err != nil {
		t.Fatal(err)
	}
	if v := incr(t, tb, "k", 2); v != math.MaxInt64-1 {
		t.Fatalf("INCRBY 2: %d", v)
	}
	if v := incr(t, tb, "k", 1); v != math.MaxInt64 {
		t.Fatalf("INCR to the largest integer: %d", v)
	}
	b.mu.Lock()
	writes := b.writes
	b.mu.Unlock()
	for _, n := range []int64{1, 5} {
		if _, err := tryIncr(tb, []byte("k"), n); !errors.Is(err, ErrOverflow) {
			t.Fatalf("TryIncr %d past the largest integer: %v", n, err)
		}
		if _, err := tb.Incr("k", n); !errors.Is(err, ErrOverflow) {
			t.Fatalf("Incr %d past the largest integer: %v", n, err)
		}
	}
	if err := tb.IncrAll([]Want{{Key: "k", N: 1}}); !errors.Is(err, ErrOverflow) {
		t.Fatalf("IncrAll past the largest integer: %v", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.writes != writes {
		t.Fatalf("%d writes for the refused INCRs", b.writes-writes)
	}
}

// scanAll walks Keys from cursor 0 to its end, count at a time.
func scanAll(tb *Table, count int) []string {
	var all []string
	for cursor := uint64(0); ; {
		all, cursor = tb.Keys(cursor, count, all)
		if cursor == 0 {
			return all
		}
	}
}

// TestKeysCursorHoldsNoState: a cursor is a place, valid for ever: a scan
// paused while many keys are made, then resumed, still returns every key
// that existed all along, once. Seeded: the keys and where the scan
// pauses.
func TestKeysCursorHoldsNoState(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	tb := newTable(t, newMem(), Options{}, nil)
	before := map[string]bool{}
	for range 500 {
		k := strconv.FormatUint(rng.Uint64(), 36)
		incr(t, tb, k, 1)
		before[k] = true
	}
	var got []string
	cursor := uint64(0)
	for range 1 + rng.IntN(50) {
		if got, cursor = tb.Keys(cursor, 1+rng.IntN(20), got); cursor == 0 {
			break
		}
	}
	for range 500 {
		incr(t, tb, strconv.FormatUint(rng.Uint64(), 36), 1)
	}
	for cursor != 0 {
		got, cursor = tb.Keys(cursor, 1+rng.IntN(20), got)
	}
	seen := map[string]int{}
	for _, k := range got {
		seen[k]++
	}
	for k := range before {
		if seen[k] != 1 {
			t.Fatalf("key %s, there all along, returned %d times", k, seen[k])
		}
	}
}

// get is GET of key in tb, which must not fail (its slot open).
func get(t testing.TB, tb *Table, key string) (int64, bool) {
	v, ok, err := tb.Get(key)
	if err != nil {
		t.Errorf("GET %s: %v", key, err)
	}
	return v, ok
}
