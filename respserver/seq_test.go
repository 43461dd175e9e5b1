package respserver

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/sequence"
	"github.com/idserver/idserver/slots"
)

// withSequences gives opts a sequence table kept in a file of t's.
func withSequences(t testing.TB, opts Options) Options {
	t.Helper()
	f, marks, _, err := sequence.OpenFile(filepath.Join(t.TempDir(), "idserver.seq"))
	if err != nil {
		t.Fatal(err)
	}
	opts.Sequences = sequence.New(sequence.Options{}, f, marks)
	t.Cleanup(func() { opts.Sequences.Stop(context.Background()); f.Close() })
	return opts
}

// seqLikeRedis are sessions of counters whose every reply idserver must
// give exactly as redis-server 7 does, each on keys of its own.
var seqLikeRedis = []struct {
	name  string
	resp3 bool
	cmds  [][]string
}{
	{"incr", false, [][]string{{"GET", "a"}, {"INCR", "a"}, {"INCR", "a"}, {"INCRBY", "a", "10"}, {"GET", "a"}, {"EXISTS", "a", "b", "a"}, {"TYPE", "a"}, {"TYPE", "b"}, {"MGET", "a", "b", "a"}}},
	{"incr resp3", true, [][]string{{"GET", "r3"}, {"INCR", "r3"}, {"GET", "r3"}, {"MGET", "r3", "none3"}}},
	{"set", false, [][]string{{"SET", "s", "100"}, {"INCR", "s"}, {"SET", "s", "200", "NX"}, {"SET", "s", "200", "XX"}, {"GET", "s"}, {"SET", "s2", "5", "XX"}, {"GET", "s2"}, {"SETNX", "s3", "7"}, {"SETNX", "s3", "9"}, {"INCR", "s3"}}},
	{"set options twice", false, [][]string{{"SET", "n2", "1", "NX", "NX"}, {"SET", "n2", "2", "NX", "nx"}, {"SET", "n2", "3", "XX", "XX"}, {"GET", "n2"}, {"INCRBY", "n2", "007"}, {"INCRBY", "n2", "-0"}}},
	{"set errors", false, [][]string{{"SET", "e"}, {"SET", "e", "1", "NX", "XX"}, {"SET", "e", "1", "FOO"}, {"INCRBY", "e", "x"}, {"INCR"}, {"GET"}}},
	{"transaction", false, [][]string{{"INCR", "t"}, {"MULTI"}, {"INCR", "t"}, {"GET", "t"}, {"INCRBY", "t", "5"}, {"INCR", "t2"}, {"GET", "t"}, {"EXEC"}, {"GET", "t"}}},
	{"transaction resp3", true, [][]string{{"MULTI"}, {"INCR", "t3"}, {"GET", "t3"}, {"EXEC"}}},
	{"watch changed", false, [][]string{{"INCR", "w"}, {"WATCH", "w"}, {"INCR", "w"}, {"MULTI"}, {"INCR", "w"}, {"EXEC"}, {"GET", "w"}}},
	{"watch unchanged", false, [][]string{{"WATCH", "w2", "w3"}, {"MULTI"}, {"INCR", "w2"}, {"EXEC"}, {"WATCH", "w2"}, {"UNWATCH"}, {"INCR", "w2"}, {"MULTI"}, {"INCR", "w2"}, {"EXEC"}}},
	{"watch touched", false, [][]string{
		{"SET", "w5", "5"}, {"WATCH", "w5"}, {"SET", "w5", "5"}, {"MULTI"}, {"GET", "w5"}, {"EXEC"},
		{"WATCH", "w5"}, {"SET", "w5", "5", "XX"}, {"MULTI"}, {"GET", "w5"}, {"EXEC"},
		{"WATCH", "w5"}, {"SET", "w5", "5", "NX"}, {"SETNX", "w5", "7"}, {"MULTI"}, {"GET", "w5"}, {"EXEC"},
		{"WATCH", "w6"}, {"SET", "w6", "7", "XX"}, {"MULTI"}, {"GET", "w6"}, {"EXEC"},
	}},
	{"watch resp3", true, [][]string{{"WATCH", "w4"}, {"INCR", "w4"}, {"MULTI"}, {"GET", "w4"}, {"EXEC"}}},
	{"expiry and length", false, [][]string{{"INCRBY", "x", "12345"}, {"TTL", "x"}, {"PTTL", "x"}, {"TTL", "nox"}, {"PTTL", "nox"}, {"STRLEN", "x"}, {"STRLEN", "nox"}, {"TOUCH", "x", "nox", "x"}}},
	{"overflow", false, [][]string{
		{"SET", "o", "9223372036854775804"}, {"INCR", "o"}, {"INCR", "o"}, {"INCR", "o"}, {"INCR", "o"}, {"INCRBY", "o", "1"}, {"GET", "o"},
		{"SET", "o2", "9223372036854775800"}, {"INCRBY", "o2", "7"}, {"INCRBY", "o2", "1"}, {"INCR", "o2"}, {"MULTI"}, {"INCR", "o2"}, {"EXEC"},
	}},
	{"keys in exec", false, [][]string{
		{"INCR", "ex:1"}, {"MULTI"}, {"INCR", "ex:2"}, {"KEYS", "ex:2*"}, {"GET", "ex:2"}, {"KEYS", "ex:1"}, {"PING"}, {"KEYS", "none:*"}, {"SCAN", "0", "MATCH", "ex:1*", "COUNT", "1000"}, {"EXEC"},
		{"MULTI"}, {"KEYS", "ex:2"}, {"EXEC"}, {"PING"},
	}},
	{"keys in exec resp3", true, [][]string{{"MULTI"}, {"INCR", "ex3:1"}, {"KEYS", "ex3:*"}, {"EXEC"}}},
	{"keyspace", false, [][]string{{"INCR", "only:1"}, {"KEYS", "only:*"}, {"KEYS", "ONLY:*"}, {"SCAN", "0", "MATCH", "only:*", "COUNT", "1000"}, {"SCAN", "0", "TYPE", "hash", "COUNT", "1000"}}},
}

