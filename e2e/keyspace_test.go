package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testetcd"
)

// TestKeyspaceIsDBSize: INFO keyspace's db0 keys is DBSIZE in every
// mode: one server; over etcd (cluster-enabled no) on the server the
// keys were made through and on one that made none, each counting the
// keys of the slots it owns, their sum the keys made (before the slots'
// owners: DBSIZE 30, etcd's count, and no db0 line, the server's own
// keys); on each node of a Redis Cluster over etcd (the keys of its
// slots).
func TestKeyspaceIsDBSize(t *testing.T) {
	e := testetcd.Start(t)
	single := start(t, nil)
	made, other := member(t, e), member(t, e)
	node1 := member(t, e, "--etcd-prefix", "/keyspace-cluster/", "--cluster-enabled", "yes")
	node2 := member(t, e, "--etcd-prefix", "/keyspace-cluster/", "--cluster-enabled", "yes")
	ctx := context.Background()
	const keys = 30
	incrAllOn := func(c redis.Cmdable) bool {
		for i := range keys {
			if c.Incr(ctx, fmt.Sprintf("ks%d", i)).Err() != nil {
				return false
			}
		}
		return true
	}
	for _, p := range []*process{single, made} {
		c := redis.NewClient(&redis.Options{Addr: p.Addr})
		if !incrAllOn(c) {
			t.Fatalf("%s: INCR failed", p.Addr)
		}
		c.Close()
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{node1.Addr, node2.Addr}, ReadTimeout: time.Second})
	defer rc.Close()
	await.True(t, time.Minute, "the cluster serves every key", func() bool { return incrAllOn(rc) })
	for _, pair := range [][2]*process{{made, other}, {node1, node2}} {
		await.True(t, time.Minute, "both servers own keys", func() bool {
			n1, n2 := dbsize(t, pair[0]), dbsize(t, pair[1])
			return n1 > 0 && n2 > 0 && n1+n2 == keys
		})
	}
	for _, p := range []*process{single, made, other, node1, node2} {
		n := dbsize(t, p)
		want := fmt.Sprintf("keys=%d,expires=0,avg_ttl=0", n)
		if got := processInfo(p, "keyspace", "db0"); got != want {
			t.Errorf("%s: INFO keyspace db0 %q, DBSIZE %d", p.Addr, got, n)
		}
	}
	if n := dbsize(t, single); n != keys {
		t.Errorf("one server: DBSIZE %d, want %d", n, keys)
	}
}

// dbsize is p's DBSIZE.
func dbsize(t *testing.T, p *process) int {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	n, err := c.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatalf("%s: DBSIZE: %v", p.Addr, err)
	}
	return int(n)
}
