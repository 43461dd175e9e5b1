package clients

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/internal/rediscluster"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// The cluster clients, on their defaults, given the address of one
// server with cluster-enabled yes (a cluster of one node owning every
// slot): each learns the topology from it, sends GETID and MGETID to a
// node of its choice and INCR and GET of 100 keys to their slots' owner.

// startClusterServer runs idserver with cluster-enabled yes.
func startClusterServer(t *testing.T) string {
	return startServer(t, "--cluster-enabled", "yes")
}

// checkCluster runs the checks through do, a cluster client's way of
// sending one command.
func checkCluster(t *testing.T, name string, do func(ctx context.Context, args ...any) (any, error)) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	id, err := do(ctx, "GETID")
	if err != nil {
		t.Fatalf("%s: GETID: %v", name, err)
	}
	if v, ok := id.(int64); !ok || v <= 0 {
		t.Fatalf("%s: GETID %#v, want a positive integer", name, id)
	}
	ids, err := do(ctx, "MGETID", "3")
	if err != nil || len(ids.([]any)) != 3 {
		t.Fatalf("%s: MGETID 3: %#v, %v", name, ids, err)
	}
	prefix := fmt.Sprintf("%s:%d:", name, time.Now().UnixNano())
	for i := range 100 {
		key := prefix + strconv.Itoa(i)
		for want := int64(1); want <= 2; want++ {
			if got, err := do(ctx, "INCR", key); err != nil || got != want {
				t.Fatalf("%s: INCR %s: %#v, %v; want %d", name, key, got, err, want)
			}
		}
		if got, err := do(ctx, "GET", key); err != nil || fmt.Sprint(got) != "2" {
			t.Fatalf("%s: GET %s: %#v, %v", name, key, got, err)
		}
	}
}

func TestGoRedisCluster(t *testing.T) {
	addr := startClusterServer(t)
	for _, protocol := range []int{2, 3} {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, Protocol: protocol})
		t.Cleanup(func() { c.Close() })
		checkCluster(t, fmt.Sprintf("go-redis-resp%d", protocol), func(ctx context.Context, args ...any) (any, error) {
			return c.Do(ctx, args...).Result()
		})
		// The keys went where the client's own slot map sent them.
		if n, err := c.DBSize(t.Context()).Result(); err != nil || n < 100 {
			t.Errorf("DBSIZE over the cluster: %d, %v", n, err)
		}
	}
}

