package clients

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/redisinfo"
)

// TestRedisBenchmark runs redis-benchmark, small and pipelined, and
// wants a requests-per-second figure for each test it names, no error
// replies, and exactly as many IDs issued as it asked for.
func TestRedisBenchmark(t *testing.T) {
	need(t, "redis-benchmark", "apt-get install redis-tools")
	addr := startServer(t)
	for _, c := range []struct {
		name     string
		requests int64
		command  []string
		tests    []string // as redis-benchmark names them in its report
		ids      int64    // IDs each request gets
	}{
		{"GETID", 20000, []string{"GETID"}, []string{"GETID"}, 1},
		// 2,000 requests: their 200,000 IDs stay well inside the default
		// max-lead-ms, which 20,000 (2 million IDs) would come close to.
		{"MGETID", 2000, []string{"MGETID", "100"}, []string{"MGETID 100"}, 100},
		{"ping", 20000, []string{"-t", "ping"}, []string{"PING_INLINE", "PING_MBULK"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := idsIssued(t, addr)
			args := append(cliConn(t, addr), "-c", "10", "-P", "16", "-q", "-n", strconv.FormatInt(c.requests, 10))
			out, code := runClientTool(t, "", "redis-benchmark", append(args, c.command...)...)
			if err := benchReport(out, c.tests); err != nil || code != 0 {
				t.Fatalf("redis-benchmark %q: exit %d, %v:\n%s", c.command, code, err, out)
			}
			if got := idsIssued(t, addr) - before; got != c.requests*c.ids {
				t.Fatalf("redis-benchmark %q issued %d IDs, want %d", c.command, got, c.requests*c.ids)
			}
		})
	}
}

// TestRedisBenchmarkIncr runs redis-benchmark's INCR, which counts in
// sequences: -t incr INCRs one key, counter:__rand_int__ (the name stays
// as it is without -r), which must then hold the number of requests;
// INCR key:__rand_int__ with -r spreads them over random keys, whose
// values, summed over SCAN, must make the same number: no INCR lost or
// counted twice.
func TestRedisBenchmarkIncr(t *testing.T) {
	need(t, "redis-benchmark", "apt-get install redis-tools")
	addr := startServer(t)
	ctx := testContext(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	const requests = 20000
	bench := func(report string, command ...string) {
		t.Helper()
		args := append(cliConn(t, addr), "-c", "10", "-P", "16", "-q", "-n", strconv.Itoa(requests))
		out, code := runClientTool(t, "", "redis-benchmark", append(args, command...)...)
		if err := benchReport(out, []string{report}); err != nil || code != 0 {
			t.Fatalf("redis-benchmark %q: exit %d, %v:\n%s", command, code, err, out)
		}
	}

	bench("INCR", "-t", "incr")
	if n, err := c.Get(ctx, "counter:__rand_int__").Int64(); err != nil || n != requests {
		t.Fatalf("GET counter:__rand_int__ after -t incr = %d, %v; want %d", n, err, requests)
	}

	bench("INCR key:__rand_int__", "-r", "100000", "INCR", "key:__rand_int__")
	var keys []string
	for iter := c.Scan(ctx, 0, "key:*", 1000).Iterator(); iter.Next(ctx); {
		keys = append(keys, iter.Val())
	}
	var sum int64
	for batch := range slices.Chunk(keys, 1000) {
		values, err := c.MGet(ctx, batch...).Result()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range values {
			n, err := strconv.ParseInt(fmt.Sprint(v), 10, 64)
			if err != nil || n < 1 {
				t.Fatalf("GET %s = %#v, want a count", batch[i], v)
			}
			sum += n
		}
	}
	if sum != requests {
		t.Errorf("the %d keys key:* sum to %d, want %d", len(keys), sum, requests)
	}
	slices.Sort(keys)
	if distinct := len(slices.Compact(slices.Clone(keys))); distinct != len(keys) {
		t.Errorf("SCAN gave %d keys key:*, only %d of them distinct", len(keys), distinct)
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != int64(len(keys))+1 {
		t.Errorf("DBSIZE = %d, %v; want the %d keys key:* and counter:__rand_int__", n, err, len(keys))
	}
}

// benchReport wants a positive requests-per-second figure for each test
// and no "Error from server" (redis-benchmark's report of an error
// reply). -q rewrites a progress line with CRs, so a result may follow
// progress text on its line.
func benchReport(out string, tests []string) error {
	if strings.Contains(out, "Error") {
		return fmt.Errorf("an error reported")
	}
	for _, name := range tests {
		m := regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(name) + `: ([0-9.]+) requests per second`).FindStringSubmatch(out)
		if m == nil {
			return fmt.Errorf("no requests-per-second figure for %s", name)
		}
		if rps, err := strconv.ParseFloat(m[2], 64); err != nil || rps <= 0 {
			return fmt.Errorf("%s: %q requests per second", name, m[2])
		}
	}
	return nil
}

// idsIssued reads ids_issued from INFO idgen: how many IDs the server has
// handed out.
func idsIssued(t *testing.T, addr string) int64 {
	t.Helper()
	out, code := redisCLI(t, addr, "", "INFO", "idgen")
	if v, ok := redisinfo.Get(out, "ids_issued"); ok && code == 0 {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			return n
		}
	}
	t.Fatalf("INFO idgen: exit %d, no ids_issued:\n%s", code, out)
	return 0
}
