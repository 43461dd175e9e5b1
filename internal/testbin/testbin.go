// Package testbin serves the tests that run the idserver binary: it builds
// the binary once for a test package, and finds free ports for it.
package testbin

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// Run builds the main package in dir (the repository root, relative to
// the test package) into a temporary directory, runs the tests with its
// path in *binary, removes it, and exits with the tests' code. For
// TestMain. If the environment variable reuse names a binary already
// built (a copy of the tests started by the tests), it is used instead.
func Run(m *testing.M, dir, reuse string, binary *string) {
	if *binary = os.Getenv(reuse); reuse != "" && *binary != "" {
		os.Exit(m.Run())
	}
	tmp, err := os.MkdirTemp("", "idserver-test")
	if err != nil {
		panic(err)
	}
	*binary = filepath.Join(tmp, "idserver")
	if out, err := exec.Command("go", "build", "-o", *binary, dir).CombinedOutput(); err != nil {
		panic("go build: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago.
// (Port 0 is no answer for idserver: there it means no plain TCP, as in
// Redis.)
func FreePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
