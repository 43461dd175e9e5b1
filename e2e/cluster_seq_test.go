package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/internal/testseed"
)

// TestClusterSequences: three servers hand out values of the same keys,
// from segments taken in etcd, while one is paused past its lease, one is
// killed and started again, and etcd is restarted: per key no value is
// handed out twice across the servers, and each client's values (of the
// one server it talks to) increase. GET on any server is at or above
// every value handed out, and DBSIZE and SCAN see every key.
func TestClusterSequences(t *testing.T) {
	e := testetcd.Start(t)
	servers := newFleet(member(t, e), member(t, e), member(t, e))
	set := newSeqSet()
	stop := set.loadAll(servers, 6, 40, testseed.Get(t))
	defer stop()
	progress := func(what string) {
		t.Helper()
		n := set.count()
		await.True(t, time.Minute, "values are handed out "+what, func() bool { return set.count() > n+500 })
	}
	progress("at first")

	servers.at(0).Cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(3 * leaseTTL / 2) // the pause under test: past the lease
	servers.at(0).Cmd.Process.Signal(syscall.SIGCONT)
	progress("after a pause")

	servers.at(1).Kill9()
	servers.replace(1, member(t, e))
	progress("after a kill -9 and restart")

	e.Kill()
	const keyWhileDown = "new:while:etcd:down"
	// The outage under test: segments in hand are served, nothing past
	// them: a new key gets -BUSY naming etcd.
	nc := redis.NewClient(&redis.Options{Addr: servers.addr(2), MaxRetries: -1, ReadTimeout: 10 * time.Second})
	if err := nc.Incr(context.Background(), keyWhileDown).Err(); err == nil || !strings.HasPrefix(err.Error(), "BUSY sequence values ahead are not yet reserved durably") {
		t.Errorf("INCR of a new key while etcd is down: %v", err)
	}
	nc.Close()
	e.Resume()
	progress("after etcd restarted")
	stop()

	values := set.check(t)
	t.Logf("%d replies, %d values from 3 servers; errors (the faults) %v", set.count(), values, set.fails)

	highest := map[string]int64{}
	for _, r := range set.ranges {
		highest[r.key] = max(highest[r.key], r.last)
	}
	ctx := context.Background()
	for _, p := range servers.all() {
		c := redis.NewClient(&redis.Options{Addr: p.Addr})
		want := int64(len(highest))
		if c.Exists(ctx, keyWhileDown).Val() == 1 { // its take may have landed as etcd came back
			want++
		}
		if n := c.DBSize(ctx).Val(); n != want {
			t.Errorf("%s: DBSIZE %d, want the %d keys handed out", p.Addr, n, want)
		}
		for key, h := range highest {
			if v, err := c.Get(ctx, key).Int64(); err != nil || v < h {
				t.Errorf("%s: GET %s = %d, %v; want at least %d, handed out", p.Addr, key, v, err, h)
			}
		}
		var scanned int
		for cursor := uint64(0); ; {
			keys, next, err := c.Scan(ctx, cursor, "seq:*", 7).Result()
			if err != nil {
				t.Fatalf("%s: SCAN: %v", p.Addr, err)
			}
			scanned += len(keys)
			if cursor = next; cursor == 0 {
				break
			}
		}
		if scanned != len(highest) {
			t.Errorf("%s: SCAN returned %d keys, want %d", p.Addr, scanned, len(highest))
		}
		c.Close()
	}
	// A key SET on one server: every server's next INCR is above it.
	c := redis.NewClient(&redis.Options{Addr: servers.at(2).Addr})
	defer c.Close()
	top := highest["seq:0"] + 1_000_000
	if err := c.Set(ctx, "seq:0", top, 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, p := range servers.all() {
		pc := redis.NewClient(&redis.Options{Addr: p.Addr})
		if err := pc.Set(ctx, "seq:0", top-1, 0).Err(); err == nil {
			t.Errorf("%s: SET below another server's SET accepted", p.Addr)
		}
		pc.Close()
	}
}
