package e2e

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testbin"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/internal/testpki"
	"github.com/idserver/idserver/internal/testseed"
)

// The cluster tests run real etcd (Debian's etcd-server: etcd on the
// PATH) on 127.0.0.1, and servers with id-range 1 (two ids) and a lease
// TTL of 2 s, so that three servers make a standby and failures show
// within seconds.

const leaseTTL = 2 * time.Second

// memberLayout is the layout member gives its servers.
var memberLayout = idgen.Layout{IDBits: 1, ShardBits: 10, RandomBits: 10}

// busyArgs make a member issue only 4 IDs per ms (shard-range 2), so that
// a few clients keep its IDs up to max-lead-ms ahead of its clock, as a
// heavy load does; busyLayout is its layout.
var (
	busyArgs   = []string{"--shard-range", "2", "--random-range", "18", "--mgetid-max", "100"}
	busyLayout = idgen.Layout{IDBits: 1, ShardBits: 2, RandomBits: 18}
)

// member starts a server in cluster mode against e.
func member(t *testing.T, e *testetcd.Server, args ...string) *process {
	t.Helper()
	return start(t, nil, append(memberArgs(e), args...)...)
}

// memberAt starts a server in cluster mode against e serving the socket
// s (args name its --dir): started again at the same s, it is a server
// its service manager restarted at its address, where clients' requests
// wait unanswered while it is down and are served once it is back.
func memberAt(t *testing.T, e *testetcd.Server, s testbin.Socket, args ...string) *process {
	t.Helper()
	return testbin.Start(t, nil, []testbin.Socket{s}, binary, append(memberArgs(e), append(args, "--port", s.Port)...)...)
}

// memberArgs are the arguments member gives a server.
func memberArgs(e *testetcd.Server) []string {
	return []string{"--etcd-endpoints", e.Endpoint, "--etcd-lease-ttl", "2",
		"--id-range", "1", "--shard-range", "10", "--enable-debug-command", "yes"}
}

// waitHolding waits until p holds a server-id and returns it.
func waitHolding(t *testing.T, p *process, within time.Duration) int64 {
	t.Helper()
	var id int64 = -1
	if !await.Within(within, func() bool {
		held, err := strconv.ParseInt(clusterInfo(p, "held_server_id"), 10, 64)
		id = held
		return err == nil && held >= 0
	}) {
		t.Fatalf("%s holds no server-id after %v:\n%s", p.Addr, within, strings.Join(p.Lines(), "\n"))
	}
	return id
}

// TestClusterClaimsStandbyTakeover: two servers claim the two ids, a third
// stands by (not ready, ID commands refused with the reason). A holder
// paused past its lease loses its id to the standby, which serves within
// the TTL plus 2 s of the expiry, above every ID of the paused one though
// its clock is 30 s behind; the paused one, resumed, issues nothing that
// repeats and stands by.
func TestClusterClaimsStandbyTakeover(t *testing.T) {
	e := testetcd.Start(t)
	a, b := member(t, e, "--metrics-addr", "127.0.0.1:0"), member(t, e)
	ida, idb := waitHolding(t, a, 10*time.Second), waitHolding(t, b, 10*time.Second)
	if ida == idb {
		t.Fatalf("both servers hold server-id %d", ida)
	}
	c := member(t, e, "--metrics-addr", "127.0.0.1:0")
	if !await.Within(10*time.Second, func() bool { return clusterInfo(c, "cluster_state") == "standby" }) {
		t.Fatalf("the third server does not stand by: %q", clusterInfo(c, "cluster_state"))
	}
	if !await.Within(5*time.Second, func() bool {
		return c.Logged("cluster: standing by: all 2 server-ids (id-range 1) are held by other servers")
	}) {
		t.Errorf("the standby does not say why it waits:\n%s", strings.Join(c.Lines(), "\n"))
	}
	rc := redis.NewClient(&redis.Options{Addr: c.Addr, MaxRetries: -1})
	defer rc.Close()
	ctx := context.Background()
	if err := rc.Do(ctx, "GETID").Err(); err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN no server-id held: all 2 server-ids") {
		t.Fatalf("GETID on the standby: %v", err)
	}
	if code, body := get(t, "http://"+c.MetricsAddr(t)+"/readyz"); code != 503 || !strings.Contains(body, "no server-id held") {
		t.Fatalf("standby /readyz: %d %q", code, body)
	}

	// The standby's clock is 30 s behind: taking over, it must still start
	// above everything the paused holder issued (at the T it stored).
	if err := rc.Do(ctx, "DEBUG", "CLOCK-OFFSET", "-30000").Err(); err != nil {
		t.Fatal(err)
	}
	set := newIDSet(memberLayout)
	before := mgetid(t, a.Addr, 5000)
	set.add(before)
	a.Cmd.Process.Signal(syscall.SIGSTOP)
	paused := time.Now()
	id := waitHolding(t, c, 3*leaseTTL+2*time.Second)
	if took := time.Since(paused); id != ida || took > 2*leaseTTL+2*time.Second {
		t.Fatalf("the standby took server-id %d %v after the holder of %d paused; want it within the TTL and 2 s of the expiry", id, took, ida)
	}
	t.Logf("the standby serves server-id %d %v after its holder paused (lease TTL %v)", id, time.Since(paused).Round(time.Millisecond), leaseTTL)
	if code, _ := get(t, "http://"+c.MetricsAddr(t)+"/readyz"); code != 200 {
		t.Fatalf("the new holder's /readyz: %d", code)
	}
	taken := mgetid(t, c.Addr, 5000)
	if slices.Min(taken) <= slices.Max(before) {
		t.Fatalf("the new holder, its clock 30 s behind, issued %d, not above %d its predecessor issued", slices.Min(taken), slices.Max(before))
	}
	set.add(taken)
	a.Cmd.Process.Signal(syscall.SIGCONT)
	// Resumed, a still believes for a moment it holds the id: whatever it
	// answers must not repeat anything c issued.
	ra := redis.NewClient(&redis.Options{Addr: a.Addr, MaxRetries: -1})
	defer ra.Close()
	for range 200 {
		if ids, err := ra.Do(ctx, "MGETID", 10).Int64Slice(); err == nil {
			set.add(ids)
		} else {
			set.fail(err)
		}
	}
	set.add(mgetid(t, c.Addr, 5000))
	if n := set.check(t); n < 15000 {
		t.Fatalf("only %d IDs", n)
	}
	// It notices within a check of its lease (250 ms) or a keep-alive.
	await.True(t, 2*leaseTTL, "the paused server, resumed, stands by", func() bool { return clusterInfo(a, "cluster_state") == "standby" })
}

