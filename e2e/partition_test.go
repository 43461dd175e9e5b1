package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/netns"
	"github.com/idserver/idserver/internal/testbin"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/internal/testseed"
)

// The partition tests run etcd and three servers each in a network
// namespace of its own (internal/netns: as root, which CI is), the
// clients in the test process, and cut the network between them with
// blackhole routes: a real partition, where packets are dropped and
// established connections hang, unlike a process paused or killed.

// partitionKeys is how many keys (k0 ..) the partition tests' clients INCR.
const partitionKeys = 30

// partitionServers are the namespaces of the servers.
var partitionServers = []string{"s0", "s1", "s2"}

// A partition is a network of etcd and three servers in namespaces.
type partition struct {
	net     *netns.Network
	etcd    *testetcd.Server
	servers []*process
}

// newPartition starts etcd and three servers with cluster-enabled
// cluster, each in its own namespace.
func newPartition(t *testing.T, cluster string) *partition {
	t.Helper()
	n := netns.New(t, append([]string{"etcd"}, partitionServers...)...)
	p := &partition{net: n, etcd: testetcd.StartVia(t, n.Addr("etcd"), n.Prefix("etcd")...)}
	for _, name := range partitionServers {
		addr := n.Addr(name)
		args := append(n.Prefix(name), binary, "--dir", t.TempDir(), "--bind", addr, "--port", "6551",
			"--protected-mode", "no", // the clients come from the bridge's address
			"--cluster-enabled", cluster, "--cluster-announce-ip", addr,
			"--etcd-endpoints", p.etcd.Endpoint, "--etcd-lease-ttl", "2", "--etcd-dial-timeout", "1",
			"--id-range", "2", "--shard-range", "9") // four ids: every server holds one
		p.servers = append(p.servers, testbin.Start(t, nil, nil, args[0], args[1:]...))
	}
	return p
}

// A partitionFault is one kind of cut: do cuts the network around server
// i (or every server) for about d and heals it.
type partitionFault struct {
	name   string
	struck bool // one server, and not etcd from all
	do     func(p *partition, i int, d time.Duration)
}

var partitionFaults = []partitionFault{
	{"a server cut from etcd, its clients still reaching it", true, func(p *partition, i int, d time.Duration) {
		p.net.Split(partitionServers[i], "etcd")
		time.Sleep(d) // the thing under test: a partition past the lease
		p.net.Join(partitionServers[i], "etcd")
	}},
	{"a server cut from its clients, still reaching etcd", true, func(p *partition, i int, d time.Duration) {
		p.net.Split(partitionServers[i], "") // the clients are the test's
		time.Sleep(d)                        // the thing under test: a partition
		p.net.Join(partitionServers[i], "")
	}},
	{"etcd cut from every server", false, func(p *partition, _ int, d time.Duration) {
		for _, name := range partitionServers {
			p.net.Split(name, "etcd")
		}
		time.Sleep(d) // the thing under test: a partition
		for _, name := range partitionServers {
			p.net.Join(name, "etcd")
		}
	}},
}

// TestPartitionClusterClients: go-redis cluster clients INCR 30 keys and
// ask IDs of three cluster-enabled servers over etcd, each server and
// etcd in a network namespace of its own, through three rounds of, in
// a seeded order: a server cut from etcd past its lease while its
// clients reach it, a server cut from its clients while it reaches etcd,
// and etcd cut from every server for up to 1.5 leases. After each, every
// key is answered again; at the end, per key, no value twice and each
// above every value whose reply came before it was sent, and IDs all
// different.
func TestPartitionClusterClients(t *testing.T) {
	p := newPartition(t, "yes")
	runPartitions(t, p, func(i int) clusterCalls {
		calls, closeClient := goRedisCluster(p.servers[i%len(p.servers)].Addr)
		t.Cleanup(closeClient)
		return calls
	})
}

// TestPartitionPlainClients is TestPartitionClusterClients with
// cluster-enabled no and plain go-redis clients, two on each server's
// address: the per-key order every client must get (issue 41 item 5)
// through the same partitions.
func TestPartitionPlainClients(t *testing.T) {
	p := newPartition(t, "no")
	runPartitions(t, p, func(i int) clusterCalls {
		c := redis.NewClient(&redis.Options{Addr: p.servers[i%len(p.servers)].Addr, ReadTimeout: time.Second, WriteTimeout: time.Second, DialTimeout: time.Second})
		t.Cleanup(func() { c.Close() })
		return clusterCalls{
			incr: func(ctx context.Context, key string) (int64, error) { return c.Incr(ctx, key).Result() },
			ids: func(ctx context.Context, n int) ([]int64, error) {
				if n == 1 {
					id, err := c.Do(ctx, "GETID").Int64()
					return []int64{id}, err
				}
				return c.Do(ctx, "MGETID", n).Int64Slice()
			},
		}
	})
}

