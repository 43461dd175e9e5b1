package clients

import (
	"context"
	"errors"
	"testing"
	"time"

	redisv8 "github.com/go-redis/redis/v8"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/mediocregopher/radix/v4"
	"github.com/mediocregopher/radix/v4/resp"
	"github.com/mediocregopher/radix/v4/resp/resp3"
	"github.com/valkey-io/valkey-go"
)

// openGoRedisV8 opens go-redis v8, which still runs where an application
// has not moved to v9: RESP2 only, and nothing sent on connect.
func openGoRedisV8(t *testing.T, addr string) idClient {
	c := redisv8.NewClient(&redisv8.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return goRedis[*redisv8.Client, redisv8.Pipeliner, []redisv8.Cmder, *redisv8.Cmd]{c}
}

// openValkeyGo opens valkey-go on its defaults: like rueidis, which it
// forks, client-side caching is on, so connecting sends HELLO 3 and
// CLIENT TRACKING ON OPTIN.
func openValkeyGo(t *testing.T, addr string) idClient {
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		t.Fatal("valkey-go connect:", err)
	}
	t.Cleanup(c.Close)
	return rueidisFamily[valkey.Completed, valkey.ValkeyResult]{
		build:   func(args ...string) valkey.Completed { return c.B().Arbitrary(args...).Build() },
		doOne:   c.Do,
		doMulti: c.DoMulti,
		dedicate: func() (func(context.Context, ...valkey.Completed) []valkey.ValkeyResult, func()) {
			d, done := c.Dedicate()
			return d.DoMulti, done
		},
		connErr: valkey.ValkeyResult.NonValkeyError,
		toAny:   valkey.ValkeyResult.ToAny,
	}
}

// redigoClient is redigo with a Pool set up as its documentation's
// example does. redigo speaks RESP2 and sends nothing on connect.
type redigoClient struct{ pool *redigo.Pool }

// openRedigo opens a redigo Pool of addr.
func openRedigo(t *testing.T, addr string) idClient {
	pool := &redigo.Pool{
		MaxIdle:     3,
		IdleTimeout: 240 * time.Second,
		DialContext: func(ctx context.Context) (redigo.Conn, error) {
			return redigo.DialContext(ctx, "tcp", addr)
		},
	}
	t.Cleanup(func() { pool.Close() })
	return redigoClient{pool}
}

// do uses Do, which returns a bulk string as []byte and an integer as
// int64.
func (r redigoClient) do(ctx context.Context, args ...string) (any, error) {
	return r.withConn(ctx, func(conn redigo.Conn) (any, error) {
		return redigo.DoContext(conn, ctx, args[0], anys(args[1:])...)
	})
}

// pipeline queues cmds with Send, then Do("") flushes them and reads
// every reply, an error reply as a redigo.Error value.
func (r redigoClient) pipeline(ctx context.Context, cmds ...[]string) ([]any, error) {
	replies, err := r.withConn(ctx, func(conn redigo.Conn) (any, error) {
		for _, args := range cmds {
			if err := conn.Send(args[0], anys(args[1:])...); err != nil {
				return nil, err
			}
		}
		return redigo.DoContext(conn, ctx, "")
	})
	if err != nil {
		return nil, err
	}
	a, _ := replies.([]any) // nil for no cmds
	return a, nil
}

// transaction pipelines MULTI, cmds and EXEC. redigo's documented
// Send("MULTI") ... Do("EXEC") returns the first error reply of the
// lot, which for a refused transaction is the queued command's, not
// EXEC's EXECABORT.
func (r redigoClient) transaction(ctx context.Context, cmds ...[]string) ([]any, error) {
	replies, err := r.pipeline(ctx, inMulti(cmds)...)
	if err != nil {
		return nil, err
	}
	return execReply(replies)
}

// withConn runs fn on a connection of the pool, then gives it back (or
// drops it after a connection error), with fn's bulk strings as Go
// strings.
func (r redigoClient) withConn(ctx context.Context, fn func(redigo.Conn) (any, error)) (any, error) {
	conn, err := r.pool.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	v, err := fn(conn)
	return bulksAsStrings(v), err
}

// radixClient is radix v4's pool on its defaults: RESP2, no HELLO, four
// connections, and a PING on one of them every 1.25 s.
type radixClient struct{ c radix.Client }

// openRadix opens a radix pool of addr with the zero PoolConfig.
func openRadix(t *testing.T, addr string) idClient {
	c, err := radix.PoolConfig{}.New(testContext(t), "tcp", addr)
	if err != nil {
		t.Fatal("radix connect:", err)
	}
	t.Cleanup(func() { c.Close() })
	return radixClient{c}
}

// do receives into an any, where radix keeps the reply's type (int64,
// []byte, []any); a typed receiver would convert, a bulk "123" into an
// int64 too.
func (r radixClient) do(ctx context.Context, args ...string) (any, error) {
	var v any
	err := r.c.Do(ctx, radix.Cmd(&v, args[0], args[1:]...))
	return bulksAsStrings(v), err
}

// pipeline performs cmds as a radix Pipeline on the pool.
func (r radixClient) pipeline(ctx context.Context, cmds ...[]string) ([]any, error) {
	return radixPipeline(ctx, r.c, cmds)
}

// transaction pipelines MULTI, cmds and EXEC inside WithConn, which
// radix's documentation gives for transactions: the pool otherwise
// shares a connection between callers, whose commands could land inside
// the transaction.
func (r radixClient) transaction(ctx context.Context, cmds ...[]string) (replies []any, err error) {
	err = r.c.Do(ctx, radix.WithConn("", func(ctx context.Context, conn radix.Conn) error {
		all, err := radixPipeline(ctx, conn, inMulti(cmds))
		if err != nil {
			return err
		}
		replies, err = execReply(all)
		return err
	}))
	return replies, err
}

// radixPipeline performs cmds as one Pipeline on c, the pool or one of
// its connections, and returns each reply, an error reply as an error
// value. (radix would return the first error reply as the pipeline's.)
func radixPipeline(ctx context.Context, c interface {
	Do(context.Context, radix.Action) error
}, cmds [][]string) ([]any, error) {
	p := radix.NewPipeline()
	received := make([]radixReply, len(cmds))
	for i, args := range cmds {
		p.Append(radix.Cmd(&received[i], args[0], args[1:]...))
	}
	if err := c.Do(ctx, p); err != nil {
		return nil, err
	}
	replies := make([]any, len(received))
	for i, r := range received {
		replies[i] = bulksAsStrings(r.v)
	}
	return replies, nil
}

// radixReply receives any reply as radix does into an any, but keeps an
// error reply as its value instead of returning it, so that one error
// reply in a pipeline leaves the others readable.
type radixReply struct{ v any }

// UnmarshalRESP implements resp.Unmarshaler.
func (r *radixReply) UnmarshalRESP(br resp.BufferedReader, o *resp.Opts) error {
	err := resp3.Unmarshal(br, &r.v, o)
	var respErr resp3.SimpleError
	if errors.As(err, &respErr) {
		r.v, err = respErr, nil
	}
	return err
}

// bulksAsStrings turns the []byte that redigo and radix give for a bulk
// string into the string the checks expect, in arrays too. An integer
// reply stays an int64, so the checks still tell the two apart. A nil
// []byte is radix's RESP2 nil bulk (GET of an unknown key), which stays
// nil, as redigo gives it.
func bulksAsStrings(v any) any {
	switch v := v.(type) {
	case []byte:
		if v == nil {
			return nil
		}
		return string(v)
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = bulksAsStrings(e)
		}
		return a
	}
	return v
}
