package seqslots

import (
	"context"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/internal/testseed"
)

// followedSlot is the slot followedThenLost's owner takes.
const followedSlot = 7

// followed is what followedThenLost made.
type followed struct {
	a          *Slots // the owner, server-id 0, on cliA
	cliA, cliB *clientv3.Client
	known      *Known // the follower, on cliB
	ceil       int64  // the owner's last ceiling, seen by the follower
}

// followedThenLost has server-id 0 take followedSlot and raise its
// ceiling above 5000 while a Known follows the records (until the test
// ends), waits for the follower to see that ceiling, and deletes every
// record.
func followedThenLost(t *testing.T) followed {
	t.Helper()
	e := testetcd.Start(t)
	ctx := context.Background()
	f := followed{cliA: e.Client(), cliB: e.Client(), known: NewKnown(nil, nil, zerolog.Nop())}
	t.Cleanup(func() { f.cliA.Close(); f.cliB.Close() })
	f.a = New(Config{Client: f.cliA, Prefix: "/t/", Owner: 0, Steps: DefaultSteps})
	run(t, f.a)
	fctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go f.known.Follow(fctx, f.cliB, "/t/")
	if _, err := f.a.Take(ctx, []int{followedSlot}, crashed, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.a.Cover(ctx, followedSlot, 5000); err != nil {
		t.Fatal(err)
	}
	f.ceil = stored(t, f.a, followedSlot).Ceil
	await.True(t, 30*time.Second, "the follower to see the ceiling", func() bool {
		r, _ := f.known.lift(followedSlot, Record{}, 0)
		return r.Ceil == f.ceil
	})
	if _, err := f.cliA.Delete(ctx, "/t/seqslot/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRecordDeletedTakenFromKnown: a slot's record deleted by hand (or
// the prefix) while a server that followed it runs: that server's take
// starts from what it saw, so the floor stays above every value the old
// owner covered, and the generation does not go back.
func TestRecordDeletedTakenFromKnown(t *testing.T) {
	f := followedThenLost(t)
	b := New(Config{Client: f.cliB, Prefix: "/t/", Owner: 1, Steps: DefaultSteps, Known: f.known})
	taken, err := b.Take(context.Background(), []int{followedSlot}, crashed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := taken[followedSlot]; r.Floor < f.ceil || r.Gen < 2 {
		t.Fatalf("taken after the record was deleted: %+v; want floor at least %d (the old owner's ceiling) and gen above 1", r, f.ceil)
	}
}

// TestDeletedRecordPutBack: a slot's record deleted while its owner is
// gone and a server that followed it runs: the follower puts back what
// it saw, so that a server that saw nothing of it (a new dir) takes the
// slot above the old owner's ceiling, not from nothing.
func TestDeletedRecordPutBack(t *testing.T) {
	f := followedThenLost(t)
	await.True(t, 30*time.Second, "the follower to put the record back", func() bool { return stored(t, f.a, followedSlot).Gen > 0 })
	fresh := New(Config{Client: f.cliA, Prefix: "/t/", Owner: 1, Steps: DefaultSteps}) // saw nothing
	taken, err := fresh.Take(context.Background(), []int{followedSlot}, crashed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := taken[followedSlot]; r.Floor < f.ceil {
		t.Fatalf("taken by a server that saw nothing after the record was deleted: %+v; want floor at least %d (the old owner's ceiling)", r, f.ceil)
	}
}

// TestOwnWritesKeptBeforeUse: a take and every raise of a slot are in the
// file (Known's save) by the time they are used: when Take or Cover
// returns, not at the next once-a-second flush. So a directory remembers
// every ceiling its server handed values out below, whatever etcd loses
// while the server is down.
func TestOwnWritesKeptBeforeUse(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	var mu sync.Mutex
	saved := map[int]Record{}
	known := NewKnown(nil, func(recs map[int]Record) error {
		mu.Lock()
		defer mu.Unlock()
		maps.Copy(saved, recs)
		return nil
	}, zerolog.Nop())
	s := New(Config{Client: cli, Prefix: "/t/", Steps: DefaultSteps, Known: known})
	run(t, s)
	if _, err := s.Take(ctx, []int{7}, crashed, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if r := saved[7]; r.Gen != 1 || r.Ceil != DefaultSteps.Min {
		t.Errorf("slot 7 taken: the file holds %+v, want gen 1, ceiling %d", r, DefaultSteps.Min)
	}
	mu.Unlock()
	for _, last := range []int64{DefaultSteps.Min + 5, 10 * DefaultSteps.Min, 100 * DefaultSteps.Min} {
		if err := s.Cover(ctx, 7, last); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if r := saved[7]; r.Ceil <= last {
			t.Errorf("Cover(%d) returned: the file holds ceiling %d", last, r.Ceil)
		}
		mu.Unlock()
	}
}

// TestWriteBacksConverge: servers start at once after etcd lost records
// (deleted, or below), each with what it saw of them, and each writes
// back what etcd holds below that. Whatever the order of their
// transactions, etcd ends with every slot's record at least the highest
// any of them saw: a server's write-back that lost a race to another's
// lower one reads again and raises it (the lower one stayed before, and
// a server that saw only it took the slot below values handed out, under
// e2e TestClusterSequencesEtcdLosesData). Random records, seed logged.
func TestWriteBacksConverge(t *testing.T) {
	e := testetcd.Start(t)
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(testseed.Get(t), 2))
	const servers, slotsUsed, rounds = 4, 40, 10
	clis := make([]*clientv3.Client, servers)
	for i := range clis {
		clis[i] = e.Client()
		defer clis[i].Close()
	}
	for round := range rounds {
		prefix := "/t" + strconv.Itoa(round) + "/"
		want := map[int]Record{}
		knowns := make([]*Known, servers)
		for i := range knowns {
			loaded := map[int]Record{}
			for range slotsUsed {
				slot := rnd.IntN(slotsUsed)
				ceil := rnd.Int64N(1e6) + 1
				r := Record{Ceil: ceil, Gen: rnd.Int64N(5) + 1, Owner: int64(i), Floor: rnd.Int64N(ceil)}
				loaded[slot] = higher(loaded[slot], r)
				want[slot] = higher(want[slot], r)
			}
			knowns[i] = NewKnown(loaded, nil, zerolog.Nop())
		}
		var wg sync.WaitGroup
		for i, k := range knowns {
			wg.Go(func() {
				if _, err := k.readAll(ctx, clis[i], prefix+"seqslot/"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		resp, err := clis[0].Get(ctx, prefix+"seqslot/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		got := map[int]Record{}
		for _, kv := range resp.Kvs {
			slot, _ := strconv.Atoi(strings.TrimPrefix(string(kv.Key), prefix+"seqslot/"))
			got[slot], _ = unmarshal(kv.Value)
		}
		for slot, w := range want {
			if g := got[slot]; g.Ceil < w.Ceil || g.Gen < w.Gen || g.Floor < w.Floor {
				t.Fatalf("round %d, slot %d: etcd holds %+v after every server wrote back; the highest seen is %+v", round, slot, g, w)
			}
		}
	}
}
