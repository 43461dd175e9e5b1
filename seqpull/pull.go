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
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/sequence"
	"github.com/idserver/idserver/slots"
)

// ReachWait is how long a node has to answer at all.
const ReachWait = time.Second

// Config is how a server reaches the others.
type Config struct {
	Username, Password string
	// TLS, if set, is used for nodes that announce only a TLS port.
	TLS *tls.Config
	// MaxArgs is the most arguments a command may have on the others
	// (proto-max-multibulk-len, the same on every server of a cluster):
	// a list of slots is sent in commands of at most that many.
	MaxArgs int
}

// perCommand is the most slots one command carries: its reply (a slot
// handed over may hold many keys) stays within a few slots' worth.
const perCommand = 256

// parts cuts list into the lists of slots, one per command.
func (cfg Config) parts(list []int) [][]int {
	n := perCommand
	if cfg.MaxArgs > 2 {
		n = min(n, cfg.MaxArgs-2) // CLUSTER <sub> and the slots
	}
	return slices.Collect(slices.Chunk(list, n))
}

// Pull asks node for the keys of list, once. It uses one connection,
// closed before it returns.
func Pull(ctx context.Context, cfg Config, node slots.Node, list []int) ([]sequence.Handed, error) {
	var out []sequence.Handed
	err := ask(ctx, cfg, node, "seqhandover", list, func(v []any) error {
		handed, err := parse(v)
		out = append(out, handed...)
		return err
	})
	return out, err
}

// Seen asks node what it saw of the records of list (CLUSTER SEQSEEN),
// once: each record it saw, by slot, as it sent it.
func Seen(ctx context.Context, cfg Config, node slots.Node, list []int) (map[int]string, error) {
	out := map[int]string{}
	err := ask(ctx, cfg, node, "seqseen", list, func(v []any) error {
		if len(v)%2 != 0 {
			return fmt.Errorf("seen: a reply of %d elements", len(v))
		}
		for i := 0; i < len(v); i += 2 {
			slot, ok1 := v[i].(int64)
			rec, ok2 := v[i+1].(string)
			if !ok1 || !ok2 {
				return fmt.Errorf("seen: a slot's reply is %v %v", v[i], v[i+1])
			}
			out[int(slot)] = rec
		}
		return nil
	})
	return out, err
}

// ask sends CLUSTER sub with list, in parts (Config.parts), to node on
// a connection of its own, closed before it returns, and has each reply's
// array read by got.
func ask(ctx context.Context, cfg Config, node slots.Node, sub string, list []int, got func([]any) error) error {
	if node.IP == "" {
		return fmt.Errorf("node %s announces no address", node.ID)
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
		return fmt.Errorf("node %s announces no port this server can reach", node.ID)
	}
	cli := redis.NewClient(opts)
	defer cli.Close()
	// A node that does not answer a PING within ReachWait is taken as
	// gone, whatever time ctx leaves the reply itself.
	rctx, cancel := context.WithTimeout(ctx, ReachWait)
	err := cli.Ping(rctx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("cluster %s on %s: no answer to PING: %w", sub, opts.Addr, err)
	}
	for _, part := range cfg.parts(list) {
		args := []any{"cluster", sub}
		for _, s := range part {
			args = append(args, s)
		}
		v, err := cli.Do(ctx, args...).Slice()
		if err == nil {
			err = got(v)
		}
		if err != nil {
			return fmt.Errorf("cluster %s on %s: %w", sub, opts.Addr, err)
		}
	}
	return nil
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
