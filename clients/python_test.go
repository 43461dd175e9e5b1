package clients

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// systemPython is the interpreter that sees Debian's python3-redis; the
// python3 first on PATH may be another build without it.
const systemPython = "/usr/bin/python3"

// TestRedisPy runs clients/python/check.py, redis-py 4.3.4 on its
// defaults, one check per subtest so each shows pass or fail on its own.
// Transaction is redis-py's default pipeline(), which is MULTI/EXEC.
func TestRedisPy(t *testing.T) {
	needRedisPy(t)
	addr := startServer(t)
	for _, check := range []string{"GetIDExact", "MGetID", "MixedPipeline", "Transaction", "TransactionAbort", "ErrorReply",
		"Sequences", "SequencePipeline", "SequenceTransaction"} {
		t.Run(check, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, systemPython, "python/check.py", addr, check).CombinedOutput()
			if err != nil {
				t.Fatalf("check.py %s: %v\n%s", check, err, out)
			}
		})
	}
}

// needRedisPy skips the test unless systemPython can import redis, or fails
// it under CI=true, where scripts/test.sh installed python3-redis.
func needRedisPy(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, systemPython, "-c", "import redis").CombinedOutput()
	if err == nil {
		return
	}
	msg := systemPython + " cannot import redis (apt-get install python3-redis): " + err.Error() + "\n" + strings.TrimSpace(string(out))
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
