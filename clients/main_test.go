// Package clients tests idserver with the client libraries and tools
// people use, each on its defaults: go-redis v9 (RESP2 and RESP3) and v8,
// rueidis, valkey-go, redigo, radix v4, redis-py (Debian's 4.3.4, and
// PyPI's 8.1 on RESP3, RESP2 and asyncio), valkey-py, redis-rs (RESP2
// and RESP3), the JavaScript clients
// in the versions people pin (ioredis 4, 5.3, 5.7 and 6, iovalkey 0.4,
// node-redis 3, 4 and 6, Valkey GLIDE), Jedis, Lettuce, Spring Data Redis
// and Redisson (Java; Jedis and Lettuce as cluster clients too), hiredis
// (C), redis-rb (Ruby),
// phpredis and Predis (PHP), Perl's Redis, redis-cli and redis-benchmark.
// Typed clients must get GETID as an integer, JavaScript ones as a
// string; sequences (INCR, INCRBY, GET, SET, ...) answer every client
// as Redis does. Every test starts the real binary on 127.0.0.1 and
// stops it.
//
// The Python, Node and Java tests need /usr/bin/python3 with Debian's
// python3-redis and the virtualenv clients/python/.venv with PyPI's
// clients (python/requirements.txt), node with `npm ci` run in
// clients/node, and java with the jar of clients/java (`mvn -q package`
// there); the Rust tests the program of clients/rust (`cargo build
// --locked` there); the others
// (scripts_test.go) need Debian's libhiredis-dev and gcc, ruby-redis,
// php-cli with php-redis and php-predis, and libredis-perl;
// scripts/test.sh installs all of it. Without them a test is skipped,
// except under CI=true, where a missing client fails the suite.
//
// clients is a module of its own, so that the libraries only it uses
// stay out of the server's go.mod; TestMain builds the server in the
// repository's root, by the root's go.mod.
package clients

import (
	"os"
	"os/exec"
	"testing"

	"github.com/idserver/idserver/internal/testbin"
)

// binary is the idserver built once for these tests.
var binary string

// builtBinary names the binary to a copy of the tests that re-runs itself
// in a network namespace (see inNamespace), so that it need not build it
// again.
const builtBinary = "CLIENTS_TEST_IDSERVER"

func TestMain(m *testing.M) { testbin.Run(m, "..", builtBinary, &binary) }

// startServer runs idserver with args on a port of 127.0.0.1 the test
// keeps until it ends, and returns its address.
func startServer(t *testing.T, args ...string) string {
	t.Helper()
	s := testbin.Listen(t, "port")
	return runServer(t, []testbin.Socket{s}, append(args, "--port", s.Port)...).Addr
}

// runServer runs idserver with args and sockets (testbin.Listen), its
// state in a directory of t's, until the test ends, and returns it once
// it is ready.
func runServer(t *testing.T, sockets []testbin.Socket, args ...string) *testbin.Process {
	t.Helper()
	return testbin.Start(t, nil, sockets, binary, append(args, "--dir", t.TempDir())...)
}

// need returns the path of a client program, or skips the test without
// it (fails it under CI=true, where scripts/test.sh installed it).
func need(t *testing.T, program, install string) string {
	t.Helper()
	path, err := exec.LookPath(program)
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing: %s", program, install)
	}
	t.Skipf("%s is missing (%s; scripts/test.sh does)", program, install)
	return ""
}
