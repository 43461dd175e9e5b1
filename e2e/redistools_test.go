package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/slots"
)

// toolsArgs make a member a Redis Cluster node with four server-ids
// (id-range 2; shard-range 9 keeps the layout's 21 bits), so that three
// servers all hold one and slots: none stands by.
var toolsArgs = []string{"--cluster-enabled", "yes", "--id-range", "2", "--shard-range", "9"}

// TestRedisToolsOverEtcd: Redis's own C tools against three idservers
// with cluster-enabled yes over etcd, every one holding slots.
// redis-benchmark --cluster, given one node, finds the three masters and
// runs INCR (-t incr, with and without -r) and the custom commands GETID
// and INCR of a {tag}ged random key against each of them, without an
// error: every node counts calls of the command, and they add up to -n.
// A custom key without {tag} goes to nodes that do not own it: the tool
// stops at the first -MOVED, its documented rule. redis-cli -c through
// one node INCRs keys of the three nodes' slots, following -MOVED, and
// counts exactly. A node killed -9 under redis-benchmark --cluster ends
// the run with an error (the tool's way, below). Once the dead node's
// slots are given to the others, redis-cli -c through a live node serves
// its keys again, each above its values before the kill and increasing;
// the other keys count on exactly.
// logSequencesIfFailed logs, if t failed, what each of ps logged of its
// sequences and slots.
func logSequencesIfFailed(t *testing.T, ps []*process) {
	if !t.Failed() {
		return
	}
	for i, p := range ps {
		for _, l := range p.Lines() {
			if strings.Contains(l, "sequences") || strings.Contains(l, "slot") {
				t.Logf("server %d (%s): %s", i, p.Addr, l)
			}
		}
	}
}

