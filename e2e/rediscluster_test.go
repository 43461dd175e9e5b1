package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/internal/testseed"
)

// An op is one INCR a cluster client sent and had answered: when it was
// sent, when its reply came, and the value.
type op struct {
	key        string
	value      int64
	sent, recv time.Time
}

// opLog collects the ops of many clients.
type opLog struct {
	mu   sync.Mutex
	ops  []op
	ids  map[int64]bool
	errs map[string]int
	dup  int64 // an ID seen twice, 0 if none
}

func (l *opLog) add(o op) {
	l.mu.Lock()
	l.ops = append(l.ops, o)
	l.mu.Unlock()
}

func (l *opLog) id(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ids[id] {
		l.dup = id
	}
	l.ids[id] = true
}

func (l *opLog) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	word, _, _ := strings.Cut(err.Error(), " ")
	l.errs[word]++
}

func (l *opLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ops)
}

// check fails the test if a key's value came twice, or a value is not
// above every value of its key whose reply came before its request was
// sent; it returns how many values it checked.
func (l *opLog) check(t *testing.T) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dup != 0 {
		t.Fatalf("GETID gave %d twice", l.dup)
	}
	byKey := map[string][]op{}
	for _, o := range l.ops {
		byKey[o.key] = append(byKey[o.key], o)
	}
	for key, ops := range byKey {
		byValue := slices.SortedFunc(slices.Values(ops), func(a, b op) int { return cmp.Compare(a.value, b.value) })
		for i := 1; i < len(byValue); i++ {
			if byValue[i].value == byValue[i-1].value {
				t.Fatalf("%s: %d handed out twice", key, byValue[i].value)
			}
		}
		// Sweep the requests in the order they were sent, with the
		// largest value of the replies received before each.
		bySent := slices.SortedFunc(slices.Values(ops), func(a, b op) int { return a.sent.Compare(b.sent) })
		byRecv := slices.SortedFunc(slices.Values(ops), func(a, b op) int { return a.recv.Compare(b.recv) })
		j, most := 0, op{value: -1}
		for _, o := range bySent {
			for ; j < len(byRecv) && byRecv[j].recv.Before(o.sent); j++ {
				if byRecv[j].value > most.value {
					most = byRecv[j]
				}
			}
			if o.value <= most.value {
				t.Fatalf("%s: %d, sent at %s, not above %d, received at %s before it was sent",
					key, o.value, o.sent.Format("15:04:05.000000"), most.value, most.recv.Format("15:04:05.000000"))
			}
		}
	}
	return len(l.ops)
}

