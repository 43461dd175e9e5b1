// Package seqpull fetches, for a slot's new owner, the keys of the slots
// an old owner let go, over the Redis protocol (CLUSTER SEQHANDOVER on
// the old owner's announced port), as a client authenticated with the
// server's own password.
package seqpull

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/sequence"
	"github.com/idserver/idserver/slots"
)

// Config is how a server reaches the others.
type Config struct {
	Username, Password string
	// TLS, if set, is used for nodes that announce only a TLS port.
	TLS *tls.Config
}

// Pull asks node for the keys of list, once. It uses one connection,
// closed before it returns.
func Pull(ctx context.Context, cfg Config, node slots.Node, list []int) ([]sequence.Handed, error) {
	if node.IP == "" {
		return nil, fmt.Errorf("node %s announces no address", node.ID)
	}
	// ctx bounds the whole pull: without ContextTimeoutEnabled go-redis
	// waits out its own 5 s socket timeouts on an owner that accepts and
	// never answers (a pull of a killed owner's slots took 5 s so, and the
	// INCRs waiting for them timed out).
	opts := &redis.Options{Username: cfg.Username, Password: cfg.Password, PoolSize: 1,
		DisableIdentity: true, Protocol: 2, ContextTimeoutEnabled: true, MaxRetries: -1}
	switch {
	case node.Port != 0:
		opts.Addr = net.JoinHostPort(node.IP, strconv.Itoa(node.Port))
	case node.TLSPort != 0 && cfg.TLS != nil:
		opts.Addr, opts.TLSConfig = net.JoinHostPort(node.IP, strconv.Itoa(node.TLSPort)), cfg.TLS
	default:
		return nil, fmt.Errorf("node %s announces no port this server can reach", node.ID)
	}
	cli := redis.NewClient(opts)
	defer cli.Close()
	args := []any{"cluster", "seqhandover"}
	for _, s := range list {
		args = append(args, s)
	}
	v, err := cli.Do(ctx, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("pull slots from %s: %w", opts.Addr, err)
	}
	return parse(v)
}

// parse reads CLUSTER SEQHANDOVER's reply.
func parse(v []any) ([]sequence.Handed, error) {
	out := make([]sequence.Handed, 0, len(v))
	for _, x := range v {
		slot, ok := x.([]any)
		if !ok || len(slot) != 3 {
			return nil, fmt.Errorf("pull: a slot's reply is %v", x)
		}
		n, ok1 := slot[0].(int64)
		gen, ok2 := slot[1].(int64)
		kvs, ok3 := slot[2].([]any)
		if !ok1 || !ok2 || !ok3 || len(kvs)%2 != 0 {
			return nil, fmt.Errorf("pull: a slot's reply is %v", x)
		}
		h := sequence.Handed{Slot: int(n), Gen: gen, Marks: make([]sequence.Mark, 0, len(kvs)/2)}
		for i := 0; i < len(kvs); i += 2 {
			key, ok1 := kvs[i].(string)
			val, ok2 := kvs[i+1].(int64)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("pull: slot %d: a key's reply is %v %v", n, kvs[i], kvs[i+1])
			}
			h.Marks = append(h.Marks, sequence.Mark{Key: key, Value: val, Born: true})
		}
		out = append(out, h)
	}
	return out, nil
}
