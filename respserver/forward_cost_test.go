package respserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/await"
)

// The figures of docs/performance.md's "Forwarding" section: two
// servers in processes of their own (this test binary again, serving one
// each: a test-only way to give them a static map of owners, outside the
// shipped configuration), one owning every slot, and redis-benchmark's
// INCR on the owner, then on the other, which forwards it. Each server's
// CPU time is read from /proc around each run.
//
//	FORWARD_COST=1 go test ./respserver -run TestForwardCost -v -count=1

// forwardCostEnv carries a child's part: "owner" or "forwarder,<owner's
// address>"; its listener is descriptor 3.
const forwardCostEnv = "FORWARD_COST_SERVE"

// TestForwardCostServe is not a test: TestForwardCost runs it in a child
// process to serve one of its two servers, until its stdin closes.
func TestForwardCostServe(t *testing.T) {
	part := os.Getenv(forwardCostEnv)
	if part == "" {
		t.Skip("a child of TestForwardCost")
	}
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		t.Fatal(err)
	}
	opts := withSequences(t, Options{})
	role, owner, _ := strings.Cut(part, ",")
	opts.Owner = func(int) (string, bool, bool) { return owner, role == "owner", true }
	serveOn(t, ln, opts)
	io.Copy(io.Discard, os.Stdin)
}

// TestForwardCost measures INCR's requests per second and each server's
// CPU per request, on the owner and through a forwarding server.
func TestForwardCost(t *testing.T) {
	if os.Getenv("FORWARD_COST") == "" {
		t.Skip("set FORWARD_COST=1 to measure (docs/performance.md)")
	}
	owner, ownerAddr := costServer(t, "owner")
	fwd, fwdAddr := costServer(t, "forwarder,"+ownerAddr)
	for _, p := range []int{16, 1} {
		n := 2000000
		if p == 1 {
			n = 200000
		}
		for _, target := range []struct{ name, addr string }{{"owner", ownerAddr}, {"forwarder", fwdAddr}} {
			o0, f0 := procCPU(t, owner), procCPU(t, fwd)
			rps := benchINCR(t, target.addr, p, n)
			o1, f1 := procCPU(t, owner), procCPU(t, fwd)
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
			t.Logf("-P %d INCR on the %s: %.0f requests/s; CPU per request: owner %.2f us, forwarder %.2f us",
				p, target.name, rps, per(o1-o0), per(f1-f0))
		}
	}
}

// costServer starts a child serving part on a listener of its own, and
// returns it with its address once it answers.
func costServer(t *testing.T, part string) (*exec.Cmd, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestForwardCostServe$", "-test.count", "1")
	cmd.Env = append(os.Environ(), forwardCostEnv+"="+part)
	cmd.ExtraFiles = []*os.File{f}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	addr := ln.Addr().String()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	await.True(t, time.Minute, part+" answers", func() bool { return rdb.Ping(context.Background()).Err() == nil })
	return cmd, addr
}

// procCPU is the user and system CPU time the process of cmd used so far.
func procCPU(t *testing.T, cmd *exec.Cmd) time.Duration {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64) // fields 14 and 15 of proc(5), in clock ticks (100 a second here)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// benchINCR runs redis-benchmark's INCR with 50 clients and pipelines of
// p against addr, n requests, and returns its requests per second.
func benchINCR(t *testing.T, addr string, p, n int) float64 {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command("redis-benchmark", "-h", host, "-p", port, "-c", "50", "-P", strconv.Itoa(p),
		"-n", strconv.Itoa(n), "-t", "incr", "-q").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	// "INCR: 812345.67 requests per second, p50=..." after \r-separated progress lines.
	last := string(out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\r')+1:])
	_, after, ok := strings.Cut(last, "INCR: ")
	if !ok {
		t.Fatalf("redis-benchmark said %q", out)
	}
	rps, err := strconv.ParseFloat(strings.Fields(after)[0], 64)
	if err != nil {
		t.Fatalf("redis-benchmark said %q: %v", out, err)
	}
	return rps
}