func TestRedisToolsOverEtcd(t *testing.T) {
	bench := needProgram(t, "redis-benchmark", "apt-get install redis-tools")
	cli := needProgram(t, "redis-cli", "apt-get install redis-tools")
	e := testetcd.Start(t)
	nodes := []*process{member(t, e, toolsArgs...), member(t, e, toolsArgs...), member(t, e, toolsArgs...)}
	defer logSequencesIfFailed(t, nodes)
	addrs := make([]string, len(nodes))
	for i, p := range nodes {
		waitHolding(t, p, 10*time.Second)
		addrs[i] = p.Addr
	}
	// Balanced, not only shared: the assignment moves slots in steps,
	// and a key of a slot still moving gets -TRYAGAIN, which
	// redis-benchmark counts as a failed request (1,669 of 3,000 once).
	await.True(t, 30*time.Second, "every node's CLUSTER SLOTS gives a third of the slots to each of the three", func() bool {
		return slices.IndexFunc(nodes, func(p *process) bool { return !balanced(slotOwners(p), addrs) }) < 0
	})
	awaitClusterOK(t, nodes)
	owners := slotOwners(nodes[0])
	host, port, _ := strings.Cut(nodes[0].Addr, ":")

	// redis-benchmark --cluster.
	benchmark := func(n int, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		args = append([]string{"--cluster", "-h", host, "-p", port, "-c", "6", "-n", strconv.Itoa(n), "-q"}, args...)
		out, err := exec.CommandContext(ctx, bench, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-benchmark %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// A node serves a slot once it has taken it, a moment after the map
	// gives it: warm up until INCRs of random keys are rejected nowhere
	// (-TRYAGAIN meanwhile; redis-benchmark counts them as requests).
	await.True(t, time.Minute, "every node serves its slots", func() bool {
		before := make([]calls, len(nodes))
		for i, p := range nodes {
			before[i] = cmdCalls(t, p, "incr")
		}
		benchmark(600, "-t", "incr", "-r", "100000")
		for i, p := range nodes {
			if cmdCalls(t, p, "incr").rejected != before[i].rejected {
				return false
			}
		}
		return true
	})
	for _, run := range []struct {
		cmd  string // the command whose calls it makes
		n    int    // requests: fewer of new keys, each a write to etcd
		args []string
	}{
		{"incr", 3000, []string{"-t", "incr"}},
		{"incr", 1000, []string{"-t", "incr", "-r", "1000"}},
		{"getid", 3000, []string{"GETID"}},
		{"incr", 1000, []string{"-r", "1000", "INCR", "bench:{tag}:__rand_int__"}},
	} {
		n := run.n
		before := make([]calls, len(nodes))
		for i, p := range nodes {
			before[i] = cmdCalls(t, p, run.cmd)
		}
		out := benchmark(n, run.args...)
		if !strings.Contains(out, "Cluster has 3 master nodes") || strings.Contains(out, "Error") {
			t.Fatalf("redis-benchmark %q:\n%s", run.args, out)
		}
		total := 0
		for i, p := range nodes {
			if !strings.Contains(out, " "+p.Addr+"\n") {
				t.Errorf("redis-benchmark %q does not list master %s:\n%s", run.args, p.Addr, out)
			}
			after := cmdCalls(t, p, run.cmd)
			if after.calls == before[i].calls || after.rejected != before[i].rejected || after.failed != before[i].failed {
				t.Errorf("redis-benchmark %q: %s %s calls %+v, before %+v", run.args, p.Addr, run.cmd, after, before[i])
			}
			total += after.calls - before[i].calls
		}
		if total != n {
			t.Errorf("redis-benchmark %q -n %d: %d %s calls on the nodes", run.args, n, total, run.cmd)
		}
		t.Logf("redis-benchmark --cluster %s: %s", strings.Join(run.args, " "), lastLine(out))
	}
	// A key without {tag} is not routed: the first -MOVED ends the run.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bench, "--cluster", "-h", host, "-p", port, "-c", "6", "-n", "3000", "-r", "1000", "-q",
		"INCR", "bench:__rand_int__").CombinedOutput()
	if err == nil || !regexp.MustCompile(`Error from server 127\.0\.0\.1:\d+: MOVED \d+ 127\.0\.0\.1:\d+`).Match(out) {
		t.Errorf("redis-benchmark --cluster with a key without {tag}: %v\n%s", err, out)
	}

	// redis-cli -c through node 0, keys of every node's slots.
	var keys []string // 8 of each node's
	byOwner := map[string][]string{}
	for i := 0; slices.ContainsFunc(addrs, func(a string) bool { return len(byOwner[a]) < 8 }); i++ {
		key := "cli:" + strconv.Itoa(i)
		if owner := owners[slots.Of([]byte(key))]; len(byOwner[owner]) < 8 {
			byOwner[owner] = append(byOwner[owner], key)
			keys = append(keys, key)
		}
	}
	incr := func(via *process, keys []string, times int) map[string][]int64 {
		t.Helper()
		var in strings.Builder
		for _, k := range keys {
			for range times {
				fmt.Fprintf(&in, "INCR %s\n", k)
			}
		}
		_, port, _ := strings.Cut(via.Addr, ":")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, cli, "-c", "-h", "127.0.0.1", "-p", port)
		cmd.Stdin = strings.NewReader(in.String())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli -c -p %s: %v\n%s", port, err, out)
		}
		var values []int64
		for line := range strings.Lines(string(out)) {
			if strings.HasPrefix(line, "-> Redirected to slot") {
				continue
			}
			v, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
			if err != nil {
				t.Fatalf("redis-cli -c -p %s: %q in\n%s", port, line, out)
			}
			values = append(values, v)
		}
		if len(values) != len(keys)*times {
			t.Fatalf("redis-cli -c -p %s: %d replies to %d INCRs:\n%s", port, len(values), len(keys)*times, out)
		}
		got := map[string][]int64{}
		for i, v := range values {
			got[keys[i/times]] = append(got[keys[i/times]], v)
		}
		if redirects := strings.Count(string(out), "-> Redirected"); redirects < 2 {
			t.Errorf("redis-cli -c -p %s was redirected %d times for keys of three nodes", port, redirects)
		}
		return got
	}
	for k, vs := range incr(nodes[0], keys, 3) {
		if !slices.Equal(vs, []int64{1, 2, 3}) {
			t.Errorf("redis-cli -c: INCR %s three times: %v, want 1 2 3", k, vs)
		}
	}
	// One-shot, as typed: a key of node 2, through node 0 (which would
	// answer -MOVED); one-shot, redis-cli does not print the redirection.
	oneShot := ""
	for i := 0; owners[slots.Of([]byte(oneShot))] != addrs[2]; i++ {
		oneShot = "one:" + strconv.Itoa(i)
	}
	for want := 1; want <= 2; want++ {
		out, err := exec.CommandContext(ctx, cli, "-c", "-h", host, "-p", port, "INCR", oneShot).CombinedOutput()
		if err != nil || string(out) != strconv.Itoa(want)+"\n" {
			t.Errorf("redis-cli -c -p %s INCR %s: %v\n%s", port, oneShot, err, out)
		}
	}

	// Node 1 killed -9 while redis-benchmark --cluster runs: the tool
	// stops ("Error: Server closed the connection", or "Connection reset
	// by peer"): it sends each of its
	// clients to one master for the whole run and reads CLUSTER SLOTS
	// again only on -MOVED, -ASK or -CLUSTERDOWN, so a master gone ends it
	// (its code, not idserver's: the same against Redis).
	ctx, cancel = context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	running := exec.CommandContext(ctx, bench, "--cluster", "-h", host, "-p", port, "-c", "6", "-n", "100000000", "-r", "1000", "-q", "-t", "incr")
	var runOut strings.Builder
	running.Stdout, running.Stderr = &runOut, &runOut
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	start := cmdCalls(t, nodes[1], "incr")
	await.True(t, 30*time.Second, "redis-benchmark runs on node 1", func() bool { return cmdCalls(t, nodes[1], "incr").calls > start.calls+100 })
	nodes[1].Kill9()
	killed := time.Now()
	err = running.Wait()
	if ctx.Err() != nil || err == nil {
		t.Errorf("redis-benchmark --cluster, a master killed: %v, context %v\n%s", err, ctx.Err(), runOut.String())
	}
	t.Logf("redis-benchmark --cluster, a master killed -9 under it: %v %v later: %q", err, time.Since(killed).Round(time.Microsecond), lastLine(runOut.String()))

	// Node 1's slots given to the others.
	live := []string{addrs[0], addrs[2]}
	await.True(t, 30*time.Second, "the live nodes' CLUSTER SLOTS give every slot to one of them", func() bool {
		return ownedBy(slotOwners(nodes[0]), live) && ownedBy(slotOwners(nodes[2]), live) &&
			slices.Equal(slotOwners(nodes[0]), slotOwners(nodes[2]))
	})
	t.Logf("node %s killed -9: its slots given to the others in %v", addrs[1], time.Since(killed).Round(time.Millisecond))
	got := incr(nodes[2], keys, 2)
	for _, k := range keys {
		vs := got[k]
		switch {
		case slices.Contains(byOwner[addrs[1]], k):
			if vs[0] <= 3 || vs[1] <= vs[0] {
				t.Errorf("redis-cli -c: INCR %s, its node killed, after 1 2 3: %v; want above 3 and increasing", k, vs)
			}
		case !slices.Equal(vs, []int64{4, 5}):
			t.Errorf("redis-cli -c: INCR %s, its node alive, after 1 2 3: %v; want 4 5", k, vs)
		}
	}
	t.Logf("the killed node's keys after 1 2 3: %v", func() (s []string) {
		for _, k := range byOwner[addrs[1]] {
			s = append(s, fmt.Sprint(got[k]))
		}
		return s
	}())
}

