package clients

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// idClient is what the checks need from a Go client library, so that one
// set of checks covers go-redis on RESP2 and on RESP3 and rueidis. A reply
// is what the library decodes it to: int64, string, []any, or an error
// value for an error reply inside a pipeline or an array.
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

// Each client on its defaults (rueidis with client-side caching on), as
// an application would use it; only go-redis's protocol is varied.
func TestGoRedisRESP2(t *testing.T) { runChecks(t, openGoRedis(2)) }
func TestGoRedisRESP3(t *testing.T) { runChecks(t, openGoRedis(0)) }
func TestRueidis(t *testing.T)      { runChecks(t, openRueidis) }

// runChecks runs every check in turn against one server through one
// client; each check asserts the order of the IDs it got itself.
func runChecks(t *testing.T, open func(*testing.T, string) idClient) {
	c := open(t, startServer(t))
	t.Run("GetIDExact", func(t *testing.T) { checkGetIDExact(t, c) })
	t.Run("MGetID", func(t *testing.T) { checkMGetID(t, c) })
	t.Run("MixedPipeline", func(t *testing.T) { checkMixedPipeline(t, c) })
	t.Run("Transaction", func(t *testing.T) { checkTransaction(t, c) })
	t.Run("TransactionAbort", func(t *testing.T) { checkTransactionAbort(t, c) })
	t.Run("ErrorReply", func(t *testing.T) { checkErrorReply(t, c) })
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

// goRedis is go-redis v9; protocol 0 leaves its default (RESP3).
type goRedis struct{ c *redis.Client }

func openGoRedis(protocol int) func(*testing.T, string) idClient {
	return func(t *testing.T, addr string) idClient {
		c := redis.NewClient(&redis.Options{Addr: addr, Protocol: protocol})
		t.Cleanup(func() { c.Close() })
		return goRedis{c}
	}
}

func (g goRedis) do(ctx context.Context, args ...string) (any, error) {
	return g.c.Do(ctx, anys(args)...).Result()
}

// pipeline uses Pipelined. It returns the first command's error reply as
// its own; that is dropped here, since each reply carries its own.
func (g goRedis) pipeline(ctx context.Context, cmds ...[]string) ([]any, error) {
	replies, err := g.exec(ctx, g.c.Pipelined, cmds)
	var redisErr redis.Error
	if errors.As(err, &redisErr) {
		err = nil
	}
	return replies, err
}

// transaction uses TxPipelined, which wraps cmds in MULTI and EXEC. When
// EXEC fails, go-redis gives its error to every command queued fine and
// returns the first command's error, kept here as the transaction's.
func (g goRedis) transaction(ctx context.Context, cmds ...[]string) ([]any, error) {
	return g.exec(ctx, g.c.TxPipelined, cmds)
}

// exec runs cmds through Pipelined or TxPipelined and returns each reply,
// an error reply as an error value, with the error run returned.
func (g goRedis) exec(ctx context.Context, run func(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error), cmds [][]string) ([]any, error) {
	sent := make([]*redis.Cmd, len(cmds))
	_, err := run(ctx, func(p redis.Pipeliner) error {
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

func anys(args []string) []any {
	a := make([]any, len(args))
	for i, s := range args {
		a[i] = s
	}
	return a
}

// rueidisClient is rueidis on its defaults: client-side caching is on, so
// connecting sends CLIENT TRACKING ON OPTIN.
type rueidisClient struct{ c rueidis.Client }

func openRueidis(t *testing.T, addr string) idClient {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		t.Fatal("rueidis connect:", err)
	}
	t.Cleanup(c.Close)
	return rueidisClient{c}
}

func (r rueidisClient) do(ctx context.Context, args ...string) (any, error) {
	return r.c.Do(ctx, r.c.B().Arbitrary(args...).Build()).ToAny()
}

func (r rueidisClient) pipeline(ctx context.Context, cmds ...[]string) ([]any, error) {
	return doMulti(ctx, r.c, r.build(cmds))
}

// transaction sends MULTI ... EXEC on a dedicated connection, as rueidis
// asks, so no other caller's command lands inside it.
func (r rueidisClient) transaction(ctx context.Context, cmds ...[]string) (replies []any, err error) {
	multi := append(rueidis.Commands{r.c.B().Multi().Build()}, r.build(cmds)...)
	multi = append(multi, r.c.B().Exec().Build())
	err = r.c.Dedicated(func(d rueidis.DedicatedClient) error {
		all, err := doMulti(ctx, d, multi)
		if err != nil {
			return err
		}
		// Only EXEC's reply matters: it holds the results, or the error
		// for the whole transaction.
		switch exec := all[len(all)-1].(type) {
		case error:
			return exec
		case []any:
			replies = exec
			return nil
		default:
			return fmt.Errorf("EXEC replied %#v", exec)
		}
	})
	return replies, err
}

func (r rueidisClient) build(cmds [][]string) rueidis.Commands {
	built := make(rueidis.Commands, len(cmds))
	for i, args := range cmds {
		built[i] = r.c.B().Arbitrary(args...).Build()
	}
	return built
}

// doMulti pipelines cmds on a rueidis client or dedicated connection and
// returns each reply, an error reply as an error value.
func doMulti(ctx context.Context, c interface {
	DoMulti(context.Context, ...rueidis.Completed) []rueidis.RedisResult
}, cmds rueidis.Commands) ([]any, error) {
	results := c.DoMulti(ctx, cmds...)
	replies := make([]any, len(results))
	for i, res := range results {
		if err := res.NonRedisError(); err != nil {
			return nil, err
		}
		v, err := res.ToAny()
		if err != nil {
			v = err
		}
		replies[i] = v
	}
	return replies, nil
}
