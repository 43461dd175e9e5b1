// Package testetcd runs a real etcd (Debian's etcd-server: etcd on the
// PATH) on 127.0.0.1 (or in a network namespace: StartVia) for tests, stopped and restarted on the same data
// directory and ports. Without etcd a test is skipped, except under
// CI=true, where it fails: scripts/test.sh installs it.
package testetcd

import (
	"context"
	"crypto/tls"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/idserver/idserver/internal/testbin"
	"github.com/idserver/idserver/internal/testpki"
)

// Server is one etcd, started, stopped and restarted by a test on the
// same data directory and ports.
type Server struct {
	t        *testing.T
	dir      string
	Endpoint string // host:port
	peer     string
	name     string // its member name
	initial  string // --initial-cluster: every member's name=peer
	cmd      *exec.Cmd
	pki      *testpki.PKI // clients need a certificate from it; nil: plain
	extra    []string     // more flags for etcd
	via      []string     // the command etcd runs through, if any
}

// Start starts etcd for t, plain, until t ends.
func Start(t *testing.T) *Server { return StartTLS(t, nil) }

// StartTLS starts etcd for t serving clients over TLS with p's server
// certificate, asking them for one of p's CA, or plain if p is nil.
func StartTLS(t *testing.T, p *testpki.PKI) *Server {
	t.Helper()
	needEtcd(t)
	e := newServer(t, "default")
	e.pki = p
	e.initial = e.name + "=" + e.peer
	e.Resume()
	return e
}

// StartArgs starts etcd for t, plain, with more flags, until t ends.
func StartArgs(t *testing.T, args ...string) *Server {
	t.Helper()
	needEtcd(t)
	e := newServer(t, "default")
	e.initial = e.name + "=" + e.peer
	e.extra = args
	e.Resume()
	return e
}

// StartVia starts etcd for t, plain, serving clients at host:2379 and
// peers at host:2380, run through the command via (its arguments before
// etcd's): etcd in a network namespace of its own (via "ip netns exec
// NS", host that namespace's address), where these ports are free.
func StartVia(t *testing.T, host string, via ...string) *Server {
	t.Helper()
	needEtcd(t)
	e := &Server{t: t, dir: filepath.Join(t.TempDir(), "etcd"), name: "default",
		Endpoint: host + ":2379", peer: "http://" + host + ":2380", via: via}
	t.Cleanup(e.Kill)
	e.initial = e.name + "=" + e.peer
	e.Resume()
	return e
}

// StartCluster starts an etcd cluster of n members for t, until t ends.
func StartCluster(t *testing.T, n int) []*Server {
	t.Helper()
	needEtcd(t)
	members := make([]*Server, n)
	var initial []string
	for i := range members {
		members[i] = newServer(t, "m"+strconv.Itoa(i))
		initial = append(initial, members[i].name+"="+members[i].peer)
	}
	for _, m := range members { // all at once: none answers before a quorum runs
		m.initial = strings.Join(initial, ",")
		m.run()
	}
	for _, m := range members {
		m.wait()
	}
	return members
}

// needEtcd skips t without etcd on the PATH, or fails it under CI=true.
func needEtcd(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("etcd is missing: apt install etcd-server (scripts/test.sh does)")
		}
		t.Skip("etcd is missing (apt install etcd-server; scripts/test.sh does)")
	}
}

func newServer(t *testing.T, name string) *Server {
	e := &Server{t: t, dir: filepath.Join(t.TempDir(), "etcd"), name: name,
		Endpoint: "127.0.0.1:" + testbin.ReservedPort(t), peer: "http://127.0.0.1:" + testbin.ReservedPort(t)}
	t.Cleanup(e.Kill)
	return e
}

// Resume runs etcd again (or the first time) and waits until it answers.
func (e *Server) Resume() {
	e.t.Helper()
	e.run()
	e.wait()
}

// run starts etcd.
func (e *Server) run() {
	e.t.Helper()
	url := "http://" + e.Endpoint
	var tlsArgs []string
	if e.pki != nil {
		url = "https://" + e.Endpoint
		tlsArgs = []string{"--cert-file", e.pki.File("server.crt"), "--key-file", e.pki.File("server.key"),
			"--client-cert-auth", "--trusted-ca-file", e.pki.File("ca.crt")}
	}
	args := append([]string{"etcd", "--data-dir", e.dir, "--name", e.name,
		"--listen-client-urls", url, "--advertise-client-urls", url,
		"--listen-peer-urls", e.peer, "--initial-advertise-peer-urls", e.peer,
		"--initial-cluster", e.initial}, append(tlsArgs, e.extra...)...)
	args = append(slices.Clone(e.via), args...)
	e.cmd = exec.Command(args[0], args[1:]...)
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
}

// wait waits until etcd answers.
func (e *Server) wait() {
	e.t.Helper()
	cli := e.Client()
	defer cli.Close()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "health")
		cancel()
		if err == nil || strings.Contains(err.Error(), "user name is empty") { // up, with authentication on
			return
		}
	}
	e.t.Fatal("etcd not answering after 20s")
}

// Kill kills etcd: a crash, as far as its clients can tell.
func (e *Server) Kill() {
	if e.cmd != nil {
		e.cmd.Process.Kill()
		e.cmd.Wait()
		e.cmd = nil
	}
}

// Freeze stops etcd with SIGSTOP: a member that hangs, as a VM paused or
// a disk that stalls leaves it, its connections open and silent. Kill or
// the test's end also ends it.
func (e *Server) Freeze() {
	if e.cmd != nil {
		e.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// Backup stops etcd, copies its data directory, and runs it again: the
// copy is a snapshot of etcd as it was, for Restore.
func (e *Server) Backup() string {
	e.t.Helper()
	e.Kill()
	backup := filepath.Join(e.t.TempDir(), "backup")
	if err := os.CopyFS(backup, os.DirFS(e.dir)); err != nil {
		e.t.Fatal(err)
	}
	e.Resume()
	return backup
}

// Restore kills etcd and runs it again on a copy of backup: etcd restored
// from an older snapshot, its revision back where the backup was.
func (e *Server) Restore(backup string) {
	e.t.Helper()
	e.Kill()
	if err := os.RemoveAll(e.dir); err != nil {
		e.t.Fatal(err)
	}
	if err := os.CopyFS(e.dir, os.DirFS(backup)); err != nil {
		e.t.Fatal(err)
	}
	e.Resume()
}

// Replace kills etcd and starts an empty one in its place, on the same
// ports: etcd as a restore from a snapshot taken before any write leaves
// it, a new cluster (another cluster id) at revision 1.
func (e *Server) Replace() {
	e.t.Helper()
	e.Kill()
	if err := os.RemoveAll(e.dir); err != nil {
		e.t.Fatal(err)
	}
	e.Resume()
}

// Client is a client of e, with a client certificate if e asks for one.
func (e *Server) Client() *clientv3.Client {
	e.t.Helper()
	cfg := clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: time.Second, Logger: zap.NewNop()}
	if e.pki != nil {
		cfg.TLS = &tls.Config{RootCAs: e.pki.Roots, Certificates: []tls.Certificate{e.pki.Client}}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return cli
}
