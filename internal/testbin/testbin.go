// Package testbin serves the tests that run the idserver binary: it builds
// the binary once for a test package, finds free ports for it, and runs
// it until it says it is ready.
package testbin

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
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

	"github.com/idserver/idserver/internal/await"
)

// Run builds the main package in dir (the repository root, relative to
// the test package) into a temporary directory, runs the tests with its
// path in *binary, removes it, and exits with the tests' code. For
// TestMain. If the environment variable reuse names a binary already
// built (a copy of the tests started by the tests), it is used instead.
// The build runs in dir, so dir's own module (its go.mod and go.sum)
// builds it: a test package of another module (clients/) tests the
// server as it ships.
func Run(m *testing.M, dir, reuse string, binary *string) {
	if *binary = os.Getenv(reuse); reuse != "" && *binary != "" {
		os.Exit(m.Run())
	}
	tmp, err := os.MkdirTemp("", "idserver-test")
	if err != nil {
		panic(err)
	}
	*binary = filepath.Join(tmp, "idserver")
	build := exec.Command("go", "build", "-o", *binary, ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		panic("go build: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// Socket is a listening TCP socket of 127.0.0.1 that a test binds and
// keeps until it ends, for a binary it starts to serve (systemd's socket
// activation, which idserver speaks): no other process can take the port
// between its choice and its use, and a restarted binary serves the same
// one.
type Socket struct {
	Name string // the address it serves: port, tls-port or metrics-addr
	Port string // the port it bound, in decimal
	file *os.File
}

// Listen binds a socket for the address name.
func Listen(t testing.TB, name string) Socket {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	ln.Close() // f is a duplicate: the socket stays bound and listening
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return Socket{Name: name, Port: strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), file: f}
}

// ReservedPort returns a port of 127.0.0.1 for a program that binds it
// itself and cannot be passed a socket (etcd), kept for this test until
// it ends, across restarts of the program: it lies below the kernel's
// range of ephemeral ports, so no connection is given it, and a lock file
// keeps other tests' ReservedPort from it.
func ReservedPort(t testing.TB) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			low, _ = strconv.Atoi(f[0])
		}
	}
	first := 10000 + rand.IntN(max(low-10000, 1))
	for i := range low - 10000 {
		port := strconv.Itoa(10000 + (first-10000+i)%(low-10000))
		lock, err := os.OpenFile(filepath.Join(os.TempDir(), "idserver-test-port-"+port+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			lock.Close() // another test's
			continue
		}
		if ln, err := net.Listen("tcp", "127.0.0.1:"+port); err == nil {
			ln.Close()
			t.Cleanup(func() { lock.Close() })
			return port
		}
		lock.Close() // in use by a program that took no lock
	}
	t.Fatalf("no free port below %d", low)
	return ""
}

// Command is the command that runs name with args and env (added to the
// test's), passing it sockets by systemd's protocol: LISTEN_PID must be
// the pid of the binary, which a shell that execs it knows.
func Command(name string, env []string, sockets []Socket, args ...string) *exec.Cmd {
	if len(sockets) == 0 {
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), env...)
		return cmd
	}
	cmd := exec.Command("sh", append([]string{"-c", `LISTEN_PID=$$ exec "$0" "$@"`, name}, args...)...)
	var names []string
	for _, s := range sockets {
		names = append(names, s.Name)
		cmd.ExtraFiles = append(cmd.ExtraFiles, s.file)
	}
	cmd.Env = append(append(os.Environ(), env...), "LISTEN_FDS="+strconv.Itoa(len(sockets)), "LISTEN_FDNAMES="+strings.Join(names, ":"))
	return cmd
}

// Unused returns an address of 127.0.0.1 where nothing listens and
// nothing can until the test ends: its port is bound to a socket that
// never listens, so a connection is refused.
func Unused(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
}

// Process is a running idserver, its addresses and its log lines.
type Process struct {
	Cmd         *exec.Cmd // the binary running
	Addr        string    // plain TCP, from the "idserver ready" line; "" if off
	TLSAddr     string    // TLS, likewise
	ClusterAddr string    // cluster-port's, likewise (cluster mode)

	mu   sync.Mutex
	log  []string
	done chan struct{} // closed when its stderr ends
}

// Start runs Command(name, env, sockets, args...), waits for the binary's
// "idserver ready" line, and kills it when the test ends.
func Start(t testing.TB, env []string, sockets []Socket, name string, args ...string) *Process {
	t.Helper()
	cmd := Command(name, env, sockets, args...)
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
		ClusterAddr   string `json:"cluster_addr"`
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
		p.Addr, p.TLSAddr, p.ClusterAddr = line.Addr, line.TLSAddr, line.ClusterAddr
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

// Pause stops p (SIGSTOP) and waits until every thread of it has
// stopped: a signal takes effect a moment after it is sent, and a thread
// may go on meanwhile (a renewal wrote the state file again after it was
// deleted, once, beside two CPU hogs).
func (p *Process) Pause(t testing.TB) {
	t.Helper()
	p.Cmd.Process.Signal(syscall.SIGSTOP)
	tasks := filepath.Join("/proc", strconv.Itoa(p.Cmd.Process.Pid), "task")
	await.True(t, 30*time.Second, "the process stopped", func() bool {
		ds, err := os.ReadDir(tasks)
		if err != nil {
			return false
		}
		for _, d := range ds {
			stat, err := os.ReadFile(filepath.Join(tasks, d.Name(), "stat"))
			// The state is the field after the command's closing parenthesis.
			i := strings.LastIndexByte(string(stat), ')')
			if err != nil || i < 0 || i+2 >= len(stat) || stat[i+2] != 'T' && stat[i+2] != 't' {
				return false
			}
		}
		return true
	})
}

// Kill9 kills p with SIGKILL and waits for it.
func (p *Process) Kill9() {
	p.Cmd.Process.Signal(syscall.SIGKILL)
	p.Wait()
}
