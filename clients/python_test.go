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

// systemPython is the interpreter that sees Debian's python3-redis; the
// python3 first on PATH may be another build without it.
const systemPython = "/usr/bin/python3"

// venvPython is the interpreter of the virtualenv where scripts/test.sh
// installs PyPI's redis-py and valkey-py, pinned with their hashes in
// clients/python/requirements.txt.
var venvPython = filepath.Join("python", ".venv", "bin", "python")

// pyChecks are the checks of clients/python/check.py that every Python
// client runs. Transaction is the default pipeline(), which is MULTI/EXEC.
var pyChecks = []string{"Connection", "GetIDExact", "MGetID", "DecodeID", "MixedPipeline", "Transaction", "TransactionAbort",
	"ErrorReply", "Sequences", "SequencePipeline", "SequenceTransaction"}

// TestRedisPy runs check.py with Debian's redis-py 4.3.4 on its defaults
// (RESP2).
func TestRedisPy(t *testing.T) { runPython(t, needRedisPy(t), "redis", "2") }

// TestRedisPyPI runs check.py with PyPI's redis-py 8.1 on its defaults,
// which since 8.0 are RESP3: HELLO 3, then CLIENT SETINFO.
func TestRedisPyPI(t *testing.T) { runPython(t, needVenv(t, "redis"), "redis", "3") }

// TestRedisPyPIRESP2 runs it with protocol=2.
func TestRedisPyPIRESP2(t *testing.T) { runPython(t, needVenv(t, "redis"), "redis-resp2", "2") }

// TestRedisPyPIAsyncio runs it with redis.asyncio.Redis on its defaults
// (RESP3), and once as an application uses it: GETIDs from 50 tasks at
// once on its connection pool (Concurrent).
func TestRedisPyPIAsyncio(t *testing.T) {
	runPython(t, needVenv(t, "redis"), "redis-asyncio", "3", "Concurrent")
}

// TestValkeyPy runs it with PyPI's valkey-py on its defaults (RESP2).
func TestValkeyPy(t *testing.T) { runPython(t, needVenv(t, "valkey"), "valkey", "2") }

// TestValkeyPyRESP3 runs it with valkey-py on RESP3 (protocol=3).
func TestValkeyPyRESP3(t *testing.T) { runPython(t, needVenv(t, "valkey"), "valkey-resp3", "3") }

// runPython runs check.py with python and --client client, pyChecks and
// extra, against a server of its own, one subtest per check read from
// its output (reportChecks); resp is the protocol the
// Connection check wants. A last subtest runs DecodeID against a server
// that answers GETID with a bulk string, and wants it to fail: proof that
// the client keeps an integer reply apart from a string of digits, so
// the other checks' pass means GETID did come as an integer.
func runPython(t *testing.T, python, client, resp string, extra ...string) {
	checks := append(append([]string(nil), pyChecks...), extra...)
	out, err := checkPy(t, python, client, resp, startServer(t), checks...)
	reportChecks(t, "check.py", checks, out, err)
	t.Run("StringGetIDRefused", func(t *testing.T) {
		out, err := checkPy(t, python, client, resp, startServer(t, "--getid-reply", "string"), "DecodeID")
		if err == nil || !strings.Contains(out, "FAIL DecodeID: AssertionError: GETID = b'") {
			t.Fatalf("DecodeID with GETID answered by a bulk string: %v, want it to fail on the bytes\n%s", err, out)
		}
	})
}

// checkPy runs check.py's checks with python and --client client against
// addr, and returns its output.
func checkPy(t *testing.T, python, client, resp, addr string, checks ...string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	args := append([]string{"python/check.py", "--client", client, "--resp", resp, addr}, checks...)
	out, err := exec.CommandContext(ctx, python, args...).CombinedOutput()
	return string(out), err
}

// needRedisPy returns systemPython, or skips the test unless it can
// import redis (fails it under CI=true, where scripts/test.sh installed
// python3-redis).
func needRedisPy(t *testing.T) string {
	t.Helper()
	needImport(t, systemPython, "redis", "apt-get install python3-redis")
	return systemPython
}

// needVenv returns venvPython, or skips the test unless it can import
// module (fails it under CI=true, where scripts/test.sh made the venv).
func needVenv(t *testing.T, module string) string {
	t.Helper()
	needImport(t, venvPython, module, "scripts/test.sh makes clients/python/.venv from clients/python/requirements.txt")
	return venvPython
}

// needImport skips the test unless python can import module, or fails it
// under CI=true.
func needImport(t *testing.T, python, module, install string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-c", "import "+module).CombinedOutput()
	if err == nil {
		return
	}
	msg := python + " cannot import " + module + " (" + install + "): " + err.Error() + "\n" + strings.TrimSpace(string(out))
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
