package respserver

import (
	"errors"
	"strconv"
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/replyerr"
)

// idCommands are the commands that issue and explain IDs. Their tips:
// no request_policy, so that a cluster client sends each to one node of
// its choice (Redis's default for a command without keys): any node's
// IDs are unique cluster-wide, and all_shards would take IDs on every
// node to return one node's. GETID and MGETID nondeterministic_output,
// as TIME: no two calls answer alike. DECODEID and IDRANGE compute from
// their arguments and the layout the nodes share: none.
var idCommands = []*command{
	{name: "getid", arity: 1, flags: []string{"write", "fast"}, tips: nondeterministic, start: cmdGetID, besideDeferred: true, takes: takesID, doc: doc{
		summary:    "Returns a new unique ID: an integer, or a bulk string for JavaScript clients (getid-reply).",
		since:      idserverSince,
		group:      "idserver",
		complexity: "O(1)",
	}},
	{name: "mgetid", arity: 2, flags: []string{"write"}, tips: nondeterministic, start: cmdMGetID, besideDeferred: true, takes: (*Server).takesIDs, doc: doc{
		summary:    "Returns count new unique IDs, consecutive and increasing, as bulk strings.",
		since:      idserverSince,
		group:      "idserver",
		complexity: "O(N) where N is the count",
		args:       []arg{{name: "count", typ: "integer"}},
	}},
	{name: "decodeid", arity: 2, flags: []string{"readonly", "fast"}, run: cmdDecodeID, doc: doc{
		summary:    "Returns the fields of an ID: its time, server-id, shard and random part.",
		since:      idserverSince,
		group:      "idserver",
		complexity: "O(1)",
		args:       []arg{{name: "id", typ: "integer"}},
	}},
	{name: "idrange", arity: 3, flags: []string{"readonly", "fast"}, run: cmdIDRange, doc: doc{
		summary:    "Returns the smallest and the largest ID whose time field lies from start-ms to end-ms (unix ms, inclusive): the bounds of a range query for that window.",
		since:      idserverSince,
		group:      "idserver",
		complexity: "O(1)",
		args:       []arg{{name: "start-ms", typ: "unix-time"}, {name: "end-ms", typ: "unix-time"}},
	}},
}

// GetIDReply is how GETID replies: an integer, as Redis's INCR and the C
// original do, or a bulk string, which JavaScript clients keep exact.
type GetIDReply int

// The values of GetIDReply (getid-reply).
const (
	// GetIDAuto replies with bulk strings to the connections of
	// JavaScript clients, which turn integers into lossy Numbers, and
	// with integers to the others. A JavaScript client is one that
	// announces itself (CLIENT SETINFO LIB-NAME ioredis, iovalkey,
	// node-redis or GlideJS) or begins with the bare lowercase "info"
	// ready check of older ioredis, iovalkey and node-redis (see greet).
	GetIDAuto GetIDReply = iota
	// GetIDInteger always replies with integers.
	GetIDInteger
	// GetIDString always replies with bulk strings.
	GetIDString
)

// cmdGetID and cmdMGetID never wait on the loop: where the generator
// would, they issue their IDs off it.
func cmdGetID(s *Server, c *client, args [][]byte) (later, error) {
	return s.issue(c, 1, writeGetID)
}

func cmdMGetID(s *Server, c *client, args [][]byte) (later, error) {
	n, err := s.mgetidCount(args)
	if err != nil {
		return later{}, err
	}
	return s.issue(c, n, (*client).appendIDs)
}

// mgetidCount is MGETID's count, checked.
func (s *Server) mgetidCount(args [][]byte) (int64, error) {
	n, ok := parseInt(args[1])
	if !ok {
		return 0, errNotInteger
	}
	if err := s.inMGetIDMax(n); err != nil {
		return 0, err
	}
	return n, nil
}

// inMGetIDMax checks MGETID's count against 1..mgetid-max.
func (s *Server) inMGetIDMax(n int64) error {
	if n < 1 || n > int64(s.opts.MGetIDMax) {
		return replyerr.Errorf("count %d out of range, must be 1..%d (mgetid-max)", n, s.opts.MGetIDMax)
	}
	return nil
}