// TestSequencesLikeRedis runs the seqLikeRedis sessions against
// redis-server and idserver and compares every reply, then DBSIZE and
// INFO keyspace, which count the keys of all of them.
func TestSequencesLikeRedis(t *testing.T) {
	sock := startRedisSocket(t)
	_, addr := startServer(t, idgen.Settings{}, withSequences(t, Options{}))
	for _, sess := range seqLikeRedis {
		t.Run(sess.name, func(t *testing.T) {
			want, got := runSession(t, sock, sess.resp3, sess.cmds), runSession(t, addr, sess.resp3, sess.cmds)
			for i, cmd := range sess.cmds {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Errorf("%q: idserver replied %#v, redis-server %#v", cmd, got[i], want[i])
				}
			}
		})
	}
	cmds := [][]string{{"DBSIZE"}, {"INFO", "keyspace"}}
	want, got := runSession(t, sock, false, cmds), runSession(t, addr, false, cmds)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DBSIZE and INFO keyspace: idserver %#v, redis-server %#v", got, want)
	}
}

// TestSequencesOnlyGoUp: every write that could move a sequence back is
// refused with a reply that says so, and the value stays; INCRBY takes
// 1..seq-max-incrby; SET only upward, an integer.
func TestSequencesOnlyGoUp(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, withSequences(t, Options{SeqMaxIncrBy: 1000}))
	c := newClient(t, addr, 2)
	ctx := context.Background()
	if v := c.IncrBy(ctx, "k", 50).Val(); v != 50 {
		t.Fatalf("INCRBY 50: %d", v)
	}
	for _, cmd := range refusedCommands {
		err := c.Do(ctx, cmd.name, "k", "1").Err()
		if err == nil || !strings.Contains(err.Error(), strings.ToUpper(cmd.name)+" is refused: sequences never go back") {
			t.Errorf("%s: %v", cmd.name, err)
		}
	}
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"INCRBY", "k", 0}, "ERR increment 0 out of range, must be 1..1000 (seq-max-incrby): sequences never go back"},
		{[]any{"INCRBY", "k", -1}, "ERR increment -1 out of range"},
		{[]any{"INCRBY", "k", 1001}, "ERR increment 1001 out of range"},
		{[]any{"SET", "k", 49}, `ERR sequences only go up: "k" is at 50 (idserver never reuses a number)`},
		{[]any{"SET", "k", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"SET", "k", "0070"}, "ERR value is not an integer or out of range"}, // Redis keeps "0070", which INCR refuses
		{[]any{"SET", "k", "-0"}, "ERR value is not an integer or out of range"},
		{[]any{"SET", "k", 60, "EX", 10}, "ERR SET ... EX is refused: sequences never expire"},
		{[]any{"SET", "k", 60, "GET"}, "ERR SET ... GET is refused"},
		{[]any{"SET", "n", -1}, `ERR sequences only go up: "n" is at 0`},
	} {
		if err := c.Do(ctx, tc.args...).Err(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if v, _ := c.Get(ctx, "k").Int64(); v != 50 {
		t.Fatalf("GET after the refusals: %d, want 50", v)
	}
	if err := c.Do(ctx, "MULTI").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "SET", "k", 100).Err(); err == nil || err.Error() != "ERR Command not allowed inside a transaction" {
		t.Fatalf("SET inside MULTI: %v", err)
	}
	if err := c.Do(ctx, "EXEC").Err(); err == nil || !strings.HasPrefix(err.Error(), "EXECABORT") {
		t.Fatalf("EXEC after a refused SET: %v", err)
	}
}