// TestClusterKillRestart: a holder killed with -9 and started again, its
// clock a minute back, stands by while its dead lease holds the id, then
// claims it once the lease expires and issues above everything it issued
// before.
func TestClusterKillRestart(t *testing.T) {
	e := testetcd.Start(t)
	a := member(t, e, "--server-id", "1") // pinned: the restart wants this id back
	waitHolding(t, a, 10*time.Second)
	before := mgetid(t, a.Addr, 20000)
	a.Kill9()
	// Its clock set back a minute while it was down: it must still start
	// above everything it issued, at the T stored in etcd.
	restarted := member(t, e, "--server-id", "1", "--debug-clock-offset-ms", "-60000")
	if id := waitHolding(t, restarted, 3*leaseTTL+2*time.Second); id != 1 {
		t.Fatalf("restarted server holds %d, want 1", id)
	}
	checkAbove(t, mgetid(t, restarted.Addr, 20000), slices.Max(before))
}

// TestClusterEtcdDown: with etcd gone under load the servers serve below
// their stored reservation, then refuse, and serve again once etcd is
// back; no ID repeats.
func TestClusterEtcdDown(t *testing.T) {
	e := testetcd.Start(t)
	servers := []*process{member(t, e), member(t, e)}
	for _, p := range servers {
		waitHolding(t, p, 10*time.Second)
	}
	set := newIDSet(memberLayout)
	stop := set.loadAll(newFleet(servers...), 4, 50)
	defer stop()
	await.True(t, time.Minute, "IDs are served before etcd goes down", func() bool { return set.count() > 1000 })
	e.Kill()
	down := set.count()
	// The outage under test: longer than the reservation (3 s) and the
	// lease, a length of time, not a condition.
	time.Sleep(3*leaseTTL + 2*time.Second)
	set.mu.Lock()
	refused := set.fails["CLUSTERDOWN"] + set.fails["BUSY"]
	set.mu.Unlock()
	duringOutage := set.count() - down
	e.Resume()
	for _, p := range servers {
		waitHolding(t, p, 3*leaseTTL+5*time.Second)
	}
	resumed := set.count()
	await.True(t, time.Minute, "IDs are served after etcd came back", func() bool { return set.count() > resumed+1000 })
	stop()
	total := set.check(t)
	if duringOutage == 0 || refused == 0 || total <= resumed {
		t.Fatalf("etcd down: %d IDs served during the outage (want some, below the reservation), %d refused (want some), %d after etcd came back (want more)",
			duringOutage, refused, total-resumed)
	}
	t.Logf("etcd down: %d IDs before, %d during the outage, %d refused, %d after; no repeats", down, duringOutage, refused, total-resumed)
}

// TestClusterFaultLoop: three servers for two ids under four clients,
// while faults come in a random order, at random times: a server paused
// past its lease, a server killed and started again, etcd killed and
// restarted, a server's clock shifted back or forward, every key under the
// prefix deleted. Every ID collected is unique, and so is every unit. The
// seed is logged; TEST_SEED replays it.
func TestClusterFaultLoop(t *testing.T) {
	seed := testseed.Get(t)
	rnd := rand.New(rand.NewPCG(seed, seed))
	e := testetcd.Start(t)
	const members = 3
	servers := newFleet(member(t, e), member(t, e), member(t, e))
	set := newIDSet(memberLayout)
	stop := set.loadAll(servers, 4, 100)
	defer stop()
	kinds := []string{"pause", "kill", "etcd", "clock", "wipe"}
	var order []string
	for range 3 {
		order = append(order, kinds...)
	}
	rnd.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for _, kind := range order {
		i := rnd.IntN(members)
		p := servers.at(i)
		switch kind {
		case "pause":
			p.Cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(leaseTTL + time.Duration(rnd.IntN(2000))*time.Millisecond)
			p.Cmd.Process.Signal(syscall.SIGCONT)
		case "kill":
			p.Kill9()
			servers.replace(i, member(t, e))
		case "etcd":
			e.Kill()
			time.Sleep(time.Duration(500+rnd.IntN(3000)) * time.Millisecond)
			e.Resume()
		case "clock":
			c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1})
			c.Do(context.Background(), "DEBUG", "CLOCK-OFFSET", strconv.Itoa(rnd.IntN(11_000)-10_000))
			c.Close()
		case "wipe":
			cli := e.Client()
			_, err := cli.Delete(context.Background(), "/idserver/", clientv3.WithPrefix())
			cli.Close()
			if err != nil {
				t.Fatalf("deleting the prefix: %v", err)
			}
		}
		time.Sleep(time.Duration(500+rnd.IntN(1500)) * time.Millisecond)
	}
	// Polled, not timed: a slow machine collects them later.
	await.True(t, time.Minute, "100,000 IDs collected", func() bool { return set.count() >= 100_000 })
	stop()
	n := set.check(t)
	set.mu.Lock()
	t.Logf("fault loop (seed %d): %d IDs collected from 3 servers for 2 ids, no ID or unit repeated; faults in order %v; error replies %v", seed, n, order, set.fails)
	set.mu.Unlock()
}

