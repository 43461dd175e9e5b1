package seqslots

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/internal/testseed"
	"github.com/idserver/idserver/seqpull"
	"github.com/idserver/idserver/sequence"
)

// A testCluster is servers' engines over one etcd, in this process, each
// on its own directory, with the slots assigned by the test as the slot
// keeper would (what moves is let go by its old owner first).
type testCluster struct {
	t     *testing.T
	etcd  *testetcd.Server
	steps Steps

	mu     sync.Mutex
	live   map[int64]*testNode
	owners map[int]int64 // by slot
	others []*Known      // servers that only follow the records, asked too
	noPull bool          // every pull fails, as from an owner that does not answer
	// beforeGens, if set before a server starts, runs before each write
	// of its slots' generations to its file; the write fails with its
	// error, if any.
	beforeGens func() error
	// afterAsk, if set before a server starts, runs once it asked the
	// others what they saw (between its take's read and its write).
	afterAsk func(self int64)
	// unfollowing, if set before a server starts, has its Known not
	// follow the records: it sees only its own writes and what it asks.
	unfollowing bool
	// wait, if set before a server starts, is how long its requests
	// wait (sequence.Options.Wait; 5 s if 0).
	wait time.Duration
}

// hookedStore is a File that runs before ahead of each SetSlotGens, and
// fails it with before's error.
type hookedStore struct {
	*sequence.File
	before func() error
}

func (h hookedStore) SetSlotGens(ctx context.Context, gens map[int]int64) error {
	if h.before != nil {
		if err := h.before(); err != nil {
			return err
		}
	}
	return h.File.SetSlotGens(ctx, gens)
}

type testNode struct {
	id     int64
	dir    string
	file   *sequence.File
	table  *sequence.Table
	known  *Known
	slots  *Slots
	eng    *Engine
	cancel context.CancelFunc
	gone   chan struct{} // closed when it crashes
}

func newTestCluster(t *testing.T, steps Steps) *testCluster {
	return &testCluster{t: t, etcd: testetcd.Start(t), steps: steps, live: map[int64]*testNode{}, owners: map[int]int64{}}
}

// start starts server-id id on dir, serving what the assignment gives it.
func (c *testCluster) start(id int64, dir string) *testNode {
	c.t.Helper()
	file, known, _, err := sequence.OpenFile(filepath.Join(dir, "seq"))
	if err != nil {
		c.t.Fatal(err)
	}
	gens := file.SlotGens()
	gate := NewGate(file)
	table := sequence.New(sequence.Options{KeepSlot: func(slot int) bool { return gens[slot] > 0 }, Wait: c.wait}, gate, known)
	ask := func(ctx context.Context, list []int) []map[int]string {
		answers := c.ask(id, list)
		if c.afterAsk != nil {
			c.afterAsk(id)
		}
		return answers
	}
	eng := NewEngine(EngineConfig{Store: hookedStore{file, c.beforeGens}, Pull: c.pull, Ask: ask, Wait: 10 * time.Second, Log: zerolog.Nop()}, table, gate)
	cli := c.etcd.Client()
	ctx, cancel := context.WithCancel(context.Background())
	seen := NewKnown(nil, nil, zerolog.Nop())
	s := New(Config{Client: cli, Prefix: "/t/", Owner: id, Steps: c.steps, Known: seen})
	go s.Run(ctx)
	if !c.unfollowing {
		go seen.Follow(ctx, cli, "/t/")
	}
	eng.Attach(s)
	n := &testNode{id: id, dir: dir, file: file, table: table, known: seen, slots: s, eng: eng, cancel: func() { cancel(); cli.Close() }, gone: make(chan struct{})}
	c.mu.Lock()
	c.live[id] = n
	c.mu.Unlock()
	c.serve(n)
	return n
}

// serve gives n what the assignment gives its id.
func (c *testCluster) serve(n *testNode) {
	c.mu.Lock()
	served := make([]bool, 16384)
	for s, id := range c.owners {
		served[s] = id == n.id
	}
	c.mu.Unlock()
	n.eng.Serve(served)
}

// stop stops n gracefully: its slots, given to others first, handed
// over.
func (c *testCluster) stop(n *testNode) {
	c.mu.Lock()
	delete(c.live, n.id)
	c.mu.Unlock()
	n.eng.Serve(nil)
	n.eng.Stop()
	if err := n.table.Stop(context.Background()); err != nil {
		c.t.Error(err)
	}
	n.cancel()
	n.file.Close()
}

