package seqslots

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/internal/testseed"
)

func crashed(int, Record) (How, int64, bool) { return Crashed, 0, true }

// run starts s's raises until the test ends.
func run(t *testing.T, s *Slots) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func stored(t *testing.T, s *Slots, slot int) Record {
	t.Helper()
	recs, _, err := s.Read(context.Background(), []int{slot})
	if err != nil {
		t.Fatal(err)
	}
	return recs[0]
}

// TestCoverStoresCeiling: a value goes out only below a ceiling stored in
// etcd; a value below the ceiling in hand costs no write.
func TestCoverStoresCeiling(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	s := New(Config{Client: cli, Prefix: "/t/", Steps: DefaultSteps})
	run(t, s)
	if _, err := s.Take(ctx, []int{1, 2}, crashed, nil); err != nil {
		t.Fatal(err)
	}
	first := DefaultSteps.Min // a take leaves a step of room
	if r := stored(t, s, 1); r.Gen != 1 || r.Owner != 0 || r.Ceil != first {
		t.Fatalf("slot 1 taken: %+v, want gen 1, owner 0, ceiling %d", r, first)
	}
	if err := s.Cover(ctx, 1, first+5); err != nil {
		t.Fatal(err)
	}
	if r := stored(t, s, 1); r.Ceil <= first+5 {
		t.Fatalf("after Cover(%d) the stored ceiling is %d", first+5, r.Ceil)
	}
	w := s.Writes(1)
	for v := first + 6; v < first+100; v++ {
		if err := s.Cover(ctx, 1, v); err != nil {
			t.Fatal(err)
		}
	}
	if s.Writes(1) != w {
		t.Fatalf("%d writes for values below the ceiling in hand", s.Writes(1)-w)
	}
}

// TestWritesFollowGrowth: covering a million values one at a time writes
// the ceiling a few dozen times (its step doubles while it lasts under a
// minute), and a thousand slots covered at once share transactions.
func TestWritesFollowGrowth(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	s := New(Config{Client: cli, Prefix: "/t/", Steps: DefaultSteps})
	run(t, s)
	slots := make([]int, 1000)
	for i := range slots {
		slots[i] = i
	}
	if _, err := s.Take(ctx, slots, crashed, nil); err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 1_000_000; v++ {
		if err := s.Cover(ctx, 0, v); err != nil {
			t.Fatal(err)
		}
	}
	if w := s.Writes(0); w > 30 {
		t.Fatalf("%d writes of the ceiling for a million values", w)
	}
	before := revision(t, cli)
	var wg sync.WaitGroup
	for _, slot := range slots[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Cover(ctx, slot, 1); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := revision(t, cli) - before; n > int64(3*((len(slots)+txnOps-1)/txnOps)) {
		t.Fatalf("%d etcd revisions to raise %d slots' ceilings", n, len(slots)-1)
	}
}

func revision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), "/none")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// TestTakeOversNeverRepeat: servers take one slot from each other, each
// as after a crash, while each hands out values from its floor up,
// covered one by one, until its Cover says the slot is another's (a
// value whose Cover failed is not handed out). The oracle: no value
// handed out twice. Seeded: the rate of take-overs and which server.
func TestTakeOversNeverRepeat(t *testing.T) {
	seed := testseed.Get(t)
	e := testetcd.Start(t)
	const servers, slot = 3, 42
	var mu sync.Mutex
	given := map[int64]int64{} // value: the server that handed it out
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for id := range int64(servers) {
		cli := e.Client()
		defer cli.Close()
		steps := Steps{Min: 1 + int64(id)*7, Max: 64, Fast: time.Minute, Slow: 10 * time.Minute}
		s := New(Config{Client: cli, Prefix: "/t/", Owner: id, Steps: steps})
		run(t, s)
		rng := rand.New(rand.NewPCG(seed, uint64(id)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
				taken, err := s.Take(ctx, []int{slot}, crashed, nil)
				if err != nil {
					return
				}
				for v := taken[slot].Floor + 1; ; v++ {
					err := s.Cover(ctx, slot, v)
					if errors.Is(err, ErrNotOwner) || ctx.Err() != nil {
						break
					}
					if err != nil {
						t.Errorf("server %d: Cover(%d): %v", id, v, err)
						return
					}
					mu.Lock()
					if other, twice := given[v]; twice {
						t.Errorf("value %d handed out by server %d and by server %d", v, other, id)
					}
					given[v] = id
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(given) < 1000 {
		t.Fatalf("only %d values handed out", len(given))
	}
	t.Logf("%d values handed out", len(given))
}
