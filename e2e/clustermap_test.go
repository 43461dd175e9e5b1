package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testbin"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/slotassign"
)

// redisPyServesAll is a redis-py RedisCluster made on the node at the
// port given first, as an application makes one: it INCRs every key of
// 40 (over both nodes' slots) until each is answered in one pass, for at
// most the seconds given second. It exits 2 if the client cannot be
// made, 1 if the keys are not all answered in time.
const redisPyServesAll = `
import sys, time
from redis.cluster import RedisCluster
port, deadline = int(sys.argv[1]), time.time() + float(sys.argv[2])
try:
    rc = RedisCluster(host="127.0.0.1", port=port)
except Exception as e:
    print("RedisCluster(): %r" % e)
    sys.exit(2)
last = None
while time.time() < deadline:
    try:
        for i in range(40):
            rc.incr("m%d" % i)
        print("every key answered")
        sys.exit(0)
    except Exception as e:
        last = e
    time.sleep(0.1)
print("after %s s, still: %r" % (sys.argv[2], last))
sys.exit(1)
`

// TestClusterClientMadeAtRestart: a redis-py RedisCluster made on a node
// of two as it starts (its first commands wait at the node's port, kept
// while it is down, and are the first it answers) serves every key once
// the cluster is whole, in each restart order of issue 41: one node
// killed -9 and started; both killed and one started, then the other;
// etcd stopped, a node killed -9 and started, then etcd started. Before
// it has read etcd a node answers CLUSTER SLOTS from the assignment it
// kept in dir (slotassign.KeptFile), every slot listed: with no map
// (*0), redis-py's constructor raised "All slots are not covered".
func TestClusterClientMadeAtRestart(t *testing.T) {
	if exec.Command(systemPython, "-c", "from redis.cluster import RedisCluster").Run() != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(systemPython + " has no redis-py RedisCluster (apt-get install python3-redis)")
		}
		t.Skip(systemPython + " has no redis-py RedisCluster (apt-get install python3-redis)")
	}
	for _, order := range []struct {
		name string
		// restart restarts c's nodes in its order, calling made where the
		// client is made (before the node it is made on starts).
		restart func(c *twoNodes, made func())
	}{
		{"one killed and started", func(c *twoNodes, made func()) {
			c.nodes[0].Kill9()
			made()
			c.start(0)
		}},
		{"both killed, one started, then the other", func(c *twoNodes, made func()) {
			c.nodes[0].Kill9()
			c.nodes[1].Kill9()
			made()
			c.start(0)
			c.start(1)
		}},
		{"etcd stopped, one killed and started, etcd started", func(c *twoNodes, made func()) {
			c.etcd.Kill()
			c.nodes[0].Kill9()
			made()
			c.start(0)
			time.Sleep(time.Second) // the outage under test: the client works on what the node kept
			c.etcd.Resume()
		}},
	} {
		t.Run(order.name, func(t *testing.T) {
			c := newTwoNodes(t)
			var done chan error
			var out, logged strings.Builder // what it says; what redis-py logs (each error it retried)
			order.restart(c, func() {
				cmd := exec.Command(systemPython, "-c", redisPyServesAll, c.sockets[0].Port, "90")
				cmd.Stdout, cmd.Stderr = &out, &logged
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done = make(chan error, 1)
				go func() { done <- cmd.Wait() }()
			})
			if err := <-done; err != nil {
				t.Fatalf("redis-py RedisCluster made as the node started: %v: %s\n%s", err, out.String(), tail(logged.String(), 2000))
			}
			t.Logf("redis-py: %s", strings.TrimSpace(out.String()))
		})
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// twoNodes is a Redis Cluster of two nodes over etcd, each on a port and
// a dir of its own, kept across restarts.
type twoNodes struct {
	t       *testing.T
	etcd    *testetcd.Server
	sockets [2]testbin.Socket
	dirs    [2]string
	nodes   [2]*process
}

// newTwoNodes starts the cluster and waits until it serves every key and
// each node has kept the assignment.
func newTwoNodes(t *testing.T) *twoNodes {
	c := &twoNodes{t: t, etcd: testetcd.Start(t)}
	for i := range c.nodes {
		c.sockets[i], c.dirs[i] = testbin.Listen(t, "port"), t.TempDir()
		c.start(i)
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.nodes[0].Addr}, ReadTimeout: time.Second})
	defer rc.Close()
	await.True(t, time.Minute, "both nodes serve their slots", func() bool {
		for i := range 40 {
			if rc.Incr(context.Background(), fmt.Sprintf("m%d", i)).Err() != nil {
				return false
			}
		}
		return true
	})
	for _, dir := range c.dirs {
		if _, err := os.Stat(filepath.Join(dir, slotassign.KeptFile)); err != nil {
			t.Fatalf("the assignment is not kept: %v", err)
		}
	}
	return c
}

// start starts node i on its port and dir.
func (c *twoNodes) start(i int) {
	c.nodes[i] = memberAt(c.t, c.etcd, c.sockets[i], "--dir", c.dirs[i], "--cluster-enabled", "yes")
}
