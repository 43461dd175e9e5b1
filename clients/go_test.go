package clients

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// idClient is what the checks need from a Go client library, so that one
// set of checks covers every Go client. A reply is what the library
// decodes it to, brought to one shape: int64, string, []any, a map for a
// RESP3 map, or an error value for an error reply inside a pipeline or an
// array.
type idClient interface {
	// do sends one command the library's ordinary way; an error reply
	// comes back as the error.
	do(ctx context.Context, args ...string) (any, error)
	// pipeline sends cmds in one round trip and returns a reply for
	// each; the error is one of the connection, not of a command.
	pipeline(ctx context.Context, cmds ...[]string) ([]any, error)
	// transaction sends cmds between MULTI and EXEC and returns EXEC's
	// replies, or the error that failed the whole transaction.
	transaction(ctx context.Context, cmds ...[]string) ([]any, error)
}

// Each client on its defaults (rueidis and valkey-go with client-side
// caching on), as an application would use it; only go-redis v9's
// protocol is varied. redigo, radix and go-redis v8 speak RESP2 only.
func TestGoRedisRESP2(t *testing.T) { runChecks(t, openGoRedis(2)) }
func TestGoRedisRESP3(t *testing.T) { runChecks(t, openGoRedis(0)) }
func TestGoRedisV8(t *testing.T)    { runChecks(t, openGoRedisV8) }
func TestRueidis(t *testing.T)      { runChecks(t, openRueidis) }
func TestValkeyGo(t *testing.T)     { runChecks(t, openValkeyGo) }
func TestRedigo(t *testing.T)       { runChecks(t, openRedigo) }
func TestRadix(t *testing.T)        { runChecks(t, openRadix) }

// runChecks runs every check in turn against one server through one
// client; each check asserts the order of the IDs it got itself. The
// last check uses a second server, one that gives GETID as a string.
func runChecks(t *testing.T, open func(*testing.T, string) idClient) {
	c := open(t, startServer(t))
	t.Run("GetIDExact", func(t *testing.T) { checkGetIDExact(t, c) })
	t.Run("MGetID", func(t *testing.T) { checkMGetID(t, c) })
	t.Run("MixedPipeline", func(t *testing.T) { checkMixedPipeline(t, c) })
	t.Run("Transaction", func(t *testing.T) { checkTransaction(t, c) })
	t.Run("TransactionAbort", func(t *testing.T) { checkTransactionAbort(t, c) })
	t.Run("ErrorReply", func(t *testing.T) { checkErrorReply(t, c) })
	t.Run("DecodeID", func(t *testing.T) { checkDecodeID(t, c) })
	t.Run("SequenceCommands", func(t *testing.T) { checkSequenceCommands(t, c) })
	t.Run("SequencePipeline", func(t *testing.T) { checkSequencePipeline(t, c) })
	t.Run("SequenceTransaction", func(t *testing.T) { checkSequenceTransaction(t, c) })
	t.Run("SequenceSetInMulti", func(t *testing.T) { checkSequenceSetInMulti(t, c) })
	t.Run("StringGetIDRefused", func(t *testing.T) {
		checkStringGetIDRefused(t, open(t, startServer(t, "--getid-reply", "string")))
	})
}

// testContext bounds a check, so a server that stops answering fails the
// test instead of hanging it until go test's own timeout.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// checkGetIDExact pipelines 100,000 GETIDs in batches (a batch is one
// round trip) and wants each reply an integer, above the one before.
// Strictly increasing in the order sent also makes them distinct.
func checkGetIDExact(t *testing.T, c idClient) {
	const total, batch = 100_000, 1_000
	ctx := testContext(t)
	cmds := make([][]string, batch)
	for i := range cmds {
		cmds[i] = []string{"GETID"}
	}
	var prev int64
	for sent := 0; sent < total; sent += batch {
		replies, err := c.pipeline(ctx, cmds...)
		if err != nil {
			t.Fatalf("batch at %d: %v", sent, err)
		}
		for i, r := range replies {
			id, err := intID(r)
			if err != nil {
				t.Fatalf("GETID #%d: %v", sent+i, err)
			}
			if id <= prev {
				t.Fatalf("GETID #%d = %d, not above %d", sent+i, id, prev)
			}
			prev = id
		}
	}
}

// checkMGetID wants MGETID 10's bulk strings to be 10 increasing IDs.
func checkMGetID(t *testing.T, c idClient) {
	r, err := c.do(testContext(t), "MGETID", "10")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := bulkIDs(r, 10)
	if err != nil {
		t.Fatal(err)
	}
	wantIncreasing(t, ids)
}

