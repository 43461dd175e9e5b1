package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testbin"
	"github.com/idserver/idserver/internal/testetcd"
)

// The failover tests run three Redis Cluster nodes over one etcd on the
// defaults (etcd-lease-ttl 5 s, the serving horizon 2 s): what a site
// that sets nothing gets.

// defaultTTL and horizon are etcd-lease-ttl's default and the serving
// horizon (etcdsession.Horizon), as the docs state them.
const (
	defaultTTL = 5 * time.Second
	horizon    = 2 * time.Second
)

// defaultsCluster is three Redis Cluster nodes over e on the defaults,
// each with a dir of its own and, if kept, on a socket the test keeps
// (started again, a node serves its old address); else on a port of its
// own, which refuses connections once it is killed, as a dead process's.
type defaultsCluster struct {
	t       *testing.T
	e       *testetcd.Server
	sockets []testbin.Socket // nil: not kept
	dirs    []string
	nodes   []*process
}

func newDefaultsCluster(t *testing.T, e *testetcd.Server, kept bool) *defaultsCluster {
	c := &defaultsCluster{t: t, e: e}
	for range 3 {
		if kept {
			c.sockets = append(c.sockets, testbin.Listen(t, "port"))
		}
		c.dirs = append(c.dirs, t.TempDir())
	}
	c.nodes = make([]*process, 3)
	c.startAll()
	return c
}

// start starts node i.
func (c *defaultsCluster) start(i int) *process {
	args := []string{"--etcd-endpoints", c.e.Endpoint, "--cluster-enabled", "yes", "--dir", c.dirs[i]}
	if c.sockets == nil {
		return start(c.t, nil, append(args, "--port", testbin.ReservedPort(c.t))...)
	}
	s := c.sockets[i]
	return testbin.Start(c.t, nil, []testbin.Socket{s}, binary, append(args, "--port", s.Port)...)
}

// startAll starts the three nodes at once, and returns when the last
// start began.
func (c *defaultsCluster) startAll() time.Time {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last time.Time
	for i := range c.nodes {
		wg.Go(func() {
			mu.Lock()
			last = time.Now()
			mu.Unlock()
			c.nodes[i] = c.start(i)
		})
	}
	wg.Wait()
	return last
}

// client is a go-redis cluster client of the nodes that follows -MOVED
// and reads the slots again every 250 ms (its default is a minute: a
// client so made would measure go-redis, not the failover).
func (c *defaultsCluster) client() *redis.ClusterClient {
	var addrs []string
	for _, p := range c.nodes {
		addrs = append(addrs, p.Addr)
	}
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ReadTimeout: 500 * time.Millisecond,
		WriteTimeout: 500 * time.Millisecond, DialTimeout: 500 * time.Millisecond, ClusterStateReloadInterval: 250 * time.Millisecond})
}

// failoverKeys are keys over every node's slots (as keysServedBy names
// them).
var failoverKeys = func() []string {
	keys := make([]string, 30)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	return keys
}()

// allServed reports whether c answers an INCR of every key.
func allServed(c *redis.ClusterClient) bool {
	for _, k := range failoverKeys {
		if err := c.Incr(context.Background(), k).Err(); err != nil {
			return false
		}
	}
	return true
}

// TestFailoverKill9OnDefaults: kill -9 of a slot's owner in a cluster of
// three on the defaults; a go-redis cluster client INCRing one of its
// keys without a pause has its longest gap between two replies under two
// TTLs (it was two TTLs and more: 23.6 s here at the old default of 10
// s). The aim, and what it logs: under the TTL, the serving horizon and
// a second (8 s).
func TestFailoverKill9OnDefaults(t *testing.T) {
	e := testetcd.Start(t)
	c := newDefaultsCluster(t, e, false)
	cc := c.client()
	defer cc.Close()
	await.True(t, time.Minute, "every key served", func() bool { return allServed(cc) })
	victim := c.nodes[1]
	var key string
	for k := range keysServedBy(c.nodes[0], victim.Addr, len(failoverKeys)) {
		key = k
	}
	if key == "" {
		t.Fatalf("%s serves none of the keys", victim.Addr)
	}
	var replies replyTimes
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !isClosed(stop) {
			if cc.Incr(context.Background(), key).Err() == nil {
				replies.add(time.Now())
			}
		}
	}()
	await.True(t, 10*time.Second, "replies before the kill", func() bool { return !replies.last().IsZero() })
	killed := time.Now()
	victim.Kill9()
	served := await.Within(time.Minute, func() bool { return replies.last().After(killed.Add(time.Second)) })
	close(stop)
	<-done
	gap := replies.longestGap()
	t.Logf("kill -9 of a slot's owner on the defaults: its key %q unanswered for %v at most (TTL %v + horizon %v)", key, gap.Round(time.Millisecond), defaultTTL, horizon)
	if !served || gap > 2*defaultTTL {
		t.Fatalf("key %q unanswered for %v after its owner was killed, want under two TTLs (%v)", key, gap, 2*defaultTTL)
	}
}

// replyTimes are when replies came.
type replyTimes struct {
	mu sync.Mutex
	at []time.Time
}

func (r *replyTimes) add(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at = append(r.at, at)
}

// last is when the last reply came (zero: none yet).
func (r *replyTimes) last() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.at) == 0 {
		return time.Time{}
	}
	return r.at[len(r.at)-1]
}