// crash abandons n with its directory, as a server whose disk went with
// it: no pull reaches it, and its raises stop.
func (c *testCluster) crash(n *testNode) {
	c.mu.Lock()
	delete(c.live, n.id)
	c.mu.Unlock()
	close(n.gone)
	n.eng.Serve(nil) // what it would serve no longer matters: no client reaches it
	n.eng.Stop()
	n.cancel()
	c.t.Cleanup(func() { n.table.Stop(context.Background()); n.file.Close() })
}

// assign moves slot to id: let go by its old owner, then given.
func (c *testCluster) assign(slot int, id int64) {
	c.mu.Lock()
	old, had := c.owners[slot]
	c.owners[slot] = id
	from, to := c.live[old], c.live[id]
	c.mu.Unlock()
	if had && from != nil {
		c.serve(from)
	}
	if to != nil {
		c.serve(to)
	}
}

func (c *testCluster) pull(ctx context.Context, owner int64, list []int) ([]sequence.Handed, error) {
	c.mu.Lock()
	n, noPull := c.live[owner], c.noPull
	c.mu.Unlock()
	if n == nil || noPull {
		return nil, fmt.Errorf("server %d does not answer", owner)
	}
	// Pages of a few keys: every hand-over of the tests crosses pages.
	return seqpull.Gather(list, func(from int, list []int) ([]sequence.Handed, error) { return n.eng.Handover(from, list, 100), nil })
}

// ask is what the live servers but self, and the others, saw of list.
func (c *testCluster) ask(self int64, list []int) []map[int]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []map[int]string
	for id, n := range c.live {
		if id != self {
			out = append(out, n.known.Seen(list))
		}
	}
	for _, k := range c.others {
		out = append(out, k.Seen(list))
	}
	return out
}

