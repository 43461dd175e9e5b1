package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/internal/testseed"
)

// The full-disk tests (issue 39): a server whose --dir is a tmpfs filled
// to its last block, clients pipelining INCRs of new keys beside old
// ones, then kill -9, space freed and a restart. (As root: smallDisk.)

// fullDiskPad pads the new keys to about 200 bytes, as the were:
// each birth is a write of that much, so the full disk refuses it soon.
var fullDiskPad = strings.Repeat("x", 200)

// fullDiskOld is how many old keys the tests make before the disk fills.
const fullDiskOld = 50

func oldKey(i int) string { return "old:" + strconv.Itoa(i) }

// shortKey is key for a message: the pad named, not spelled out.
func shortKey(key string) string {
	return strings.Replace(key, fullDiskPad, "<200 x's>", 1)
}

// TestFullDiskNoValueTwice: on a disk that the load fills to its last
// block (a tmpfs filled, and a few pages freed now and then), a server
// that clients press with one-shot INCRs and INCRBYs, pipelines of them
// and transactions, mostly of new keys, and that is killed with SIGKILL
// at a random moment, then restarted once space returns, never hands a
// value of a key out twice: every key a client was given values of
// exists after the restart, at or above the largest of them, and its
// next INCR is above it; every key SCAN listed before the kill exists
// after it (a key counted is durable), and no key exists that no client
// sent a command for. Rounds on the same dir (FULLDISK_ROUNDS, default
// 3), each with the disk filled again; TEST_SEED replays one.
func TestFullDiskNoValueTwice(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		fullDiskNoValueTwice(t, func(dir string) *process { return start(t, nil, "--dir", dir) })
	})
	// The one server over etcd: a new key's values come from the same
	// file, under its slot's ceiling in etcd (plain clients: its multi-key
	// commands span slots).
	t.Run("etcd", func(t *testing.T) {
		e := testetcd.Start(t)
		fullDiskNoValueTwice(t, func(dir string) *process {
			p := member(t, e, "--dir", dir)
			waitHolding(t, p, time.Minute)
			c := redis.NewClient(&redis.Options{Addr: p.Addr})
			defer c.Close()
			await.True(t, time.Minute, "the slots taken", func() bool { return c.Get(context.Background(), "no key").Err() == redis.Nil })
			return p
		})
	})
}

