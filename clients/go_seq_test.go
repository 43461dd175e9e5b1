package clients

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	redisv8 "github.com/go-redis/redis/v8"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"
)

// Sequences through every Go client (runChecks), and through go-redis
// v9's typed methods (TestGoRedisSequences), as applications call them.
// Each check uses keys named after itself: one server serves them all.

// refusedDel and goesUp are the texts of the refusals the checks expect
// (without "ERR ", which rueidis and valkey-go drop).
const (
	refusedDel = "DEL is refused: sequences never go back, expire or go away (idserver never reuses a number)"
	goesUp     = "sequences only go up: %q is at %d"
)

// seqStep is one command and its reply: an int64, a string, nil, a
// []any of those, or errText for an error reply containing it.
type seqStep struct {
	args []string
	want any
}

// errText is a seqStep's want of an error reply with this text.
type errText string

// checkSequenceCommands sends the sequences' commands one by one: a new
// key counts from 1, SET moves it up only, DEL is refused, and GET, MGET,
// EXISTS and TYPE answer as Redis does for a string holding the number.
func checkSequenceCommands(t *testing.T, c idClient) {
	ctx := testContext(t)
	k, none := t.Name()+":k", t.Name()+":none"
	for _, s := range []seqStep{
		{[]string{"INCR", k}, int64(1)},
		{[]string{"INCR", k}, int64(2)},
		{[]string{"INCRBY", k, "10"}, int64(12)},
		{[]string{"GET", k}, "12"},
		{[]string{"GET", none}, nil},
		{[]string{"SET", k, "100"}, "OK"},
		{[]string{"INCR", k}, int64(101)},
		{[]string{"SET", k, "50"}, errText(fmt.Sprintf(goesUp, k, 101))},
		{[]string{"DEL", k}, errText(refusedDel)},
		{[]string{"GET", k}, "101"},
		{[]string{"EXISTS", k, none}, int64(1)},
		{[]string{"TYPE", k}, "string"},
		{[]string{"TYPE", none}, "none"},
		{[]string{"MGET", k, none}, []any{"101", nil}},
	} {
		r, err := c.do(ctx, s.args...)
		wantReply(t, s.args, orNil(r, err), s.want)
	}
}

// checkSequencePipeline pipelines 100 INCRs of a new key, one round
// trip, and wants 1 to 100 in the order sent.
func checkSequencePipeline(t *testing.T, c idClient) {
	cmds := make([][]string, 100)
	for i := range cmds {
		cmds[i] = []string{"INCR", t.Name()}
	}
	replies, err := c.pipeline(testContext(t), cmds...)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range replies {
		wantReply(t, cmds[i], r, int64(i+1))
	}
}

// checkSequenceTransaction wants MULTI INCR INCRBY 5 GET EXEC on a new
// key to give 1, 6 and "6": the INCRs' values consecutive, GET the last.
func checkSequenceTransaction(t *testing.T, c idClient) {
	k := t.Name()
	replies, err := c.transaction(testContext(t), []string{"INCR", k}, []string{"INCRBY", k, "5"}, []string{"GET", k})
	if err != nil {
		t.Fatal(err)
	}
	wantReply(t, []string{"EXEC"}, replies, []any{int64(1), int64(6), "6"})
}

// checkSequenceSetInMulti wants a SET queued in MULTI refused, as Redis
// refuses a no_multi command, so EXEC discards the INCR before it too.
func checkSequenceSetInMulti(t *testing.T, c idClient) {
	ctx := testContext(t)
	k := t.Name()
	replies, err := c.transaction(ctx, []string{"INCR", k}, []string{"SET", k, "10"})
	if err == nil || !strings.Contains(err.Error(), "EXECABORT") {
		t.Fatalf("MULTI INCR SET EXEC: %v, %v; want an EXECABORT error", replies, err)
	}
	r, err := c.do(ctx, "GET", k)
	wantReply(t, []string{"GET", k}, orNil(r, err), nil)
}

// orNil is a reply brought to one shape: go-redis, rueidis and valkey-go
// return a nil reply as an error of their own, redigo and radix as nil.
func orNil(r any, err error) any {
	switch {
	case errors.Is(err, redis.Nil), errors.Is(err, redisv8.Nil), rueidis.IsRedisNil(err), valkey.IsValkeyNil(err):
		return nil
	case err != nil:
		return err
	}
	return r
}

// wantReply fails t unless got, the reply to args, is want (a seqStep's).
func wantReply(t *testing.T, args []string, got, want any) {
	t.Helper()
	if text, ok := want.(errText); ok {
		if err, ok := got.(error); !ok || !strings.Contains(err.Error(), string(text)) {
			t.Fatalf("%q = %#v, want an error containing %q", args, got, text)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q = %#v (%T), want %#v (%T)", args, got, got, want, want)
	}
}

// TestGoRedisSequences drives sequences through go-redis v9's own
// methods (Incr, IncrBy, Get, Set, Pipelined, TxPipelined ...), which
// decode each reply as Redis's type for it: Incr wants an integer, Get a
// bulk string, Set a status.
func TestGoRedisSequences(t *testing.T) {
	addr := startServer(t)
	for _, protocol := range []int{2, 3} {
		t.Run("RESP"+strconv.Itoa(protocol), func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: addr, Protocol: protocol})
			t.Cleanup(func() { c.Close() })
			t.Run("Commands", func(t *testing.T) { checkGoRedisSeqCommands(t, c) })
			t.Run("Pipelined", func(t *testing.T) { checkGoRedisSeqPipelined(t, c) })
			t.Run("TxPipelined", func(t *testing.T) { checkGoRedisSeqTxPipelined(t, c) })
		})
	}
}

