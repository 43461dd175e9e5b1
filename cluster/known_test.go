package cluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/etcdsession"
	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/testetcd"
)

// TestKnownFollowsReservations: a member learns every reservation written
// for its layout, before and after it started following, and once it has
// awaited the revision of a write under its layout's keys (a claim, here
// a reservation) it knows every T written up to it, also those deleted
// since. (etcd 3.4's progress notifications could come before the events
// they should follow: awaiting one, this lost a T in the first round.)
func TestKnownFollowsReservations(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	etcdCfg := etcdsession.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second}
	sess := etcdsession.New(etcdCfg, "")
	if err := sess.Connect(); err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	m := &Member{cfg: Config{Etcd: etcdCfg, LeaseTTL: 2 * time.Second}, sess: sess, known: newKnown(), log: zerolog.Nop(),
		k: newKeys("/test/", idgen.Layout{IDBits: 4, ShardBits: 10, RandomBits: 10}, idgen.DefaultEpoch)}
	put := func(id, t int64) int64 {
		resp, err := cli.Put(ctx, m.k.reserved(id), strconv.FormatInt(t, 10))
		if err != nil {
			panic(err)
		}
		return resp.Header.Revision
	}
	put(0, 100)
	for round := range 20 {
		fctx, fcancel := context.WithCancel(ctx)
		go m.follow(fctx)
		id := int64(round%15 + 1)
		rev := put(id, int64(1000+round))
		if err := m.awaitKnown(ctx, rev); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if got := m.known.of(id); got != int64(1000+round) {
			t.Fatalf("round %d: known T of id %d is %d, want %d", round, id, got, 1000+round)
		}
		if _, err := cli.Delete(ctx, m.k.reserved(id)); err != nil {
			t.Fatal(err)
		}
		fcancel()
	}
	if m.known.of(0) != 100 {
		t.Fatalf("known T of id 0: %d, want 100", m.known.of(0))
	}
}
