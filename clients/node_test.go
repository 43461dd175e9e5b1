package clients

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/idserver/idserver/internal/testseed"
	"github.com/idserver/idserver/publicid"
)

// The Node tests run one script per library family, with the npm alias
// (clients/node/package.json) of the version to check; every version runs
// the same checks, clients/node/checks.js, on its defaults. Each turns
// integer replies into JavaScript Numbers, so every GETID must arrive as a
// string (getid-reply auto): from ioredis 5.8+, node-redis 4.6.11+ and GLIDE
// because they send CLIENT SETINFO LIB-NAME, from the others because they
// begin with the bare lowercase info ready check. Sequences' INCRs stay
// integer replies, as from Redis: exact as Numbers below 2^53, which a
// key passes only if a user SETs it there; the check "INCR above 2^53"
// logs what each library then returns, and with its option for exact
// integers (ioredis stringNumbers, node-redis 3 string_numbers, node-redis
// 5+ typeMapping; node-redis 4 and GLIDE have none).

// TestIORedis runs clients/node/ioredis.js, ioredis 6 on its defaults.
func TestIORedis(t *testing.T) { runNode(t, "ioredis.js", "ioredis") }

// TestIORedis4 runs ioredis 4.31, which names no library and begins with
// its info ready check.
func TestIORedis4(t *testing.T) { runNode(t, "ioredis.js", "ioredis4") }

// TestIORedis53 runs ioredis 5.3 (5.3.2), which names no library either.
func TestIORedis53(t *testing.T) { runNode(t, "ioredis.js", "ioredis53") }

// TestIORedis57 runs ioredis 5.7 (5.7.0), the last before CLIENT SETINFO
// came in 5.8.
func TestIORedis57(t *testing.T) { runNode(t, "ioredis.js", "ioredis57") }

// TestIOValkey04 runs iovalkey 0.4, Valkey's fork of ioredis, which names
// no library either.
func TestIOValkey04(t *testing.T) { runNode(t, "ioredis.js", "iovalkey04") }

// TestNodeRedis runs clients/node/node-redis.js, node-redis 6 (npm
// package redis) on its defaults.
func TestNodeRedis(t *testing.T) { runNode(t, "node-redis.js", "redis") }

// TestNodeRedis3 runs node-redis 3.1 (3.1.2), callback-based, which names
// no library and begins with its info ready check.
func TestNodeRedis3(t *testing.T) { runNode(t, "node-redis.js", "redis3") }

// TestNodeRedis4 runs node-redis 4.7 (4.7.1), which sends CLIENT SETINFO.
func TestNodeRedis4(t *testing.T) { runNode(t, "node-redis.js", "redis4") }

// TestValkeyGlide runs clients/node/glide.js, Valkey GLIDE 2.5.2, whose
// native core the lock file has for Linux (glibc and musl) and macOS, x64
// and arm64. It connects only once INFO REPLICATION says role:master.
func TestValkeyGlide(t *testing.T) { runNode(t, "glide.js", "@valkey/valkey-glide") }

// TestNodeSqids: without public-id-key, PUBLICID's strings are Sqids
// that the npm sqids package (another language's Sqids) decodes, and
// encodes alike, for the default alphabet and another with a minimum
// length (clients/node/sqids.js).
func TestNodeSqids(t *testing.T) {
	node := need(t, "node", "apt-get install nodejs npm")
	needNodeModules(t, "sqids")
	needNodeModules(t, "ioredis")
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	nums := []string{"0", "1", "61", "62", "1000000", strconv.FormatUint(1<<53-1, 10)}
	for range 200 {
		nums = append(nums, strconv.FormatUint(rng.Uint64N(1<<53)>>rng.UintN(53), 10))
	}
	for _, cfg := range [][2]string{{publicid.DefaultAlphabet, "0"}, {"0123456789abcdefghijklmnopqrstuvwxyz-_", "10"}} {
		addr := startServer(t, "--public-id-alphabet", cfg[0], "--public-id-min-length", cfg[1])
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		cmd := exec.CommandContext(ctx, node, append([]string{"sqids.js", addr, cfg[0], cfg[1]}, nums...)...)
		cmd.Dir = "node"
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("node sqids.js %s %s %s: %v\n%s", addr, cfg[0], cfg[1], err, out)
		}
		t.Logf("%s", out)
	}
}

// runNode runs script from clients/node, for the library version npm
// installed as alias, against a server of its own. The script prints one
// line per check and exits non-zero if any failed; its output is logged
// either way, for the timings.
func runNode(t *testing.T, script, alias string) {
	node := need(t, "node", "apt-get install nodejs npm")
	needNodeModules(t, alias)
	addr := startServer(t)
	// The scripts give up on their own after 100s; this only bounds a
	// node that never gets that far.
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, alias, addr)
	cmd.Dir = "node"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s %s %s: %v\n%s", script, alias, addr, err, out)
	}
	t.Logf("node %s %s %s:\n%s", script, alias, addr, out)
}

// needNodeModules skips the test unless the library version npm installs
// as alias from clients/node/package-lock.json is installed, or fails it
// under CI=true, where scripts/test.sh ran npm ci.
func needNodeModules(t *testing.T, alias string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join("node", "node_modules", alias, "package.json")); err == nil {
		return
	}
	msg := "clients/node/node_modules/" + alias + " is missing: run npm ci in clients/node"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
