package e2e

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/idgen"
)

// The one load generator of the black-box tests: clients asking for IDs
// in batches, every ID and every error kept for the test to check.

// idSet collects IDs from many clients and finds repeats: of IDs, and of
// units (an ID without its random field: time, server-id and shard slot),
// which one holder never issues twice, so a unit seen twice means two
// holders overlapped even where the random fields happened to differ. It
// keeps a plain slice, sorted when checked: millions of IDs fit in tens
// of MB.
type idSet struct {
	layout idgen.Layout
	mu     sync.Mutex
	ids    []int64
	fails  map[string]int // error replies by their first word
}

func newIDSet(l idgen.Layout) *idSet { return &idSet{layout: l, fails: map[string]int{}} }

func (s *idSet) add(ids []int64) {
	s.mu.Lock()
	s.ids = append(s.ids, ids...)
	s.mu.Unlock()
}

func (s *idSet) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	word, _, _ := strings.Cut(err.Error(), " ")
	s.fails[word]++
}

// count is how many IDs came so far.
func (s *idSet) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

// check fails the test on any repeat, naming its server-id and time, and
// returns how many IDs came.
func (s *idSet) check(t *testing.T) int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	slices.Sort(s.ids)
	units := make([]int64, len(s.ids))
	for i, id := range s.ids {
		units[i] = id >> s.layout.RandomBits
		if i > 0 && id == s.ids[i-1] {
			p, _ := idgen.Decode(id, s.layout, idgen.DefaultEpoch)
			t.Fatalf("ID %d repeated (server-id %d, time %v)", id, p.ServerID, p.Time)
		}
	}
	slices.Sort(units)
	reused := 0
	for i := 1; i < len(units); i++ {
		if units[i] == units[i-1] {
			reused++
		}
	}
	if reused > 0 {
		t.Fatalf("%d of %d units (time, server-id, shard slot) issued twice: two holders overlapped", reused, len(units))
	}
	return len(s.ids)
}

// load asks addr for batches of n IDs until stop, into s.
func (s *idSet) load(addr func() string, n int, stop <-chan struct{}, wg *sync.WaitGroup) {
	clientLoop(addr, time.Second, stop, wg, func(c *redis.Client) bool {
		ids, err := c.Do(context.Background(), "MGETID", n).Int64Slice()
		if err != nil {
			s.fail(err)
			return false
		}
		s.add(ids)
		return true
	})
}

// clientLoop has a client of addr run batch until stop, on a new
// connection after every 20 batches and after a batch that reports its
// connection broken (a server restarting). stop closes the connection
// at once: a test keeps a killed server's port (its next run serves it),
// so a reply that will never come would otherwise hold stop for a read
// timeout.
func clientLoop(addr func() string, timeout time.Duration, stop <-chan struct{}, wg *sync.WaitGroup, batch func(*redis.Client) bool) {
	defer wg.Done()
	for {
		select {
		case <-stop:
			return
		default:
		}
		c := redis.NewClient(&redis.Options{Addr: addr(), MaxRetries: -1, DialTimeout: 500 * time.Millisecond,
			ReadTimeout: timeout, WriteTimeout: timeout, PoolSize: 1})
		done := make(chan struct{})
		go func() {
			select {
			case <-stop:
				c.Close()
			case <-done:
			}
		}()
		for range 20 {
			if !batch(c) {
				time.Sleep(10 * time.Millisecond)
				break
			}
		}
		close(done)
		c.Close()
	}
}

// fleet is the servers a load asks: client i asks server i mod their
// number. A test replaces a server it killed while the load runs, so the
// list is read and written only under its lock: the load never reads a
// slice the test is writing.
type fleet struct {
	mu sync.Mutex
	ps []*process
}

// newFleet is a fleet of a copy of ps: a test's own writes to its slice
// are not the load's.
func newFleet(ps ...*process) *fleet { return &fleet{ps: slices.Clone(ps)} }

// at is the server client i asks.
func (f *fleet) at(i int) *process {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ps[i%len(f.ps)]
}

// replace puts p in the place of server i.
func (f *fleet) replace(i int, p *process) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ps[i] = p
}

// all is the servers now, a copy.
func (f *fleet) all() []*process {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ps)
}

// addr is the address client i asks.
func (f *fleet) addr(i int) string { return f.at(i).Addr }

// loadAll runs clients clients, client i asking f.at(i) for batches of n
// IDs, into s until the returned stop is called; stop waits for them, and
// does nothing the second time, so a test defers it and may call it
// before checking s.
func (s *idSet) loadAll(f *fleet, clients, n int) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go s.load(func() string { return f.addr(i) }, n, quit, &wg)
	}
	var once sync.Once
	return func() { once.Do(func() { close(quit); wg.Wait() }) }
}