func TestRueidisCluster(t *testing.T) {
	addr := startClusterServer(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// rueidis chooses its cluster client when CLUSTER SLOTS answers; a
	// single client's Nodes has one entry either way, so ask its mode.
	if mode := c.Mode(); mode != rueidis.ClientModeCluster {
		t.Fatalf("rueidis mode %v, want cluster", mode)
	}
	checkCluster(t, "rueidis", func(ctx context.Context, args ...any) (any, error) {
		strs := make([]string, len(args))
		for i, a := range args {
			strs[i] = fmt.Sprint(a)
		}
		return rueidisValue(c.Do(ctx, c.B().Arbitrary(strs[0]).Keys(keysOf(strs)...).Args(argsOf(strs)...).Build()))
	})
}

// keysOf and argsOf split a command for rueidis's builder: INCR and GET
// take a key, which routes them; GETID and MGETID none.
func keysOf(args []string) []string {
	if args[0] == "INCR" || args[0] == "GET" {
		return args[1:2]
	}
	return nil
}

func argsOf(args []string) []string {
	if args[0] == "INCR" || args[0] == "GET" {
		return args[2:]
	}
	return args[1:]
}

// rueidisValue is a rueidis reply as int64, string or []any.
func rueidisValue(r rueidis.RedisResult) (any, error) {
	if n, err := r.AsInt64(); err == nil {
		return n, nil
	}
	if s, err := r.ToString(); err == nil {
		return s, nil
	}
	arr, err := r.ToArray()
	if err != nil {
		return nil, err
	}
	out := make([]any, len(arr))
	for i, m := range arr {
		out[i], _ = m.ToString()
	}
	return out, nil
}

// TestRedisCLICluster: redis-cli -c follows the node's answers; with
// every slot on one node it never has to move.
func TestRedisCLICluster(t *testing.T) {
	cli := need(t, "redis-cli", "apt-get install redis-tools")
	addr := startClusterServer(t)
	host, port, _ := strings.Cut(addr, ":")
	run := func(args ...string) string {
		out, err := exec.CommandContext(t.Context(), cli, append([]string{"-c", "-h", host, "-p", port}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli -c %q: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if out := run("GETID"); !regexp.MustCompile(`^\(integer\) [0-9]+$|^[0-9]+$`).MatchString(out) {
		t.Errorf("GETID: %q", out)
	}
	if out := run("MGETID", "3"); len(strings.Fields(out)) != 3 {
		t.Errorf("MGETID 3: %q", out)
	}
	for i := range 100 {
		key := "cli:" + strconv.Itoa(i)
		run("INCR", key)
		if out := run("INCR", key); !strings.HasSuffix(out, "2") {
			t.Fatalf("INCR %s: %q", key, out)
		}
		if out := run("GET", key); out != "2" && out != `"2"` {
			t.Fatalf("GET %s: %q", key, out)
		}
	}
	if out := run("CLUSTER", "KEYSLOT", "{user1000}.following"); !strings.HasSuffix(out, "3443") {
		t.Errorf("CLUSTER KEYSLOT: %q", out)
	}
}

// TestRedisBenchmarkCluster: redis-benchmark --cluster reads CLUSTER
// NODES and refuses a cluster of one node ("Invalid cluster: 1
// node(s).", its own rule), from idserver as from redis-server: it
// needs the several nodes of the etcd cluster.
func TestRedisBenchmarkCluster(t *testing.T) {
	bench := need(t, "redis-benchmark", "apt-get install redis-tools")
	run := func(addr string) string {
		host, port, _ := strings.Cut(addr, ":")
		out, _ := exec.CommandContext(t.Context(), bench, "--cluster", "-h", host, "-p", port, "-n", "100", "-q", "-t", "incr").CombinedOutput()
		return string(out)
	}
	got, want := run(startClusterServer(t)), run(rediscluster.Start(t))
	if got != want || !strings.Contains(got, "1 node(s)") {
		t.Errorf("redis-benchmark --cluster: %q from idserver, %q from redis-server", got, want)
	}
}

// TestRedisPyCluster runs clients/python/cluster.py: redis-py 4.3.4's
// RedisCluster.
func TestRedisPyCluster(t *testing.T) {
	needRedisPy(t)
	addr := startClusterServer(t)
	out, err := exec.CommandContext(t.Context(), systemPython, "python/cluster.py", addr).CombinedOutput()
	if err != nil {
		t.Fatalf("cluster.py: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}

// TestIORedisCluster and TestNodeRedisCluster run clients/node/cluster.js:
// ioredis 6's Cluster and node-redis 6's createCluster.
func TestIORedisCluster(t *testing.T)   { runNodeCluster(t, "ioredis") }
func TestNodeRedisCluster(t *testing.T) { runNodeCluster(t, "redis") }

func runNodeCluster(t *testing.T, lib string) {
	node := need(t, "node", "apt-get install nodejs npm")
	needNodeModules(t, lib)
	addr := startClusterServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "cluster.js", lib, addr)
	cmd.Dir = "node"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node cluster.js %s %s: %v\n%s", lib, addr, err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}

// TestGoRedisClusterTips: go-redis v9 routes by the COMMAND tips only
// when told to (its default resolver knows module commands alone); with
// its dynamic resolver, MGET of keys of several slots (tip
// request_policy:multi_shard) is split by slot and answered in order,
// where the node itself says CROSSSLOT, and DBSIZE (all_shards,
// agg_sum) is summed over the nodes.
func TestGoRedisClusterTips(t *testing.T) {
	addr := startClusterServer(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
	t.Cleanup(func() { c.Close() })
	ctx := t.Context()
	keys := []any{"tips:a", "tips:b", "tips:c", "tips:d"}
	for i, k := range keys {
		if err := c.IncrBy(ctx, k.(string), int64(i+1)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	mget := append([]any{"MGET"}, keys...)
	if err := c.Do(ctx, mget...).Err(); err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Fatalf("MGET across slots, default resolver: %v; want the node's CROSSSLOT", err)
	}
	c.SetCommandInfoResolver(c.NewDynamicResolver())
	got, err := c.Do(ctx, mget...).Result()
	if fmt.Sprint(got) != "[1 2 3 4]" || err != nil {
		t.Fatalf("MGET across slots, by the tips: %v, %v; want [1 2 3 4]", got, err)
	}
	if n, err := c.Do(ctx, "DBSIZE").Int64(); n != 4 || err != nil {
		t.Errorf("DBSIZE by the tips: %d, %v", n, err)
	}
}