// TestRedisClusterOverEtcd: three servers with cluster-enabled yes over a
// real etcd (leases of 2 s) and go-redis cluster clients given one
// address each, INCRing 60 keys and asking GETID, through a server killed
// and started again, one paused past its lease and resumed, one stopped
// gracefully and started again and etcd restarted, three times in a random
// order (the seed logged), and a fourth server added: every
// (sent, received, value) kept, per key no value twice and each above
// every value whose reply came before it was sent; GETIDs all different.
func TestRedisClusterOverEtcd(t *testing.T) {
	e := testetcd.Start(t)
	seed := testseed.Get(t)
	rnd := rand.New(rand.NewPCG(seed, 5))
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()}
	server := func(i int) *process { return member(t, e, "--dir", dirs[i], "--cluster-enabled", "yes") }
	servers := newFleet(server(0), server(1), server(2))
	log := &opLog{ids: map[int64]bool{}, errs: map[string]int{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const keys, clients = 60, 6
	for c := range clients {
		wg.Go(func() { clusterLoad(servers.at(c).Addr, log, rand.New(rand.NewPCG(seed, uint64(c+10))), keys, stop) })
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	progress := func(what string) {
		t.Helper()
		n, begin := log.count(), time.Now()
		defer func() {
			t.Logf("%s: %d INCRs, 2000 more in %v", what, log.count(), time.Since(begin).Round(time.Millisecond))
		}()
		if !await.Within(3*time.Minute, func() bool { return log.count() > n+2000 }) {
			for _, p := range servers.all() {
				t.Logf("%s: %s | %s | %s", p.Addr, rawCmd(p, "CLUSTER", "SLOTS"), clusterInfo(p, "cluster_state"), clusterInfo(p, "held_server_id"))
			}
			log.mu.Lock()
			t.Logf("errors: %v", log.errs)
			log.mu.Unlock()
			t.Fatalf("INCRs are not answered %s", what)
		}
	}
	progress("at first")

	events := []struct {
		name string
		do   func()
	}{
		{"a server killed and started again", func() {
			i := rnd.IntN(3)
			servers.at(i).Kill9()
			servers.replace(i, server(i))
		}},
		{"a server paused past its lease", func() {
			p := servers.at(rnd.IntN(3))
			p.Cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(3 * leaseTTL) // the thing under test: a pause
			p.Cmd.Process.Signal(syscall.SIGCONT)
		}},
		{"a server stopped gracefully and started again", func() {
			i := rnd.IntN(3)
			servers.at(i).Stop()
			servers.replace(i, server(i))
		}},
		{"etcd restarted", func() {
			e.Kill()
			e.Resume()
		}},
	}
	for range 3 { // a slot that moved away comes back: its old values must not
		rnd.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
		for _, ev := range events {
			ev.do()
			progress("after " + ev.name)
		}
	}
	fourth := server(3)
	defer fourth.Stop()
	progress("after a fourth server joined")
	close(stop)
	wg.Wait()
	stop = make(chan struct{}) // for the deferred close
	t.Logf("%d INCRs checked, %d IDs, error replies %v", log.check(t), len(log.ids), log.errs)
}

// clusterLoad has a go-redis cluster client, given addr, INCR random keys
// of keys and ask GETID until stop, into log.
func clusterLoad(addr string, log *opLog, rnd *rand.Rand, keys int, stop <-chan struct{}) {
	// go-redis reads the slots again every ClusterStateReloadInterval (60
	// s by default) or on a MOVED: a client whose map sends a slot to a
	// server gone (killed, or stopped: the test keeps its port, so that it
	// answers nothing) errs on it until then. 5 s keeps the test short;
	// the figures on defaults are in docs/cluster.md.
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ReadTimeout: time.Second, WriteTimeout: time.Second,
		ClusterStateReloadInterval: 5 * time.Second})
	defer c.Close()
	ctx := context.Background()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if rnd.IntN(8) == 0 {
			id, err := c.Do(ctx, "GETID").Int64()
			if err == nil {
				log.id(id)
			} else {
				log.fail(err)
			}
			continue
		}
		key := fmt.Sprintf("k%d", rnd.IntN(keys))
		sent := time.Now()
		v, err := c.Incr(ctx, key).Result()
		recv := time.Now()
		if err != nil {
			log.fail(err)
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // a client's own pace after an error
			continue
		}
		log.add(op{key: key, value: v, sent: sent, recv: recv})
	}
}

// rawCmd is p's reply to args, flattened, for a log.
func rawCmd(p *process, args ...any) string {
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil {
		return err.Error()
	}
	return fmt.Sprint(v)
}

// TestRedisClusterGracefulStopRedirects: at a graceful stop a Redis
// Cluster node hands its slots over while it still answers, so that a
// go-redis cluster client on its defaults (which reads the slots again
// only every minute, or on -MOVED) is told -MOVED and goes on with the
// other node within seconds, rather than erring on those slots for a
// minute at a port closed (the test keeps the port: it answers nothing).
func TestRedisClusterGracefulStopRedirects(t *testing.T) {
	e := testetcd.Start(t)
	a := member(t, e, "--cluster-enabled", "yes")
	b := member(t, e, "--cluster-enabled", "yes")
	waitHolding(t, a, 10*time.Second)
	waitHolding(t, b, 10*time.Second)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{a.Addr, b.Addr}, ReadTimeout: time.Second, WriteTimeout: time.Second})
	defer c.Close()
	ctx := context.Background()
	keys := make([]string, 40) // over both nodes' slots
	for i := range keys {
		keys[i] = fmt.Sprintf("g%d", i)
	}
	allAnswered := func() bool {
		for _, k := range keys {
			if _, err := c.Incr(ctx, k).Result(); err != nil {
				return false
			}
		}
		return true
	}
	await.True(t, 20*time.Second, "both nodes serve their slots", allAnswered)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		a.Stop()
	}()
	begin := time.Now()
	for !allAnswered() || !isClosed(stopped) { // INCRs go on while it stops
		if time.Since(begin) > 30*time.Second {
			t.Fatalf("after a graceful stop, INCRs of some keys still fail after %v", time.Since(begin))
		}
	}
	t.Logf("a graceful stop: every key answered again %v after it began", time.Since(begin).Round(time.Millisecond))
}

// isClosed reports whether ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
