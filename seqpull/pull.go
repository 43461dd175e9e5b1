// Package seqpull fetches, for a slot's new owner, the keys of the slots
// an old owner let go (CLUSTER SEQHANDOVER, in pages), and what another
// server saw of the slot records (CLUSTER SEQSEEN), over the Redis
// protocol on the other's announced cluster-port (its port before
// cluster-port came), as a client authenticated with the server's own
// password.
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
	// Username and Password authenticate as the server's own clients
	// must (requirepass): every server of a cluster has the same.
	Username, Password string
	// TLS, if set (tls-cluster), is what the others' cluster-port is
	// reached with; nil: plain TCP.
	TLS *tls.Config
	// MaxArgs is the most arguments a command may have on the others
	// (proto-max-multibulk-len, the same on every server of a cluster):
	// a list of slots is sent in commands of at most that many.
	MaxArgs int
}

// perCommand is the most slots one command carries.
const perCommand = 256

// parts cuts list into the lists of slots, one per command of fixed
// arguments more.
func (cfg Config) parts(list []int, fixed int) [][]int {
	n := perCommand
	if cfg.MaxArgs > fixed {
		n = min(n, cfg.MaxArgs-fixed)
	}
	return slices.Collect(slices.Chunk(list, n))
}

// Pull asks node for the keys of list, once, a page at a time (Gather).
// It uses one connection, closed before it returns.
func Pull(ctx context.Context, cfg Config, node slots.Node, list []int) ([]sequence.Handed, error) {
	var out []sequence.Handed
	err := dial(ctx, cfg, node, func(do func(args ...any) ([]any, error)) error {
		for _, part := range cfg.parts(list, 3) { // CLUSTER SEQHANDOVER <from>
			got, err := Gather(part, func(from int, list []int) ([]sequence.Handed, error) {
				v, err := do(command("seqhandover", list, from)...)
				if err != nil {
					return nil, err
				}
				return parse(v)
			})
			out = append(out, got...)
			if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// Gather collects the keys of the slots of list from an old owner's
// pages (page: a CLUSTER SEQHANDOVER from place from of the first slot's
// keys; Engine.Handover on the owner), asking again from where each
// stopped. A slot whose pages came at different generations (the owner
// dropped it, or served it again, between two) is given with Gen 0: not
// handed over.
func Gather(list []int, page func(from int, list []int) ([]sequence.Handed, error)) ([]sequence.Handed, error) {
	var out []sequence.Handed
	from := 0
	for len(list) > 0 {
		got, err := page(from, list)
		if err != nil {
			return out, err
		}
		if err := check(got, list, from); err != nil {
			return out, err
		}
		for i, h := range got {
			if i > 0 || from == 0 {
				out = append(out, h)
				continue
			}
			last := &out[len(out)-1] // its next page
			if h.Gen != last.Gen {
				last.Gen, last.Marks = 0, nil
			} else if h.Gen > 0 {
				last.Marks = append(last.Marks, h.Marks...)
			}
		}
		end := got[len(got)-1]
		if end.Next > 0 {
			list, from = list[len(got)-1:], end.Next
		} else {
			list, from = list[len(got):], 0
		}
	}
	return out, nil
}

// check returns an error if got is not a page of list from from: one
// slot or more of list, in order, and past from.
func check(got []sequence.Handed, list []int, from int) error {
	if len(got) == 0 || len(got) > len(list) {
		return fmt.Errorf("handover: a page of %d slots, of %d asked", len(got), len(list))
	}
	for i, h := range got {
		if h.Slot != list[i] {
			return fmt.Errorf("handover: slot %d given in the place of %d", h.Slot, list[i])
		}
	}
	if end := got[len(got)-1].Next; len(got) == 1 && end > 0 && end <= from {
		return fmt.Errorf("handover: slot %d: a page from %d ends at %d", got[0].Slot, from, end)
	}
	return nil
}

// Seen asks node what it saw of the records of list (CLUSTER SEQSEEN),
// once: each record it saw, by slot, as it sent it.
func Seen(ctx context.Context, cfg Config, node slots.Node, list []int) (map[int]string, error) {
	out := map[int]string{}
	err := dial(ctx, cfg, node, func(do func(args ...any) ([]any, error)) error {
		for _, part := range cfg.parts(list, 2) {
			v, err := do(command("seqseen", part)...)
			if err != nil {
				return err
			}
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
		}
		return nil
	})
	return out, err
}

// command is CLUSTER sub, the integers first, then list.
func command(sub string, list []int, first ...int) []any {
	args := []any{"cluster", sub}
	for _, n := range first {
		args = append(args, n)
	}
	for _, s := range list {
		args = append(args, s)
	}
	return args
}

// dial connects to node and has use send its commands (do: each
// command's reply, an array) on that one connection, closed before dial
// returns. ctx bounds the whole call; a node that does not answer a PING
// within ReachWait is taken as gone, whatever time ctx leaves.
func dial(ctx context.Context, cfg Config, node slots.Node, use func(do func(args ...any) ([]any, error)) error) error {
	if node.IP == "" {
		return fmt.Errorf("node %s announces no address", node.ID)
	}
	// Without ContextTimeoutEnabled go-redis waits out its own 5 s socket
	// timeouts on a node that accepts and never answers (a pull of a
	// killed owner's slots took 5 s so, and the INCRs waiting for them
	// timed out).
	opts := &redis.Options{Username: cfg.Username, Password: cfg.Password, PoolSize: 1,
		DisableIdentity: true, Protocol: 2, ContextTimeoutEnabled: true, MaxRetries: -1}
	switch {
	case node.BusPort != 0:
		opts.Addr, opts.TLSConfig = net.JoinHostPort(node.IP, strconv.Itoa(node.BusPort)), cfg.TLS
	case node.Port != 0: // a server of a version before cluster-port
		opts.Addr = net.JoinHostPort(node.IP, strconv.Itoa(node.Port))
	default:
		return fmt.Errorf("node %s announces no port this server can reach", node.ID)
	}
	cli := redis.NewClient(opts)
	defer cli.Close()
	rctx, cancel := context.WithTimeout(ctx, ReachWait)
	err := cli.Ping(rctx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("%s: no answer to PING: %w", opts.Addr, err)
	}
	return use(func(args ...any) ([]any, error) {
		v, err := cli.Do(ctx, args...).Slice()
		if err != nil {
			return nil, fmt.Errorf("%s %s on %s: %w", args[0], args[1], opts.Addr, err)
		}
		return v, nil
	})
}

// parse reads a CLUSTER SEQHANDOVER reply: for each slot, its number,
// generation, keys and values (flat), and where its next page starts.
func parse(v []any) ([]sequence.Handed, error) {
	out := make([]sequence.Handed, 0, len(v))
	for _, x := range v {
		slot, ok := x.([]any)
		if !ok || len(slot) != 4 {
			return nil, fmt.Errorf("pull: a slot's reply is %v", x)
		}
		n, ok1 := slot[0].(int64)
		gen, ok2 := slot[1].(int64)
		kvs, ok3 := slot[2].([]any)
		next, ok4 := slot[3].(int64)
		if !ok1 || !ok2 || !ok3 || !ok4 || len(kvs)%2 != 0 || next < 0 {
			return nil, fmt.Errorf("pull: a slot's reply is %v", x)
		}
		h := sequence.Handed{Slot: int(n), Gen: gen, Next: int(next), Marks: make([]sequence.Mark, 0, len(kvs)/2)}
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
