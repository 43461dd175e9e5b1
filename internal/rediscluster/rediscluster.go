// Package rediscluster starts a real redis-server with cluster-enabled
// yes for tests: one node that owns all 16384 slots, the model idserver's
// one-node cluster answers like.
package rediscluster

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Start runs redis-server 7 with cluster-enabled yes on a free port of
// 127.0.0.1 (its bus port 10000 above) in a temporary directory, with
// args as more options, until the test ends; it returns the address
// once the node owns every slot and says cluster_state:ok.
func Start(t testing.TB, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	for try := 0; try < 8; try++ {
		port := 20000 + rand.IntN(30000)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command("redis-server", append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--dir", dir, "--save", "", "--appendonly", "no", "--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", try))}, args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("redis-server (scripts/test.sh installs it): %v", err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		if ready(addr, done) {
			return addr
		}
	}
	t.Fatal("redis-server did not start on any of 8 ports")
	return ""
}

// ready assigns every slot to the node at addr and waits until its
// cluster is ok; false if the server exited first (its port was taken).
func ready(addr string, exited <-chan struct{}) bool {
	deadline := time.Now().Add(30 * time.Second)
	var c net.Conn
	for c == nil {
		select {
		case <-exited:
			return false
		default:
		}
		if time.Now().After(deadline) {
			return false
		}
		c, _ = net.Dial("tcp", addr)
		time.Sleep(20 * time.Millisecond)
	}
	defer c.Close()
	c.SetDeadline(deadline)
	r := bufio.NewReader(c)
	fmt.Fprintf(c, "CLUSTER ADDSLOTSRANGE 0 16383\r\n")
	if _, err := r.ReadString('\n'); err != nil {
		return false
	}
	for time.Now().Before(deadline) {
		fmt.Fprintf(c, "CLUSTER INFO\r\n")
		head, err := r.ReadString('\n')
		if err != nil {
			return false
		}
		n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
		body := make([]byte, n+2)
		if _, err := io.ReadFull(r, body); err != nil {
			return false
		}
		if strings.HasPrefix(string(body), "cluster_state:ok") {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