// slotOwners is the address of each slot's node in p's CLUSTER SLOTS, ""
// for none; nil if p does not answer.
func slotOwners(p *process) []string {
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	ranges, err := c.ClusterSlots(context.Background()).Result()
	if err != nil {
		return nil
	}
	owners := make([]string, slots.N)
	for _, r := range ranges {
		for s := r.Start; s <= r.End && s < slots.N; s++ {
			owners[s] = r.Nodes[0].Addr
		}
	}
	return owners
}

// ownedBy reports whether owners gives every slot to one of addrs and
// each of addrs some.
func ownedBy(owners, addrs []string) bool {
	if owners == nil || slices.ContainsFunc(owners, func(a string) bool { return !slices.Contains(addrs, a) }) {
		return false
	}
	return !slices.ContainsFunc(addrs, func(a string) bool { return !slices.Contains(owners, a) })
}

// balanced reports whether owners (by slot) gives each of addrs a share
// of the slots, as the assignment ends: at least slots.N / len(addrs).
func balanced(owners, addrs []string) bool {
	if !ownedBy(owners, addrs) {
		return false
	}
	for _, a := range addrs {
		if n := len(slices.DeleteFunc(slices.Clone(owners), func(o string) bool { return o != a })); n < len(owners)/len(addrs) {
			return false
		}
	}
	return true
}

// calls are a node's INFO commandstats figures of a command.
type calls struct{ calls, rejected, failed int }

// cmdCalls reads p's INFO commandstats line of cmd.
func cmdCalls(t *testing.T, p *process, cmd string) calls {
	t.Helper()
	line := processInfo(p, "commandstats", "cmdstat_"+cmd)
	var c calls
	for field := range strings.SplitSeq(line, ",") {
		name, v, _ := strings.Cut(field, "=")
		n, _ := strconv.Atoi(v)
		switch name {
		case "calls":
			c.calls = n
		case "rejected_calls":
			c.rejected = n
		case "failed_calls":
			c.failed = n
		}
	}
	return c
}

// lastLine is the last line of out with text: what follows the last
// carriage return or newline (redis-benchmark rewrites its progress
// line).
func lastLine(out string) string {
	s := strings.TrimSpace(out)
	return strings.TrimSpace(s[strings.LastIndexAny(s, "\r\n")+1:])
}
