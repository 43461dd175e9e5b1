package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/reservation"
)

// TestFence: the reservation of an id is stored only while its claim
// carries the saver's lease. Once the lease is revoked and the id claimed
// by another lease, the old holder's save is refused (and signalled), the
// stored T stays the new holder's, and the new claim read the last T the
// old holder stored.
func TestFence(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	k := newKeys("/test/", idgen.Layout{IDBits: 1, ShardBits: 10, RandomBits: 10}, idgen.DefaultEpoch)
	grant := func() clientv3.LeaseID {
		l, err := cli.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		return l.ID
	}
	old := grant()
	if _, err := checkLayout(ctx, cli, k); err != nil {
		t.Fatal(err)
	}
	c, _, err := claim(ctx, cli, k, old, "old", []int64{0, 1})
	if err != nil || c.id != 0 || c.reserved != 0 {
		t.Fatalf("first claim: %+v, %v; want id 0, nothing reserved", c, err)
	}
	var stored []int64
	s := &store{cli: cli, k: k, id: 0, lease: old, timeout: time.Second, fenced: make(chan struct{}, 1),
		last: func(t int64) { stored = append(stored, t) }}
	if err := s.Save(context.Background(), reservation.State{Reserved: 5000}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := claim(ctx, cli, k, grant(), "rival", []int64{0}); !errors.Is(err, errAllHeld) {
		t.Fatalf("claiming a held id: %v, want errAllHeld", err)
	}

	if _, err := cli.Revoke(ctx, old); err != nil { // the old holder's lease expires
		t.Fatal(err)
	}
	next, _, err := claim(ctx, cli, k, grant(), "new", []int64{0})
	if err != nil || next.id != 0 || next.reserved != 5000 {
		t.Fatalf("claim after the lease went: %+v, %v; want id 0 with T 5000", next, err)
	}
	if err := s.Save(context.Background(), reservation.State{Reserved: 9000}); !errors.Is(err, errFenced) {
		t.Fatalf("the old holder's save after the new claim: %v, want errFenced", err)
	}
	select {
	case <-s.fenced:
	default:
		t.Fatal("a refused save was not signalled")
	}
	resp, err := cli.Get(ctx, k.reserved(0))
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "5000" || len(stored) != 1 {
		t.Fatalf("T in etcd after the refused save: %v, %v (stored %v); want 5000", resp.Kvs, err, stored)
	}
}

// TestLayoutGuards: a server of another layout or epoch never claims an
// id while one of this layout holds one, whatever single key under the
// prefix is deleted first (each in turn, on a prefix of its own): the
// layout key and the live keys guard it twice.
func TestLayoutGuards(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	layout := idgen.Layout{IDBits: 1, ShardBits: 10, RandomBits: 10}
	// setup has a server of the default epoch hold an id under prefix,
	// and returns the keys of a server of an epoch 3 s later.
	setup := func(prefix string) keys {
		a, b := newKeys(prefix, layout, idgen.DefaultEpoch), newKeys(prefix, layout, idgen.DefaultEpoch.Add(3*time.Second))
		if _, err := checkLayout(ctx, cli, a); err != nil {
			t.Fatal(err)
		}
		l, err := cli.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := claim(ctx, cli, a, l.ID, "a", []int64{0, 1}); err != nil {
			t.Fatal(err)
		}
		return b
	}
	setup("/guards/")
	resp, err := cli.Get(ctx, "/guards/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(resp.Kvs) < 3 {
		t.Fatalf("keys under the prefix: %v, %v", resp.Kvs, err)
	}
	for i, kv := range resp.Kvs {
		prefix := fmt.Sprintf("/guards%d/", i)
		b := setup(prefix)
		key := prefix + strings.TrimPrefix(string(kv.Key), "/guards/")
		if _, err := cli.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		checkLayout(ctx, cli, b) // writes the layout key again if it is gone
		l, err := cli.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		if c, _, err := claim(ctx, cli, b, l.ID, "b", []int64{0, 1}); !errors.Is(err, errLayout) {
			t.Fatalf("with %s deleted, a server of another epoch claimed: %+v, %v; want errLayout", key, c, err)
		}
	}
}

// TestLayoutKey: the first server under a prefix records its layout;
// another layout or epoch under it is refused.
func TestLayoutKey(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	a := newKeys("/test/", idgen.Layout{IDBits: 1, ShardBits: 10, RandomBits: 10}, idgen.DefaultEpoch)
	if existed, err := checkLayout(ctx, cli, a); err != nil || existed {
		t.Fatalf("the first layout under the prefix: existed %v, %v", existed, err)
	}
	if existed, err := checkLayout(ctx, cli, a); err != nil || !existed {
		t.Fatalf("the same layout again: existed %v, %v", existed, err)
	}
	b := newKeys("/test/", idgen.Layout{IDBits: 1, ShardBits: 10, RandomBits: 10}, idgen.DefaultEpoch.Add(time.Hour))
	if _, err := checkLayout(ctx, cli, b); !errors.Is(err, errLayout) {
		t.Fatalf("another epoch under the prefix: %v, want errLayout", err)
	}
}
