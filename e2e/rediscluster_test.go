package e2e

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testbin"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/internal/testseed"
	"github.com/idserver/idserver/slots"
)

// An op is one reply a cluster client had: to an INCR of key, or an ID
// (key ""); when its request was sent and its reply came, in wall-clock
// ns since the Unix epoch (drivers of other processes report those).
type op struct {
	client     string
	key        string
	value      int64
	sent, recv int64
}

// opLog collects the ops and errors of many clients.
type opLog struct {
	mu    sync.Mutex
	ops   []op
	incrs int
	errs  map[string]map[string]int // by client, then the message's first word
	first map[string]string         // the first message of each, by client and word
}

func newOpLog() *opLog {
	return &opLog{errs: map[string]map[string]int{}, first: map[string]string{}}
}

func (l *opLog) add(o op) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, o)
	if o.key != "" {
		l.incrs++
	}
}

// fail counts an error of client by its message's first word.
func (l *opLog) fail(client, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	word, _, _ := strings.Cut(msg, " ")
	if l.errs[client] == nil {
		l.errs[client] = map[string]int{}
	}
	if l.errs[client][word]++; l.errs[client][word] == 1 {
		l.first[client+" "+word] = msg
	}
}

// count is how many INCRs were answered.
func (l *opLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.incrs
}

// check fails the test if an ID came twice, a key's value came twice, or
// a value is not above every value of its key whose reply came before
// its request was sent, whichever clients they came to; it returns how
// many INCRs and IDs it checked.
func (l *opLog) check(t *testing.T) (incrs, ids int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	byKey := map[string][]op{}
	idTo := map[int64]string{}
	for _, o := range l.ops {
		if o.key != "" {
			byKey[o.key] = append(byKey[o.key], o)
			continue
		}
		if c, ok := idTo[o.value]; ok {
			t.Fatalf("ID %d given twice: to %s and %s", o.value, c, o.client)
		}
		idTo[o.value] = o.client
	}
	at := func(ns int64) string { return time.Unix(0, ns).Format("15:04:05.000000") }
	for key, ops := range byKey {
		byValue := slices.SortedFunc(slices.Values(ops), func(a, b op) int { return cmp.Compare(a.value, b.value) })
		for i := 1; i < len(byValue); i++ {
			if a, b := byValue[i-1], byValue[i]; a.value == b.value {
				t.Fatalf("%s: %d handed out twice, to %s and %s", key, b.value, a.client, b.client)
			}
		}
		// Sweep the requests in the order they were sent, with the
		// largest value of the replies received before each.
		bySent := slices.SortedFunc(slices.Values(ops), func(a, b op) int { return cmp.Compare(a.sent, b.sent) })
		byRecv := slices.SortedFunc(slices.Values(ops), func(a, b op) int { return cmp.Compare(a.recv, b.recv) })
		j, most := 0, op{value: -1}
		for _, o := range bySent {
			for ; j < len(byRecv) && byRecv[j].recv < o.sent; j++ {
				if byRecv[j].value > most.value {
					most = byRecv[j]
				}
			}
			if o.value <= most.value {
				t.Fatalf("%s: %d to %s, sent at %s, not above %d to %s, received at %s before it was sent",
					key, o.value, o.client, at(o.sent), most.value, most.client, at(most.recv))
			}
		}
	}
	return len(l.ops) - len(idTo), len(idTo)
}

