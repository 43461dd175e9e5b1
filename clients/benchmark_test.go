package clients

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

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