// incr is a client's INCR of key on the owner of its slot, retried
// while the slot moves.
func (c *testCluster) incr(ctx context.Context, key string) (int64, error) {
	for {
		c.mu.Lock()
		n := c.live[c.owners[slotOf(key)]]
		c.mu.Unlock()
		if n != nil {
			v, lost, err := n.incr(key)
			if !lost && (err == nil || !(errors.Is(err, sequence.ErrNotServed) || errors.Is(err, sequence.ErrNotReserved) || errors.Is(err, sequence.ErrStopped))) {
				return v, err
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("INCR %s: %w", key, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// incr is an INCR of key on n as a client connected to n sees it: if n
// crashes while the INCR waits, its reply is lost with the connection
// (the client tries again elsewhere at once, as a cluster client does),
// rather than waiting out the table's Wait in a server no one reaches.
func (n *testNode) incr(key string) (v int64, lost bool, err error) {
	type result struct {
		v   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := n.table.Incr(key, 1)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, false, r.err
	case <-n.gone:
		return 0, true, nil
	}
}

// keysOf returns n keys of each of slots.
func keysOf(list []int, n int) []string {
	var keys []string
	left := map[int]int{}
	for _, s := range list {
		left[s] = n
	}
	for i := 0; len(keys) < n*len(list); i++ {
		k := fmt.Sprintf("key:%d", i)
		if left[slotOf(k)] > 0 {
			left[slotOf(k)]--
			keys = append(keys, k)
		}
	}
	return keys
}

// TestEngineHandOversAreExact: slots moved back and forth between two
// live servers, as at a rolling restart or a rebalance, and each server
// stopped and started again on its own directory: every key's values
// are 1, 2, 3, ... with none skipped and none twice.
func TestEngineHandOversAreExact(t *testing.T) {
	c := newTestCluster(t, Steps{Min: 16, Max: 64, Fast: time.Minute, Slow: 10 * time.Minute})
	list := []int{3, 700, 16000}
	for _, s := range list {
		c.owners[s] = 0
	}
	dirs := []string{t.TempDir(), t.TempDir()}
	nodes := []*testNode{c.start(0, dirs[0]), c.start(1, dirs[1])}
	keys := keysOf(list, 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := map[string]int64{}
	round := func() {
		for range 50 {
			for _, k := range keys {
				v, err := c.incr(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				if want[k]++; v != want[k] {
					t.Fatalf("INCR %s gave %d, want %d", k, v, want[k])
				}
			}
		}
	}
	round()
	for i := range 6 {
		to := int64((i + 1) % 2)
		for _, s := range list {
			c.assign(s, to)
		}
		round()
		old := nodes[1-to].eng
		old.mu.Lock()
		unpulled := len(old.unpulled)
		old.mu.Unlock()
		if unpulled > 0 {
			t.Fatalf("the slots were pulled and their keys INCRed on their new owner; the old owner counts %d not pulled", unpulled)
		}
		if i%2 == 1 { // the server that let the slots go restarts on its directory
			from := 1 - to
			c.stop(nodes[from])
			nodes[from] = c.start(from, dirs[from])
		}
	}
}

// TestEngineTakingAsksAgain: a pull of a slot whose take is under way on
// the server pulled from (its record in etcd names it, its file does not
// yet hold the keys' generation) is asked to come again, not answered
// "none": the new owner took such a slot as after a crash, and a new
// key's first INCR gave 1001 (e2e TestRedisToolsOverEtcd).
func TestEngineTakingAsksAgain(t *testing.T) {
	c := newTestCluster(t, Steps{Min: 16, Max: 64, Fast: time.Minute, Slow: 10 * time.Minute})
	hold, reached := make(chan struct{}), make(chan struct{}, 1)
	c.beforeGens = func() error {
		select {
		case reached <- struct{}{}:
		default:
		}
		<-hold
		return nil
	}
	c.assign(3, 0)
	a := c.start(0, t.TempDir())
	select {
	case <-reached:
	case <-time.After(time.Minute):
		t.Fatal("the take never came to record its generations")
	}
	got := a.eng.Handover(0, []int{3}, 1<<20)
	close(hold)
	if len(got) != 1 || got[0].Gen != sequence.GenTaking {
		t.Fatalf("a pull during the take: %+v; want Gen %d (ask again)", got, sequence.GenTaking)
	}
}

// TestEngineTakeDecidedAgain: a slot another server takes (and hands
// out values of, and lets go) between a take's read, on which it decided
// whom to pull from, and its write is not taken as after a crash from the
// record it finds then, but looked at again: pulled from that server,
// its keys continue exactly (a joiner took such slots as after a crash:
// a new key's first INCR gave 1001, e2e TestRedisToolsOverEtcd).
func TestEngineTakeDecidedAgain(t *testing.T) {
	c := newTestCluster(t, Steps{Min: 16, Max: 64, Fast: time.Minute, Slow: 10 * time.Minute})
	const slot = 3
	key := keysOf([]int{slot}, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var a *testNode
	var once sync.Once
	c.afterAsk = func(self int64) {
		if self != 1 {
			return
		}
		once.Do(func() { // b read no record; a takes the slot, INCRs, lets it go
			served := make([]bool, 16384)
			served[slot] = true
			a.eng.Serve(served)
			await.True(t, time.Minute, "a owns the slot", func() bool { _, ok := a.slots.Owned(slot); return ok })
			if v, err := a.table.Incr(key, 1); err != nil || v != 1 {
				t.Errorf("INCR %s on a: %d, %v", key, v, err)
			}
			a.eng.Serve(make([]bool, 16384))
		})
	}
	a = c.start(0, t.TempDir())
	c.assign(slot, 1)
	c.unfollowing = true // b learns of a's take only from its own write's read
	c.start(1, t.TempDir())
	v, err := c.incr(ctx, key)
	if err != nil || v != 2 {
		t.Fatalf("INCR %s on b after a let the slot go: %d, %v; want 2", key, v, err)
	}
}

// TestEngineAwaitsOnlyWhatIsPulled: a graceful stop waits for the new
// owners to pull the slots the server let go, but not for a slot it was
// given and let go before it took it (it holds no keys of it: a stop
// waited out its 3 s for the 8,192 slots a joiner took so), nor for one
// the new owner took without a pull (it failed).
func TestEngineAwaitsOnlyWhatIsPulled(t *testing.T) {
	c := newTestCluster(t, Steps{Min: 16, Max: 64, Fast: time.Minute, Slow: 10 * time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const taken, never = 3, 700
	c.assign(taken, 0)
	a := c.start(0, t.TempDir())
	c.start(1, t.TempDir())
	if _, err := c.incr(ctx, keysOf([]int{taken}, 1)[0]); err != nil {
		t.Fatal(err)
	}
	// Given and let go at once: never taken, while the engine's takes
	// fail (no server-id for a while).
	a.eng.gate.Use(nil)
	served := make([]bool, 16384)
	served[taken], served[never] = true, true
	a.eng.Serve(served)
	served[never] = false
	a.eng.Serve(served)
	a.eng.Attach(a.slots)
	// Taken by the other without a pull.
	c.mu.Lock()
	c.noPull = true
	c.mu.Unlock()
	c.assign(taken, 1)
	if _, err := c.incr(ctx, keysOf([]int{taken}, 1)[0]); err != nil {
		t.Fatal(err)
	}
	a.eng.AwaitHandedOver(ctx)
	if ctx.Err() != nil {
		t.Fatal("the stop waited for slots no new owner pulls, until its deadline")
	}
}

// TestEngineNeverRepeats: three servers, slots moved between them at
// random, servers crashing with their disks (a new server-id on an empty
// directory takes their place) or restarting on their directories,
// while clients INCR keys of the slots. The oracle: each key's values
// strictly increase in the order they were received, and none is handed
// out twice. Seeded: the events and their order.
func TestEngineNeverRepeats(t *testing.T) {
	seed := testseed.Get(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	c := newTestCluster(t, Steps{Min: 8, Max: 256, Fast: time.Minute, Slow: 10 * time.Minute})
	list := []int{1, 2, 9000}
	for _, s := range list {
		c.owners[s] = int64(rng.IntN(3))
	}
	nodes := map[int64]*testNode{}
	next := int64(0)
	for ; next < 3; next++ {
		nodes[next] = c.start(next, t.TempDir())
	}
	keys := keysOf(list, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var mu sync.Mutex
	got := map[string][]reply{}
	handed := 0 // values in got, under mu: to see progress
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(g+1)))
			for {
				select {
				case <-done:
					return
				default:
				}
				k := keys[r.IntN(len(keys))]
				sent := time.Now()
				v, err := c.incr(ctx, k)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got[k] = append(got[k], reply{v, sent, time.Now()})
				handed++
				mu.Unlock()
			}
		}()
	}
	counted := func() int { mu.Lock(); defer mu.Unlock(); return handed }
	for event := range 30 {
		// Each change comes once the last has let values through: the
		// oracle then sees every kind of change under load, however
		// slow the machine, and a change that stalls the keys fails.
		if from := counted(); !await.Within(time.Minute, func() bool { return counted() >= from+30 }) {
			t.Fatalf("no 30 values handed out within a minute after change %d", event)
		}
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond) // under load, a change at no set point
		ids := slices.Sorted(func(yield func(int64) bool) {
			for id := range nodes {
				if !yield(id) {
					return
				}
			}
		})
		id := ids[rng.IntN(len(ids))]
		switch rng.IntN(3) {
		case 0: // a slot moves
			c.assign(list[rng.IntN(len(list))], id)
		case 1: // a crash with its disk: its slots go to a new server
			c.crash(nodes[id])
			delete(nodes, id)
			nodes[next] = c.start(next, t.TempDir())
			for _, s := range list {
				if c.owners[s] == id {
					c.assign(s, next)
				}
			}
			next++
		case 2: // a restart on its own directory, its slots kept
			n := nodes[id]
			c.stop(n)
			nodes[id] = c.start(id, n.dir)
		}
	}
	close(done)
	wg.Wait()
	total, jumps := 0, 0
	for k, rs := range got {
		total += len(rs)
		jumps += checkReplies(t, k, rs)
	}
	t.Logf("%d values of %d keys; %d jumps (crash take-overs)", total, len(got), jumps)
}

// A reply is a value of a key a client had, and when.
type reply struct {
	v          int64
	sent, recv time.Time
}

// checkReplies fails the test if a value of key came twice, or is not
// above every value received before its request was sent; it returns
// how many times the values, in order, jumped.
func checkReplies(t *testing.T, key string, rs []reply) (jumps int) {
	t.Helper()
	byValue := slices.SortedFunc(slices.Values(rs), func(a, b reply) int { return cmp.Compare(a.v, b.v) })
	for i := 1; i < len(byValue); i++ {
		if byValue[i].v == byValue[i-1].v {
			t.Errorf("%s: %d handed out twice", key, byValue[i].v)
		} else if byValue[i].v != byValue[i-1].v+1 {
			jumps++
		}
	}
	bySent := slices.SortedFunc(slices.Values(rs), func(a, b reply) int { return a.sent.Compare(b.sent) })
	byRecv := slices.SortedFunc(slices.Values(rs), func(a, b reply) int { return a.recv.Compare(b.recv) })
	j, most := 0, int64(-1)
	for _, r := range bySent {
		for ; j < len(byRecv) && byRecv[j].recv.Before(r.sent); j++ {
			most = max(most, byRecv[j].v)
		}
		if r.v <= most {
			t.Errorf("%s: %d, sent at %s, not above %d received before it was sent", key, r.v, r.sent.Format("15:04:05.000000"), most)
		}
	}
	return jumps
}

// TestEngineAsksWhatOthersSaw: a slot's owner crashes with its directory
// and etcd loses the slot's record (deleted, or put back below by a server
// that saw less, or restored from an older snapshot); a server on a new
// directory, which saw nothing of it, takes it before any server puts the
// record back: it asks the live servers what they saw (a server that
// followed the records has the owner's last ceiling), and continues every
// key above it, not from what etcd holds.
func TestEngineAsksWhatOthersSaw(t *testing.T) {
	lose := map[string]func(ctx context.Context, cli *clientv3.Client, key string) error{
		"deleted": func(ctx context.Context, cli *clientv3.Client, key string) error {
			_, err := cli.Delete(ctx, key)
			return err
		},
		"below": func(ctx context.Context, cli *clientv3.Client, key string) error {
			_, err := cli.Put(ctx, key, Record{Ceil: 20, Gen: 1, Owner: 0}.marshal())
			return err
		},
	}
	for name, lose := range lose {
		t.Run(name, func(t *testing.T) { asksWhatOthersSaw(t, lose) })
	}
}

func asksWhatOthersSaw(t *testing.T, lose func(ctx context.Context, cli *clientv3.Client, key string) error) {
	c := newTestCluster(t, Steps{Min: 10, Max: 10, Fast: time.Minute, Slow: 10 * time.Minute})
	ctx := context.Background()
	const slot = 42
	key := keysOf([]int{slot}, 1)[0]
	c.assign(slot, 0)
	a := c.start(0, t.TempDir())
	var last int64
	for range 200 { // twenty raises of a step of 10
		v, err := c.incr(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		last = v
	}
	// A server that only follows the records, then stops following (it
	// would put the record back, and the take is to come first).
	follower := NewKnown(nil, nil, zerolog.Nop())
	cli := c.etcd.Client()
	defer cli.Close()
	fctx, stopFollowing := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); follower.Follow(fctx, cli, "/t/") }()
	await.True(t, time.Minute, "the follower sees the owner's last ceiling", func() bool {
		rec, err := unmarshal([]byte(follower.Seen([]int{slot})[slot]))
		return err == nil && rec.Ceil > last
	})
	stopFollowing()
	<-done
	c.mu.Lock()
	c.others = append(c.others, follower)
	c.mu.Unlock()
	c.crash(a)
	if err := lose(ctx, cli, "/t/seqslot/"+strconv.Itoa(slot)); err != nil {
		t.Fatal(err)
	}
	c.start(1, t.TempDir())
	c.assign(slot, 1)
	v, err := c.incr(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if v <= last {
		t.Fatalf("INCR %s after the take-over: %d, at or below %d handed out before", key, v, last)
	}
	t.Logf("INCR %s: %d before the crash, %d after the take-over", key, last, v)
}

// TestEngineReadsWaitForTakes: a GET of a key on the server taking its
// slot, while the take runs (the key not pulled yet), waits for the take
// and answers the value its last owner handed out: never "no such key",
// nor a value below one a client was given.
func TestEngineReadsWaitForTakes(t *testing.T) {
	c := newTestCluster(t, Steps{Min: 16, Max: 64, Fast: time.Minute, Slow: 10 * time.Minute})
	const slot = 3
	key := keysOf([]int{slot}, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.afterAsk = func(self int64) {
		if self == 1 {
			once.Do(func() { close(entered); <-release })
		}
	}
	c.assign(slot, 0)
	c.start(0, t.TempDir())
	for range 5 {
		if _, err := c.incr(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	b := c.start(1, t.TempDir())
	c.assign(slot, 1)
	<-entered // b's take under way, held
	type read struct {
		v   int64
		ok  bool
		err error
	}
	got := make(chan read, 1)
	go func() { v, ok, err := b.table.Get(key); got <- read{v, ok, err} }()
	select {
	case r := <-got:
		t.Fatalf("GET %s on b during its take: %d %v %v; want to wait, then 5", key, r.v, r.ok, r.err)
	case <-time.After(100 * time.Millisecond): // waits, as it should
	}
	close(release)
	select {
	case r := <-got:
		if r.err != nil || !r.ok || r.v != 5 {
			t.Errorf("GET %s on b once its take ended: %d %v %v; want 5", key, r.v, r.ok, r.err)
		}
	case <-ctx.Done():
		t.Fatal("GET still waits after the take")
	}
	if v, err := c.incr(ctx, key); err != nil || v != 6 {
		t.Errorf("INCR %s on b: %d, %v; want 6", key, v, err)
	}
}

// TestEngineLetGoEndsWaits: an INCR waiting on a server for a slot it was
// given, and has not taken yet, fails at once (ErrNotServed: the client
// goes to the new owner) when the slot moves on to another server before
// the take, rather than wait out its bound (5 s of every such client's
// INCR as a cluster formed).
func TestEngineLetGoEndsWaits(t *testing.T) {
	c := newTestCluster(t, Steps{Min: 16, Max: 64, Fast: time.Minute, Slow: 10 * time.Minute})
	c.wait = time.Minute
	const slot = 3
	key := keysOf([]int{slot}, 1)[0]
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.afterAsk = func(self int64) {
		if self == 0 {
			once.Do(func() { close(entered); <-release })
		}
	}
	var released sync.Once
	free := func() { released.Do(func() { close(release) }) }
	defer free()
	a := c.start(0, t.TempDir())
	c.assign(slot, 0)
	<-entered // a's take under way, held
	done := make(chan error, 1)
	go func() { _, err := a.table.Incr(key, 1); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("INCR of a slot being taken returned before its take: %v", err)
	case <-time.After(100 * time.Millisecond): // waits, as it should
	}
	c.assign(slot, 1) // no server 1 yet: a lets the slot go
	select {
	case err := <-done:
		if !errors.Is(err, sequence.ErrNotServed) {
			t.Errorf("INCR once the slot moved on: %v, want ErrNotServed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("INCR still waits 30 s after its slot moved on")
	}
	// Given back before the take: INCR waits for the take again.
	c.assign(slot, 0)
	go func() { _, err := a.table.Incr(key, 1); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("INCR of a slot given back returned before its take: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	free()
	if err := <-done; err != nil {
		t.Errorf("INCR once the slot given back was taken: %v", err)
	}
}

// TestEngineOwnTakeKnown: a server's take of its own slot again (Current)
// that wrote the slot's record in etcd, but could not record the new
// generation in its file (a full disk), then a kill: a server started on
// that directory (another server-id) keeps the slot's keys, as its file
// recorded the record before the write (Slots.Take's intend), rather
// than drop every one as after a crash (a key a client had values of
// then read as missing: e2e TestFullDiskNoValueTwice).
func TestEngineOwnTakeKnown(t *testing.T) {
	c := newTestCluster(t, Steps{Min: 16, Max: 64, Fast: time.Minute, Slow: 10 * time.Minute})
	const slot = 3
	key := keysOf([]int{slot}, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var full atomic.Bool
	failed := make(chan struct{}, 1)
	c.beforeGens = func() error {
		if !full.Load() {
			return nil
		}
		select {
		case failed <- struct{}{}:
		default:
		}
		return errors.New("no space left on device")
	}
	dir := t.TempDir()
	c.assign(slot, 0)
	a := c.start(0, dir)
	for range 3 {
		if _, err := c.incr(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	full.Store(true)
	c.assign(slot, 5) // no such server: a lets it go, then takes it again
	c.assign(slot, 0)
	select {
	case <-failed:
	case <-ctx.Done():
		t.Fatal("a never took the slot again")
	}
	c.crash(a)
	a.file.Close() // as a kill: the directory is free, what the file holds stays
	c.beforeGens = nil
	c.assign(slot, 1)
	b := c.start(1, dir)
	await.True(t, time.Minute, "b owns the slot", func() bool { _, ok := b.slots.Owned(slot); return ok })
	if v, ok, err := b.table.Get(key); err != nil || !ok || v < 3 {
		t.Fatalf("GET %s on b, started on a's directory: %d %v %v; want the key, at 3 or above", key, v, ok, err)
	}
}