// TestRedisClusterOverEtcd: three servers with cluster-enabled yes over a
// real etcd (leases of 2 s) and many cluster clients, each given one
// server's address, INCRing the same 60 keys and asking GETID and MGETID:
// go-redis, rueidis and valkey-go in the test, redis-py, ioredis, node-redis and
// Valkey GLIDE as drivers (clusterdriver_test.go), through a server killed
// and started again, one paused past its lease and resumed, one stopped
// gracefully and started again and etcd restarted, three times in a random
// order (the seed logged), and a fourth server added: every client's
// (sent, received, value) kept, per key no value twice and each above
// every value whose reply came before it was sent; IDs all different.
// It logs, per fault and client, how long until the client had an ID and
// an INCR of a key the struck server served.
func TestRedisClusterOverEtcd(t *testing.T) {
	needDrivers(t)
	e := testetcd.Start(t)
	seed := testseed.Get(t)
	rnd := rand.New(rand.NewPCG(seed, 5))
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()}
	// A server started again serves its old port, as one its service
	// manager restarts: a port kept listening by no server would take a
	// client's connection and never answer, and a client without a read
	// timeout (redis-py's, ioredis's defaults) would wait on it forever.
	ports := []testbin.Socket{testbin.Listen(t, "port"), testbin.Listen(t, "port"), testbin.Listen(t, "port"), testbin.Listen(t, "port")}
	server := func(i int) *process { return memberAt(t, e, ports[i], "--dir", dirs[i], "--cluster-enabled", "yes") }
	servers := newFleet(server(0), server(1), server(2))
	log := newOpLog()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const keys, goRedisClients, rueidisWorkers = 60, 6, 4
	for c := range goRedisClients {
		calls, closeClient := goRedisCluster(servers.at(c).Addr)
		wg.Go(func() {
			defer closeClient()
			clusterLoad(fmt.Sprintf("go-redis#%d", c), calls, log, rand.New(rand.NewPCG(seed, uint64(c+10))), keys, stop)
		})
	}
	calls, closeRueidis, err := rueidisCluster(servers.at(0).Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer closeRueidis()
	for w := range rueidisWorkers {
		wg.Go(func() { clusterLoad("rueidis", calls, log, rand.New(rand.NewPCG(seed, uint64(w+20))), keys, stop) })
	}
	vcalls, closeValkey, err := valkeyGoCluster(servers.at(2).Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer closeValkey()
	for w := range rueidisWorkers {
		wg.Go(func() { clusterLoad("valkey-go", vcalls, log, rand.New(rand.NewPCG(seed, uint64(w+30))), keys, stop) })
	}
	var drivers []*driver
	for i, d := range driverCommands {
		drivers = append(drivers, startDriver(t, d.name, d.dir, servers.at(i+1).Addr, keys, d.argv...))
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
	// Faults begin once every driver has a client that works: one that
	// never had an INCR answered fails the test.
	for _, d := range drivers {
		if !await.Within(time.Minute, d.answered) {
			t.Fatalf("%s had no INCR answered in a minute:\n%s", d.name, d.stderr.String())
		}
	}

	events := []struct {
		name   string
		struck bool // a server, i, and not etcd
		do     func(i int)
	}{
		{"a server killed and started again", true, func(i int) {
			servers.at(i).Kill9()
			servers.replace(i, server(i))
		}},
		{"a server paused past its lease", true, func(i int) {
			p := servers.at(i)
			p.Cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(3 * leaseTTL) // the thing under test: a pause
			p.Cmd.Process.Signal(syscall.SIGCONT)
		}},
		{"a server stopped gracefully and started again", true, func(i int) {
			servers.at(i).Stop()
			servers.replace(i, server(i))
		}},
		{"etcd restarted", false, func(int) {
			e.Kill()
			e.Resume()
		}},
	}
	var faults []fault
	for range 3 { // a slot that moved away comes back: its old values must not
		rnd.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
		for _, ev := range events {
			f, i := fault{name: ev.name}, -1
			if ev.struck {
				i = rnd.IntN(3)
				f.node = servers.at(i).Addr
				f.keys = keysServedBy(servers.at((i+1)%3), f.node, keys)
			}
			f.begin = time.Now()
			ev.do(i)
			f.end = time.Now()
			faults = append(faults, f)
			progress("after " + ev.name)
		}
	}
	fourth := server(3)
	defer fourth.Stop()
	progress("after a fourth server joined")
	// Every client must go on after the faults: a client whose map
	// lost a slot can fail every command from then on (redis-py's and
	// node-redis's did, when a server listed no owner for the slots of a
	// lease that had run out). settleTime gives the slowest to recover
	// (Lettuce, about 11 s after a kill) room to.
	settled := time.Now()
	time.Sleep(settleTime)
	close(stop)
	wg.Wait()
	stop = make(chan struct{}) // for the deferred close
	var stopping sync.WaitGroup
	for _, d := range drivers {
		stopping.Go(func() { d.stop() })
	}
	stopping.Wait()
	for _, d := range drivers {
		if err := d.stop(); err != nil {
			t.Error(err)
		} else if err := d.read(log); err != nil {
			t.Error(err)
		}
	}
	incrs, ids := log.check(t)
	t.Logf("%d INCRs checked, %d IDs", incrs, ids)
	log.report(t, faults, settled)
}

// settleTime is how long the clients run after the last fault (a server
// joined), each to show it goes on.
const settleTime = 15 * time.Second

// A fault is one the test caused: when it began and ended, and the keys
// whose slots the server it struck (node) served just before; no node
// for etcd.
type fault struct {
	name       string
	node       string
	keys       map[string]bool
	begin, end time.Time
}

// keysServedBy is the keys of k0 .. k{keys-1} whose slots p says node
// serves (empty if p does not answer).
func keysServedBy(p *process, node string, keys int) map[string]bool {
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	ranges, _ := c.ClusterSlots(context.Background()).Result()
	served := map[string]bool{}
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		slot := slots.Of([]byte(key))
		for _, r := range ranges {
			if r.Start <= slot && slot <= r.End && len(r.Nodes) > 0 && r.Nodes[0].Addr == node {
				served[key] = true
			}
		}
	}
	return served
}

// report logs each client's INCRs, IDs and errors, and per fault and
// client the time from the fault's beginning to the first reply to a
// request sent after it: an ID, and an INCR of a key the struck server
// served (of any key when etcd was struck). It fails the test for a
// client without INCRs, or none sent after settled, or with an ID it
// could not take exactly.
func (l *opLog) report(t *testing.T, faults []fault, settled time.Time) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	byClient := map[string][]op{}
	for _, o := range l.ops {
		byClient[o.client] = append(byClient[o.client], o)
	}
	clients := slices.Sorted(maps.Keys(byClient))
	for c := range l.errs {
		if byClient[c] == nil {
			clients = append(clients, c)
		}
	}
	first := slices.MinFunc(l.ops, func(a, b op) int { return cmp.Compare(a.sent, b.sent) }).sent
	at := func(ns int64) time.Duration { return time.Duration(ns - first).Round(time.Millisecond) }
	for _, c := range clients {
		incrs, gap, gapAt, last := 0, int64(0), first, first
		for _, o := range slices.SortedFunc(slices.Values(byClient[c]), func(a, b op) int { return cmp.Compare(a.recv, b.recv) }) {
			if o.key != "" {
				incrs++
			}
			if o.recv-last > gap {
				gap, gapAt = o.recv-last, last
			}
			last = o.recv
		}
		t.Logf("%-12s %6d INCRs %6d IDs, errors %v; last reply at %v, longest without one %v from %v",
			c, incrs, len(byClient[c])-incrs, l.errs[c], at(last), time.Duration(gap).Round(time.Millisecond), at(gapAt))
		for _, word := range slices.Sorted(maps.Keys(l.errs[c])) {
			t.Logf("%-12s first %s error: %.300s", c, word, l.first[c+" "+word])
		}
		if incrs == 0 {
			t.Errorf("%s had no INCR answered", c)
		}
		if !slices.ContainsFunc(byClient[c], func(o op) bool { return o.key != "" && o.sent > settled.UnixNano() }) {
			t.Errorf("%s had no INCR answered of those sent in the %v after the faults", c, settleTime)
		}
		if n := l.errs[c]["inexact:"]; n > 0 {
			t.Errorf("%s could not take %d IDs exactly", c, n)
		}
	}
	for _, f := range faults {
		for _, c := range clients {
			id, incr := time.Duration(-1), time.Duration(-1)
			for _, o := range byClient[c] {
				if o.sent < f.begin.UnixNano() {
					continue
				}
				d := time.Duration(o.recv - f.begin.UnixNano())
				if o.key == "" && (id < 0 || d < id) {
					id = d
				}
				if (f.keys[o.key] || f.node == "" && o.key != "") && (incr < 0 || d < incr) {
					incr = d
				}
			}
			shown := func(d time.Duration) string {
				if d < 0 {
					return "none"
				}
				return d.Round(time.Millisecond).String()
			}
			which := fmt.Sprintf("of its %d keys", len(f.keys))
			if f.node == "" {
				which = "of any key"
			}
			t.Logf("failover: %s %s (%v long): %s: first ID after %s, first INCR %s after %s",
				f.name, f.node, f.end.Sub(f.begin).Round(time.Millisecond), c, shown(id), which, shown(incr))
		}
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
	// INCRs go on while it stops.
	await.True(t, 30*time.Second, "after a graceful stop, every key's INCR answered", func() bool { return allAnswered() && isClosed(stopped) })
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
