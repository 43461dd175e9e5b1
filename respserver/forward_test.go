package respserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/testseed"
	"github.com/idserver/idserver/slots"
)

// owners is servers that split the slots among them with a static Owner
// (cluster-enabled no): server i owns the i-th of len(addrs) equal
// ranges.
type owners struct {
	addrs   []string
	servers []*Server
}

// ownerIndex is the server owning slot among n.
func ownerIndex(slot, n int) int { return slot * n / slots.N }

// startOwners runs n servers with sequences, each forwarding the keys of
// the others' slots; opts is each server's Options beside Owner.
func startOwners(t *testing.T, n int, opts Options) *owners {
	t.Helper()
	o := &owners{}
	lns := make([]net.Listener, n)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		o.addrs = append(o.addrs, ln.Addr().String())
	}
	for i, ln := range lns {
		opts := withSequences(t, opts)
		opts.Owner = func(slot int) (string, bool, bool) {
			j := ownerIndex(slot, n)
			return o.addrs[j], j == i, true
		}
		o.servers = append(o.servers, serveOn(t, ln, opts))
	}
	return o
}

// serveOn runs a server with opts on ln until the test ends.
func serveOn(t *testing.T, ln net.Listener, opts Options) *Server {
	t.Helper()
	g, err := idgen.New(idgen.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Generator = g
	s := New(opts)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return s
}

// keyOf returns a key whose slot server i of n owns, made from prefix.
func keyOf(prefix string, i, n int) string {
	for j := 0; ; j++ {
		k := fmt.Sprintf("%s:%d", prefix, j)
		if ownerIndex(slots.Of([]byte(k)), n) == i {
			return k
		}
	}
}

// TestForwardPipeline: on a server that owns none of their keys, a
// pipeline mixing forwarded and local commands gets every reply in
// order, with the owner's values; transactions go whole to one owner,
// and are refused, with nothing applied, when their keys have two.
func TestForwardPipeline(t *testing.T) {
	o := startOwners(t, 2, Options{})
	here, there := keyOf("here", 0, 2), keyOf("there", 1, 2)
	owner := dialRaw(t, o.addrs[1])
	for range 5 {
		owner.do("INCR", there)
	}
	c := dialRaw(t, o.addrs[0])
	cmds := [][]string{
		{"INCR", there}, {"INCR", here}, {"GET", there}, {"PING"}, {"INCRBY", there, "10"}, {"GET", here},
		{"MULTI"}, {"INCR", there}, {"GET", there}, {"EXEC"},
		{"MGET", there, here}, {"WATCH", there},
		{"MULTI"}, {"INCR", there}, {"INCR", here}, {"EXEC"},
		{"GET", there}, {"GET", here}, {"EXISTS", there},
	}
	want := []any{
		int64(6), int64(1), "6", "PONG", int64(16), "1",
		"OK", "QUEUED", "QUEUED", []any{int64(17), "17"},
		errors.New("CROSSSLOT Keys in request don't hash to the same slot (nor to slots of one server: they would be applied in part)"),
		errWatchForwarded,
		"OK", "QUEUED", "QUEUED", errors.New("EXECABORT Transaction discarded because of: CROSSSLOT Keys in request don't hash to the same slot (nor to slots of one server: they would be applied in part)"),
		"17", "1", int64(1),
	}
	var req strings.Builder
	for _, cmd := range cmds {
		req.WriteString(encode(cmd...))
	}
	c.send(req.String())
	got := make([]any, len(cmds))
	for i := range got {
		got[i] = c.reply()
	}
	for i := range cmds {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Errorf("%q: got %v, want %v", cmds[i], got[i], want[i])
		}
	}
}

// incrOp is one INCR as a client saw it: sent at start, its value back
// at end.
type incrOp struct {
	start, end time.Time
	v          int64
}

