package clients

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestIORedis runs clients/node/ioredis.js, ioredis 6 on its defaults.
func TestIORedis(t *testing.T) { runNode(t, "ioredis.js") }

// TestNodeRedis runs clients/node/node-redis.js, node-redis 6 (npm
// package redis) on its defaults.
func TestNodeRedis(t *testing.T) { runNode(t, "node-redis.js") }

// runNode runs script from clients/node against a server of its own. The
// script prints one line per check and exits non-zero if any failed; its
// output is logged either way, for the timings.
func runNode(t *testing.T, script string) {
	node := need(t, "node", "apt-get install nodejs npm")
	needNodeModules(t)
	addr := startServer(t)
	// The scripts give up on their own after 100s; this only bounds a
	// node that never gets that far.
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, addr)
	cmd.Dir = "node"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s %s: %v\n%s", script, addr, err, out)
	}
	t.Logf("node %s %s:\n%s", script, addr, out)
}

// needNodeModules skips the test unless the libraries pinned in
// clients/node/package-lock.json are installed, or fails it under
// CI=true, where scripts/test.sh ran npm ci.
func needNodeModules(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join("node", "node_modules")); err == nil {
		return
	}
	msg := "clients/node/node_modules is missing: run npm ci in clients/node"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