// fullDiskNoValueTwice is TestFullDiskNoValueTwice on the servers serve
// starts on dir.
func fullDiskNoValueTwice(t *testing.T, serve func(dir string) *process) {
	seed := testseed.Get(t)
	rnd := rand.New(rand.NewPCG(seed, 0))
	rounds := 3
	if s := os.Getenv("FULLDISK_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("FULLDISK_ROUNDS=%q: want a number of rounds", s)
		}
		rounds = n
	}
	dir := smallDisk(t, "16m")
	filler := filepath.Join(dir, "filler")
	l := newFullDiskLoad()
	p := serve(dir)
	ran := []*process{p} // for their logs, should a check fail
	defer func() {
		if t.Failed() {
			logRuns(t, ran, "sequences", "slot", "etcd")
		}
	}()
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	for i := range fullDiskOld {
		key := oldKey(i)
		l.sentKey(key)
		v, err := c.Incr(context.Background(), key).Result()
		if err != nil {
			t.Fatalf("INCR %s before the disk is full: %v", key, err)
		}
		l.got(key, 1, v, fullDiskChecker)
	}
	c.Close()
	begin, done := time.Now(), 0
	for round := range rounds {
		l.nextRound(round)
		fill(t, filler)
		// A few pages (seeded) free again: the load's first writes take
		// the disk to its last block, as a disk that fills under load,
		// and a write fits where the next does not. (With none free, no
		// value of a new key was given at all, and no round failed.)
		freed := 4 + rnd.IntN(125)
		if err := shrink(filler, freed); err != nil {
			t.Fatal(err)
		}
		loadFor := time.Duration(500+rnd.IntN(2500)) * time.Millisecond
		quit := make(chan struct{})
		var wg sync.WaitGroup
		clients := []func(addr string, rnd *rand.Rand, client int, quit <-chan struct{}){l.oneShot, l.oneShot, l.pipeline, l.transactions} // as fullDiskClients names them
		for i, client := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client(p.Addr, rand.New(rand.NewPCG(seed, uint64(round*len(clients)+i+1))), i, quit)
			}()
		}
		// The kill comes at no set moment of the load. Meanwhile a few
		// pages are freed now and then, as other files on the disk come
		// and go: each time the disk fills again under the load (half
		// the rounds failed on main without, nearly all with).
		for end := time.Now().Add(loadFor); time.Now().Before(end); {
			time.Sleep(min(time.Duration(100+rnd.IntN(400))*time.Millisecond, time.Until(end)))
			more := 2 + rnd.IntN(16)
			if err := shrink(filler, more); err != nil {
				t.Fatal(err)
			}
			freed += more
		}
		listed := scanAll(t, p.Addr)
		before := dbSize(t, p.Addr)
		p.Kill9()
		close(quit)
		wg.Wait()
		l.set.nextRun()
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		p = serve(dir)
		ran = append(ran, p)
		after := dbSize(t, p.Addr)
		received, keys := l.roundValues()
		t.Logf("round %d: %d pages freed after the fill; killed after %v of load; %d values received of %d keys; SCAN listed %d keys, DBSIZE %d before the kill, %d after the restart",
			round, freed, loadFor, received, keys, len(listed), before, after)
		l.check(t, p, round, listed)
		done++
		if t.Failed() {
			break
		}
	}
	if n := l.fails()["protocol"]; n > 0 {
		t.Errorf("%d replies to the pipeline were neither an integer nor an error", n)
	}
	values := l.set.check(t)
	t.Logf("%d of %d rounds in %v: %d values checked, %d keys sent; errors by kind %v (conn: the kills)",
		done, rounds, time.Since(begin).Round(time.Millisecond), values, l.sentCount(), l.fails())
}

// TestFullDiskPipelineAnswered: on a disk filled to the last block, a
// pipeline of 2,000 INCRs of new keys on one connection gets a reply to
// each, an integer or an error, within 60 s: a write that cannot succeed
// ends in a reply, not a wait. Every key counted before a kill -9 is
// durable (DBSIZE after the restart is not below DBSIZE before), and every
// key a client was given a value of is at or above it after the restart.
func TestFullDiskPipelineAnswered(t *testing.T) {
	const n, within = 2000, 60 * time.Second
	dir := smallDisk(t, "16m")
	filler := filepath.Join(dir, "filler")
	p := start(t, nil, "--dir", dir)
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	ctx := context.Background()
	given := map[string]int64{}
	for i := range fullDiskOld {
		v, err := c.Incr(ctx, oldKey(i)).Result()
		if err != nil {
			t.Fatalf("INCR %s before the disk is full: %v", oldKey(i), err)
		}
		given[oldKey(i)] = v
	}
	fill(t, filler)
	var oneShot []string
	for i := 1; i <= 5; i++ {
		key := "new:" + strconv.Itoa(i)
		v, err := c.Incr(ctx, key).Result()
		if err != nil {
			oneShot = append(oneShot, fmt.Sprintf("%s: %v", key, err))
			continue
		}
		given[key] = v
		oneShot = append(oneShot, fmt.Sprintf("%s: %d", key, v))
	}
	t.Logf("one-shot INCRs on the full disk: %s", strings.Join(oneShot, "; "))

	conn, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(within))
	keys := make([]string, n)
	var w strings.Builder
	for i := range keys {
		keys[i] = "fresh:" + fullDiskPad + ":" + strconv.Itoa(i)
		appendIncr(&w, keys[i], 1)
	}
	begin := time.Now()
	// Written beside the reading: the server reads a pipeline as it
	// answers it, and TCP holds the rest back meanwhile.
	go io.WriteString(conn, w.String())
	r := bufio.NewReader(conn)
	answered, values, fails := 0, 0, map[string]int{}
	for ; answered < n; answered++ {
		v, err := readIntReply(r)
		var reply replyError
		switch {
		case errors.As(err, &reply):
			fails[reply.kind()]++
			continue
		case errors.Is(err, os.ErrDeadlineExceeded):
			fails["timeout"]++
		case errors.As(err, new(protocolError)):
			t.Errorf("reply %d: %v", answered, err)
			fails["protocol"]++
		case err != nil:
			fails["conn"]++
		default:
			given[keys[answered]] = v
			values++
			continue
		}
		break
	}
	took := time.Since(begin)
	t.Logf("%d of the %d pipelined INCRs answered in %v: %d values, errors by kind %v", answered, n, took.Round(time.Millisecond), values, fails)
	if answered < n {
		t.Errorf("only %d of %d pipelined INCRs of new keys on a full disk were answered within %v (INFO clients: blocked_clients:%s): a write that cannot succeed must end in a reply, not a wait",
			answered, n, within, processInfo(p, "clients", "blocked_clients"))
	}
	conn.Close()

	before := dbSize(t, p.Addr)
	p.Kill9()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	p = start(t, nil, "--dir", dir)
	after := dbSize(t, p.Addr)
	t.Logf("DBSIZE %d before the kill, %d after the restart; %d keys given values", before, after, len(given))
	if after < before {
		t.Errorf("DBSIZE %d after the restart, below %d before the kill: keys counted were not durable", after, before)
	}
	if below := belowGiven(t, p.Addr, given); len(below) > 0 {
		t.Errorf("after the restart, GET of %d of the %d keys given values is nil or below the value given (values handed out again), e.g. %s",
			len(below), len(given), examples(below))
	}
}

