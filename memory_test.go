package main

import (
	"bufio"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rssMB is the resident memory of pid, in MiB.
func rssMB(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb >> 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestClientsThatNeverRead: four clients pipeline MGETID 10000 and never
// read, reconnecting whenever they are closed, for 6 s, against the server
// on its defaults. Its memory stays bounded (it grew past 1.6 GB before
// the output limits, and to about 300 MiB before client-query-buffer-limit
// bounded the requests waiting behind unread replies), and a client on
// another connection is answered throughout. The bound on PING is loose, for a busy machine: the figure
// itself is logged, and measured by scripts/hostile.sh.
func TestClientsThatNeverRead(t *testing.T) {
	p := start(t, nil)
	pid := p.Cmd.Process.Pid
	stop := time.Now().Add(6 * time.Second)
	batch := []byte(strings.Repeat("MGETID 10000\r\n", 1000))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				c, err := net.Dial("tcp", p.Addr)
				if err != nil {
					t.Error(err)
					return
				}
				for time.Now().Before(stop) {
					c.SetWriteDeadline(stop)
					if _, err := c.Write(batch); err != nil {
						break // closed at the hard limit
					}
				}
				c.Close()
			}
		})
	}
	probe, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	r := bufio.NewReader(probe)
	peak, worst, pings := 0, time.Duration(0), 0
	for time.Now().Before(stop) {
		begin := time.Now()
		probe.SetDeadline(begin.Add(10 * time.Second))
		probe.Write([]byte("PING\r\n"))
		if line, err := r.ReadString('\n'); line != "+PONG\r\n" {
			t.Fatalf("probe: %q, %v", line, err)
		}
		worst = max(worst, time.Since(begin))
		peak = max(peak, rssMB(t, pid))
		pings++
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	closed := 0
	for _, l := range p.Lines() {
		if strings.Contains(l, "closing a client at client-output-buffer-limit") || strings.Contains(l, "reached client-query-buffer-limit") {
			closed++
		}
	}
	t.Logf("peak RSS %d MiB, worst PING %v over %d PINGs, %d limit warnings", peak, worst.Round(time.Millisecond), pings, closed)
	if peak >= 300 {
		t.Errorf("peak RSS %d MiB, want under 300", peak)
	}
	if worst > time.Second {
		t.Errorf("a PING waited %v", worst)
	}
	if closed == 0 {
		t.Error("no client was closed at its output or query buffer limits")
	}
}
