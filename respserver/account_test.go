package respserver

import (
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testseed"
)

// hostileScripts are what a client of TestAccountantRandomClients may do
// on one connection: each writes to c until it has written n batches, or
// the server closes it.
var hostileScripts = []struct {
	name  string
	write func(c net.Conn, r *rand.Rand, n int) error
}{
	{"pipeline never read", func(c net.Conn, r *rand.Rand, n int) error {
		return writeN(c, n, []byte(strings.Repeat("MGETID 1000\r\n", 100)))
	}},
	{"transaction never run", func(c net.Conn, r *rand.Rand, n int) error {
		if _, err := c.Write([]byte("MULTI\r\n")); err != nil {
			return err
		}
		return writeN(c, n, []byte(encode("ECHO", strings.Repeat("t", r.IntN(60<<10)))+"PING\r\nGETID\r\n"))
	}},
	{"big arguments", func(c net.Conn, r *rand.Rand, n int) error {
		return writeN(c, n, []byte(encode("ECHO", strings.Repeat("b", 60<<10))))
	}},
	{"unfinished command", func(c net.Conn, r *rand.Rand, n int) error {
		_, err := fmt.Fprintf(c, "*2\r\n$4\r\nECHO\r\n$65536\r\n%s", strings.Repeat("u", r.IntN(64<<10)))
		return err
	}},
	{"reset while replies are written", func(c net.Conn, r *rand.Rand, n int) error {
		// Closed with a reset (SO_LINGER 0) right behind its requests: the
		// server's write of their replies may fail, and gnet close the
		// connection inside that write.
		err := writeN(c, n, []byte(strings.Repeat("MGETID 1000\r\n", 10)))
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
		return err
	}},
	{"reads its replies", func(c net.Conn, r *rand.Rand, n int) error {
		buf := make([]byte, 64<<10)
		for range n {
			if _, err := c.Write([]byte("MGETID 100\r\n")); err != nil {
				return err
			}
			if _, err := c.Read(buf); err != nil {
				return err
			}
		}
		return nil
	}},
}

// writeN writes b to c n times.
func writeN(c net.Conn, n int, b []byte) error {
	for range n {
		if _, err := c.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// TestAccountantRandomClients: 24 clients run scripts drawn from a logged
// seed (pipelines never read, transactions never run, big arguments,
// unfinished commands, honest reads), on connections they keep, drop or
// have closed or reset. The oracle, sampled every 5 ms: no client is
// charged more than its hard limit, all of them no more than
// maxmemory-clients plus a hard limit per loop (charged concurrently),
// and the live heap grows by no more than a budget; a client on another
// connection is answered throughout; once every client is gone, nothing
// is charged any more.
func TestAccountantRandomClients(t *testing.T) {
	const hard, bound = 1 << 20, 4 << 20
	s, addr := startServer(t, idgen.Settings{Layout: idgen.Layout{IDBits: 2, ShardBits: 19}}, Options{ConnOptions: ConnOptions{
		MaxMemoryClients: bound, QueryBufferLimit: 256 << 10,
		Output: OutputLimits{Hard: hard, Soft: hard / 2, SoftFor: time.Second},
	}})
	seed := testseed.Get(t)
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	ran := make([]int, len(hostileScripts))
	var ranMu sync.Mutex
	for i := range 24 {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Go(func() {
			for time.Now().Before(stop) {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					return // the test is over, and the server closed
				}
				c.SetDeadline(stop)
				k := r.IntN(len(hostileScripts))
				hostileScripts[k].write(c, r, 1+r.IntN(50))
				ranMu.Lock()
				ran[k]++
				ranMu.Unlock()
				if r.IntN(2) == 0 {
					c.Close()
				} else {
					defer c.Close() // kept open, holding what it sent
				}
			}
		})
	}
	probe := dialRaw(t, addr)
	// The live heap as of the last collection, against its level before:
	// garbage the collector has not reached yet is not the server's.
	runtime.GC()
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	base, budget := live[0].Value.Uint64(), uint64(48<<20)
	worstTotal, worstHeap := int64(0), uint64(0)
	var failure string
	for time.Now().Before(stop) && failure == "" {
		total := s.Stats().ClientMem
		worstTotal = max(worstTotal, total)
		if limit := int64(bound + runtime.GOMAXPROCS(0)*hard); total > limit {
			failure = fmt.Sprintf("clients charged %d bytes, over maxmemory-clients %d plus a hard limit per loop", total, bound)
		}
		for _, c := range s.conns.Conns() {
			if n := c.Mem(); n > hard {
				failure = fmt.Sprintf("a client is charged %d bytes, over its hard limit %d", n, hard)
			}
		}
		metrics.Read(live)
		grown := live[0].Value.Uint64() - min(base, live[0].Value.Uint64())
		worstHeap = max(worstHeap, grown)
		if grown > budget {
			failure = fmt.Sprintf("the live heap grew by %d MiB, over %d MiB", grown>>20, budget>>20)
		}
		if v := probe.do("PING"); v != "PONG" {
			failure = fmt.Sprintf("probe: %v", v)
		}
		time.Sleep(5 * time.Millisecond) // the next sample: the bounds must hold all the while the load runs
	}
	wg.Wait()
	if failure != "" {
		t.Fatal(failure)
	}
	probe.conn.Close()
	if !await.Within(time.Minute, func() bool { return len(s.conns.Conns()) == 0 && s.Stats().ClientMem == 0 }) {
		t.Fatalf("every client gone, yet %d connections listed and %d bytes charged", len(s.conns.Conns()), s.Stats().ClientMem)
	}
	st := s.Stats()
	t.Logf("scripts run %v; clients charged at most %d KiB in all, the live heap grew at most %d MiB; closed at the query limit %d, the output limits %d, maxmemory-clients %d",
		ran, worstTotal>>10, worstHeap>>20, st.QueryClosed, st.LimitClosed, st.Evicted)
	if st.Evicted+st.LimitClosed+st.QueryClosed == 0 {
		t.Error("no client was closed at any limit")
	}
}
