package seqslots

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testetcd"
)

// TestRecordDeletedTakenFromKnown: a slot's record deleted by hand (or
// the prefix) while a server that followed it runs: that server's take
// starts from what it saw, so the floor stays above every value the old
// owner covered, and the generation does not go back.
func TestRecordDeletedTakenFromKnown(t *testing.T) {
	e := testetcd.Start(t)
	ctx := context.Background()
	cliA, cliB := e.Client(), e.Client()
	defer cliA.Close()
	defer cliB.Close()
	a := New(Config{Client: cliA, Prefix: "/t/", Owner: 0, Steps: DefaultSteps})
	run(t, a)
	known := NewKnown(nil, nil, zerolog.Nop())
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go known.Follow(fctx, cliB, "/t/")
	b := New(Config{Client: cliB, Prefix: "/t/", Owner: 1, Steps: DefaultSteps, Known: known})

	const slot = 7
	if _, err := a.Take(ctx, []int{slot}, crashed); err != nil {
		t.Fatal(err)
	}
	if err := a.Cover(ctx, slot, 5000); err != nil {
		t.Fatal(err)
	}
	ceil := stored(t, a, slot).Ceil
	await.True(t, 30*time.Second, "the follower to see the ceiling", func() bool {
		r, _ := known.lift(slot, Record{}, 0)
		return r.Ceil == ceil
	})
	if _, err := cliA.Delete(ctx, "/t/seqslot/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	taken, err := b.Take(ctx, []int{slot}, crashed)
	if err != nil {
		t.Fatal(err)
	}
	if r := taken[slot]; r.Floor < ceil || r.Gen < 2 {
		t.Fatalf("taken after the record was deleted: %+v; want floor at least %d (the old owner's ceiling) and gen above 1", r, ceil)
	}
}

// TestDeletedRecordPutBack: a slot's record deleted while its owner is
// gone and a server that followed it runs: the follower puts back what
// it saw, so that a server that saw nothing of it (a new dir) takes the
// slot above the old owner's ceiling, not from nothing.
func TestDeletedRecordPutBack(t *testing.T) {
	e := testetcd.Start(t)
	ctx := context.Background()
	cliA, cliB := e.Client(), e.Client()
	defer cliA.Close()
	defer cliB.Close()
	a := New(Config{Client: cliA, Prefix: "/t/", Owner: 0, Steps: DefaultSteps})
	run(t, a)
	known := NewKnown(nil, nil, zerolog.Nop())
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go known.Follow(fctx, cliB, "/t/")

	const slot = 7
	if _, err := a.Take(ctx, []int{slot}, crashed); err != nil {
		t.Fatal(err)
	}
	if err := a.Cover(ctx, slot, 5000); err != nil {
		t.Fatal(err)
	}
	ceil := stored(t, a, slot).Ceil
	await.True(t, 30*time.Second, "the follower to see the ceiling", func() bool {
		r, _ := known.lift(slot, Record{}, 0)
		return r.Ceil == ceil
	})
	if _, err := cliA.Delete(ctx, "/t/seqslot/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	await.True(t, 30*time.Second, "the follower to put the record back", func() bool { return stored(t, a, slot).Gen > 0 })
	fresh := New(Config{Client: cliA, Prefix: "/t/", Owner: 1, Steps: DefaultSteps}) // saw nothing
	taken, err := fresh.Take(ctx, []int{slot}, crashed)
	if err != nil {
		t.Fatal(err)
	}
	if r := taken[slot]; r.Floor < ceil {
		t.Fatalf("taken by a server that saw nothing after the record was deleted: %+v; want floor at least %d (the old owner's ceiling)", r, ceil)
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
	if _, err := s.Take(ctx, []int{7}, crashed); err != nil {
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
