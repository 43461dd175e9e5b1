package etcdsession

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/internal/testetcd"
)

// TestSessionRevokesStale: a session has no client before Connect; its
// Lease is the one granted last, until released; a lease released while
// etcd is down (which keeps it through its restart) is revoked at the
// next grant, so that it holds nothing for its TTL.
func TestSessionRevokesStale(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	s := New(Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second}, "")
	defer s.Close()
	if _, err := s.Client(); err == nil {
		t.Fatal("a client before Connect")
	}
	if err := s.Connect(); err != nil {
		t.Fatal(err)
	}
	old, err := s.Grant(ctx, time.Minute, time.Second)
	if err != nil || s.Lease() != old {
		t.Fatalf("grant: %v; the session's lease %v, want the one granted", err, s.Lease())
	}
	e.Kill()
	s.Release(old)
	if s.Lease() != nil {
		t.Fatal("a lease released is still the session's")
	}
	e.Resume()
	if ttl := ttlOf(t, cli, old.ID()); ttl <= 0 {
		t.Fatalf("the lease released while etcd was down: TTL %d; want kept through the restart", ttl)
	}
	if _, err := s.Grant(ctx, time.Minute, time.Second); err != nil {
		t.Fatal(err)
	}
	if ttl := ttlOf(t, cli, old.ID()); ttl > 0 {
		t.Fatalf("after the next grant, the stale lease: TTL %d; want revoked", ttl)
	}
}

// ttlOf is the TTL etcd gives lease id now: -1 once it is gone.
func ttlOf(t *testing.T, cli *clientv3.Client, id clientv3.LeaseID) int64 {
	t.Helper()
	r, err := cli.TimeToLive(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.TTL
}
