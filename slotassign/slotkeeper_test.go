package slotassign

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/etcdsession"
	"github.com/idserver/idserver/internal/await"
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
// 5 s: they split the slots; one stops gracefully and one is killed (its
// lease left to expire), and each time the others serve every slot again
// (the killed one's within a TTL and the serving horizon); a lease
// revoked by hand while its holder is paused; the last server stopped
// gracefully, a server started with another node ID waits for it, and
// once it is back (under another server-id) both serve within a second;
// both stopped and one back, it serves its own slots at once, the
// other's a while later;
// sampled throughout every few milliseconds, no slot is served by two at
// once.
func TestSlotKeepers(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	const ttl = 5 * time.Second
	k := slotKeys{prefix: "/k/"}
	start := func(id int64, node string) *keeperUnderTest {
		ctx, cancel := context.WithCancel(context.Background())
		l, err := etcdsession.Grant(ctx, cli, ttl, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		u := &keeperUnderTest{id: id, stop: cancel, l: l}
		s := &slotKeeper{cli: cli, k: k, id: id, l: l, ttl: ttl, log: zerolog.Nop(),
			handing: make(chan chan struct{}), ended: make(chan struct{}),
			self: Node{ID: node, IP: "127.0.0.1", Port: 7000 + int(id)},
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
	servers := []*keeperUnderTest{start(0, "0"), start(1, "1"), start(2, "2")}
	servers = append(servers, nil, nil, nil, nil) // more come later
	var sampling atomic.Bool
	sampling.Store(true)
	samples := make(chan string, 1)
	go func() {
		// Every few milliseconds until the test stops sampling (within go
		// test's default timeout), or a slot is served by two.
		found := "the sampler stopped after 10 minutes, before the test did"
		await.Within(10*time.Minute, func() bool {
			for slot := range slotCount {
				// Twice in a row: servers are read one after another, and
				// one may stop and the next start between two reads.
				if by := servedBy(servers, slot); len(by) > 1 && len(servedBy(servers, slot)) > 1 {
					found = fmt.Sprintf("slot %d served by %v", slot, by)
					return true
				}
			}
			if !sampling.Load() {
				found = ""
				return true
			}
			return false
		})
		samples <- found
	}()
	// settled waits until the servers live serve every slot, each its
	// share, and says how long that took.
	settled := func(live []*keeperUnderTest, within time.Duration) time.Duration {
		t.Helper()
		begin := time.Now()
		total := 0
		if !await.Within(within, func() bool {
			even := true
			total = 0
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
			return total == slotCount && even
		}) {
			t.Fatalf("not settled after %v: %d slots served by %d servers", within, total, len(live))
		}
		return time.Since(begin)
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
	if took := settled(servers[:1], 10*ttl); took > ttl+etcdsession.Horizon+time.Second {
		t.Fatalf("a kill: the other served every slot after %v, more than a TTL and the serving horizon (%v)", took, ttl+etcdsession.Horizon)
	} else {
		t.Logf("a kill: settled in %v", took)
	}

	// A lease revoked by hand while its holder is paused: the holder
	// serves until its own deadline, and no one else before.
	storeKeeper(&servers[3], start(3, "3"))
	settled([]*keeperUnderTest{servers[0], servers[3]}, 10*ttl)
	servers[3].frozen.Store(true)
	if _, err := cli.Revoke(context.Background(), servers[3].l.ID()); err != nil {
		t.Fatal(err)
	}
	t.Logf("a lease revoked by hand: settled in %v", settled(servers[:1], 10*ttl))
	servers[3].done.Wait()

	// The last server stopped gracefully releases its slots: another
	// node waits for it (a TTL at most) rather than take them, and once
	// it is back, under another server-id, it has them back at once.
	servers[0].stop()
	servers[0].done.Wait()
	servers[0].l.Revoke()
	storeKeeper(&servers[4], start(4, "4"))
	if await.Within(time.Second, func() bool { return servers[4].serving.Load().Has(0) }) {
		t.Fatal("a node serves the slots of one that released them, before it had time to come back")
	}
	storeKeeper(&servers[5], start(5, "0"))
	if took := settled(servers[4:6], 10*ttl); took > time.Second { // no lease waited out
		t.Fatalf("the last server stopped and started again: every slot served after %v", took)
	} else {
		t.Logf("the last server stopped and started again: settled in %v", took)
	}

	// Both stopped gracefully at once, one back: it serves its own slots
	// at once, and the other's once that one had a TTL to come back.
	for _, u := range servers[4:6] {
		u.stop()
	}
	for _, u := range servers[4:6] {
		u.done.Wait()
		u.l.Revoke()
	}
	back := time.Now()
	storeKeeper(&servers[6], start(6, "0"))
	await.True(t, 3*time.Second, "its own slots served again", func() bool { return servers[6].serving.Load().Has(0) })
	t.Logf("two stopped, one back: its own slots served in %v", time.Since(back))
	if took := settled(servers[6:7], 10*ttl); took < ttl/2 {
		t.Fatalf("the other's slots served %v after it stopped: it had no time to come back", took)
	}
	sampling.Store(false)
	if s := <-samples; s != "" {
		t.Fatal(s)
	}
	servers[6].stop()
	servers[6].done.Wait()
}

// servedBy is the ids of the servers that serve slot now.
func servedBy(servers []*keeperUnderTest, slot int) []int64 {
	var by []int64
	for i := range servers {
		if u := loadKeeper(&servers[i]); u != nil && u.serving.Load().Has(slot) {
			by = append(by, u.id)
		}
	}
	return by
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