// fullDiskChecker is the client number of the test's own INCRs: the old
// keys' first, and those after each restart.
const fullDiskChecker = 100

// fullDiskClients names TestFullDiskNoValueTwice's clients by number.
var fullDiskClients = map[int]string{0: "one-shot", 1: "one-shot", 2: "pipeline", 3: "transactions", fullDiskChecker: "the test's"}

// fullDiskLoad is what TestFullDiskNoValueTwice's clients sent and were
// given, over all its rounds.
type fullDiskLoad struct {
	set *seqSet // the values given, by key and round: none twice

	mu    sync.Mutex
	sent  map[string]bool // every key a command was sent for
	fresh []string        // the round's new keys sent so far
	next  int             // the number of the round's next new key
	round int
	kinds map[string]int // error replies by their first word, "conn" for a broken connection
	from  int            // the round's first range in l.set
}

func newFullDiskLoad() *fullDiskLoad {
	return &fullDiskLoad{set: newSeqSet(), sent: map[string]bool{}, kinds: map[string]int{}}
}

// nextRound begins round: its new keys are new to every round before.
func (l *fullDiskLoad) nextRound(round int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.round, l.fresh, l.next, l.from = round, nil, 0, l.set.count()
}

func (l *fullDiskLoad) sentKey(key string) {
	l.mu.Lock()
	l.sent[key] = true
	l.mu.Unlock()
}

func (l *fullDiskLoad) sentCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sent)
}

// key picks the key of a command, and records it as sent: newShare
// percent a new key, a tenth one of the round's new keys sent already
// (another client's, perhaps prepared ahead for a pipeline and not yet
// durable), the rest an old key.
func (l *fullDiskLoad) key(rnd *rand.Rand, newShare int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var key string
	switch x := rnd.IntN(100); {
	case x < newShare:
		key = "new:" + strconv.Itoa(l.round) + ":" + fullDiskPad + ":" + strconv.Itoa(l.next)
		l.next++
		l.fresh = append(l.fresh, key)
	case x < newShare+10 && len(l.fresh) > 0:
		key = l.fresh[rnd.IntN(len(l.fresh))]
	default:
		key = oldKey(rnd.IntN(fullDiskOld))
	}
	l.sent[key] = true
	return key
}