// TestClusterClaimKeyDeleted: a holder whose claim key is deleted (by an
// operator, say) stops issuing at once, with the reason, and claims
// again, its old id first.
func TestClusterClaimKeyDeleted(t *testing.T) {
	e := testetcd.Start(t)
	a := member(t, e)
	id := waitHolding(t, a, 10*time.Second)
	before := mgetid(t, a.Addr, 1000)
	cli := e.Client()
	defer cli.Close()
	if _, err := cli.Delete(context.Background(), "/idserver/l1-10-10/e1420041600000/claim/"+strconv.FormatInt(id, 10)); err != nil {
		t.Fatal(err)
	}
	await.True(t, 30*time.Second, "lease_losses is 1 after the claim key was deleted", func() bool { return clusterInfo(a, "lease_losses") == "1" })
	if again := waitHolding(t, a, 3*leaseTTL); again != id {
		t.Fatalf("after its claim key was deleted the server holds %d, want its old %d back", again, id)
	}
	checkAbove(t, mgetid(t, a.Addr, 1000), slices.Max(before))
	if !a.Logged("its claim key was deleted or taken") {
		t.Fatalf("no log line naming the reason:\n%s", strings.Join(a.Lines(), "\n"))
	}
}

// TestClusterOtherLayout: a server of another layout under the same
// etcd-prefix claims nothing and says why: IDs of two layouts can
// collide.
func TestClusterOtherLayout(t *testing.T) {
	e := testetcd.Start(t)
	a := member(t, e)
	waitHolding(t, a, 10*time.Second)
	b := start(t, nil, "--etcd-endpoints", e.Endpoint, "--id-range", "2", "--shard-range", "9")
	c := redis.NewClient(&redis.Options{Addr: b.Addr, MaxRetries: -1})
	defer c.Close()
	var err error
	if !await.Within(20*time.Second, func() bool {
		err = c.Do(context.Background(), "GETID").Err()
		return err != nil && strings.Contains(err.Error(), "another layout or epoch")
	}) {
		t.Fatalf("GETID on a server of another layout: %v", err)
	}
	if !b.Logged("etcd-prefix is used by servers of another layout or epoch") {
		t.Fatalf("no line saying another layout uses the prefix:\n%s", strings.Join(b.Lines(), "\n"))
	}
}

// TestClusterStartsBeforeEtcd: a server started while etcd is down stands
// by and says so, in its replies and once in its log however often it
// retries, and holds an id once etcd is up.
func TestClusterStartsBeforeEtcd(t *testing.T) {
	e := testetcd.Start(t)
	e.Kill()
	p := member(t, e, "--etcd-dial-timeout", "1")
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1})
	defer c.Close()
	var err error
	await.Within(30*time.Second, func() bool {
		err = c.Do(context.Background(), "GETID").Err()
		return err != nil && strings.Contains(err.Error(), "etcd unreachable")
	})
	if err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN no server-id held: etcd unreachable") {
		t.Fatalf("GETID with etcd down: %v", err)
	}
	// It retries about every second; the log says so once.
	time.Sleep(4 * time.Second)
	if n := strings.Count(strings.Join(p.Lines(), "\n"), "etcd unreachable; standing by"); n != 1 {
		t.Errorf("%d warnings that etcd is unreachable in 4 s of retries, want 1:\n%s", n, strings.Join(p.Lines(), "\n"))
	}
	e.Resume()
	waitHolding(t, p, 3*leaseTTL+5*time.Second)
	checkAbove(t, mgetid(t, p.Addr, 1000), 0)
}

// TestClusterEtcdTLSAndAuth: a server reaches etcd over TLS with a client
// certificate, and with etcd's authentication on, as a user; with a wrong
// password it holds nothing and says why.
func TestClusterEtcdTLSAndAuth(t *testing.T) {
	p := testpki.New(t)
	e := testetcd.StartTLS(t, &p)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	for _, step := range []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "s3cret"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	tlsArgs := []string{"--etcd-ca-cert-file", p.File("ca.crt"), "--etcd-cert-file", p.File("client.crt"), "--etcd-key-file", p.File("client.key")}
	good := member(t, e, append(tlsArgs, "--etcd-username", "root", "--etcd-password", "s3cret")...)
	waitHolding(t, good, 10*time.Second)
	checkAbove(t, mgetid(t, good.Addr, 1000), 0)
	gc := redis.NewClient(&redis.Options{Addr: good.Addr})
	defer gc.Close()
	if shown, err := gc.ConfigGet(ctx, "etcd-*").Result(); err != nil || shown["etcd-password"] != "(redacted)" || shown["etcd-username"] != "root" {
		t.Errorf("CONFIG GET etcd-*: %v, %v; want the password redacted", shown, err)
	}

	bad := member(t, e, append(tlsArgs, "--etcd-username", "root", "--etcd-password", "wrong", "--etcd-dial-timeout", "1")...)
	c := redis.NewClient(&redis.Options{Addr: bad.Addr, MaxRetries: -1})
	defer c.Close()
	var err error
	await.Within(30*time.Second, func() bool {
		err = c.Do(ctx, "GETID").Err()
		return err != nil && strings.Contains(err.Error(), "authentication failed")
	})
	if err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("GETID with a wrong etcd password: %v", err)
	}
}