// checkMixedPipeline interleaves ID commands with others a client sends
// on its own, and wants each reply in its place.
func checkMixedPipeline(t *testing.T, c idClient) {
	replies, err := c.pipeline(testContext(t),
		[]string{"GETID"}, []string{"MGETID", "3"}, []string{"PING"}, []string{"ECHO", "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if len(replies) != 4 {
		t.Fatalf("%d replies, want 4: %v", len(replies), replies)
	}
	id, err := intID(replies[0])
	if err != nil {
		t.Fatal("GETID:", err)
	}
	more, err := bulkIDs(replies[1], 3)
	if err != nil {
		t.Fatal("MGETID 3:", err)
	}
	wantIncreasing(t, append([]int64{id}, more...))
	if replies[2] != "PONG" || replies[3] != "hello" {
		t.Errorf("PING, ECHO hello = %#v, %#v; want \"PONG\", \"hello\"", replies[2], replies[3])
	}
}

// checkTransaction wants MULTI GETID GETID MGETID 2 EXEC to give four
// increasing IDs.
func checkTransaction(t *testing.T, c idClient) {
	replies, err := c.transaction(testContext(t),
		[]string{"GETID"}, []string{"GETID"}, []string{"MGETID", "2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(replies) != 3 {
		t.Fatalf("EXEC gave %d replies, want 3: %v", len(replies), replies)
	}
	var ids []int64
	for _, r := range replies[:2] {
		id, err := intID(r)
		if err != nil {
			t.Fatal("GETID:", err)
		}
		ids = append(ids, id)
	}
	more, err := bulkIDs(replies[2], 2)
	if err != nil {
		t.Fatal("MGETID 2:", err)
	}
	wantIncreasing(t, append(ids, more...))
}

// checkTransactionAbort queues an unknown command, which makes EXEC
// refuse the whole transaction as Redis does. GETID comes first because
// go-redis reports the first command's error, which for a command queued
// fine is EXEC's.
func checkTransactionAbort(t *testing.T, c idClient) {
	replies, err := c.transaction(testContext(t), []string{"GETID"}, []string{"NOSUCHCOMMAND"})
	if err == nil || !strings.Contains(err.Error(), "EXECABORT") {
		t.Fatalf("transaction with an unknown command: %v, %v; want an EXECABORT error", replies, err)
	}
}

// checkErrorReply wants MGETID 0 refused, and the client (its connection
// back in the pool) still usable.
func checkErrorReply(t *testing.T, c idClient) {
	ctx := testContext(t)
	r, err := c.do(ctx, "MGETID", "0")
	if err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("MGETID 0 = %v, %v; want an error with \"out of range\"", r, err)
	}
	r, err = c.do(ctx, "GETID")
	if err != nil {
		t.Fatal("GETID after the error:", err)
	}
	if _, err := intID(r); err != nil {
		t.Fatal("GETID after the error:", err)
	}
}

// checkDecodeID wants DECODEID of a fresh ID to give the fields idgen
// finds in it under the default layout and epoch, each number an integer
// reply, and the ID's time within a minute of now.
func checkDecodeID(t *testing.T, c idClient) {
	ctx := testContext(t)
	r, err := c.do(ctx, "GETID")
	if err != nil {
		t.Fatal("GETID:", err)
	}
	id, err := intID(r)
	if err != nil {
		t.Fatal("GETID:", err)
	}
	r, err = c.do(ctx, "DECODEID", strconv.FormatInt(id, 10))
	if err != nil {
		t.Fatal("DECODEID:", err)
	}
	got, err := fields(r)
	if err != nil {
		t.Fatal("DECODEID:", err)
	}
	p, err := idgen.Decode(id, idgen.DefaultLayout, idgen.DefaultEpoch)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"unix-ms":   p.Time.UnixMilli(),
		"time":      p.Time.UTC().Format("2006-01-02T15:04:05.000Z"),
		"server-id": p.ServerID,
		"shard":     p.Shard,
		"random":    p.Random,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DECODEID %d = %#v\nwant %#v", id, got, want)
	}
	if lag := time.Since(p.Time); lag.Abs() > time.Minute {
		t.Errorf("ID %d is of %v, %v from now", id, p.Time, lag)
	}
}

// checkStringGetIDRefused is given a client of a server that replies to
// GETID with a bulk string (getid-reply string), and wants intID to
// refuse that reply: proof that the client and its adapter keep an
// integer reply apart from a string of digits, so the other checks' pass
// means GETID did come as an integer.
func checkStringGetIDRefused(t *testing.T, c idClient) {
	r, err := c.do(testContext(t), "GETID")
	if err != nil {
		t.Fatal("GETID:", err)
	}
	if s, ok := r.(string); !ok {
		t.Errorf("GETID as a bulk string = %#v (%T), want a string", r, r)
	} else if _, err := strconv.ParseInt(s, 10, 64); err != nil {
		t.Errorf("GETID as a bulk string = %q, want a decimal ID", s)
	}
	if _, err := intID(r); err == nil {
		t.Errorf("intID took the bulk string %#v", r)
	}
}