func checkGoRedisSeqCommands(t *testing.T, c *redis.Client) {
	ctx := testContext(t)
	k, none := t.Name()+":k", t.Name()+":none"
	wantInt := func(what string, got int64, err error, want int64) {
		t.Helper()
		if err != nil || got != want {
			t.Fatalf("%s = %d, %v; want %d", what, got, err, want)
		}
	}
	wantErr := func(what string, err error, text string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), text) {
			t.Fatalf("%s: %v, want an error containing %q", what, err, text)
		}
	}
	n, err := c.Incr(ctx, k).Result()
	wantInt("Incr of a new key", n, err, 1)
	n, err = c.Incr(ctx, k).Result()
	wantInt("Incr", n, err, 2)
	n, err = c.IncrBy(ctx, k, 10).Result()
	wantInt("IncrBy 10", n, err, 12)
	n, err = c.Get(ctx, k).Int64()
	wantInt("Get", n, err, 12)
	if v, err := c.Get(ctx, none).Result(); err != redis.Nil {
		t.Fatalf("Get of an unknown key = %q, %v; want redis.Nil", v, err)
	}
	if v, err := c.Set(ctx, k, 100, 0).Result(); err != nil || v != "OK" {
		t.Fatalf("Set 100 = %q, %v; want OK", v, err)
	}
	n, err = c.Incr(ctx, k).Result()
	wantInt("Incr after Set 100", n, err, 101)
	wantErr("Set 50", c.Set(ctx, k, 50, 0).Err(), fmt.Sprintf("ERR "+goesUp, k, 101))
	if set, err := c.SetNX(ctx, k, 500, 0).Result(); err != nil || set {
		t.Fatalf("SetNX of a key that exists = %v, %v; want false", set, err)
	}
	wantErr("Del", c.Del(ctx, k).Err(), "ERR "+refusedDel)
	wantErr("Decr", c.Decr(ctx, k).Err(), "ERR DECR is refused")
	n, err = c.Exists(ctx, k, none).Result()
	wantInt("Exists of a key and an unknown one", n, err, 1)
	if typ, err := c.Type(ctx, k).Result(); err != nil || typ != "string" {
		t.Fatalf("Type = %q, %v; want string", typ, err)
	}
	if v, err := c.MGet(ctx, k, none).Result(); err != nil || !reflect.DeepEqual(v, []any{"101", nil}) {
		t.Fatalf("MGet = %#v, %v; want [\"101\" nil]", v, err)
	}
}

// checkGoRedisSeqPipelined pipelines 100 Incrs of a new key and wants 1
// to 100 in the order queued.
func checkGoRedisSeqPipelined(t *testing.T, c *redis.Client) {
	ctx := testContext(t)
	cmds := make([]*redis.IntCmd, 100)
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range cmds {
			cmds[i] = p.Incr(ctx, t.Name())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if n, err := cmd.Result(); err != nil || n != int64(i+1) {
			t.Fatalf("Incr #%d = %d, %v; want %d", i, n, err, i+1)
		}
	}
}

// checkGoRedisSeqTxPipelined runs Incr, IncrBy 5 and Get of a key in
// MULTI/EXEC: consecutive values, Get the last. Then a Set in MULTI,
// which is refused and discards the transaction.
func checkGoRedisSeqTxPipelined(t *testing.T, c *redis.Client) {
	ctx := testContext(t)
	k := t.Name()
	for range 2 {
		var incr, incrBy *redis.IntCmd
		var get *redis.StringCmd
		if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			incr, incrBy, get = p.Incr(ctx, k), p.IncrBy(ctx, k, 5), p.Get(ctx, k)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		first := incr.Val()
		if incrBy.Val() != first+5 || get.Val() != strconv.FormatInt(first+5, 10) {
			t.Fatalf("Incr, IncrBy 5, Get = %d, %d, %q; want n, n+5, \"n+5\"", first, incrBy.Val(), get.Val())
		}
	}
	var set *redis.StatusCmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, k)
		set = p.Set(ctx, k, 1000, 0)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "EXECABORT") {
		t.Fatalf("TxPipelined Incr, Set: %v, want EXECABORT", err)
	}
	if !strings.Contains(set.Err().Error(), "Command not allowed inside a transaction") {
		t.Errorf("Set in TxPipelined: %v, want \"Command not allowed inside a transaction\"", set.Err())
	}
	if n, err := c.Get(ctx, k).Int64(); err != nil || n != 12 {
		t.Fatalf("Get after the discarded transaction = %d, %v; want 12 (two transactions of 6)", n, err)
	}
}
