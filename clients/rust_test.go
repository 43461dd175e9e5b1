package clients

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rustCheck is the program of clients/rust (redis-rs from crates.io,
// pinned in its Cargo.lock), which scripts/test.sh builds with
// cargo build --locked.
var rustCheck = filepath.Join("rust", "target", "debug", "idserver-rust-check")

// rustChecks are the checks of clients/rust/src/main.rs, python/check.py's.
var rustChecks = []string{"Connection", "GetIDExact", "MGetID", "DecodeID", "MixedPipeline", "Transaction", "TransactionAbort",
	"ErrorReply", "Sequences", "SequencePipeline", "SequenceTransaction"}

// TestRedisRs runs the checks with redis-rs's synchronous client on its
// defaults (RESP2; it sends CLIENT SETINFO on connect).
func TestRedisRs(t *testing.T) { runRust(t) }

// TestRedisRsRESP3 runs them with ?protocol=resp3 in the URL (HELLO 3).
func TestRedisRsRESP3(t *testing.T) { runRust(t, "--resp3") }

// runRust runs rustCheck with flags against a server of its own, one
// subtest per check, and, as runPython does, DecodeID against a server
// that answers GETID with a bulk string, which must fail.
func runRust(t *testing.T, flags ...string) {
	needRustCheck(t)
	out, err := checkRust(t, startServer(t), flags, rustChecks...)
	reportChecks(t, rustCheck, rustChecks, out, err)
	t.Run("StringGetIDRefused", func(t *testing.T) {
		out, err := checkRust(t, startServer(t, "--getid-reply", "string"), flags, "DecodeID")
		if err == nil || !strings.Contains(out, "FAIL DecodeID: GETID = bulk-string(") {
			t.Fatalf("DecodeID with GETID answered by a bulk string: %v, want it to fail on the BulkString\n%s", err, out)
		}
	})
}

// checkRust runs rustCheck's checks with flags against addr, and returns
// its output.
func checkRust(t *testing.T, addr string, flags []string, checks ...string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	args := append(append(append([]string(nil), flags...), addr), checks...)
	out, err := exec.CommandContext(ctx, rustCheck, args...).CombinedOutput()
	return string(out), err
}

// needRustCheck skips the test unless rustCheck was built, or fails it
// under CI=true, where scripts/test.sh built it.
func needRustCheck(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(rustCheck); err != nil {
		msg := "clients/" + rustCheck + " is missing: run cargo build --locked in clients/rust (scripts/test.sh does)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}