// intID checks a GETID reply: an integer reply (not a string the client
// would have to parse), above 0.
func intID(r any) (int64, error) {
	id, ok := r.(int64)
	if !ok {
		return 0, fmt.Errorf("reply %#v (%T), want an int64", r, r)
	}
	if id <= 0 {
		return 0, fmt.Errorf("ID %d, want > 0", id)
	}
	return id, nil
}

// bulkIDs checks an MGETID n reply: an array of n bulk strings, each a
// decimal ID above 0.
func bulkIDs(r any, n int) ([]int64, error) {
	a, ok := r.([]any)
	if !ok || len(a) != n {
		return nil, fmt.Errorf("reply %#v, want an array of %d", r, n)
	}
	ids := make([]int64, n)
	for i, e := range a {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("element %d is %#v (%T), want a bulk string", i, e, e)
		}
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("element %d is %q, want a decimal ID > 0", i, s)
		}
		ids[i] = id
	}
	return ids, nil
}

// fields reads a reply that is a map in RESP3 and a flat array of name,
// value pairs in RESP2 (as Redis gives HGETALL) into a map by name.
// Libraries decode a RESP3 map to map[string]any or map[any]any.
func fields(r any) (map[string]any, error) {
	var pairs []any
	switch r := r.(type) {
	case map[string]any:
		return r, nil
	case map[any]any:
		for k, v := range r {
			pairs = append(pairs, k, v)
		}
	case []any:
		pairs = r
	default:
		return nil, fmt.Errorf("reply %#v (%T), want a map or an array of pairs", r, r)
	}
	if len(pairs)%2 != 0 {
		return nil, fmt.Errorf("reply %#v has an odd number of elements", r)
	}
	m := make(map[string]any, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		name, ok := pairs[i].(string)
		if !ok {
			return nil, fmt.Errorf("field name %#v (%T), want a string", pairs[i], pairs[i])
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("field %q twice in %#v", name, r)
		}
		m[name] = pairs[i+1]
	}
	return m, nil
}

// wantIncreasing fails t unless ids are strictly increasing, and so
// distinct.
func wantIncreasing(t *testing.T, ids []int64) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("IDs %v not strictly increasing at %d", ids, i)
		}
	}
}

// goRedis is go-redis, v9 or v8: the same API under two module paths, so
// one adapter serves both. Its type parameters are the version's
// *Client, Pipeliner, []Cmder and *Cmd.
type goRedis[C goRedisClient[P, K, R], P goRedisQueue[R], K any, R goRedisCmd] struct{ c C }

// goRedisClient is the part of a go-redis *Client the adapter uses.
type goRedisClient[P, K, R any] interface {
	Do(ctx context.Context, args ...any) R
	Pipelined(ctx context.Context, fn func(P) error) (K, error)
	TxPipelined(ctx context.Context, fn func(P) error) (K, error)
}

// goRedisQueue is a go-redis Pipeliner: its Do queues a command.
type goRedisQueue[R any] interface {
	Do(ctx context.Context, args ...any) R
}

// goRedisCmd is a go-redis *Cmd.
type goRedisCmd interface{ Result() (any, error) }

// openGoRedis opens go-redis v9; protocol 0 leaves its default (RESP3).
func openGoRedis(protocol int) func(*testing.T, string) idClient {
	return func(t *testing.T, addr string) idClient {
		c := redis.NewClient(&redis.Options{Addr: addr, Protocol: protocol})
		t.Cleanup(func() { c.Close() })
		return goRedis[*redis.Client, redis.Pipeliner, []redis.Cmder, *redis.Cmd]{c}
	}
}

// do uses Do, go-redis's way to send a command it has no method for.
func (g goRedis[C, P, K, R]) do(ctx context.Context, args ...string) (any, error) {
	return g.c.Do(ctx, anys(args)...).Result()
}

// pipeline uses Pipelined. It returns the first command's error reply as
// its own; that is dropped here, since each reply carries its own.
func (g goRedis[C, P, K, R]) pipeline(ctx context.Context, cmds ...[]string) ([]any, error) {
	replies, err := g.exec(ctx, g.c.Pipelined, cmds)
	var redisErr interface{ RedisError() } // redis.Error of either version
	if errors.As(err, &redisErr) {
		err = nil
	}
	return replies, err
}

// transaction uses TxPipelined, which wraps cmds in MULTI and EXEC. When
// EXEC fails, go-redis gives its error to every command queued fine and
// returns the first command's error, kept here as the transaction's.
func (g goRedis[C, P, K, R]) transaction(ctx context.Context, cmds ...[]string) ([]any, error) {
	return g.exec(ctx, g.c.TxPipelined, cmds)
}