// TestForwardOrderAcrossServers: plain clients (go-redis) on each of
// three servers INCR the same keys at once; per key, every value is
// given once and values increase in real time across all servers (the
// oracle: a reply received before another INCR was sent holds a smaller
// value), as a cluster client gets from the owner.
func TestForwardOrderAcrossServers(t *testing.T) {
	seed := testseed.Get(t)
	o := startOwners(t, 3, Options{})
	rng := rand.New(rand.NewPCG(seed, 41))
	keys := make([]string, 4+rng.IntN(8))
	for i := range keys {
		keys[i] = fmt.Sprintf("order:%d:%d", rng.IntN(1000), i)
	}
	var mu sync.Mutex
	ops := map[string][]incrOp{}
	var wg sync.WaitGroup
	for i, addr := range o.addrs {
		for j := range 4 {
			rng := rand.New(rand.NewPCG(seed, uint64(i*10+j)))
			rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 4, Protocol: 2 + j%2})
			t.Cleanup(func() { rdb.Close() })
			wg.Go(func() {
				ctx := context.Background()
				for range 400 {
					key := keys[rng.IntN(len(keys))]
					start := time.Now()
					v, err := rdb.Incr(ctx, key).Result()
					end := time.Now()
					if err != nil {
						t.Errorf("INCR %s on %s: %v", key, addr, err)
						return
					}
					mu.Lock()
					ops[key] = append(ops[key], incrOp{start, end, v})
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for key, kops := range ops {
		checkRealTimeOrder(t, key, kops)
		last := slices.MaxFunc(kops, func(a, b incrOp) int { return int(a.v - b.v) }).v
		for _, addr := range o.addrs {
			if got := dialRaw(t, addr).do("GET", key); got != fmt.Sprint(last) {
				t.Errorf("GET %s on %s: %v, want %d, the last value given", key, addr, got, last)
			}
		}
	}
}

// checkRealTimeOrder checks one key's INCRs: no value twice, and none
// smaller than a value whose reply came before it was sent.
func checkRealTimeOrder(t *testing.T, key string, ops []incrOp) {
	t.Helper()
	seen := map[int64]bool{}
	for _, op := range ops {
		if seen[op.v] {
			t.Errorf("%s: value %d given twice", key, op.v)
		}
		seen[op.v] = true
	}
	byEnd := slices.Clone(ops)
	slices.SortFunc(byEnd, func(a, b incrOp) int { return a.end.Compare(b.end) })
	slices.SortFunc(ops, func(a, b incrOp) int { return a.start.Compare(b.start) })
	var done int
	var most int64 // the largest value whose reply came before ops[i] was sent
	for _, op := range ops {
		for ; done < len(byEnd) && byEnd[done].end.Before(op.start); done++ {
			most = max(most, byEnd[done].v)
		}
		if op.v <= most {
			t.Errorf("%s: INCR sent at %s got %d, after a reply of %d had come", key, op.start.Format(time.StampMicro), op.v, most)
		}
	}
}

// TestForwardOwnerStops: clients INCRing another server's keys while
// that server stops get error replies naming the owner, at once rather
// than after a hang, and the forwarding server goes on serving its own.
func TestForwardOwnerStops(t *testing.T) {
	o := startOwners(t, 2, Options{})
	here, there := keyOf("here", 0, 2), keyOf("there", 1, 2)
	rdb := redis.NewClient(&redis.Options{Addr: o.addrs[0], ReadTimeout: time.Minute, MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	if _, err := rdb.Incr(ctx, there).Result(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stopped := make(chan struct{})
	var errs sync.Map
	for range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				start := time.Now()
				_, err := rdb.Incr(ctx, there).Result()
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("an INCR took %v", d)
				}
				if err != nil {
					errs.Store(err.Error(), true)
				}
				select {
				case <-stopped:
					if i > 50 {
						return
					}
				default:
					i = 0
				}
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // a stream in flight, not a condition
	o.servers[1].Close()
	close(stopped)
	wg.Wait()
	n := 0
	errs.Range(func(k, _ any) bool {
		n++
		if msg := k.(string); !strings.HasPrefix(msg, "TRYAGAIN ") || !strings.Contains(msg, o.addrs[1]) {
			t.Errorf("error %q: want -TRYAGAIN naming the owner %s", msg, o.addrs[1])
		}
		return true
	})
	if n == 0 {
		t.Error("no error once the owner stopped")
	}
	if v, err := rdb.Incr(ctx, here).Result(); err != nil || v != 1 {
		t.Errorf("INCR of a key of its own: %v, %v", v, err)
	}
}

// TestForwardNoLoop: two servers that each take the other for a key's
// owner (their views differ for a moment) answer -TRYAGAIN rather than
// pass the command back and forth: a command that came forwarded is
// never forwarded again.
func TestForwardNoLoop(t *testing.T) {
	lns := make([]net.Listener, 2)
	addrs := make([]string, 2)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], addrs[i] = ln, ln.Addr().String()
	}
	for i, ln := range lns {
		opts := withSequences(t, Options{})
		opts.Owner = func(int) (string, bool, bool) { return addrs[1-i], false, true }
		serveOn(t, ln, opts)
	}
	c := dialRaw(t, addrs[0])
	got := fmt.Sprint(c.do("INCR", "k"))
	if want := errNotOwnerNow.Error(); got != want {
		t.Errorf("INCR: %v, want %v", got, want)
	}
}

// TestForwardNonReader: a client that sends GETs of another server's
// key and never reads is held and then closed at its hard output limit
// on the forwarding server, which counts the owner's replies as its own:
// it does not hold them without bound.
func TestForwardNonReader(t *testing.T) {
	o := startOwners(t, 2, Options{ConnOptions: ConnOptions{Output: OutputLimits{Soft: 256 << 10, Hard: 1 << 20}, QueryBufferLimit: 64 << 20}})
	key := keyOf("k", 1, 2)
	dialRaw(t, o.addrs[1]).do("INCRBY", key, "1000000")
	flood, other := dialRaw(t, o.addrs[0]), dialRaw(t, o.addrs[0])
	if v := flood.do("GET", key); v != "1000000" {
		t.Fatalf("GET %s: %v, want the owner's 1000000", key, v)
	}
	// Inline GETs: each reply, "$7\r\n1000000\r\n", is larger than its
	// request.
	floodUntilClosed(t, flood, other, []byte(strings.Repeat("GET "+key+"\r\n", 10000)), 256<<20, "the client that never reads")
	awaitInfo(t, other, "client_output_buffer_limit_disconnections:1\r\n")
	if mem := o.servers[0].Stats().ClientMem; mem > 4<<20 {
		t.Errorf("the clients hold %d bytes after the flood", mem)
	}
}

// TestForwardRESP3: a client that said HELLO 3 gets the owner's RESP3
// replies (its nulls), forwarded on a connection of that protocol.
func TestForwardRESP3(t *testing.T) {
	o := startOwners(t, 2, Options{})
	c := dialRaw(t, o.addrs[0])
	if _, ok := c.do("HELLO", "3").(map[string]any); !ok {
		t.Fatal("HELLO 3: no map")
	}
	a, b := keyOf("none", 1, 2), keyOf("none2", 1, 2)
	c.send(encode("GET", a) + encode("MGET", a, b) + encode("MULTI") + encode("GET", b) + encode("EXEC"))
	want := "_\r\n*2\r\n_\r\n_\r\n+OK\r\n+QUEUED\r\n*1\r\n_\r\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c.r, got); err != nil || string(got) != want {
		t.Errorf("replies %q (%v), want %q", got, err, want)
	}
}