// increment is a command's: INCR (1) mostly, else INCRBY of a few.
func increment(rnd *rand.Rand) int64 {
	if rnd.IntN(4) == 0 {
		return 2 + rnd.Int64N(19)
	}
	return 1
}

// got records that client was given the n values of key up to v.
func (l *fullDiskLoad) got(key string, n, v int64, client int) {
	l.set.mu.Lock()
	defer l.set.mu.Unlock()
	l.set.ranges = append(l.set.ranges, seqRange{key, v - n + 1, v, l.set.run, client, time.Now()})
}

// failed counts err by kind, and reports whether the client must stop:
// its connection broke, or the server said what INCR never says.
func (l *fullDiskLoad) failed(err error) bool {
	kind := "conn"
	var reply replyError
	var rerr redis.Error
	switch {
	case errors.As(err, &reply):
		kind = reply.kind()
	case errors.As(err, new(protocolError)):
		kind = "protocol"
	case errors.As(err, &rerr):
		kind, _, _ = strings.Cut(rerr.Error(), " ")
	}
	l.mu.Lock()
	l.kinds[kind]++
	l.mu.Unlock()
	return kind == "conn" || kind == "protocol"
}

func (l *fullDiskLoad) fails() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.kinds)
}

// roundValues is how many values the round's clients were given, and of
// how many keys.
func (l *fullDiskLoad) roundValues() (values int64, keys int) {
	l.mu.Lock()
	from := l.from
	l.mu.Unlock()
	l.set.mu.Lock()
	defer l.set.mu.Unlock()
	seen := map[string]bool{}
	for _, r := range l.set.ranges[from:] {
		values += r.last - r.first + 1
		seen[r.key] = true
	}
	return values, len(seen)
}

// closeOnQuit closes c once quit is closed: the test keeps the killed
// server's listening socket, so a connection made after the kill would
// wait for a reply that never comes.
func closeOnQuit(c io.Closer, quit <-chan struct{}) (done func()) {
	ended := make(chan struct{})
	go func() {
		select {
		case <-quit:
			c.Close()
		case <-ended:
		}
	}()
	return func() { close(ended) }
}

func quitting(quit <-chan struct{}) bool {
	select {
	case <-quit:
		return true
	default:
		return false
	}
}

// oneShot sends INCRs and INCRBYs one at a time, until quit or its
// connection breaks.
func (l *fullDiskLoad) oneShot(addr string, rnd *rand.Rand, client int, quit <-chan struct{}) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1, ReadTimeout: time.Minute})
	defer c.Close()
	defer closeOnQuit(c, quit)()
	ctx := context.Background()
	for !quitting(quit) {
		key, n := l.key(rnd, 60), increment(rnd)
		var v int64
		var err error
		if n == 1 {
			v, err = c.Incr(ctx, key).Result()
		} else {
			v, err = c.IncrBy(ctx, key, n).Result()
		}
		if err != nil {
			if l.failed(err) {
				return
			}
			continue
		}
		l.got(key, n, v, client)
	}
}

// pipeline sends pipelines of 50 to 500 INCRs and INCRBYs, written and
// read by hand on one connection as redis-cli --pipe does, each read to
// its last reply before the next, until quit or the connection breaks.
func (l *fullDiskLoad) pipeline(addr string, rnd *rand.Rand, client int, quit <-chan struct{}) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		l.failed(err)
		return
	}
	defer conn.Close()
	defer closeOnQuit(conn, quit)()
	conn.SetDeadline(time.Now().Add(5 * time.Minute)) // a stall of the test's own, not the server's
	r := bufio.NewReader(conn)
	type sent struct {
		key string
		n   int64
	}
	for !quitting(quit) {
		cmds := make([]sent, 50+rnd.IntN(451))
		var w strings.Builder
		for i := range cmds {
			cmds[i] = sent{l.key(rnd, 75), increment(rnd)}
			appendIncr(&w, cmds[i].key, cmds[i].n)
		}
		written := make(chan error, 1)
		go func() { _, err := io.WriteString(conn, w.String()); written <- err }()
		for _, cmd := range cmds {
			v, err := readIntReply(r)
			if err != nil {
				if l.failed(err) {
					return
				}
				continue
			}
			l.got(cmd.key, cmd.n, v, client)
		}
		if err := <-written; err != nil {
			l.failed(err)
			return
		}
	}
}