// exec runs cmds through Pipelined or TxPipelined and returns each reply,
// an error reply as an error value, with the error run returned.
func (g goRedis[C, P, K, R]) exec(ctx context.Context, run func(context.Context, func(P) error) (K, error), cmds [][]string) ([]any, error) {
	sent := make([]R, len(cmds))
	_, err := run(ctx, func(p P) error {
		for i, args := range cmds {
			sent[i] = p.Do(ctx, anys(args)...)
		}
		return nil
	})
	replies := make([]any, len(sent))
	for i, cmd := range sent {
		v, cmdErr := cmd.Result()
		if cmdErr != nil {
			v = cmdErr
		}
		replies[i] = v
	}
	return replies, err
}

// anys is args as the []any go-redis and redigo take.
func anys(args []string) []any {
	a := make([]any, len(args))
	for i, s := range args {
		a[i] = s
	}
	return a
}

// rueidisFamily is rueidis or valkey-go, its fork: one API under two
// module paths, with the result type and one of its methods renamed, so
// one adapter serves both given the library's own pieces. C is the
// library's built command, R its result.
type rueidisFamily[C, R any] struct {
	build    func(args ...string) C
	doOne    func(context.Context, C) R
	doMulti  func(context.Context, ...C) []R
	dedicate func() (doMulti func(context.Context, ...C) []R, done func())
	// connErr is the result's error that is not an error reply.
	connErr func(R) error
	// toAny is the reply, or an error reply or connErr as the error.
	toAny func(R) (any, error)
}

// openRueidis opens rueidis on its defaults: client-side caching is on,
// so connecting sends CLIENT TRACKING ON OPTIN.
func openRueidis(t *testing.T, addr string) idClient {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		t.Fatal("rueidis connect:", err)
	}
	t.Cleanup(c.Close)
	return rueidisFamily[rueidis.Completed, rueidis.RedisResult]{
		build:   func(args ...string) rueidis.Completed { return c.B().Arbitrary(args...).Build() },
		doOne:   c.Do,
		doMulti: c.DoMulti,
		dedicate: func() (func(context.Context, ...rueidis.Completed) []rueidis.RedisResult, func()) {
			d, done := c.Dedicate()
			return d.DoMulti, done
		},
		connErr: rueidis.RedisResult.NonRedisError,
		toAny:   rueidis.RedisResult.ToAny,
	}
}

// do builds the command as Arbitrary, rueidis's way to send one it has
// no builder for.
func (r rueidisFamily[C, R]) do(ctx context.Context, args ...string) (any, error) {
	return r.toAny(r.doOne(ctx, r.build(args...)))
}

// pipeline uses DoMulti, which writes cmds together on the shared
// connection.
func (r rueidisFamily[C, R]) pipeline(ctx context.Context, cmds ...[]string) ([]any, error) {
	return r.pipelineOn(ctx, r.doMulti, cmds)
}

// transaction pipelines MULTI, cmds and EXEC on a dedicated connection,
// as rueidis asks, so no other caller's command lands inside it.
func (r rueidisFamily[C, R]) transaction(ctx context.Context, cmds ...[]string) ([]any, error) {
	doMulti, done := r.dedicate()
	defer done()
	replies, err := r.pipelineOn(ctx, doMulti, inMulti(cmds))
	if err != nil {
		return nil, err
	}
	return execReply(replies)
}

// pipelineOn pipelines cmds through doMulti, the client's or a dedicated
// connection's, and returns each reply, an error reply as an error value.
func (r rueidisFamily[C, R]) pipelineOn(ctx context.Context, doMulti func(context.Context, ...C) []R, cmds [][]string) ([]any, error) {
	built := make([]C, len(cmds))
	for i, args := range cmds {
		built[i] = r.build(args...)
	}
	results := doMulti(ctx, built...)
	replies := make([]any, len(results))
	for i, res := range results {
		if err := r.connErr(res); err != nil {
			return nil, err
		}
		v, err := r.toAny(res)
		if err != nil {
			v = err
		}
		replies[i] = v
	}
	return replies, nil
}

// inMulti wraps cmds in MULTI and EXEC, for the libraries whose
// transaction is a pipeline the caller writes.
func inMulti(cmds [][]string) [][]string {
	return append(append([][]string{{"MULTI"}}, cmds...), []string{"EXEC"})
}

// execReply picks EXEC's reply out of the replies to inMulti's commands:
// only it matters, as it holds the results, or the error for the whole
// transaction (the queued commands' own errors come before it).
func execReply(replies []any) ([]any, error) {
	switch exec := replies[len(replies)-1].(type) {
	case error:
		return nil, exec
	case []any:
		return exec, nil
	default:
		return nil, fmt.Errorf("EXEC replied %#v", exec)
	}
}