// runPartitions runs six clients made by client (i: 0 .. 5) against p
// through the faults, and checks and reports their replies.
func runPartitions(t *testing.T, p *partition, client func(i int) clusterCalls) {
	seed := testseed.Get(t)
	rnd := rand.New(rand.NewPCG(seed, 41))
	log, stop := newOpLog(), make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for c := range 6 {
		calls := client(c)
		wg.Go(func() {
			clusterLoad(fmt.Sprintf("client#%d", c), calls, log, rand.New(rand.NewPCG(seed, uint64(c))), partitionKeys, stop)
		})
	}
	begin := time.Now()
	everyKey(t, p, log, begin, "at first")
	var faults []fault
	for round := range 3 {
		order := slices.Clone(partitionFaults)
		rnd.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, pf := range order {
			f, i, d := fault{name: pf.name}, -1, time.Duration(500+rnd.IntN(2500))*time.Millisecond
			if pf.struck {
				i, d = rnd.IntN(len(p.servers)), 2*leaseTTL+time.Duration(rnd.IntN(2000))*time.Millisecond
				f.node = p.servers[i].Addr
				f.keys = keysServedBy(p.servers[(i+1)%len(p.servers)], f.node, partitionKeys)
			}
			f.begin = time.Now()
			pf.do(p, i, d)
			f.end = time.Now()
			faults = append(faults, f)
			t.Logf("round %d: %s %s from %v to %v", round, f.name, f.node,
				f.begin.Sub(begin).Round(time.Millisecond), f.end.Sub(begin).Round(time.Millisecond))
			everyKey(t, p, log, f.end, "after "+f.name)
		}
	}
	settled := time.Now()
	await.True(t, 30*time.Second, "every client has an INCR answered after the faults", func() bool {
		return log.clientsAnsweredSince(settled) == 6
	})
	close(stop)
	wg.Wait()
	stop = make(chan struct{}) // for the deferred close
	incrs, ids := log.check(t)
	t.Logf("%d INCRs checked, %d IDs, in %v", incrs, ids, time.Since(begin).Round(time.Millisecond))
	log.report(t, faults, settled)
}

// everyKey waits until every key has an INCR answered that was sent
// after since, and fails the test, saying what the servers say, if one
// has none within a minute.
func everyKey(t *testing.T, p *partition, log *opLog, since time.Time, what string) {
	t.Helper()
	var missing []string
	if await.Within(time.Minute, func() bool {
		missing = log.keysUnansweredSince(since, partitionKeys)
		return len(missing) == 0
	}) {
		t.Logf("%s: every key answered within %v", what, time.Since(since).Round(time.Millisecond))
		return
	}
	for _, s := range p.servers {
		t.Logf("%s: %s | %s | %s", s.Addr, rawCmd(s, "CLUSTER", "SLOTS"), clusterInfo(s, "cluster_state"), clusterInfo(s, "held_server_id"))
	}
	log.mu.Lock()
	t.Logf("errors: %v", log.errs)
	log.mu.Unlock()
	t.Fatalf("%s: keys %v had no INCR answered of those sent in the minute after", what, missing)
}

// keysUnansweredSince is the keys of k0 .. k{keys-1} without an INCR
// answered that was sent after since.
func (l *opLog) keysUnansweredSince(since time.Time, keys int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	answered := map[string]bool{}
	for _, o := range l.ops {
		if o.key != "" && o.sent > since.UnixNano() {
			answered[o.key] = true
		}
	}
	var missing []string
	for k := range keys {
		if key := fmt.Sprintf("k%d", k); !answered[key] {
			missing = append(missing, key)
		}
	}
	return missing
}

// clientsAnsweredSince is how many clients had an INCR answered that was
// sent after since.
func (l *opLog) clientsAnsweredSince(since time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	clients := map[string]bool{}
	for _, o := range l.ops {
		if o.key != "" && o.sent > since.UnixNano() {
			clients[o.client] = true
		}
	}
	return len(clients)
}