// TestSequencesConcurrent: clients incrementing a few keys at once, with
// pipelines and transactions (go-redis's TxPipelined): per key, no value
// twice, and each client's values increase; a transaction's values of a
// key are consecutive.
func TestSequencesConcurrent(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, withSequences(t, Options{}))
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[string]map[int64]bool{}
	record := func(key string, v int64) {
		mu.Lock()
		defer mu.Unlock()
		if seen[key] == nil {
			seen[key] = map[int64]bool{}
		}
		if seen[key][v] {
			t.Errorf("%s: %d handed out twice", key, v)
		}
		seen[key][v] = true
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			c := newClient(t, addr, 2+g%2)
			last := map[string]int64{}
			for i := range 200 {
				key := "k" + strconv.Itoa(i%3)
				var cmds []redis.Cmder
				var err error
				if i%2 == 0 {
					cmds, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
						p.Incr(ctx, key)
						p.IncrBy(ctx, key, 3)
						return nil
					})
				} else {
					cmds, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
						p.Incr(ctx, key)
						p.IncrBy(ctx, key, 3)
						return nil
					})
				}
				if err != nil {
					t.Error(err)
					return
				}
				a, b := cmds[0].(*redis.IntCmd).Val(), cmds[1].(*redis.IntCmd).Val()
				if a <= last[key] || b <= a || i%2 == 0 && b != a+3 {
					t.Errorf("%s: %d then %d after %d (transaction %v)", key, a, b, last[key], i%2 == 0)
				}
				last[key] = b
				for v := a; v <= b; v++ {
					if v == a || v > b-3 {
						record(key, v)
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestSequencesBounds: a key past seq-max-key-bytes, and a new key past
// seq-max-keys, are refused naming the key; the others keep working.
func TestSequencesBounds(t *testing.T) {
	opts := Options{}
	f, _, _, err := sequence.OpenFile(filepath.Join(t.TempDir(), "idserver.seq"))
	if err != nil {
		t.Fatal(err)
	}
	opts.Sequences = sequence.New(sequence.Options{MaxKeys: 2, MaxKeyBytes: 10}, f, nil)
	t.Cleanup(func() { opts.Sequences.Stop(context.Background()); f.Close() })
	_, addr := startServer(t, idgen.Settings{}, opts)
	c := newClient(t, addr, 2)
	ctx := context.Background()
	if err := c.Incr(ctx, "0123456789a").Err(); err == nil || !strings.Contains(err.Error(), `"0123456789a" refused: the key is 11 bytes, longer than seq-max-key-bytes 10`) {
		t.Fatalf("an 11-byte key: %v", err)
	}
	c.Incr(ctx, "a")
	c.Incr(ctx, "b")
	if err := c.Incr(ctx, "c").Err(); err == nil || !strings.Contains(err.Error(), `sequence "c" refused: there are seq-max-keys 2 sequences already`) {
		t.Fatalf("a third key: %v", err)
	}
	if v := c.Incr(ctx, "a").Val(); v != 2 {
		t.Fatalf("an existing key: %d", v)
	}
	if n := c.DBSize(ctx).Val(); n != 2 {
		t.Fatalf("DBSIZE: %d", n)
	}
}

// TestNoSequences: a server without sequences says so.
func TestNoSequences(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{})
	c := newClient(t, addr, 2)
	if err := c.Incr(context.Background(), "k").Err(); err == nil || err.Error() != "ERR sequences are off on this server" || !errors.Is(err, err) {
		t.Fatalf("INCR: %v", err)
	}
}

// TestScanAndKeys: a full SCAN returns every key exactly once, while
// keys are added during it; KEYS matches exactly (case matters), and one
// whose reply would pass the client's hard output limit fails, saying to
// use SCAN.
func TestScanAndKeys(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, withSequences(t, Options{ConnOptions: ConnOptions{Output: OutputLimits{Hard: 1 << 20}}}))
	c := newClient(t, addr, 2)
	ctx := context.Background()
	incrAll(t, c, 3000, func(i int) string { return "user:" + strconv.Itoa(i) })
	seen := map[string]int{}
	cursor, added := uint64(0), 0
	for {
		keys, next, err := c.Scan(ctx, cursor, "user:*", 100).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			seen[k]++
		}
		c.Incr(ctx, "other:"+strconv.Itoa(added)) // not matched
		c.Incr(ctx, "user:new"+strconv.Itoa(added))
		added++
		if cursor = next; cursor == 0 {
			break
		}
	}
	for i := range 3000 {
		if n := seen["user:"+strconv.Itoa(i)]; n != 1 {
			t.Fatalf("user:%d returned %d times", i, n)
		}
	}
	if keys := c.Keys(ctx, "user:1?9").Val(); len(keys) != 10 {
		t.Fatalf("KEYS user:1?9: %d keys", len(keys))
	}
	if keys := c.Keys(ctx, "USER:*").Val(); len(keys) != 0 {
		t.Fatalf("KEYS USER:* matched %d keys: case must matter", len(keys))
	}
	incrAll(t, c, 40000, func(i int) string { return "long:" + strings.Repeat("x", 20) + strconv.Itoa(i) })
	if err := c.Keys(ctx, "*").Err(); err == nil || !strings.Contains(err.Error(), "use SCAN") {
		t.Fatalf("KEYS * of more than 1 MiB: %v", err)
	}
}

