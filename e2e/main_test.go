// Package e2e tests the idserver binary from the outside, as it is run:
// built once (testbin), started on ports of its own, alone or as members
// of a cluster over a real etcd (testetcd), and driven with real clients
// (go-redis, redis-cli, the cluster clients of other languages), for
// what only the whole server shows: starts and stops, crashes and
// restarts, partitions and failovers, the files it keeps, its limits,
// and the commands the docs show. One helper starts a server (start,
// member), one reads its INFO (readInfo), one waits for a condition
// (internal/await).
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/conf"
	"github.com/idserver/idserver/internal/buildinfo"
	"github.com/idserver/idserver/internal/testbin"
)

// binary is the idserver built once for these tests.
var binary string

func TestMain(m *testing.M) { testbin.Run(m, "..", "", &binary) }

// process is a running idserver and its log lines.
type process = testbin.Process

// start runs the binary with args on a free port and waits for its
// "idserver ready" line.
func start(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	return startCmd(t, env, binary, args...)
}

// startLimited is start with the open files limit set to nofile.
func startLimited(t *testing.T, nofile int, args ...string) *process {
	t.Helper()
	return startCmd(t, nil, "sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile), binary}, args...)...)
}

// startCmd runs name with args, the binary's arguments last, and waits
// for the binary's "idserver ready" line.
func startCmd(t *testing.T, env []string, name string, args ...string) *process {
	t.Helper()
	if !slices.Contains(args, "--dir") {
		args = append(args, "--dir", t.TempDir())
	}
	args, sockets := withPort(t, args)
	return testbin.Start(t, env, sockets, name, args...)
}

// withPort adds a port of the test's to args that name none, passed to
// the binary as a socket (testbin.Listen).
func withPort(t *testing.T, args []string) ([]string, []testbin.Socket) {
	if slices.Contains(args, "--port") {
		return args, nil
	}
	s := testbin.Listen(t, "port")
	return append(args, "--port", s.Port), []testbin.Socket{s}
}

func TestBinaryServesAndStops(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "idserver.conf")
	os.WriteFile(conf, []byte("# the C original's line\nid-generator server-id 5 id-range 3 shard-range 8 random-range 10\n"), 0o600)
	p := start(t, []string{"IDSERVER_MGETID_MAX=50"}, conf)
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	ctx := context.Background()
	id, err := c.Do(ctx, "GETID").Int64()
	if err != nil || id <= 0 {
		t.Fatalf("GETID: %d, %v", id, err)
	}
	if sid := id >> 18 & 7; sid != 5 {
		t.Fatalf("id %d has server-id %d, want 5 from the id-generator line", id, sid)
	}
	if err := c.Do(ctx, "MGETID", 51).Err(); err == nil || !strings.Contains(err.Error(), "1..50 (mgetid-max)") {
		t.Fatalf("MGETID 51 with IDSERVER_MGETID_MAX=50: %v", err)
	}
	if code := p.Stop(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	log := strings.Join(p.Lines(), "\n")
	if !strings.Contains(log, `"layout":"id-range 3 shard-range 8 random-range 10"`) || !strings.Contains(log, "shutting down") {
		t.Fatalf("log lacks the start-up layout or the shutdown line:\n%s", log)
	}
}

func TestBinaryRefusesBadConfig(t *testing.T) {
	for _, args := range [][]string{
		{"--shard-range", "10"},
		{"--server-id", "9"},
		{"--port", "x"},
		{"--tls-cert-file", "/nonexistent.crt", "--tls-key-file", "/nonexistent.key", "--tls-port", "6552", "--tls-auth-clients", "no"},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(binary, append(args, "--dir", t.TempDir())...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if cmd.ProcessState.ExitCode() != 1 || len(lines) != 1 || !strings.Contains(lines[0], strings.TrimPrefix(args[0], "--")) {
			t.Errorf("idserver %v: %v, stderr %q; want exit 1 and one line naming the key", args, err, stderr.String())
		}
	}
}

// TestWarningsRateLimited makes the server borrow ahead on every request
// for a few seconds and checks the warning comes at most once a second.
func TestWarningsRateLimited(t *testing.T) {
	p := start(t, nil, "--mgetid-max", "10000")
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	ctx := context.Background()
	begin := time.Now()
	requests := 0
	for time.Since(begin) < 2500*time.Millisecond {
		// 10000 IDs is 20ms of a 512-per-ms layout: every call borrows.
		if err := c.Do(ctx, "MGETID", 10000).Err(); err != nil && !strings.HasPrefix(err.Error(), "BUSY") {
			t.Fatal(err)
		}
		requests++
	}
	p.Stop()
	warnings := 0
	for _, l := range p.Lines() {
		if strings.Contains(l, "issuing IDs ahead of the clock") {
			warnings++
		}
	}
	if warnings < 1 || warnings > 4 || requests < 10 {
		t.Fatalf("%d borrow warnings for %d borrowing requests in 2.5s; want 1..4", warnings, requests)
	}
}

func TestBinaryMetrics(t *testing.T) {
	p := start(t, nil, "--metrics-addr", "127.0.0.1:0")
	metricsAddr := p.MetricsAddr(t)
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	if err := c.Do(context.Background(), "MGETID", 7).Err(); err != nil {
		t.Fatal(err)
	}
	_, body := get(t, "http://"+metricsAddr+"/metrics")
	for _, want := range []string{
		"idserver_ids_issued_total 7\n",
		`idserver_info{id_range="2",random_range="10",shard_range="9",version="` + buildinfo.Version + `"} 1`,
		"idserver_server_id 0\n",
		"idserver_lead_refusals_total 0\n",
		"idserver_client_output_buffer_limit_disconnections_total 0\n",
		"idserver_clients_over_soft_limit 0\n",
		"go_goroutines ",
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("/metrics lacks %q:\n%.2000s", want, body)
		}
	}
}

// TestVersionFlag: --version prints the version, the commit (unknown
// when the build did not stamp it) and the Go version, and exits 0
// without starting.
func TestVersionFlag(t *testing.T) {
	out, err := exec.Command(binary, "--version", "--dir", "/nonexistent").CombinedOutput()
	want := regexp.MustCompile(`^idserver ` + regexp.QuoteMeta(buildinfo.Version) + ` commit \S+ go1\.\d+(\.\d+)?\n$`)
	if err != nil || !want.Match(out) {
		t.Fatalf("--version: %v, %q", err, out)
	}
}

// TestHelpFlag: --help lists every configuration key as a flag, with
// --config, --version and --check-ready, and exits 0 without starting.
func TestHelpFlag(t *testing.T) {
	out, err := exec.Command(binary, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, key := range append(conf.Keys(), "config", "version", "check-ready") {
		if !regexp.MustCompile(`(?m)^\s+--` + regexp.QuoteMeta(key) + `\b`).Match(out) {
			t.Errorf("--help does not list --%s:\n%s", key, out)
		}
	}
}

// TestSocketActivation: the server serves sockets passed by systemd's
// protocol (the tests' own way to keep their ports), each at the address
// its name says; a restart serves the same socket, and a socket named for
// no address, or for one that is off, stops the start with one line.
func TestSocketActivation(t *testing.T) {
	port, metrics := testbin.Listen(t, "port"), testbin.Listen(t, "metrics-addr")
	sockets := []testbin.Socket{metrics, port}
	args := []string{"--dir", t.TempDir(), "--port", port.Port, "--metrics-addr", "127.0.0.1:" + metrics.Port}
	for run := range 2 {
		p := testbin.Start(t, nil, sockets, binary, args...)
		if p.Addr != "127.0.0.1:"+port.Port || p.MetricsAddr(t) != "127.0.0.1:"+metrics.Port {
			t.Fatalf("run %d serves %s and metrics at %s, want the sockets' ports %s and %s", run, p.Addr, p.MetricsAddr(t), port.Port, metrics.Port)
		}
		if ids := mgetid(t, p.Addr, 10); len(ids) != 10 {
			t.Fatalf("run %d: %d IDs", run, len(ids))
		}
		if code := p.Stop(); code != 0 {
			t.Fatalf("run %d: exit code %d", run, code)
		}
	}
	for _, c := range []struct{ name, want string }{
		{"bogus", `a socket passed by systemd is named bogus: name each port, tls-port, cluster-port or metrics-addr (FileDescriptorName=)`},
		{"tls-port", "a socket passed by systemd is named tls-port, but tls-port is off in the configuration"},
	} {
		s := testbin.Listen(t, c.name)
		cmd := testbin.Command(binary, nil, []testbin.Socket{s}, "--dir", t.TempDir(), "--port", testbin.Listen(t, "unused").Port)
		out, _ := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), c.want) || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("a socket named %s: exit %d, output %q", c.name, cmd.ProcessState.ExitCode(), out)
		}
	}
}
