package respserver

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/testseed"
)

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern string
		yes, no []string
	}{
		{"*", []string{"", "port", "a*b"}, nil},
		{"port", []string{"port", "PORT"}, []string{"por", "ports", ""}},
		{"p?rt", []string{"port", "purt"}, []string{"prt", "poort"}},
		{"*-ms", []string{"max-lead-ms", "-ms"}, []string{"max-lead-m", "ms"}},
		{"max*", []string{"max-wait-ms", "maxclients", "max"}, []string{"ma", "mgetid-max"}},
		{"*a*b*", []string{"ab", "xaxbx", "aab"}, []string{"ba", "a"}},
		{"[pb]ort", []string{"port", "bort"}, []string{"sort", "ort"}},
		{"[^pb]ort", []string{"sort"}, []string{"port", "bort", "ort"}},
		{"[a-c]x", []string{"ax", "bx", "cx"}, []string{"dx"}},
		{"[c-a]x", []string{"bx"}, []string{"dx"}}, // a range either way round
		{"[A-C]x", []string{"bx", "BX"}, []string{"dx"}},
		{`\*`, []string{"*"}, []string{"a"}},
		{`[\]]`, []string{"]"}, []string{`\`}},
		{`a\`, []string{`a\`}, []string{"a"}},            // a trailing backslash is itself
		{"[abc", []string{"a", "c"}, []string{"d", "["}}, // an unclosed set ends with the pattern
		{"[", nil, []string{"", "[", "a"}},
		{"[^", []string{"x"}, []string{""}},
		{"a**?**b", []string{"axb", "axxb"}, []string{"ab"}},
	}
	for _, tt := range tests {
		g := compileGlob([]byte(tt.pattern), 64)
		for _, s := range tt.yes {
			if !g.match(s) {
				t.Errorf("%q does not match %q", tt.pattern, s)
			}
		}
		for _, s := range tt.no {
			if g.match(s) {
				t.Errorf("%q matches %q", tt.pattern, s)
			}
		}
	}
}

// TestGlobLikeRedis compares the matcher with redis-server's own, through
// KEYS, on random patterns over an alphabet rich in glob syntax (lower
// case only: KEYS matches case-sensitively, CONFIG GET does not).
func TestGlobLikeRedis(t *testing.T) {
	rdb := startRedis(t)
	ctx := context.Background()
	keys := []string{"", "a", "b", "ab", "ba", "abc", "a-c", "a]b", `a\b`, "a*b", "a?b", "[ab]", "^a", "aaab", "abab", "port", "max-lead-ms"}
	for _, k := range keys[1:] {
		if err := rdb.Set(ctx, k, 1, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte(`ab*?[]^-\c`)
	for range 3000 {
		p := make([]byte, r.IntN(8)+1)
		for i := range p {
			p[i] = alphabet[r.IntN(len(alphabet))]
		}
		want, err := rdb.Keys(ctx, string(p)).Result()
		if err != nil {
			t.Fatal(err)
		}
		g := compileGlob(p, 64)
		var got []string
		for _, k := range keys[1:] {
			if g.match(k) {
				got = append(got, k)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("pattern %q matches %q here, %q in Redis", p, got, want)
		}
	}
}

// startRedis runs redis-server on a unix socket (startRedisSocket) and
// returns a client.
func startRedis(t *testing.T) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: startRedisSocket(t)})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// hostileGlob is the pattern that made the backtracking matcher take
// about 100 ms per key: ('*?' * 24) + '*n'.
var hostileGlob = strings.Repeat("*?", 24) + "*n"

// TestConfigGetHostilePatterns: 200 pipelined CONFIG GETs of the
// backtracking matcher's worst pattern, and a few of 64 KiB, cost the
// server little CPU, and another client is answered while they run.
func TestConfigGetHostilePatterns(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{Config: [][2]string{{"maxclients", "10000"}, {"port", "6551"}}})
	hostile, other := dialRaw(t, addr), dialRaw(t, addr)
	var batch strings.Builder
	for range 200 {
		batch.WriteString(encode("CONFIG", "GET", hostileGlob))
	}
	for _, p := range []string{strings.Repeat("*?", 32<<10-1), "*" + strings.Repeat("a", 64<<10-1), strings.Repeat("*[a-z]", 10<<10)} {
		batch.WriteString(encode("CONFIG", "GET", p))
	}
	cpu0 := cpuTime(t)
	hostile.send(batch.String())
	begin := time.Now()
	if v := other.do("PING"); v != "PONG" {
		t.Fatalf("other client: %v", v)
	}
	ping := time.Since(begin)
	for i := range 203 {
		v, ok := hostile.reply().([]any)
		if want := i < 200; !ok || want != (len(v) == 0) && i < 200 {
			t.Fatalf("reply %d: %v", i, v)
		}
	}
	// The backtracking matcher took about 19 s of CPU for the 200 alone;
	// this one takes a few milliseconds (generous for -race on a busy
	// machine).
	cpu := cpuTime(t) - cpu0
	t.Logf("200 backtracking globs and 3 of 64 KiB, pipelined: %v of CPU in all; a PING meanwhile took %v", cpu, ping)
	if cpu > 500*time.Millisecond {
		t.Fatalf("hostile CONFIG GETs cost %v of CPU", cpu)
	}
	// And the matcher still matches.
	if v := other.do("CONFIG", "GET", "*x*c*").([]any); len(v) != 4 || v[0] != "maxclients" || v[2] != "maxmemory-policy" {
		t.Fatalf("CONFIG GET *x*c*: %v", v)
	}
}

// TestGlobCostBounded holds generated hostile patterns, up to the 64 KiB
// a bulk may have, to the matcher's bound: compiling costs two steps per
// byte of the pattern and 256 per token kept (at most 2 x the longest key
// + 2: past that the pattern needs more bytes than any key has), and each
// key a step per byte and word of state. No shape of pattern costs more
// per byte than a short one: a set's range is not a loop over its bytes,
// and no star backtracks.
func TestGlobCostBounded(t *testing.T) {
	keys := configKeysForBench()
	maxLen, keyBytes := 0, 0
	for _, k := range keys {
		maxLen, keyBytes = max(maxLen, len(k)), keyBytes+len(k)
	}
	maxToks := 2*maxLen + 3
	words := maxToks/64 + 1
	seed := testseed.Get(t)
	r := rand.New(rand.NewPCG(seed, 0))
	pieces := []string{"*", "?", "[", "]", "^", "-", `\`, "a", "p", "-ms", "[\x00-\xff", "[^a-z]", "[a-", "*?", "*[x", "\\*"}
	worst := 0.0
	for n := range 400 {
		size := 1 << r.IntN(17) // 1 B to 64 KiB
		var b []byte
		for len(b) < size {
			b = append(b, pieces[r.IntN(len(pieces))]...)
		}
		if n%4 == 0 { // one piece repeated, as an attacker would
			b = bytes.Repeat([]byte(pieces[r.IntN(len(pieces))]), size)
		}
		b = b[:min(len(b), 64<<10)]
		g := compileGlob(b, maxLen)
		for _, k := range keys {
			g.match(k)
		}
		bound := 2*len(b) + 256*maxToks + keyBytes*words
		if g.cost > bound {
			t.Fatalf("pattern %d (%d bytes, starting %q) cost %d steps, over its bound %d", n, len(b), b[:min(len(b), 40)], g.cost, bound)
		}
		worst = max(worst, float64(g.cost)/float64(bound))
	}
	t.Logf("the costliest pattern used %.0f%% of its bound", 100*worst)
}

// BenchmarkConfigGetGlob is the cost of one CONFIG GET pattern against
// every configuration key, compiled and matched.
func BenchmarkConfigGetGlob(b *testing.B) {
	keys := configKeysForBench()
	maxLen := len(slices.MaxFunc(keys, func(a, b string) int { return len(a) - len(b) }))
	for name, p := range map[string]string{
		"hostile":     hostileGlob,
		"port":        "port",
		"64KiB_stars": strings.Repeat("*?", 32<<10),
		"64KiB_tail":  "*" + strings.Repeat("a", 64<<10-1),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				g := compileGlob([]byte(p), maxLen)
				for _, k := range keys {
					g.match(k)
				}
			}
		})
	}
}

// configKeysForBench are the keys CONFIG GET matches against, as many as
// idserver has.
func configKeysForBench() []string {
	return []string{"bind", "port", "server-id", "id-range", "shard-range", "random-range", "epoch", "max-lead-ms",
		"max-wait-ms", "gomaxprocs", "mgetid-max", "maxclients", "timeout", "proto-max-bulk-len", "proto-max-multibulk-len",
		"requirepass", "dir", "state-file", "reserve-ms", "enable-debug-command", "debug-clock-offset-ms", "loglevel",
		"metrics-addr", "client-output-buffer-limit", "databases", "save", "appendonly", "maxmemory", "maxmemory-policy", "cluster-enabled", "notify-keyspace-events", "daemonize", "logfile"}
}
