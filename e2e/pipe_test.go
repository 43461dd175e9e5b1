package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisCliPipe: redis-cli --pipe, Redis's documented mass insertion,
// of a million commands on new keys (500,000 INCR k<i> and 500,000 SET
// s<i> <i>, alternating, in Redis's protocol) completes with every reply
// and no error, and DBSIZE is then a million. Each new key's first INCR,
// and each SET, waits for a durable write: the client is not read
// meanwhile, and TCP holds it back (it was closed at
// client-query-buffer-limit after 31 keys). The INCRs of a read share a
// write, and so do its SETs: each SET was a write of its own, 100,000
// (1% of the commands then) took 84 s. Time and peak RSS are logged (a
// figure, not asserted: the deadline only catches a stall).
func TestRedisCliPipe(t *testing.T) {
	cli := needProgram(t, "redis-cli", "apt-get install redis-tools")
	const n, setEvery = 1_000_000, 2
	input := filepath.Join(t.TempDir(), "mass-insertion.resp")
	f, err := os.Create(input)
	if err != nil {
		t.Fatal(err)
	}
	w := make([]byte, 0, 64<<10)
	for i := range n {
		if i%setEvery == setEvery-1 {
			k, v := "s"+strconv.Itoa(i), strconv.Itoa(i)
			w = fmt.Appendf(w, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(v), v)
		} else {
			k := "k" + strconv.Itoa(i)
			w = fmt.Appendf(w, "*2\r\n$4\r\nINCR\r\n$%d\r\n%s\r\n", len(k), k)
		}
		if len(w) > 60<<10 {
			f.Write(w)
			w = w[:0]
		}
	}
	if _, err := f.Write(w); err != nil {
		t.Fatal(err)
	}
	f.Seek(0, 0)
	defer f.Close()

	p := start(t, nil)
	host, port, _ := net.SplitHostPort(p.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, "-h", host, "-p", port, "--pipe")
	cmd.Stdin = f
	begin := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(begin)
	if err != nil {
		t.Fatalf("redis-cli --pipe after %v: %v\n%s\nserver log:\n%s", took.Round(time.Millisecond), err, out, strings.Join(p.Lines(), "\n"))
	}
	if want := fmt.Sprintf("errors: 0, replies: %d", n); !strings.Contains(string(out), want) {
		t.Fatalf("redis-cli --pipe says:\n%s\nwant %q", out, want)
	}
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	if size, err := c.DBSize(context.Background()).Result(); err != nil || size != n {
		t.Fatalf("DBSIZE: %d %v, want %d (every key distinct)", size, err, n)
	}
	t.Logf("redis-cli --pipe of %d commands (%d SETs): %v, server peak RSS %d MiB", n, n/setEvery, took.Round(time.Millisecond), peakMB(t, p.Cmd.Process.Pid))
}
