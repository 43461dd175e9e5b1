package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idserver/idserver/internal/testetcd"
)

// peakMB is the peak resident memory of pid so far (VmHWM), in MiB.
func peakMB(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb >> 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// attack prepares what one hostile client sends, and returns what it
// does until stop: it dials addr, misbehaves, and dials again whenever
// the server closes it. (Preparing comes before the attack's time
// starts: a 64 MiB command took seconds to make under -race.)
type attack func(addr string) (run func(stop time.Time))

// underAttack runs n clients of a against p for d while a probe on
// another connection PINGs every 20 ms, and returns p's peak RSS in MiB,
// the worst PING, and how many clients p closed at a limit (its log).
func underAttack(t *testing.T, p *process, n int, d time.Duration, a attack) (peak int, worst time.Duration, closed int) {
	t.Helper()
	runs := make([]func(time.Time), n)
	for i := range runs {
		runs[i] = a(p.Addr)
	}
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(func() { run(stop) })
	}
	if os.Getenv("HOSTILE_CLI_LATENCY") != "" { // scripts/hostile.sh: latency as a user sees it
		wg.Go(func() { cliLatency(t, p.Addr, d) })
	}
	probe, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	r := bufio.NewReader(probe)
	for time.Now().Before(stop) {
		begin := time.Now()
		probe.SetDeadline(begin.Add(10 * time.Second))
		probe.Write([]byte("PING\r\n"))
		if line, err := r.ReadString('\n'); line != "+PONG\r\n" {
			t.Fatalf("probe: %q, %v", line, err)
		}
		worst = max(worst, time.Since(begin))
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	for _, l := range p.Lines() {
		if strings.Contains(l, "closing a client") {
			closed++
		}
	}
	return peakMB(t, p.Cmd.Process.Pid), worst, closed
}

// cliLatency runs redis-cli --latency against addr for d, and logs what
// it measured: min, max and average in ms, and the samples.
func cliLatency(t *testing.T, addr string, d time.Duration) {
	_, port, _ := net.SplitHostPort(addr)
	out, _ := exec.Command("timeout", "-s", "INT", fmt.Sprint(d.Seconds()), "redis-cli", "-p", port, "--latency").Output()
	f := strings.Fields(string(out))
	if len(f) != 4 {
		t.Errorf("redis-cli --latency said %q", out)
		return
	}
	t.Logf("redis-cli --latency: min %s ms, max %s ms, avg %s ms (%s samples)", f[0], f[1], f[2], f[3])
}

// redial runs session on new connections to addr until stop; a session
// returns when its connection fails (the server closed it).
func redial(addr string, stop time.Time, session func(c net.Conn)) {
	for time.Now().Before(stop) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		c.SetDeadline(stop)
		session(c)
		c.Close()
	}
}

// writeUntil writes b to c until stop or an error.
func writeUntil(c net.Conn, b []byte, stop time.Time) {
	for time.Now().Before(stop) {
		if _, err := c.Write(b); err != nil {
			return
		}
	}
}

// The attacks of issue 19, each as a client repeats it.
var (
	// neverRead pipelines MGETID 10000 and never reads.
	neverRead attack = func(addr string) func(time.Time) {
		batch := []byte(strings.Repeat("MGETID 10000\r\n", 1000))
		return func(stop time.Time) { redial(addr, stop, func(c net.Conn) { writeUntil(c, batch, stop) }) }
	}
	// multiFlood sends MULTI, then PINGs, and never reads.
	multiFlood attack = func(addr string) func(time.Time) {
		batch := []byte(strings.Repeat("PING\r\n", 10000))
		return func(stop time.Time) {
			redial(addr, stop, func(c net.Conn) {
				if _, err := c.Write([]byte("MULTI\r\n")); err == nil {
					writeUntil(c, batch, stop)
				}
			})
		}
	}
	// unfinished sends a legal command of 1024 bulks of 64 KiB, all but
	// its last byte, and waits.
	unfinished attack = func(addr string) func(time.Time) {
		bulk := append(append([]byte("$65536\r\n"), bytes.Repeat([]byte("x"), 64<<10)...), "\r\n"...)
		return func(stop time.Time) {
			redial(addr, stop, func(c net.Conn) {
				if _, err := c.Write([]byte("*1024\r\n")); err != nil {
					return
				}
				for range 1023 {
					if _, err := c.Write(bulk); err != nil {
						return
					}
				}
				c.Write(bulk[:len(bulk)-1])
				c.Read(make([]byte, 1)) // until closed, or stop
			})
		}
	}
	// bracketSets sends CONFIG GET with 1022 unclosed 64 KiB sets, each
	// of ranges over every byte, and waits for the reply.
	bracketSets attack = func(addr string) func(time.Time) {
		arg := append([]byte("[")[:1:1], bytes.Repeat([]byte("\x00-\xff"), (64<<10)/3)...)
		var cmd bytes.Buffer
		fmt.Fprintf(&cmd, "*1024\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n")
		for range 1022 {
			fmt.Fprintf(&cmd, "$%d\r\n%s\r\n", len(arg), arg)
		}
		return func(stop time.Time) {
			redial(addr, stop, func(c net.Conn) {
				if _, err := c.Write(cmd.Bytes()); err == nil {
					c.Read(make([]byte, 1))
				}
			})
		}
	}
)

// hostileTarget starts the server the attacks go to: the binary on its
// defaults, or with HOSTILE_ETCD set (scripts/hostile.sh) a Redis
// Cluster node over etcd owning every slot, whose keys' values come from
// the sequence engine.
func hostileTarget(t *testing.T) *process {
	if os.Getenv("HOSTILE_ETCD") == "" {
		return start(t, nil)
	}
	p := member(t, testetcd.Start(t), "--cluster-enabled", "yes")
	awaitClusterOK(t, []*process{p})
	return p
}

// TestHostileClientsMemory runs each attack of issue 19 against the
// binary on its defaults: 4 clients that never read, 20 MULTI floods, 10
// unfinished 64 MiB commands, 2 clients of hostile CONFIG GETs. Each
// leaves the server's peak RSS under its bound (4 clients that never
// read peaked at 240-319 MiB; 30 unfinished commands held 3.5 GiB; 20
// MULTI floods 1.3 GiB) and a client on another connection is answered
// throughout. The worst PING is logged, not asserted tightly: this
// machine is shared (scripts/hostile.sh prints the figures).
func TestHostileClientsMemory(t *testing.T) {
	for _, tt := range []struct {
		name  string
		n     int
		a     attack
		bound int // MiB
	}{
		{"never read", 4, neverRead, 200},
		{"MULTI floods", 20, multiFlood, 400},
		{"unfinished 64 MiB commands", 10, unfinished, 400},
		{"bracket-set CONFIG GETs", 2, bracketSets, 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := hostileTarget(t)
			peak, worst, closed := underAttack(t, p, tt.n, 4*time.Second, tt.a)
			t.Logf("%d clients: peak RSS %d MiB, worst PING %v, %d closes logged (rate-limited), evicted_clients %s",
				tt.n, peak, worst.Round(time.Millisecond), closed, processInfo(p, "stats", "evicted_clients"))
			if peak >= tt.bound {
				t.Errorf("peak RSS %d MiB, want under %d", peak, tt.bound)
			}
			// A stall, not a figure: under two CPU hogs a PING once
			// waited 1.1 s (quiet: 50-140 ms); a server that stops
			// answering for the attack's 4 s still fails.
			if worst > 2500*time.Millisecond {
				t.Errorf("a PING waited %v", worst)
			}
			if closed == 0 {
				t.Error("no client was closed at a limit")
			}
		})
	}
}
