// Package testbin serves the tests that run the idserver binary: it builds
// the binary once for a test package, finds free ports for it, and runs
// it until it says it is ready.
package testbin

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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

// Process is a running idserver, its addresses and its log lines.
type Process struct {
	Cmd     *exec.Cmd
	Addr    string // plain TCP, from the "idserver ready" line; "" if off
	TLSAddr string // TLS, likewise

	mu   sync.Mutex
	log  []string
	done chan struct{} // closed when its stderr ends
}

// Start runs name with args and env (added to the test's), waits for the
// binary's "idserver ready" line, and kills it when the test ends.
func Start(t testing.TB, env []string, name string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	type readyLine struct {
		Message, Addr string
		TLSAddr       string `json:"tls_addr"`
	}
	ready := make(chan readyLine, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.log = append(p.log, sc.Text())
			p.mu.Unlock()
			var line readyLine
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "idserver ready" {
				ready <- line
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	select {
	case line := <-ready:
		p.Addr, p.TLSAddr = line.Addr, line.TLSAddr
	case <-p.done:
		t.Fatalf("idserver exited before it was ready:\n%s", strings.Join(p.Lines(), "\n"))
	case <-time.After(20 * time.Second):
		t.Fatal("idserver not ready after 20s")
	}
	return p
}

// Lines returns the log lines so far.
func (p *Process) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.log)
}

// Logged reports whether a log line contains s.
func (p *Process) Logged(s string) bool {
	return slices.ContainsFunc(p.Lines(), func(l string) bool { return strings.Contains(l, s) })
}

// MetricsAddr is the metrics-addr the process logged it serves.
func (p *Process) MetricsAddr(t testing.TB) string {
	t.Helper()
	for _, l := range p.Lines() {
		var line struct {
			MetricsAddr string `json:"metrics_addr"`
		}
		if json.Unmarshal([]byte(l), &line) == nil && line.MetricsAddr != "" {
			return line.MetricsAddr
		}
	}
	t.Fatalf("no metrics_addr in the log:\n%s", strings.Join(p.Lines(), "\n"))
	return ""
}

// Wait waits for p to exit and returns its exit code.
func (p *Process) Wait() int {
	<-p.done
	p.Cmd.Wait()
	return p.Cmd.ProcessState.ExitCode()
}

// Stop sends SIGTERM and returns the exit code.
func (p *Process) Stop() int {
	p.Cmd.Process.Signal(syscall.SIGTERM)
	return p.Wait()
}

// Kill9 kills p with SIGKILL and waits for it.
func (p *Process) Kill9() {
	p.Cmd.Process.Signal(syscall.SIGKILL)
	p.Wait()
}
