package e2e

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The load generator of sequences: clients pipelining INCR and INCRBY
// over a pool of keys, every value handed out kept with the run it came
// in, for the test to check that none repeats and that each run is above
// the ones before.

// seqSet collects the values of sequences from many clients.
type seqSet struct {
	mu     sync.Mutex
	ranges []seqRange
	fails  map[string]int // error replies by their first word
	run    int            // the run values come in now
}

// seqRange is a reply: INCRBY n returns last, and hands out last-n+1 ..
// last of key.
type seqRange struct {
	key         string
	first, last int64
	run         int
	client      int
	at          time.Time // when its reply was read: says which fault a repeat followed
}

func newSeqSet() *seqSet { return &seqSet{fails: map[string]int{}} }

// nextRun says that the values from now on come from a restarted server.
func (s *seqSet) nextRun() {
	s.mu.Lock()
	s.run++
	s.mu.Unlock()
}

func (s *seqSet) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ranges)
}

// failed is how many error replies began with word.
func (s *seqSet) failed(word string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fails[word]
}

func (s *seqSet) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	word, _, _ := strings.Cut(err.Error(), " ")
	s.fails[word]++
}

// check fails the test if a value of a key was handed out twice, a run's
// value is not above every value of the runs before it, or a client's
// values of a key (from the one server it talks to) did not increase. It
// returns how many values came. (That nothing is skipped at a graceful
// stop is not checked here: a reply lost to a client's timeout looks
// like a skip.)
func (s *seqSet) check(t *testing.T) int64 {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	byKey := map[string][]seqRange{}
	type clientKey struct {
		client int
		key    string
	}
	lastOf := map[clientKey]int64{}
	var values int64
	for _, r := range s.ranges {
		byKey[r.key] = append(byKey[r.key], r)
		values += r.last - r.first + 1
		ck := clientKey{r.client, r.key}
		if r.first <= lastOf[ck] {
			t.Fatalf("%s: client %d got %d..%d after %d: a server's values did not increase", r.key, r.client, r.first, r.last, lastOf[ck])
		}
		lastOf[ck] = r.last
	}
	for key, rs := range byKey {
		slices.SortFunc(rs, func(a, b seqRange) int { return cmp.Compare(a.first, b.first) })
		for i := 1; i < len(rs); i++ {
			a, b := rs[i-1], rs[i]
			switch {
			case b.first <= a.last:
				t.Fatalf("%s: %d..%d (run %d, client %d, %s) and %d..%d (run %d, client %d, %s) overlap: a value handed out twice", key,
					a.first, a.last, a.run, a.client, a.at.Format(time.TimeOnly+".000"), b.first, b.last, b.run, b.client, b.at.Format(time.TimeOnly+".000"))
			case b.run < a.run:
				t.Fatalf("%s: run %d handed out %d..%d, below %d..%d of run %d before it", key, b.run, b.first, b.last, a.first, a.last, a.run)
			}
		}
	}
	return values
}

// load has one client pipeline INCRs and INCRBYs of keys random keys at
// addr until stop, into s.
func (s *seqSet) load(addr func() string, keys, client int, seed uint64, stop <-chan struct{}, wg *sync.WaitGroup) {
	rnd := rand.New(rand.NewPCG(seed, 0))
	clientLoop(addr, 10*time.Second, stop, wg, func(c *redis.Client) bool {
		return s.pipeline(c, rnd, keys, client)
	})
}

// pipeline sends one pipeline of 50 INCRs and INCRBYs, and keeps what
// came back; it reports whether the connection is still good.
func (s *seqSet) pipeline(c *redis.Client, rnd *rand.Rand, keys, client int) bool {
	ctx := context.Background()
	p := c.Pipeline()
	type sent struct {
		key string
		n   int64
		cmd *redis.IntCmd
	}
	var cmds []sent
	for range 50 {
		key := seqKey(rnd.IntN(keys))
		n := int64(1)
		if rnd.IntN(4) == 0 {
			n = 1 + rnd.Int64N(20)
		}
		if n == 1 {
			cmds = append(cmds, sent{key, n, p.Incr(ctx, key)})
		} else {
			cmds = append(cmds, sent{key, n, p.IncrBy(ctx, key, n)})
		}
	}
	p.Exec(ctx)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sc := range cmds {
		v, err := sc.cmd.Result()
		if err != nil {
			word, _, _ := strings.Cut(err.Error(), " ")
			s.fails[word]++
			if !strings.HasPrefix(err.Error(), "BUSY") {
				return false // the connection broke: what followed was not answered
			}
			continue
		}
		s.ranges = append(s.ranges, seqRange{sc.key, v - sc.n + 1, v, s.run, client, now})
	}
	return true
}

// seqKey is the name of the load's key i: the load and the checks that
// read its keys back must agree on it.
func seqKey(i int) string { return "seq:" + strconv.Itoa(i) }

// loadAll runs clients clients, client i at f.at(i), over keys keys,
// into s until the returned stop is called (see idSet.loadAll).
func (s *seqSet) loadAll(f *fleet, clients, keys int, seed uint64) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go s.load(func() string { return f.addr(i) }, keys, i, seed+uint64(i), quit, &wg)
	}
	var once sync.Once
	return func() { once.Do(func() { close(quit); wg.Wait() }) }
}