// waitAhead waits until p issues IDs lead ms ahead of its clock.
func waitAhead(t *testing.T, p *process, lead int) {
	t.Helper()
	if !await.Within(30*time.Second, func() bool {
		ms, err := strconv.Atoi(processInfo(p, "idgen", "lead_ms"))
		return err == nil && ms >= lead
	}) {
		t.Fatalf("IDs never ran %d ms ahead of the clock under load", lead)
	}
}

// wipe deletes every key under the prefix, as an operator's cleanup
// would.
func wipe(t *testing.T, e *testetcd.Server) {
	t.Helper()
	cli := e.Client()
	defer cli.Close()
	if _, err := cli.Delete(context.Background(), "/idserver/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
}

// TestClusterPrefixDeletedUnderLoad: an operator deletes every key under
// the prefix while two holders issue IDs seconds ahead of their clocks.
// Both lose their ids and claim again, and start above everything they
// issued (the last T each stored): the first finds no reservation left,
// says loudly that etcd lost data and writes back the T it knew of the
// other's id, which the other then finds. No ID and no unit repeats.
func TestClusterPrefixDeletedUnderLoad(t *testing.T) {
	e := testetcd.Start(t)
	servers := []*process{member(t, e, busyArgs...), member(t, e, busyArgs...)}
	for _, p := range servers {
		waitHolding(t, p, 10*time.Second)
	}
	set := newIDSet(busyLayout)
	stop := set.loadAll(newFleet(servers...), 4, 100)
	defer stop()
	waitAhead(t, servers[0], 2000)
	wipe(t, e)
	deleted, deletedAt := set.count(), time.Now()
	for _, p := range servers {
		if !await.Within(10*time.Second, func() bool { return clusterInfo(p, "claims") == "2" && clusterInfo(p, "cluster_state") == "holding" }) {
			t.Fatalf("%s did not claim again after the prefix was deleted:\n%s", p.Addr, strings.Join(p.Lines(), "\n"))
		}
	}
	t.Logf("both holding again %v after the prefix was deleted", time.Since(deletedAt).Round(time.Millisecond))
	if !await.Within(20*time.Second, func() bool { return set.count() > deleted+20000 }) {
		t.Fatalf("only %d IDs after the claims again (%d before)", set.count()-deleted, deleted)
	}
	stop()
	n := set.check(t)
	t.Logf("%d IDs, %d after the prefix was deleted, none and no unit repeated; errors %v", n, n-deleted, set.fails)
	// The first to claim again says so and writes back the other's T,
	// which the other then finds in etcd as if nothing was lost.
	if !slices.ContainsFunc(servers, func(p *process) bool { return p.Logged("etcd lost data") }) {
		t.Errorf("both claimed again without saying etcd lost data:\n%s", strings.Join(servers[0].Lines(), "\n"))
	}
}

// TestClusterPrefixDeletedStandbyClaims: as above, with a third server
// standing by. It sees the claims go and takes the id of a holder paused
// at the wipe (so that the holder cannot claim it again first, as on a
// busy machine it did): it never held that id, and etcd has no
// reservation left for it. It must still start above every ID the holder issued,
// which ran further ahead of the clock than max-lead-ms (the holders
// started max-lead-ms ahead, and borrowed from there): it knows the
// reservations it saw in etcd before they were deleted.
func TestClusterPrefixDeletedStandbyClaims(t *testing.T) {
	e := testetcd.Start(t)
	servers := []*process{member(t, e, busyArgs...), member(t, e, busyArgs...)}
	for _, p := range servers {
		waitHolding(t, p, 10*time.Second)
	}
	standby := member(t, e, busyArgs...)
	servers = append(servers, standby)
	if !await.Within(10*time.Second, func() bool { return clusterInfo(standby, "cluster_state") == "standby" }) {
		t.Fatalf("the third server does not stand by: %s", clusterInfo(standby, "cluster_state"))
	}
	set := newIDSet(busyLayout)
	stop := set.loadAll(newFleet(servers...), 4, 100)
	defer stop()
	waitAhead(t, servers[0], 6000)
	servers[0].Cmd.Process.Signal(syscall.SIGSTOP)
	wipe(t, e)
	deleted := set.count()
	if !await.Within(30*time.Second, func() bool { return clusterInfo(standby, "cluster_state") == "holding" }) {
		t.Fatalf("the standby did not claim after the prefix was deleted:\n%s", strings.Join(standby.Lines(), "\n"))
	}
	servers[0].Cmd.Process.Signal(syscall.SIGCONT)
	if !await.Within(20*time.Second, func() bool { return set.count() > deleted+40000 }) {
		t.Fatalf("only %d IDs after the standby claimed (%d before)", set.count()-deleted, deleted)
	}
	stop()
	n := set.check(t)
	t.Logf("%d IDs, %d after the prefix was deleted, none and no unit repeated; errors %v", n, n-deleted, set.fails)
}

// TestClusterPrefixDeletedNewServer: the holder of one id is paused when
// every key is deleted, so nobody claims its id again, and then a server
// new to etcd (an empty dir, no history) claims it. The other holder,
// claiming its own id again, found etcd lost data and wrote back the
// reservations it knew, the paused holder's among them: the new server
// starts above every ID the paused one issued, though those ran further
// ahead of the clock than max-lead-ms.
func TestClusterPrefixDeletedNewServer(t *testing.T) {
	e := testetcd.Start(t)
	servers := []*process{member(t, e, busyArgs...), member(t, e, busyArgs...)}
	paused := servers[0]
	if waitHolding(t, paused, 10*time.Second) != 0 {
		servers[0], servers[1] = servers[1], servers[0]
		paused = servers[0]
	}
	waitHolding(t, servers[1], 10*time.Second)
	set := newIDSet(busyLayout)
	load := newFleet(servers...)
	stop := set.loadAll(load, 4, 100)
	defer stop()
	waitAhead(t, paused, 6000)
	paused.Cmd.Process.Signal(syscall.SIGSTOP)
	wipe(t, e)
	deleted := set.count()
	cli := e.Client()
	defer cli.Close()
	if !await.Within(10*time.Second, func() bool { return clusterInfo(servers[1], "claims") == "2" }) {
		t.Fatalf("the running holder did not claim again:\n%s", strings.Join(servers[1].Lines(), "\n"))
	}
	// The paused holder's own reservation key, not a count of keys: a
	// count met by other keys (the live keys came later) let the new
	// server claim before the write-back, which the package doc of
	// cluster names as what remains.
	if !await.Within(10*time.Second, func() bool {
		resp, err := cli.Get(context.Background(), "/idserver/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		return err == nil && slices.ContainsFunc(resp.Kvs, func(kv *mvccpb.KeyValue) bool {
			return strings.HasSuffix(string(kv.Key), "/reserved/0")
		})
	}) {
		resp, _ := cli.Get(context.Background(), "/idserver/", clientv3.WithPrefix())
		t.Fatalf("the reservation of the paused holder's id was not written back: %v\n%s", resp.Kvs, strings.Join(servers[1].Lines(), "\n"))
	}
	fresh := member(t, e, busyArgs...)
	if id := waitHolding(t, fresh, 10*time.Second); id != 0 {
		t.Fatalf("the new server holds id %d, want the paused holder's 0", id)
	}
	load.replace(0, fresh)
	paused.Cmd.Process.Signal(syscall.SIGCONT)
	if !await.Within(20*time.Second, func() bool { return set.count() > deleted+40000 }) {
		t.Fatalf("only %d IDs after the new server claimed (%d before)", set.count()-deleted, deleted)
	}
	stop()
	n := set.check(t)
	t.Logf("%d IDs, %d after the prefix was deleted, none and no unit repeated; errors %v", n, n-deleted, set.fails)
}

