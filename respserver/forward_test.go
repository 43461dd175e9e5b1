package respserver

import (
	"context"
	"errors"
	"fmt"
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
			rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 4})
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
