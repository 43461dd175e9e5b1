package slotassign

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/etcdsession"
	"github.com/idserver/idserver/internal/testetcd"
)

// keeperUnderTest is a slotKeeper with the lease it keeps, and what it
// published last.
type keeperUnderTest struct {
	id      int64
	frozen  atomic.Bool        // what it published stays: a process paused
	stop    context.CancelFunc // its keeper and its lease's keep
	serving atomic.Pointer[Serving]
	l       *etcdsession.Lease
	done    sync.WaitGroup
}

// TestSlotKeepers: three servers keep the assignment with real leases of
// 2 s: they split the slots; one stops gracefully and one is killed (its
// lease left to expire), and each time the others serve every slot again
// (within a few TTLs); sampled throughout every few milliseconds, no slot
// is served by two at once.
func TestSlotKeepers(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	const ttl = 2 * time.Second
	k := slotKeys{prefix: "/k/"}
	start := func(id int64) *keeperUnderTest {
		ctx, cancel := context.WithCancel(context.Background())
		l, err := etcdsession.Grant(ctx, cli, ttl, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		u := &keeperUnderTest{id: id, stop: cancel, l: l}
		s := &slotKeeper{cli: cli, k: k, id: id, l: l, ttl: ttl, log: zerolog.Nop(),
			handing: make(chan chan struct{}), ended: make(chan struct{}),
			self: Node{ID: strconv.FormatInt(id, 10), IP: "127.0.0.1", Port: 7000 + int(id)},
			publish: func(s *Serving) {
				if !u.frozen.Load() {
					u.serving.Store(s)
				}
			}}
		u.done.Add(2)
		go func() { defer u.done.Done(); l.Keep(ctx) }()
		go func() { defer u.done.Done(); s.run(ctx) }()
		return u
	}
	servers := []*keeperUnderTest{start(0), start(1), start(2)}
	servers = append(servers, nil) // the fourth comes later
	var sampling atomic.Bool
	sampling.Store(true)
	samples := make(chan string, 1)
	go func() {
		for sampling.Load() {
			for slot := range slotCount {
				n := 0
				for i := range servers {
					if u := loadKeeper(&servers[i]); u != nil && u.serving.Load().Has(slot) {
						n++
					}
				}
				if n > 1 {
					samples <- "slot " + strconv.Itoa(slot) + " served by " + strconv.Itoa(n)
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		samples <- ""
	}()
	// settled waits until the servers live serve every slot, each its
	// share, and says how long that took.
	settled := func(live []*keeperUnderTest, within time.Duration) time.Duration {
		t.Helper()
		begin := time.Now()
		for {
			total, even := 0, true
			for _, u := range live {
				n := 0
				for slot := range slotCount {
					if u.serving.Load().Has(slot) {
						n++
					}
				}
				total += n
				even = even && n >= slotCount/len(live) && n <= slotCount/len(live)+1
			}
			if total == slotCount && even {
				return time.Since(begin)
			}
			if time.Since(begin) > within {
				t.Fatalf("not settled after %v: %d slots served by %d servers", within, total, len(live))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("three servers: settled in %v", settled(servers[:3], 10*ttl))

	// A graceful stop: its slots move to the others, then it gives its
	// lease up.
	servers[2].stop()
	servers[2].done.Wait()
	servers[2].l.Revoke()
	if took := settled(servers[:2], 10*ttl); took > ttl {
		t.Fatalf("a graceful stop: the others served every slot after %v, more than a TTL", took)
	} else {
		t.Logf("a graceful stop: settled in %v", took)
	}

	// A kill: its lease left to expire, what it published left as it was.
	servers[1].l.End("killed") // its keeper and keep-alive stop, as a process killed does
	servers[1].done.Wait()
	t.Logf("a kill: settled in %v", settled(servers[:1], 10*ttl))

	// A lease revoked by hand while its holder is paused: the holder
	// serves until its own deadline, and no one else before.
	storeKeeper(&servers[3], start(3))
	settled([]*keeperUnderTest{servers[0], servers[3]}, 10*ttl)
	servers[3].frozen.Store(true)
	if _, err := cli.Revoke(context.Background(), servers[3].l.ID()); err != nil {
		t.Fatal(err)
	}
	t.Logf("a lease revoked by hand: settled in %v", settled(servers[:1], 10*ttl))
	servers[3].done.Wait()
	sampling.Store(false)
	if s := <-samples; s != "" {
		t.Fatal(s)
	}
	servers[0].stop()
	servers[0].done.Wait()
}

// serversMu guards the list of servers the sampler reads.
var serversMu sync.Mutex

func loadKeeper(p **keeperUnderTest) *keeperUnderTest {
	serversMu.Lock()
	defer serversMu.Unlock()
	return *p
}

func storeKeeper(p **keeperUnderTest, u *keeperUnderTest) {
	serversMu.Lock()
	defer serversMu.Unlock()
	*p = u
}