// TestClusterLocalCopy: a holder killed with -9, its keys then deleted
// from etcd, and started again on the same dir with its clock a minute
// back, starts above everything it issued: at the copy of its reservation
// in dir, which every save writes before etcd.
func TestClusterLocalCopy(t *testing.T) {
	e := testetcd.Start(t)
	dir := t.TempDir()
	a := member(t, e, "--server-id", "1", "--dir", dir)
	waitHolding(t, a, 10*time.Second)
	before := mgetid(t, a.Addr, 20000)
	a.Kill9()
	cli := e.Client()
	defer cli.Close()
	if _, err := cli.Delete(context.Background(), "/idserver/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	restarted := member(t, e, "--server-id", "1", "--dir", dir, "--debug-clock-offset-ms", "-60000")
	waitHolding(t, restarted, 10*time.Second)
	checkAbove(t, mgetid(t, restarted.Addr, 20000), slices.Max(before))
	if !restarted.Logged("etcd lost data") {
		t.Errorf("the restarted server did not say etcd lost data:\n%s", strings.Join(restarted.Lines(), "\n"))
	}
}

// TestClusterEtcdWentBack: a holder killed with -9 and started again on
// the same dir after etcd was replaced by one that knows nothing (as a
// restore from an old snapshot leaves it: another cluster, a lower
// revision) claims nothing and says why, naming the file to remove; once
// an operator removes it, it claims and starts above everything it issued
// (its local copy), though etcd has no reservation and its clock is a
// minute back.
func TestClusterEtcdWentBack(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	for i := range 100 { // other users of etcd move its revision on
		if _, err := cli.Put(context.Background(), "/other/"+strconv.Itoa(i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	a := member(t, e, "--server-id", "1", "--dir", dir)
	waitHolding(t, a, 10*time.Second)
	before := mgetid(t, a.Addr, 20000)
	a.Kill9()
	e.Replace()
	restarted := member(t, e, "--server-id", "1", "--dir", dir, "--debug-clock-offset-ms", "-60000")
	history := filepath.Join(dir, "idserver.state.etcd")
	if !await.Within(10*time.Second, func() bool { return restarted.Logged("etcd went back in time") }) {
		t.Fatalf("no line saying etcd went back:\n%s", strings.Join(restarted.Lines(), "\n"))
	}
	rc := redis.NewClient(&redis.Options{Addr: restarted.Addr, MaxRetries: -1})
	defer rc.Close()
	// The line may come from the sequences' first read of etcd, before
	// the claim has looked (GETID: "connecting to etcd" meanwhile).
	var err error
	if !await.Within(10*time.Second, func() bool {
		err = rc.Do(context.Background(), "GETID").Err()
		return err != nil && strings.Contains(err.Error(), "etcd went back in time") && strings.Contains(err.Error(), "remove "+history)
	}) {
		t.Fatalf("GETID while etcd is behind: %v", err)
	}
	if err := os.Remove(history); err != nil {
		t.Fatal(err)
	}
	waitHolding(t, restarted, 10*time.Second)
	checkAbove(t, mgetid(t, restarted.Addr, 20000), slices.Max(before))
}

// TestClusterEtcdLeaderLost: with a 3-member etcd, freezing its leader
// (the quorum stays; its connections hang open and silent) under load
// costs the holders nothing: the other members elect a new leader, which
// extends every lease, and a holder whose keep-alive stream hangs on the
// frozen member renews through another before etcd expires its lease.
// With a lease TTL of 10 s both keep their ids, and no ID or unit
// repeats. (Before, a holder whose stream happened to be on the leader
// lost its id: in about half the runs one did. With a TTL of 5 s, etcd
// itself, electing under the full suite beside two CPU hogs, once
// answered no write for longer than that: losing the lease then is what
// the design asks, and the TTL leaves etcd room.)
func TestClusterEtcdLeaderLost(t *testing.T) {
	const ttl = 10 * time.Second
	members := testetcd.StartCluster(t, 3)
	var endpoints []string
	for _, e := range members {
		endpoints = append(endpoints, e.Endpoint)
	}
	args := append([]string{"--etcd-endpoints", strings.Join(endpoints, ","), "--etcd-lease-ttl", strconv.Itoa(int(ttl.Seconds())),
		"--id-range", "1", "--enable-debug-command", "yes"}, busyArgs...)
	servers := []*process{start(t, nil, args...), start(t, nil, args...)}
	for _, p := range servers {
		waitHolding(t, p, 10*time.Second)
		waitRenewed(t, p)
	}
	set := newIDSet(busyLayout)
	stop := set.loadAll(newFleet(servers...), 4, 100)
	defer stop()
	leader := etcdLeader(t, members)
	t.Logf("freezing etcd leader %s", leader.Endpoint)
	leader.Freeze()
	frozen := set.count()
	time.Sleep(2 * ttl) // two lease TTLs: a lease renewed only through the frozen member would be gone
	for _, p := range servers {
		if losses := clusterInfo(p, "lease_losses"); losses != "0" || clusterInfo(p, "cluster_state") != "holding" {
			t.Errorf("%s after the leader froze: lease_losses %s, cluster_state %s\n%s", p.Addr, losses, clusterInfo(p, "cluster_state"), strings.Join(p.Lines(), "\n"))
		}
	}
	await.True(t, time.Minute, "10,000 IDs after the leader froze", func() bool { return set.count() >= frozen+10000 })
	stop()
	n := set.check(t)
	t.Logf("%d IDs, %d after the leader froze; errors %v", n, n-frozen, set.fails)
}

// waitRenewed waits until p's lease has been renewed by a keep-alive
// reply since it was granted: the steady state a holder spends its life
// in. (Frozen before its first reply, a holder has only what is left of
// the grant's TTL to reach the new leader, which on a busy machine may
// not be elected in time; then it gives its id up, safely, as designed.)
func waitRenewed(t *testing.T, p *process) {
	t.Helper()
	prev := int64(1 << 62)
	if !await.Within(time.Minute, func() bool {
		left, err := strconv.ParseInt(clusterInfo(p, "lease_ttl_left_ms"), 10, 64)
		renewed := err == nil && left > prev // the time left went up: a reply came
		if err == nil {
			prev = left
		}
		return renewed
	}) {
		t.Fatalf("%s: lease not renewed within a minute", p.Addr)
	}
}

// etcdLeader is the member of members that leads.
func etcdLeader(t *testing.T, members []*testetcd.Server) *testetcd.Server {
	t.Helper()
	cli := members[0].Client()
	defer cli.Close()
	for _, e := range members {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cli.Status(ctx, "http://"+e.Endpoint)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return e
		}
	}
	t.Fatal("no etcd member leads")
	return nil
}

// TestClusterEtcdNoSpace: etcd reaching its space quota (NOSPACE: every
// write refused) stops the holder's renewals; once its reservation runs
// out, GETID's reply, /readyz and INFO cluster name NOSPACE. After an
// operator frees space (delete, compact, defragment, disarm) the holder
// serves again by itself, above every ID before.
func TestClusterEtcdNoSpace(t *testing.T) {
	e := testetcd.StartArgs(t, "--quota-backend-bytes", strconv.Itoa(4<<20))
	a := member(t, e, "--reserve-ms", "500", "--metrics-addr", "127.0.0.1:0")
	waitHolding(t, a, 10*time.Second)
	before := mgetid(t, a.Addr, 1000)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	junk := strings.Repeat("x", 256<<10)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = cli.Put(ctx, "/junk/"+strconv.Itoa(i), junk)
	}
	if !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("filling etcd to its 4 MiB quota: %v, want NOSPACE", err)
	}
	rc := redis.NewClient(&redis.Options{Addr: a.Addr, MaxRetries: -1})
	defer rc.Close()
	var lastErr error
	if !await.Within(10*time.Second, func() bool {
		lastErr = rc.Do(ctx, "GETID").Err()
		return lastErr != nil && strings.Contains(lastErr.Error(), "NOSPACE")
	}) {
		t.Fatalf("GETID with etcd out of space: %v, want a -BUSY naming NOSPACE", lastErr)
	}
	if code, body := get(t, "http://"+a.MetricsAddr(t)+"/readyz"); code != 503 || !strings.Contains(body, "NOSPACE") {
		t.Errorf("/readyz with etcd out of space: %d %q", code, body)
	}
	if !await.Within(10*time.Second, func() bool { return clusterInfo(a, "etcd_alarm_nospace") == "1" }) {
		t.Errorf("INFO cluster: etcd_alarms %q, etcd_alarm_nospace %q; want NOSPACE, 1", clusterInfo(a, "etcd_alarms"), clusterInfo(a, "etcd_alarm_nospace"))
	}

	// The operator frees space.
	resp, err := cli.Delete(ctx, "/junk/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	// Physical: a plain Compact returns before etcd removes the old
	// revisions, the Defragment after it may then free nothing, and the
	// first write after the disarm raises the alarm again.
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Defragment(ctx, e.Endpoint); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil {
		t.Fatal(err)
	}
	disarmed := time.Now()
	if !await.Within(10*time.Second, func() bool { return rc.Do(ctx, "GETID").Err() == nil }) {
		t.Fatalf("GETID after etcd's space was freed: %v", rc.Do(ctx, "GETID").Err())
	}
	t.Logf("serving again %v after the alarm was disarmed", time.Since(disarmed).Round(time.Millisecond))
	checkAbove(t, mgetid(t, a.Addr, 1000), slices.Max(before))
	if !await.Within(10*time.Second, func() bool { return clusterInfo(a, "etcd_alarms") == "none" }) {
		t.Errorf("INFO cluster etcd_alarms %q after the alarm was disarmed, want none", clusterInfo(a, "etcd_alarms"))
	}
}

// TestClusterEtcdRestored: etcd is restored from a backup taken seconds
// earlier, while two holders issue IDs seconds ahead of their clocks; both
// are killed and restarted on their dirs. The restored etcd holds older
// reservations; the restarted holders see etcd behind what they saw and
// claim nothing until an operator removes their history files, then start
// above everything they issued. No ID and no unit repeats.
func TestClusterEtcdRestored(t *testing.T) {
	e := testetcd.Start(t)
	dirs := []string{t.TempDir(), t.TempDir()}
	holder := func(i int) *process {
		return member(t, e, append([]string{"--server-id", strconv.Itoa(i), "--dir", dirs[i]}, busyArgs...)...)
	}
	servers := []*process{holder(0), holder(1)}
	for _, p := range servers {
		waitHolding(t, p, 10*time.Second)
	}
	set := newIDSet(busyLayout)
	load := newFleet(servers...)
	stop := set.loadAll(load, 4, 100)
	defer stop()
	cli := e.Client()
	defer cli.Close()
	resp, err := cli.Get(context.Background(), "backup")
	if err != nil {
		t.Fatal(err)
	}
	backup := e.Backup()
	if !await.Within(20*time.Second, func() bool { return set.count() > 30000 }) {
		t.Fatalf("only %d IDs after the backup", set.count())
	}
	// A holder finds the restore only if it saw etcd past the backup
	// (beside two CPU hogs one had not yet, and found the reservations
	// lost instead, as it should).
	await.True(t, time.Minute, "every holder saw etcd past the backup", func() bool {
		return !slices.ContainsFunc(dirs, func(dir string) bool { return historyRevision(dir) <= resp.Header.Revision })
	})
	for _, p := range servers {
		p.Kill9()
	}
	e.Restore(backup)
	restoredAt := set.count()
	servers = []*process{holder(0), holder(1)}
	for i, p := range servers {
		load.replace(i, p)
	}
	for i, p := range servers {
		if !await.Within(10*time.Second, func() bool { return p.Logged("etcd went back in time") }) {
			t.Fatalf("restarted holder %d did not see etcd go back:\n%s", i, strings.Join(p.Lines(), "\n"))
		}
	}
	for i, p := range servers { // the operator confirms
		if err := os.Remove(filepath.Join(dirs[i], "idserver.state.etcd")); err != nil {
			t.Fatal(err)
		}
		waitHolding(t, p, 10*time.Second)
	}
	if !await.Within(20*time.Second, func() bool { return set.count() > restoredAt+20000 }) {
		t.Fatalf("only %d IDs after the restore", set.count()-restoredAt)
	}
	stop()
	n := set.check(t)
	t.Logf("%d IDs, %d after the restore, none and no unit repeated; errors %v", n, n-restoredAt, set.fails)
}

// frozenProxy forwards TCP connections to target until Freeze: then it
// moves no more bytes, either way, but keeps every connection open, as a
// network that silently drops packets does.
type frozenProxy struct {
	ln     net.Listener
	target string
	frozen atomic.Bool
}

func startProxy(t *testing.T, target string) *frozenProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &frozenProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go p.accept()
	return p
}

func (p *frozenProxy) Addr() string { return p.ln.Addr().String() }

// Freeze stops every byte, for good.
func (p *frozenProxy) Freeze() { p.frozen.Store(true) }

func (p *frozenProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				return
			}
			go p.pipe(up, c)
			p.pipe(c, up)
		}()
	}
}

