// Package seqpull fetches, for a slot's new owner, the keys of the slots
// an old owner let go (CLUSTER SEQHANDOVER on the old owner's announced
// port), and what another server saw of slot records etcd lost (CLUSTER
// SEQSEEN), over the Redis protocol, as a client authenticated with the
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
	v, err := ask(ctx, cfg, node, "seqhandover", list)
	if err != nil {
		return nil, err
	}
	return parse(v)
}

// Seen asks node what it saw of the records of list (CLUSTER SEQSEEN),
// once: each record it saw, by slot, as it sent it.
func Seen(ctx context.Context, cfg Config, node slots.Node, list []int) (map[int]string, error) {
	v, err := ask(ctx, cfg, node, "seqseen", list)
	if err != nil {
		return nil, err
	}
	if len(v)%2 != 0 {
		return nil, fmt.Errorf("seen: a reply of %d elements", len(v))
	}
	out := map[int]string{}
	for i := 0; i < len(v); i += 2 {
		slot, ok1 := v[i].(int64)
		rec, ok2 := v[i+1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("seen: a slot's reply is %v %v", v[i], v[i+1])
		}
		out[int(slot)] = rec
	}
	return out, nil
}

// ask sends CLUSTER sub with list to node on a connection of its own,
// closed before it returns, and returns the reply's array.
func ask(ctx context.Context, cfg Config, node slots.Node, sub string, list []int) ([]any, error) {
	if node.IP == "" {
		return nil, fmt.Errorf("node %s announces no address", node.ID)
	}
	// ctx bounds the whole call: without ContextTimeoutEnabled go-redis
	// waits out its own 5 s socket timeouts on a node that accepts and
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
	args := []any{"cluster", sub}
	for _, s := range list {
		args = append(args, s)
	}
	v, err := cli.Do(ctx, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("cluster %s on %s: %w", sub, opts.Addr, err)
	}
	return v, nil
}

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
