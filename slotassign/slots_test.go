package slotassign

import (
	"context"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/internal/testseed"
)

// simServer is a server as the slot assignment sees it: a node key under
// its lease, and the slots it serves, from the view it read last.
type simServer struct {
	id      int64
	lease   clientv3.LeaseID
	serving []bool
}

// TestSlotsOneOwner: over generated runs of servers joining, stopping
// gracefully (releasing what no one took, or not), crashing (their lease
// revoked: they stopped serving by their own deadline first) and coming
// back under a new lease, each reading the
// assignment and acting on it in a random order (the seed logged), no
// slot is ever served by two servers at once, and once all have acted
// with nothing changing, every live server serves its share and no slot
// moves or lacks an owner.
func TestSlotsOneOwner(t *testing.T) {
	seed := testseed.Get(t)
	rnd := rand.New(rand.NewPCG(seed, 2))
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	k := slotKeys{prefix: "/t/"}
	servers := map[int64]*simServer{}
	join := func(id int64) {
		l, err := cli.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(Node{ID: strconv.FormatInt(id, 10), IP: "127.0.0.1", Port: 7000 + int(id)})
		if _, err := cli.Put(ctx, k.node(id), string(b), clientv3.WithLease(l.ID)); err != nil {
			t.Fatal(err)
		}
		servers[id] = &simServer{id: id, lease: l.ID, serving: make([]bool, slotCount)}
	}
	leave := func(id int64) { // gracefully or not: it serves nothing, then its lease goes
		s := servers[id]
		clear(s.serving)
		for rnd.IntN(2) == 0 { // gracefully: it releases what it still owns
			v, err := readSlots(ctx, cli, k)
			if err != nil {
				t.Fatal(err)
			}
			next := v.freed(id, int64(s.lease), strconv.FormatInt(id, 10))
			if next == nil {
				break
			}
			if ok, err := v.commit(ctx, cli, k, *v.put(k, *next)); err != nil {
				t.Fatal(err)
			} else if ok {
				break
			}
		}
		if _, err := cli.Revoke(ctx, s.lease); err != nil {
			t.Fatal(err)
		}
		delete(servers, id)
	}
	step := func(s *simServer) (wrote bool) {
		v, err := readSlots(ctx, cli, k)
		if err != nil {
			t.Fatal(err)
		}
		copy(s.serving, v.served(s.id, int64(s.lease))) // before it lets anything go
		if op := v.release(k, s.id, int64(s.lease)); op != nil {
			ok, err := v.commit(ctx, cli, k, *op)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if ids := slices.Sorted(maps.Keys(v.nodes)); len(ids) > 0 && ids[0] == s.id {
			// A server that leaves stops serving first: its lease may be
			// taken as gone at once.
			if op := v.plan(k, func(int64) bool { return true }, func(string) bool { return true }); op != nil {
				ok, err := v.commit(ctx, cli, k, *op)
				if err != nil {
					t.Fatal(err)
				}
				return ok
			}
		}
		return false
	}
	check := func(when string) {
		for slot := range slotCount {
			var by []int64
			for _, s := range servers {
				if s.serving[slot] {
					by = append(by, s.id)
				}
			}
			if len(by) > 1 {
				t.Fatalf("%s: slot %d served by %v", when, slot, by)
			}
		}
	}
	settle := func(when string) {
		for round := 0; ; round++ {
			wrote := false
			for _, id := range slices.Sorted(maps.Keys(servers)) {
				wrote = step(servers[id]) || wrote
				check(when)
			}
			if !wrote && round > 0 {
				break
			}
			if round > 50 {
				t.Fatalf("%s: no settling in 50 rounds", when)
			}
		}
		v, err := readSlots(ctx, cli, k)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[int64]int{}
		for _, s := range servers {
			for _, on := range s.serving {
				if on {
					counts[s.id]++
				}
			}
		}
		total := 0
		for id := range servers {
			if n := counts[id]; n < slotCount/len(servers) || n > slotCount/len(servers)+1 {
				t.Fatalf("%s: settled with %d serving %d slots (%d servers), assignment %+v", when, id, n, len(servers), v.a)
			}
			total += counts[id]
		}
		if total != slotCount {
			t.Fatalf("%s: settled with %d slots served", when, total)
		}
	}

	join(0)
	settle("first server")
	for ev := range 60 {
		ids := slices.Sorted(maps.Keys(servers))
		switch r := rnd.IntN(10); {
		case r < 3 && len(servers) < 6:
			id := int64(rnd.IntN(8))
			if _, ok := servers[id]; !ok {
				join(id)
			}
		case r < 5 && len(servers) > 1:
			leave(ids[rnd.IntN(len(ids))])
		case r < 6 && len(servers) > 0: // back at once under a new lease
			id := ids[rnd.IntN(len(ids))]
			leave(id)
			join(id)
		}
		for range rnd.IntN(3 * len(servers)) { // a few servers act, in any order
			ids := slices.Sorted(maps.Keys(servers))
			if len(ids) > 0 {
				step(servers[ids[rnd.IntN(len(ids))]])
				check("event " + strconv.Itoa(ev))
			}
		}
		if rnd.IntN(4) == 0 && len(servers) > 0 {
			settle("event " + strconv.Itoa(ev))
		}
	}
	if len(servers) == 0 {
		join(1)
	}
	settle("the end")
}