// transactions sends MULTI, INCR of a new key and of an old one, EXEC,
// until quit or its connection breaks.
func (l *fullDiskLoad) transactions(addr string, rnd *rand.Rand, client int, quit <-chan struct{}) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1, ReadTimeout: time.Minute})
	defer c.Close()
	defer closeOnQuit(c, quit)()
	ctx := context.Background()
	for !quitting(quit) {
		keys := []string{l.key(rnd, 90), oldKey(rnd.IntN(fullDiskOld))}
		cmds := make([]*redis.IntCmd, len(keys))
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for i, key := range keys {
				cmds[i] = p.Incr(ctx, key)
			}
			return nil
		})
		for i, cmd := range cmds {
			if v, err := cmd.Result(); err == nil {
				l.got(keys[i], 1, v, client)
			}
		}
		if err != nil && l.failed(err) {
			return
		}
	}
}

// check is the oracle of a round, on the server restarted after its
// kill: every key given values exists, at or above the largest of them,
// and its next INCR (recorded as given) is above; every key listed
// before the kill exists; no key exists that no client sent.
func (l *fullDiskLoad) check(t *testing.T, p *process, round int, listed []string) {
	t.Helper()
	exist := map[string]bool{}
	for _, key := range scanAll(t, p.Addr) {
		exist[key] = true
	}
	var gone, invented []string
	for _, key := range listed {
		if !exist[key] {
			gone = append(gone, shortKey(key))
		}
	}
	l.mu.Lock()
	for key := range exist {
		if !l.sent[key] {
			invented = append(invented, shortKey(key))
		}
	}
	l.mu.Unlock()
	if len(gone) > 0 {
		t.Errorf("round %d: %d of the %d keys SCAN listed before the kill do not exist after the restart (a key counted must be durable), e.g. %s",
			round, len(gone), len(listed), strings.Join(gone[:min(len(gone), 3)], ", "))
	}
	if len(invented) > 0 {
		t.Errorf("round %d: %d keys exist after the restart that no client sent a command for, e.g. %s", round, len(invented), strings.Join(invented[:min(len(invented), 3)], ", "))
	}

	given, by := map[string]int64{}, map[string]int{} // the largest value of each key, and the client given it
	l.set.mu.Lock()
	for _, r := range l.set.ranges {
		if r.last > given[r.key] {
			given[r.key], by[r.key] = r.last, r.client
		}
	}
	l.set.mu.Unlock()
	if below := belowGiven(t, p.Addr, given); len(below) > 0 {
		clients := map[string]int{}
		for _, b := range below {
			clients[fullDiskClients[by[b.key]]]++
		}
		t.Errorf("round %d: after the restart, GET of %d of the %d keys clients were given values of is nil or below the largest value given (keys by the client given it: %v), e.g. %s",
			round, len(below), len(given), clients, examples(below))
	}

	keys := slices.Sorted(maps.Keys(given))
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	ctx := context.Background()
	var again []string
	for part := range slices.Chunk(keys, 500) {
		pipe := c.Pipeline()
		cmds := make([]*redis.IntCmd, len(part))
		for i, key := range part {
			cmds[i] = pipe.Incr(ctx, key)
		}
		pipe.Exec(ctx)
		for i, cmd := range cmds {
			v, err := cmd.Result()
			if err != nil {
				t.Fatalf("round %d: INCR %s after the restart, space free: %v", round, shortKey(part[i]), err)
			}
			l.got(part[i], 1, v, fullDiskChecker)
			if v <= given[part[i]] {
				again = append(again, fmt.Sprintf("%s: %d, given up to %d", shortKey(part[i]), v, given[part[i]]))
			}
		}
	}
	if len(again) > 0 {
		t.Errorf("round %d: after the restart, INCR of %d of the %d keys clients were given values of is not above them (values handed out twice), e.g. %s",
			round, len(again), len(keys), strings.Join(again[:min(len(again), 3)], "; "))
	}
}