// pipe copies from src to dst until either fails; frozen, it holds what
// it read and waits (the test's end closes the listener, not these).
func (p *frozenProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for p.frozen.Load() {
			time.Sleep(50 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// TestClusterHolderCutOff: a holder whose every connection to etcd goes
// silent (a frozen proxy between them) while its clients still reach it
// serves below the T it stored, then gives its id up; the standby, which
// reaches etcd, takes the id once the lease expires and issues above.
// Clients keep asking both throughout: no ID and no unit repeats.
func TestClusterHolderCutOff(t *testing.T) {
	e := testetcd.Start(t)
	proxy := startProxy(t, e.Endpoint)
	args := append([]string{"--id-range", "0", "--enable-debug-command", "yes", "--etcd-lease-ttl", "2"}, busyArgs...)
	args = append(args, "--random-range", "19")
	cut := start(t, nil, append([]string{"--etcd-endpoints", proxy.Addr()}, args...)...)
	waitHolding(t, cut, 10*time.Second)
	standby := start(t, nil, append([]string{"--etcd-endpoints", e.Endpoint}, args...)...)
	if !await.Within(10*time.Second, func() bool { return clusterInfo(standby, "cluster_state") == "standby" }) {
		t.Fatalf("the second server does not stand by: %s", clusterInfo(standby, "cluster_state"))
	}
	set := newIDSet(idgen.Layout{IDBits: 0, ShardBits: 2, RandomBits: 19})
	servers := []*process{cut, standby}
	stop := set.loadAll(newFleet(servers...), 4, 100)
	defer stop()
	if !await.Within(20*time.Second, func() bool { return set.count() > 10000 }) {
		t.Fatalf("only %d IDs before the cut", set.count())
	}
	proxy.Freeze()
	frozenAt, frozenTime := set.count(), time.Now()
	if !await.Within(5*leaseTTL+5*time.Second, func() bool { return clusterInfo(standby, "cluster_state") == "holding" }) {
		t.Fatalf("the standby never took the id of the holder cut off:\n%s", strings.Join(standby.Lines(), "\n"))
	}
	t.Logf("the standby held the id %v after the cut (lease TTL 2 s)", time.Since(frozenTime).Round(time.Millisecond))
	if !await.Within(20*time.Second, func() bool { return set.count() > frozenAt+20000 }) {
		t.Fatalf("only %d IDs after the cut", set.count()-frozenAt)
	}
	if !await.Within(5*leaseTTL, func() bool { return clusterInfo(cut, "lease_losses") == "1" }) {
		t.Errorf("the holder cut off did not give its id up: lease_losses %s", clusterInfo(cut, "lease_losses"))
	}
	// It stopped serving, and says so at once, not after its final write
	// to the etcd it cannot reach.
	c := redis.NewClient(&redis.Options{Addr: cut.Addr, MaxRetries: -1})
	defer c.Close()
	if err := c.Do(context.Background(), "GETID").Err(); err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN") {
		t.Errorf("GETID from the holder cut off: %v, want CLUSTERDOWN", err)
	}
	if state := clusterInfo(cut, "cluster_state"); state == "holding" {
		t.Errorf("the holder cut off stopped serving, and INFO says cluster_state:%s", state)
	}
	stop()
	n := set.check(t)
	t.Logf("%d IDs, %d after the cut, none and no unit repeated; errors %v", n, n-frozenAt, set.fails)
}

// TestClusterOtherEpochNeverHolds: a server of another epoch (3 s later)
// on the same prefix stands by while one of the first holds an id, and
// still does whatever single key under the prefix is deleted, each in
// turn (the layout key, the holder's claim key, its live key, its
// reservation): the two never hold ids at once, and no ID comes twice
// from them (before, deleting the layout key let both hold id 0).
func TestClusterOtherEpochNeverHolds(t *testing.T) {
	e := testetcd.Start(t)
	a := member(t, e)
	waitHolding(t, a, 10*time.Second)
	b := member(t, e, "--epoch", strconv.FormatInt(idgen.DefaultEpoch.UnixMilli()+3000, 10))
	await.True(t, 10*time.Second, "the server of another epoch stands by", func() bool {
		return b.Logged("another layout or epoch")
	})
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	resp, err := cli.Get(ctx, "/idserver/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	// The claims' keys, not the sequences' slot records (16,384 once a has
	// taken its slots: deleted one by one, 2 TTLs each, the test ran for
	// hours; TestClusterSequencesEtcdLosesData deletes those).
	resp.Kvs = slices.DeleteFunc(resp.Kvs, func(kv *mvccpb.KeyValue) bool { return strings.HasPrefix(string(kv.Key), "/idserver/seqslot/") })
	if len(resp.Kvs) < 4 {
		t.Fatalf("keys under the prefix: %v", resp.Kvs)
	}
	ids := map[int64]string{}
	collect := func(p *process, who string) {
		c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1})
		defer c.Close()
		batch, _ := c.Do(ctx, "MGETID", 100).Int64Slice() // a server standing by refuses
		for _, id := range batch {
			if other, ok := ids[id]; ok {
				t.Fatalf("ID %d from %s and %s", id, other, who)
			}
			ids[id] = who
		}
	}
	for _, kv := range resp.Kvs {
		if _, err := cli.Delete(ctx, string(kv.Key)); err != nil {
			t.Fatal(err)
		}
		// For two lease TTLs (time for any claim the deletion lets
		// through), never both at once; IDs collected at every poll.
		if await.Within(2*leaseTTL, func() bool {
			if clusterInfo(a, "cluster_state") == "holding" && clusterInfo(b, "cluster_state") == "holding" {
				return true
			}
			collect(a, "a")
			collect(b, "b")
			return false
		}) {
			t.Fatalf("with %s deleted, servers of two epochs hold ids at once", kv.Key)
		}
		// One of them claims again after a loses a key of its own: a,
		// mostly; b when its claim comes first (the layout key deleted
		// before, and a's live key gone with its claim), as it did beside
		// two CPU hogs.
		await.True(t, 10*time.Second, "a server holds an id", func() bool {
			return clusterInfo(a, "cluster_state") == "holding" || clusterInfo(b, "cluster_state") == "holding"
		})
	}
	if len(ids) == 0 {
		t.Fatal("no IDs collected")
	}
	t.Logf("%d keys deleted in turn, %d IDs, none twice", len(resp.Kvs), len(ids))
}