// longestGap is the longest time between two replies.
func (r *replyTimes) longestGap() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var gap time.Duration
	for i := 1; i < len(r.at); i++ {
		gap = max(gap, r.at[i].Sub(r.at[i-1]))
	}
	return gap
}

// TestFullRestartOnDefaults: the three nodes stopped gracefully, at once
// and then one after another (the last holds every slot), and started
// again at once: every key is served within seconds of the last start
// (3 s is the aim; it took 24.5 s when the stopped nodes' revoked leases
// were waited out for a TTL).
func TestFullRestartOnDefaults(t *testing.T) {
	e := testetcd.Start(t)
	c := newDefaultsCluster(t, e, true)
	cc := c.client()
	defer cc.Close()
	await.True(t, time.Minute, "every key served", func() bool { return allServed(cc) })
	for _, how := range []string{"at once", "one after another"} {
		var wg sync.WaitGroup
		for _, p := range c.nodes {
			if how == "at once" {
				wg.Go(func() { p.Stop() })
			} else {
				p.Stop()
			}
		}
		wg.Wait()
		last := c.startAll()
		served := await.Within(time.Minute, func() bool { return allServed(cc) })
		took := time.Since(last)
		t.Logf("a full restart on the defaults, stopped %s: every key served %v after the last start", how, took.Round(time.Millisecond))
		if !served || took > 6*time.Second {
			t.Fatalf("a full restart, stopped %s: every key served only %v after the last start, want under 6 s", how, took)
		}
	}
}

// TestSlotOwnerFaultsOneOwner: two Redis Cluster nodes over a 3-member
// etcd (leases of 2 s), plain clients on each node INCRing the same keys
// (a node answers its own slots' keys, -MOVED the others'), through an
// owner's lease revoked by hand (as etcdctl lease revoke) while it was
// paused for a second, an owner paused past its lease and resumed, and
// etcd's leader killed (an election): per key no value twice and each
// above every value whose reply came before it was sent, over both
// nodes, so no two nodes served a slot at once.
func TestSlotOwnerFaultsOneOwner(t *testing.T) {
	members := testetcd.StartCluster(t, 3)
	var endpoints []string
	for _, e := range members {
		endpoints = append(endpoints, e.Endpoint)
	}
	node := func() *process {
		return start(t, nil, append([]string{"--etcd-endpoints", strings.Join(endpoints, ",")}, faultArgs...)...)
	}
	nodes := []*process{node(), node()}
	load := startPlainLoad(t, nodes)
	defer load.stop()
	load.progress("at first")

	// Revoked while its holder is paused, for a second: resumed within
	// its horizon, it serves until it sees the lease gone, and the other
	// must not have begun.
	cli := members[0].Client()
	defer cli.Close()
	resp, err := cli.Get(context.Background(), "/idserver/node/0")
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("server-id 0's node key: %v, %v", resp, err)
	}
	holder := nodes[0]
	if clusterInfo(nodes[1], "held_server_id") == "0" {
		holder = nodes[1]
	}
	holder.Pause(t)
	if _, err := cli.Revoke(context.Background(), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the thing under test: a pause
	holder.Cmd.Process.Signal(syscall.SIGCONT)
	load.progress("after an owner's lease was revoked by hand while it was paused")
	nodes[1].Cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(3 * leaseTTL) // the thing under test: a pause past the lease
	nodes[1].Cmd.Process.Signal(syscall.SIGCONT)
	load.progress("after an owner was paused past its lease")
	etcdLeader(t, members).Kill()
	load.progress("after etcd's leader was killed")
	load.check()
}

// faultArgs are the fault tests' nodes' arguments: leases of 2 s, two
// server-ids.
var faultArgs = []string{"--etcd-lease-ttl", "2", "--id-range", "1", "--shard-range", "10", "--cluster-enabled", "yes"}

// A plainLoad is plain clients, two on each node, INCRing k0 .. k19 into
// one opLog until stop.
type plainLoad struct {
	t    *testing.T
	log  *opLog
	quit chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// startPlainLoad waits until nodes hold a server-id and starts the load.
func startPlainLoad(t *testing.T, nodes []*process) *plainLoad {
	for _, p := range nodes {
		waitHolding(t, p, 20*time.Second)
	}
	l := &plainLoad{t: t, log: newOpLog(), quit: make(chan struct{})}
	for i, p := range nodes {
		for c := range 2 {
			plain := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, ReadTimeout: time.Second, WriteTimeout: time.Second})
			t.Cleanup(func() { plain.Close() })
			l.wg.Go(func() {
				clusterLoad(fmt.Sprintf("node%d#%d", i, c), goRedisCalls(plain), l.log, rand.New(rand.NewPCG(uint64(i), uint64(c))), 20, l.quit)
			})
		}
	}
	return l
}

// progress waits for 2000 INCRs more, or fails the test.
func (l *plainLoad) progress(what string) {
	l.t.Helper()
	n := l.log.count()
	if !await.Within(time.Minute, func() bool { return l.log.count() > n+2000 }) {
		l.t.Fatalf("INCRs are not answered %s", what)
	}
}

// stop stops the clients (again: nothing).
func (l *plainLoad) stop() {
	l.once.Do(func() { close(l.quit) })
	l.wg.Wait()
}

// check stops the clients and checks every value they had.
func (l *plainLoad) check() {
	l.t.Helper()
	l.stop()
	incrs, _ := l.log.check(l.t)
	l.t.Logf("%d INCRs checked; errors %v", incrs, l.log.errs)
}