func takesID(*Server, [][]byte) take { return take{ids: 1} }

// takesIDs is MGETID's: none when the command will fail.
func (s *Server) takesIDs(args [][]byte) take {
	n, _ := s.mgetidCount(args)
	return take{ids: n}
}

// issue takes n IDs and has reply write them. Inside EXEC they come from
// the IDs EXEC took for the whole transaction. Otherwise, where the
// generator would wait, it issues them off the loop.
func (s *Server) issue(c *client, n int64, reply func(*client, []int64)) (later, error) {
	if c.inExec {
		reply(c, c.txIDs[:n])
		c.txIDs = c.txIDs[n:]
		return later{}, nil
	}
	ids := c.scratchIDs(n)
	err := s.tryNextN(ids)
	if errors.Is(err, idgen.ErrWouldWait) {
		return offLoop(func() error { return s.nextN(ids) }, func(c *client, err error) (later, error) {
			if err == nil {
				reply(c, ids)
			}
			c.dropScratchIDs()
			return later{}, err
		}), nil
	}
	if err != nil {
		return later{}, err
	}
	reply(c, ids)
	c.dropScratchIDs()
	return later{}, nil
}

// tryNextN fills ids from the current generator without waiting
// (idgen.ErrWouldWait where it would), or returns why none issues IDs.
func (s *Server) tryNextN(ids []int64) error {
	g, err := s.generator()
	if err != nil {
		return err
	}
	return g.TryNextN(ids)
}

// nextN is tryNextN that waits, off the event loop.
func (s *Server) nextN(ids []int64) error {
	g, err := s.generator()
	if err != nil {
		return err
	}
	return g.NextN(ids)
}

// scratchIDs returns c's scratch space for n IDs.
func (c *client) scratchIDs(n int64) []int64 {
	if int64(cap(c.ids)) < n {
		c.ids = make([]int64, n)
	}
	return c.ids[:n]
}

// dropScratchIDs lets a scratch space grown for a rare big request go.
func (c *client) dropScratchIDs() {
	if cap(c.ids) > keepBuf/8 {
		c.ids = nil
	}
}

// writeGetID writes GETID's reply.
func writeGetID(c *client, ids []int64) {
	if c.stringIDs {
		c.Out = appendBulkID(c.Out, ids[0])
		return
	}
	c.writeInt64(ids[0])
}

// appendIDs appends MGETID's reply: the IDs as bulk strings.
func (c *client) appendIDs(ids []int64) {
	b := append(c.Out, '*')
	b = strconv.AppendInt(b, int64(len(ids)), 10)
	b = append(b, '\r', '\n')
	var f bulkIDs
	for _, id := range ids {
		b = f.append(b, id)
	}
	c.Out = b
}

func cmdDecodeID(s *Server, c *client, args [][]byte) error {
	id, ok := parseInt(args[1])
	if !ok {
		return errNotInteger
	}
	p, err := idgen.Decode(id, s.opts.Layout, s.opts.Epoch)
	if err != nil {
		return replyerr.Errorf("invalid id: %v", err)
	}
	c.writeMap(5)
	c.writeBulkString("unix-ms")
	c.writeInt64(p.Time.UnixMilli())
	c.writeBulkString("time")
	c.writeBulkString(p.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	c.writeBulkString("server-id")
	c.writeInt64(p.ServerID)
	c.writeBulkString("shard")
	c.writeInt64(p.Shard)
	c.writeBulkString("random")
	c.writeInt64(p.Random)
	return nil
}

// cmdIDRange is IDRANGE start-ms end-ms: two integers, the bounds of a
// WHERE id BETWEEN query for that window.
func cmdIDRange(s *Server, c *client, args [][]byte) error {
	first, ok1 := parseInt(args[1])
	last, ok2 := parseInt(args[2])
	if !ok1 || !ok2 {
		return errNotInteger
	}
	lo, hi, err := idgen.Range(s.opts.Layout, s.opts.Epoch, time.UnixMilli(first), time.UnixMilli(last))
	if err != nil {
		return err
	}
	c.writeArray(2)
	c.writeInt64(lo)
	c.writeInt64(hi)
	return nil
}