// incrAll increments n keys, named by key, in pipelines.
func incrAll(t *testing.T, c *redis.Client, n int, key func(int) string) {
	t.Helper()
	for i := 0; i < n; i += 1000 {
		_, err := c.Pipelined(context.Background(), func(p redis.Pipeliner) error {
			for j := i; j < min(i+1000, n); j++ {
				p.Incr(context.Background(), key(j))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestPipelinedIncrsWaitTogether: the INCRs and INCRBYs of new keys
// pipelined behind one that waits are prepared while it waits (the
// command table's takes), so that the pipeline waits for a few writes
// rather than one per key; the commands that take nothing, and those
// that will fail, are passed over.
func TestPipelinedIncrsWaitTogether(t *testing.T) {
	opts := withSequences(t, Options{})
	_, addr := startServer(t, idgen.Settings{}, opts)
	const keys = 200
	var in strings.Builder
	for i := range keys {
		k := "p" + strconv.Itoa(i)
		if i%2 == 0 {
			in.WriteString(encode("INCR", k))
		} else {
			in.WriteString(encode("INCRBY", k, "3"))
		}
		in.WriteString(encode("GETID") + encode("INCRBY", k, "0") + encode("INCR"))
	}
	c := dialRaw(t, addr)
	c.send(in.String())
	for i := range keys {
		want := int64(1 + 2*(i%2))
		if v := c.reply(); v != want {
			t.Fatalf("key %d: %#v, want %d", i, v, want)
		}
		for range 3 {
			c.reply()
		}
	}
	if n := opts.Sequences.Stats().Takes; n > keys/10 {
		t.Errorf("%d writes for %d pipelined new keys: the keys behind the first were not prepared", n, keys)
	}
}

// TestPipelinedSetsShareWrites: a pipeline of SETs (redis-cli --pipe's
// mass insertion) is written in a few writes, not one per SET (100,000
// took 84 s so), and every reply is the one each command gets alone: a
// SET's OK, SETNX's 0, XX's nil and the refusal of a SET below, a GET
// right behind SETs sees them, an INCR after a SET of its key is above
// it, in order.
func TestPipelinedSetsShareWrites(t *testing.T) {
	opts := withSequences(t, Options{})
	_, addr := startServer(t, idgen.Settings{}, opts)
	const keys = 2000
	var in strings.Builder
	var want []any
	for i := range keys {
		k, v := "s"+strconv.Itoa(i), int64(10*i+10)
		in.WriteString(encode("SET", k, strconv.FormatInt(v, 10)))
		want = append(want, "OK")
		if i%10 == 0 {
			in.WriteString(encode("SETNX", k, "1") + encode("SET", "x"+k, "1", "XX") + encode("SETNX", "n"+k, "3") + encode("GETID"))
			want = append(want, int64(0), nil, int64(1), anID{})
		}
		if i%500 == 0 {
			in.WriteString(encode("GET", k) + encode("EXISTS", "n"+k))
			want = append(want, strconv.FormatInt(v, 10), int64(1))
		}
	}
	for i := 0; i < keys; i += 10 {
		in.WriteString(encode("INCR", "s"+strconv.Itoa(i)))
		want = append(want, int64(10*i+11))
	}
	// A second SET of a key waits for the first's write (it is refused,
	// or not, by the value the first leaves).
	in.WriteString(encode("SET", "twice", "20") + encode("SET", "twice", "10") + encode("SET", "twice", "30"))
	want = append(want, "OK", respError(`ERR sequences only go up: "twice" is at 20 (idserver never reuses a number)`), "OK")
	before := opts.Sequences.Stats().Takes
	c := dialRaw(t, addr)
	c.send(in.String())
	for i, w := range want {
		got := c.reply()
		if _, id := got.(int64); w == (anID{}) && id {
			continue
		}
		if got != w {
			t.Fatalf("reply %d: %#v, want %#v", i, got, w)
		}
	}
	writes := opts.Sequences.Stats().Takes - before
	if writes > keys/20 {
		t.Errorf("%d writes for %d pipelined SETs (and %d SETNXs, %d INCRs)", writes, keys, keys/10*2, keys/10)
	}
	t.Logf("%d SETs, %d SETNXs, %d INCRs after a SET in one pipeline: %d writes", keys, keys/10*2, keys/10, writes)
}

// anID is GETID's reply, any integer, among those a test wants.
type anID struct{}

// overFile starts a server whose sequences are kept by wrap of a File
// of t's, and returns its address.
func overFile(t *testing.T, wrap func(f *sequence.File) sequence.Backend) string {
	f, marks, _, err := sequence.OpenFile(filepath.Join(t.TempDir(), "idserver.seq"))
	if err != nil {
		t.Fatal(err)
	}
	seq := sequence.New(sequence.Options{}, wrap(f), marks)
	t.Cleanup(func() { seq.Stop(context.Background()); f.Close() })
	_, addr := startServer(t, idgen.Settings{}, Options{Sequences: seq})
	return addr
}

// failingSets is a File whose writes of SETs of keys that begin with
// "bad" fail; the others are written.
type failingSets struct{ *sequence.File }

func (f failingSets) Set(ctx context.Context, ss []sequence.Setting) {
	for i := range ss {
		if strings.HasPrefix(ss[i].Key, "bad") {
			ss[i].Err = errors.New("no space left on device")
		}
	}
	f.File.Set(ctx, ss)
}

// TestPipelinedSetFails: a SET whose write fails replies with the error,
// in its place among the replies of the pipeline (written with the
// others', as if it succeeded, and put right once the write ended); the
// SETs written with it reply OK.
func TestPipelinedSetFails(t *testing.T) {
	c := dialRaw(t, overFile(t, func(f *sequence.File) sequence.Backend { return failingSets{f} }))
	c.send(encode("SET", "a", "10") + encode("SET", "bad1", "10") + encode("PING") +
		encode("SETNX", "bad2", "3") + encode("SET", "b", "20", "NX") + encode("SET", "bad3", "1", "XX") +
		encode("GET", "a") + encode("GET", "bad1") + encode("INCR", "b"))
	failed := respError("ERR no space left on device")
	for i, w := range []any{"OK", failed, "PONG", failed, "OK", nil, "10", nil, int64(21)} {
		if got := c.reply(); got != w {
			t.Fatalf("reply %d: %#v, want %#v", i, got, w)
		}
	}
}

// TestDeferredAmongBigReplies: SETs whose writes fail, among MGETID 5000s
// in one batch (replies past the size a batch writes at once), each
// reply in its place: a deferred reply's place among the replies stays
// put until it settles, so nothing is written from behind it.
func TestDeferredAmongBigReplies(t *testing.T) {
	c := dialRaw(t, overFile(t, func(f *sequence.File) sequence.Backend { return failingSets{f} }))
	mget := encode("MGETID", "5000")
	c.send(mget + mget + encode("SET", "bad1", "1") + mget + mget + mget + encode("SET", "a", "1") + mget + encode("SET", "bad2", "1") + mget)
	failed := respError("ERR no space left on device")
	for i, w := range []any{5000, 5000, failed, 5000, 5000, 5000, "OK", 5000, failed, 5000} {
		got := c.reply()
		if n, ok := w.(int); ok {
			if ids, isArray := got.([]any); !isArray || len(ids) != n {
				t.Fatalf("reply %d: not %d IDs", i, n)
			}
		} else if got != w {
			t.Fatalf("reply %d: %#v, want %#v", i, got, w)
		}
	}
}

// failingBirths is a File whose takes that record a key beginning with
// "bad" as existing fail (a full disk, for the write of its birth); the
// others are written.
type failingBirths struct{ *sequence.File }

func (f failingBirths) Take(ctx context.Context, ts []sequence.Take) {
	for i := range ts {
		if ts[i].Born && strings.HasPrefix(ts[i].Key, "bad") {
			ts[i].Err = errors.New("no space left on device")
		}
	}
	f.File.Take(ctx, ts)
}

// TestPipelinedBirthFails: the first value of a key prepared for a
// pipeline is replied only once the write that records the key ended: if
// it failed, the reply is -BUSY in its place among the pipeline's (the
// value is skipped, never sent), the key does not exist, and the keys
// written with it reply their values.
func TestPipelinedBirthFails(t *testing.T) {
	c := dialRaw(t, overFile(t, func(f *sequence.File) sequence.Backend { return failingBirths{f} }))
	// The first waits for its write, and prepares the others meanwhile.
	// good2's birth is asked for first: it is written before bad1's or
	// with it (a write that stores nothing, bad1's alone, has the keys
	// after it refused at once, as the store fails).
	c.send(encode("INCR", "first") + encode("INCR", "good2") + encode("INCR", "bad1") + encode("PING") +
		encode("INCRBY", "bad3", "2") + encode("GET", "bad1") + encode("GET", "good2") + encode("EXISTS", "bad3") + encode("DBSIZE"))
	busy := "BUSY sequence values ahead are not yet reserved durably: the last write failed: no space left on device; retry shortly"
	for i, w := range []any{int64(1), int64(1), respError(busy), "PONG", respError(busy), nil, "1", int64(0), int64(2)} {
		if got := c.reply(); got != w {
			t.Fatalf("reply %d: %#v, want %#v", i, got, w)
		}
	}
}

// TestWatchTouchedLikeRedis: a SET by another client of a WATCHed key to
// the value it holds, or a SETNX of a new key, aborts the EXEC, as in
// redis-server (a write always touches the key); the keys watched are
// forgotten when the clients' transactions end or they close.
func TestWatchTouchedLikeRedis(t *testing.T) {
	sock := startRedisSocket(t)
	s, addr := startServer(t, idgen.Settings{}, withSequences(t, Options{}))
	steps := []struct {
		other bool
		cmd   []string
	}{
		{true, []string{"SET", "t1", "5"}}, {false, []string{"WATCH", "t1"}}, {true, []string{"SET", "t1", "5"}},
		{false, []string{"MULTI"}}, {false, []string{"GET", "t1"}}, {false, []string{"EXEC"}},
		{false, []string{"WATCH", "t2", "t1"}}, {true, []string{"SETNX", "t2", "1"}}, {false, []string{"MULTI"}}, {false, []string{"EXEC"}},
		{false, []string{"WATCH", "t2"}}, {false, []string{"WATCH", "t2"}}, {true, []string{"SET", "t2", "1", "NX"}}, {false, []string{"UNWATCH"}},
		{true, []string{"SET", "t2", "1"}}, {false, []string{"MULTI"}}, {false, []string{"EXEC"}}, {false, []string{"WATCH", "t1"}},
	}
	replies := func(addr string) []any {
		c, other := dialRaw(t, addr), dialRaw(t, addr)
		var all []any
		for _, st := range steps {
			if st.other {
				all = append(all, other.do(st.cmd...))
			} else {
				all = append(all, c.do(st.cmd...))
			}
		}
		c.conn.Close()
		return all
	}
	if want, got := replies(sock), replies(addr); !reflect.DeepEqual(got, want) {
		t.Errorf("idserver replied %#v, redis-server %#v", got, want)
	}
	await.True(t, time.Minute, "no key watched once the clients closed", func() bool { return s.touches.empty() })
}

// TestReadsWaitForTakes: GET, MGET, EXISTS, TYPE, STRLEN and a GET inside
// EXEC of a key whose slot is being taken (closed: its last owner's
// value may not be here yet) wait for the take, off the loop (another
// client is answered meanwhile), then answer in order; a WATCHed key
// whose slot is being taken at EXEC counts as changed.
func TestReadsWaitForTakes(t *testing.T) {
	opts := withSequences(t, Options{})
	_, addr := startServer(t, idgen.Settings{}, opts)
	seq := opts.Sequences
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	if v := a.do("INCRBY", "{r}a", "5"); v != int64(5) {
		t.Fatalf("INCRBY: %#v", v)
	}
	slot := slots.Of([]byte("{r}"))
	seq.CloseSlot(slot)
	cmds := [][]string{{"GET", "{r}a"}, {"MGET", "{r}a", "{r}none", "other"}, {"EXISTS", "{r}a", "{r}none"}, {"TYPE", "{r}a"}, {"STRLEN", "{r}a"},
		{"MULTI"}, {"INCR", "other"}, {"GET", "{r}a"}, {"GET", "other"}, {"EXEC"}, {"PING"}}
	for _, c := range cmds {
		a.send(encode(c...))
	}
	if v := b.do("PING"); v != "PONG" {
		t.Fatalf("another client's PING meanwhile: %#v", v)
	}
	a.conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond)) // the thing under test: a while passes, and GET still waits
	if v, err := readReply(a.r); err == nil {
		t.Fatalf("GET of a key of a slot being taken answered at once: %#v", v)
	}
	a.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	seq.OpenSlot(slot)
	want := []any{"5", []any{"5", nil, nil}, int64(1), "string", int64(1), "OK", "QUEUED", "QUEUED", "QUEUED", []any{int64(1), "5", "1"}, "PONG"}
	for i, w := range want {
		if got := a.reply(); !reflect.DeepEqual(got, w) {
			t.Errorf("%q: %#v, want %#v", cmds[i], got, w)
		}
	}
	// WATCHed absent, a key whose slot is then being taken may exist by
	// now: EXEC fails.
	a.do("WATCH", "{r}new")
	seq.CloseSlot(slot)
	a.do("MULTI")
	a.do("GET", "{r}new")
	if v := a.do("EXEC"); v != nil {
		t.Errorf("EXEC of a key WATCHed, then of a slot being taken: %#v, want nil (not run)", v)
	}
	seq.OpenSlot(slot)
	if v := a.do("GET", "{r}a"); v != "5" {
		t.Errorf("GET after: %#v", v)
	}
}