// below is a key whose GET after a restart is nil or below the value a
// client was given.
type below struct {
	key   string
	get   any // GET's reply: nil, or the value as a string
	given int64
}

func (b below) String() string {
	return fmt.Sprintf("%s: GET %v, given %d", shortKey(b.key), b.get, b.given)
}

// examples is the first few of bs, for a message.
func examples[T fmt.Stringer](bs []T) string {
	var s []string
	for _, b := range bs[:min(len(bs), 3)] {
		s = append(s, b.String())
	}
	return strings.Join(s, "; ")
}

// belowGiven returns the keys of given whose GET at addr is nil or below
// the value given.
func belowGiven(t *testing.T, addr string, given map[string]int64) []below {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	keys := slices.Sorted(maps.Keys(given))
	var bs []below
	for part := range slices.Chunk(keys, 500) {
		vals, err := c.MGet(context.Background(), part...).Result()
		if err != nil {
			t.Fatal(err)
		}
		for i, val := range vals {
			s, _ := val.(string)
			v, err := strconv.ParseInt(s, 10, 64)
			if val == nil || err != nil || v < given[part[i]] {
				bs = append(bs, below{part[i], val, given[part[i]]})
			}
		}
	}
	return bs
}

// shrink frees the last pages of path, a file filling the disk: so many
// are free again.
func shrink(path string, pages int) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.Truncate(path, max(st.Size()-int64(pages)*4096, 0))
}

// scanAll is every key at addr, by SCAN.
func scanAll(t *testing.T, addr string) []string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	var keys []string
	for cursor := uint64(0); ; {
		part, next, err := c.Scan(context.Background(), cursor, "*", 1000).Result()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, part...)
		if cursor = next; cursor == 0 {
			return keys
		}
	}
}

func dbSize(t *testing.T, addr string) int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	n, err := c.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// appendIncr writes INCR key (n 1) or INCRBY key n in Redis's protocol.
func appendIncr(w *strings.Builder, key string, n int64) {
	if n == 1 {
		fmt.Fprintf(w, "*2\r\n$4\r\nINCR\r\n$%d\r\n%s\r\n", len(key), key)
		return
	}
	count := strconv.FormatInt(n, 10)
	fmt.Fprintf(w, "*3\r\n$6\r\nINCRBY\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, len(count), count)
}

// replyError is an error reply read by hand: its line, without the '-'.
type replyError string

func (e replyError) Error() string { return string(e) }

// kind is the reply's first word (BUSY, ERR...).
func (e replyError) kind() string {
	kind, _, _ := strings.Cut(string(e), " ")
	return kind
}

// readIntReply reads a reply of INCR: an integer, or an error reply
// (replyError); any other is the server's mistake, an error too.
func readIntReply(r *bufio.Reader) (int64, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch {
	case strings.HasPrefix(line, ":"):
		if v, err := strconv.ParseInt(line[1:], 10, 64); err == nil {
			return v, nil
		}
	case strings.HasPrefix(line, "-"):
		return 0, replyError(line[1:])
	}
	return 0, protocolError(line)
}

// protocolError is a reply that INCR never makes.
type protocolError string

func (e protocolError) Error() string { return fmt.Sprintf("not a reply of INCR: %q", string(e)) }

// logRuns logs the lines of each of ran that say one of words.
func logRuns(t *testing.T, ran []*process, words ...string) {
	for i, p := range ran {
		for _, l := range p.Lines() {
			if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(l, w) }) {
				t.Logf("run %d: %s", i, l)
			}
		}
	}
}
