package respserver

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/idserver/idserver/internal/replyerr"
	"github.com/idserver/idserver/sequence"
)

// cmdDBSize is keyCount, off the loop where it walks every key.
func cmdDBSize(s *Server, c *client, args [][]byte) (later, error) {
	if !s.keyCountWalks() {
		c.writeInt(s.keyCount())
		return later{}, nil
	}
	n := 0
	return offLoop(func() error { n = s.keyCount(); return nil }, func(c *client, err error) (later, error) {
		c.writeInt(n)
		return later{}, nil
	}), nil
}

// keyCount is the number of keys, DBSIZE's and INFO keyspace's (one
// number, so that they agree): this server's sequences; over etcd, of
// the slots it owns (notOwn), unless it owns them all (a cluster client
// sums over the nodes). It walks every key where keyCountWalks says so:
// then it is called off the loop.
func (s *Server) keyCount() int {
	seq, err := s.sequences()
	if err != nil {
		return 0
	}
	notOwn := s.notOwn()
	if notOwn == nil {
		return seq.Len()
	}
	n := 0
	eachKey(seq, func(k string) bool {
		if !notOwn(k) {
			n++
		}
		return true
	})
	return n
}

// keyCountWalks reports whether keyCount walks every key.
func (s *Server) keyCountWalks() bool {
	_, err := s.sequences()
	return err == nil && s.notOwn() != nil
}

// eachKey calls yield with every key, a chunk at a time, until it
// returns false.
func eachKey(seq *sequence.Table, yield func(key string) bool) {
	var chunk []string
	for cursor := uint64(0); ; {
		chunk, cursor = seq.Keys(cursor, 10000, chunk[:0])
		for _, k := range chunk {
			if !yield(k) {
				return
			}
		}
		if cursor == 0 {
			return
		}
	}
}

// scanMaxCount bounds the keys one SCAN examines, whatever its COUNT (a
// hint in Redis too): each call's work stays bounded.
const scanMaxCount = 1000

// cmdScan is SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]: the
// cursor is a place in the order of the keys (sequence.Table.Keys), so a
// full iteration returns every key that existed all along exactly once.
// Sequences are strings: TYPE anything else returns none.
func cmdScan(s *Server, c *client, args [][]byte) error {
	cursor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		return replyerr.New(replyerr.ERR, "invalid cursor")
	}
	count, pattern, typ := 10, []byte(nil), "string"
	for i := 2; i < len(args); i += 2 {
		if i+1 == len(args) {
			return errSyntax
		}
		switch keyword(args[i]) {
		case "count":
			n, ok := parseInt(args[i+1])
			if !ok {
				return errNotInteger
			}
			if n < 1 {
				return errSyntax
			}
			count = int(min(n, scanMaxCount))
		case "match":
			pattern = args[i+1]
		case "type":
			typ = keyword(args[i+1])
		default:
			return errSyntax
		}
	}
	seq, err := s.sequences()
	if err != nil {
		c.writeScan(nil, 0)
		return nil
	}
	keys, next := seq.Keys(cursor, count, nil)
	if typ != "string" {
		keys = nil
	}
	if notOwn := s.notOwn(); notOwn != nil {
		keys = slices.DeleteFunc(keys, notOwn)
	}
	if pattern != nil {
		var g glob
		g.compileExact(pattern, seq.LongestKey())
		keys = slices.DeleteFunc(keys, func(k string) bool { return !g.match(k) })
	}
	c.writeScan(keys, next)
	return nil
}

// outputBound is the most a reply of keys (KEYS, CLUSTER GETKEYSINSLOT)
// may hold: the client's hard output limit, past which it would be
// closed anyway, or 64 MiB without one. Such a command collects keys up
// to it and fails past it, so that a huge reply costs neither the memory
// nor the client's connection.
func (s *Server) outputBound() int {
	if s.opts.Output.Hard > 0 {
		return s.opts.Output.Hard
	}
	return 64 << 20
}

// keyReplyBytes is what a key costs in a reply of keys: its bytes and
// the bulk string's header.
func keyReplyBytes(key string) int { return len(key) + 16 }

// errOverOutput is the error of a command (what) whose reply would hold
// more than bound bytes.
func errOverOutput(what string, bound int) error {
	return replyerr.Errorf("%s: the reply would hold more than the client's hard output limit of %d bytes (client-output-buffer-limit): use SCAN, or ask for fewer", what, bound)
}

// writeScan writes SCAN's reply: the cursor to go on from, and keys.
func (c *client) writeScan(keys []string, next uint64) {
	c.writeArray(2)
	c.writeBulkString(strconv.FormatUint(next, 10))
	c.writeArray(len(keys))
	for _, k := range keys {
		c.writeBulkString(k)
	}
}

// cmdKeys is KEYS pattern. It examines every key, so it runs off the
// event loop (other clients are not held up), a chunk of keys at a time;
// what it collects is bounded by the client's hard output limit, past
// which it would be closed anyway: then it fails, saying to use SCAN.
func cmdKeys(s *Server, c *client, args [][]byte) (later, error) {
	seq, err := s.sequences()
	if err != nil {
		return later{}, err
	}
	pattern := slices.Clone(args[1]) // args are the read buffer's, reused once this returns
	limit := s.outputBound()
	notOwn := s.notOwn()
	var keys []string
	return offLoop(func() error {
		var g glob
		g.compileExact(pattern, seq.LongestKey())
		var over error
		size := 0
		eachKey(seq, func(k string) bool {
			if g.match(k) && (notOwn == nil || !notOwn(k)) {
				keys = append(keys, k)
				if size += keyReplyBytes(k); size > limit {
					over = errOverOutput(fmt.Sprintf("KEYS %q", pattern), limit)
					return false
				}
			}
			return true
		})
		return over
	}, func(c *client, err error) (later, error) {
		if err != nil {
			return later{}, err
		}
		c.writeArray(len(keys))
		for _, k := range keys {
			c.writeBulkString(k)
		}
		return later{}, nil
	}), nil
}
