package respserver

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/redcon"

	"github.com/idserver/idserver/internal/replyerr"
	"github.com/idserver/idserver/sequence"
)

// seqCommands are the sequences: Redis's commands and replies for
// counters (INCR, INCRBY, GET, SET, MGET, EXISTS, TYPE, SCAN, KEYS), so
// that code written for Redis counters points here unchanged. A sequence
// never goes back, so the writes that would move one back or remove it
// are refused (refusedCommands).
var seqCommands = []*command{
	{name: "incr", arity: 2, flags: []string{"write", "denyoom", "fast"}, run: cmdIncr, besideHeld: true, takes: takesIncr, doc: doc{
		summary: "Returns the key's next value: 1 for a new key. Values never repeat, through crashes and restarts.",
		since:   "1.0.0", group: "string", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}},
	}},
	{name: "incrby", arity: 3, flags: []string{"write", "denyoom", "fast"}, run: cmdIncrBy, besideHeld: true, takes: (*Server).takesIncrBy, doc: doc{
		summary: "Reserves the key's next increment values and returns the last of them (1 <= increment <= seq-max-incrby).",
		since:   "1.0.0", group: "string", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}, {name: "increment", typ: "integer"}},
	}},
	{name: "get", arity: 2, flags: []string{"readonly", "fast"}, run: cmdGet, doc: doc{
		summary: "Returns the key's value: at least every value handed out (after a restart, the durable mark); nil for a new key.",
		since:   "1.0.0", group: "string", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}},
	}},
	{name: "mget", arity: -2, flags: []string{"readonly", "fast"}, tips: []string{"request_policy:multi_shard"}, run: cmdMGet, doc: doc{
		summary: "Returns the values of the keys, as GET does each.",
		since:   "1.0.0", group: "string", complexity: "O(N) where N is the number of keys to retrieve.",
		args: []arg{{name: "key", typ: "key", flags: multiple}},
	}},
	{name: "set", arity: -3, flags: []string{"write", "denyoom", "no_multi"}, run: cmdSet, besideHeld: true, doc: doc{
		summary: "Sets the key's value, only upward: the next INCR returns value + 1 (to start above an existing MAX(id)).",
		since:   "1.0.0", group: "string", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}, {name: "value", typ: "integer"}, oneOf("condition", optional, "NX", "XX")},
	}},
	{name: "setnx", arity: 3, flags: []string{"write", "denyoom", "fast", "no_multi"}, run: cmdSetNX, besideHeld: true, doc: doc{
		summary: "Sets the value of a new key; 1 if it was set, 0 if the key exists.",
		since:   "1.0.0", group: "string", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}, {name: "value", typ: "integer"}},
	}},
	{name: "exists", arity: -2, flags: []string{"readonly", "fast"}, tips: []string{"request_policy:multi_shard", "response_policy:agg_sum"}, run: cmdExists, doc: doc{
		summary: "Returns how many of the keys exist (a key named twice counts twice).",
		since:   "1.0.0", group: "generic", complexity: "O(N) where N is the number of keys to check.",
		args: []arg{{name: "key", typ: "key", flags: multiple}},
	}},
	{name: "type", arity: 2, flags: []string{"readonly", "fast"}, run: cmdType, doc: doc{
		summary: "Returns the type of the key: string for a sequence, none otherwise.",
		since:   "1.0.0", group: "generic", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}},
	}},
	{name: "strlen", arity: 2, flags: []string{"readonly", "fast"}, run: cmdStrlen, doc: doc{
		summary: "Returns the length of the key's value as a string of digits (redis-cli --bigkeys reads it); 0 for a new key.",
		since:   "2.2.0", group: "string", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}},
	}},
	{name: "ttl", arity: 2, flags: []string{"readonly", "fast"}, tips: nondeterministic, run: cmdTTL, doc: doc{
		summary: "Returns -1 for a sequence (they never expire), -2 for a key that does not exist.",
		since:   "1.0.0", group: "generic", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}},
	}},
	{name: "pttl", arity: 2, flags: []string{"readonly", "fast"}, tips: nondeterministic, run: cmdTTL, doc: doc{
		summary: "Returns -1 for a sequence (they never expire), -2 for a key that does not exist.",
		since:   "2.6.0", group: "generic", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}},
	}},
	{name: "touch", arity: -2, flags: []string{"readonly", "fast"}, tips: []string{"request_policy:multi_shard", "response_policy:agg_sum"}, run: cmdExists, doc: doc{
		summary: "Returns how many of the keys exist (nothing else changes: sequences have no access time).",
		since:   "3.2.1", group: "generic", complexity: "O(N) where N is the number of keys that will be touched.",
		args: []arg{{name: "key", typ: "key", flags: multiple}},
	}},
	{name: "keys", arity: 2, flags: []string{"readonly"}, tips: []string{"request_policy:all_shards", "nondeterministic_output_order"}, acl: []string{"dangerous"}, run: cmdKeys, doc: doc{
		summary: "Returns the keys that match the pattern (it examines every key: prefer SCAN).",
		since:   "1.0.0", group: "generic", complexity: "O(N) with N being the number of keys in the database",
		args: []arg{{name: "pattern", typ: "pattern"}},
	}},
}

// refusedCommands are Redis's writes that would move a sequence back or
// remove it: idserver never reuses a number, so they are refused, each
// with a reply that says so.
var refusedCommands = func() []*command {
	var cmds []*command
	for _, name := range []string{"del", "unlink", "decr", "decrby", "incrbyfloat", "getset", "getdel", "getex",
		"setex", "psetex", "mset", "msetnx", "append", "setrange", "expire", "pexpire", "expireat", "pexpireat",
		"persist", "rename", "renamenx", "move", "copy", "restore", "flushdb", "flushall", "swapdb"} {
		var acl []string
		if slices.Contains([]string{"restore", "flushdb", "flushall", "swapdb"}, name) {
			acl = []string{"dangerous"}
		}
		cmds = append(cmds, &command{name: name, arity: -1, flags: []string{"write"}, acl: acl, run: cmdRefused, doc: doc{
			summary: "Refused: sequences never go back, expire or go away (idserver never reuses a number).",
			since:   idserverSince, group: "generic", complexity: "O(1)",
		}})
	}
	return cmds
}()

func cmdRefused(s *Server, c *client, args [][]byte) error {
	return replyerr.Errorf("%s is refused: sequences never go back, expire or go away (idserver never reuses a number)", strings.ToUpper(string(args[0])))
}

// errNoSequences is the reply of a server that has no sequences: a
// protocol server made without them (tests).
var errNoSequences = replyerr.New(replyerr.ERR, "sequences are off on this server")

// sequences is the server's table, or why there is none.
func (s *Server) sequences() (*sequence.Table, error) {
	if s.opts.Sequences == nil {
		return nil, errNoSequences
	}
	return s.opts.Sequences, nil
}

func cmdIncr(s *Server, c *client, args [][]byte) error { return s.incr(c, "incr", args[1], 1) }

func cmdIncrBy(s *Server, c *client, args [][]byte) error {
	n, err := s.increment(args[2])
	if err != nil {
		return err
	}
	return s.incr(c, "incrby", args[1], n)
}

func takesIncr(_ *Server, args [][]byte) take { return take{key: args[1], n: 1} }

// takesIncrBy is INCRBY's: no values when the increment is refused.
func (s *Server) takesIncrBy(args [][]byte) take {
	n, _ := s.increment(args[2])
	return take{key: args[1], n: n}
}

// increment is INCRBY's increment, checked: sequences only go up.
func (s *Server) increment(arg []byte) (int64, error) {
	n, ok := parseInt(arg)
	switch {
	case !ok:
		return 0, errNotInteger
	case n < 1 || n > s.opts.SeqMaxIncrBy:
		return 0, replyerr.Errorf("increment %d out of range, must be 1..%d (seq-max-incrby): sequences never go back", n, s.opts.SeqMaxIncrBy)
	}
	return n, nil
}

// incr hands out n values of key and replies with the last: at once, or,
// for the first values of a key prepared ahead, once the table says the
// reply may go (held). Inside EXEC they come from the values EXEC took
// for the whole transaction. Otherwise, where the key's segment lacks
// them, the rest is done off the loop (later).
func (s *Server) incr(c *client, cmd string, key []byte, n int64) error {
	if c.inExec {
		v, err := c.txSeq.take(key, n)
		if err == nil {
			c.writeInt64(v)
		}
		return err
	}
	seq, err := s.sequences()
	if err != nil {
		return err
	}
	v, p, err := seq.TryIncr(key, n)
	switch {
	case errors.Is(err, sequence.ErrWouldWait):
		s.prepareAhead(c, seq)
		c.incrLater(seq, string(key), n)
		return nil
	case errors.Is(err, sequence.ErrNotServed): // its slot is being taken: Incr waits for it
		c.incrLater(seq, string(key), n)
		return nil
	case err != nil:
		return err
	}
	at := len(c.Out)
	c.writeInt64(v)
	if !p.Ready() {
		c.hold(seq, p, cmd, at)
	}
	return nil
}

// seqHeld is the replies of a batch that may go only once the table
// says so (conns.Conn.Hold; sequence.Pending: a key's existence not yet
// durable, a SET's write), and where each is in c.Out: written as if it
// may go, and put right if not. Its await and then are made once per
// client: a batch holds with no allocation of its own. Between the Hold
// and then, the goroutine running await owns it.
type seqHeld struct {
	seq     *sequence.Table
	pending []sequence.Pending
	replies []heldReply              // pending's, in order
	errs    []error                  // why each may not go, once awaited
	out     []byte                   // the buffer settleHeld copies c.Out into
	await   func() error             // c.awaitHeld
	then    func(error)              // settleHeld for c
	waitFor func(args [][]byte) bool // c.waitsForHeld
}

// heldReply is where a held reply is in c.Out, and the name of its
// command (whose failure it counts, if it may not go).
type heldReply struct {
	at, n int
	cmd   string
}

// hold has the batch's replies wait for p, the table's say on the reply
// of cmd written at c.Out[at:].
func (c *client) hold(seq *sequence.Table, p sequence.Pending, cmd string, at int) {
	c.held.seq = seq
	c.held.pending = append(c.held.pending, p)
	c.held.replies = append(c.held.replies, heldReply{at: at, n: len(c.Out) - at, cmd: cmd})
	c.Hold(c.held.await, c.held.then, c.held.waitFor)
}

// waitsForHeld reports whether the command args must run only once the
// batch's held replies may go: all but those that see no key (IDs), that
// see a key as it is (INCR and SET of a held key wait for it, or are
// held too; the table knows), and those refused before they run, so
// that a GET, an EXISTS or a WATCH pipelined after them sees them done,
// as in Redis.
func (c *client) waitsForHeld(args [][]byte) bool {
	if len(c.held.pending) == 0 {
		return false
	}
	cmd, err := c.lookup(args)
	return err == nil && !cmd.besideHeld
}

// awaitHeld waits, off the loop, until the table says whether each held
// reply may go, and the forwarded commands' replies came.
func (c *client) awaitHeld() error {
	c.fwd.send()
	if len(c.held.pending) > 0 {
		c.held.errs = slices.Grow(c.held.errs[:0], len(c.held.pending))[:len(c.held.pending)]
		c.held.seq.Await(c.held.pending, c.held.errs)
	}
	c.fwd.wait()
	return nil
}

// settleHeld, on the loop once awaitHeld returned, puts right each held
// reply that may not go: its values are not sent (they are skipped), or
// its SET did not succeed (a failed write, a condition not met); the
// error reply, or SET's nil, takes its place. The forwarded commands'
// replies go in at their places. c.Out is copied once, into c.held.out,
// whose buffer it then takes: a batch settles without an allocation once
// the buffers have grown. Then it empties c.held and c.fwd.
func (s *Server) settleHeld(c *client) {
	from, pos, fwd := c.Out, 0, c.fwd.replies
	c.Out = c.held.out[:0]
	for i, h := range c.held.replies {
		for len(fwd) > 0 && fwd[0].at <= h.at { // at one place, the forwarded reply came first
			c.Out = append(c.Out, from[pos:fwd[0].at]...)
			s.relay(c, fwd[0])
			pos, fwd = fwd[0].at, fwd[1:]
		}
		c.Out = append(c.Out, from[pos:h.at]...)
		pos = h.at + h.n
		switch err := c.held.errs[i]; {
		case err == nil:
			c.Out = append(c.Out, from[h.at:pos]...)
		case notMet(err):
			c.writeSetReply(false, h.cmd == "setnx")
		default:
			s.fail(c, commands[h.cmd], err)
		}
	}
	for _, r := range fwd {
		c.Out = append(c.Out, from[pos:r.at]...)
		s.relay(c, r)
		pos = r.at
	}
	c.Out = append(c.Out, from[pos:]...)
	c.held.out = from[:0]
	if cap(c.held.out) > keepBuf {
		c.held.out = nil
	}
	c.fwd.done()
	clear(c.held.pending)
	clear(c.held.errs)
	c.held.pending, c.held.replies, c.held.errs = c.held.pending[:0], c.held.replies[:0], c.held.errs[:0]
	if cap(c.held.pending) > keepBuf/32 {
		c.held.pending, c.held.replies, c.held.errs = nil, nil, nil
	}
}

// incrLater is incr's wait, off the loop. (Its own function: what its
// closures share escapes to the heap, and incr's fast path must not.)
func (c *client) incrLater(seq *sequence.Table, key string, n int64) {
	var v int64
	c.later(waiting{
		off: func() error {
			var err error
			v, err = seq.Incr(key, n)
			return err
		},
		then: func(c *client, err error) error {
			if err == nil {
				c.writeInt64(v)
			}
			return err
		},
	})
}

// prepareAhead has seq prepare the values the INCRs pipelined behind a
// waiting one will need, so that they all wait for one write.
func (s *Server) prepareAhead(c *client, seq *sequence.Table) {
	c.Ahead(func(args [][]byte) bool {
		if cmd, err := c.lookup(args); err == nil && cmd.takes != nil {
			if t := cmd.takes(s, args); t.n > 0 {
				seq.Prepare(t.key, t.n)
			}
		}
		return true
	})
}

func cmdGet(s *Server, c *client, args [][]byte) error {
	return s.lookup(c, args[1:], func(c *client, vals []int64, exist []bool) { c.writeValue(vals[0], exist[0]) })
}

func cmdMGet(s *Server, c *client, args [][]byte) error {
	return s.lookup(c, args[1:], func(c *client, vals []int64, exist []bool) {
		c.writeArray(len(vals))
		for i, v := range vals {
			c.writeValue(v, exist[i])
		}
	})
}

func cmdExists(s *Server, c *client, args [][]byte) error {
	return s.lookup(c, args[1:], func(c *client, vals []int64, exist []bool) {
		c.writeInt(len(slices.DeleteFunc(exist, func(ok bool) bool { return !ok })))
	})
}

func cmdType(s *Server, c *client, args [][]byte) error {
	return s.lookup(c, args[1:], func(c *client, vals []int64, exist []bool) {
		c.writeString(map[bool]string{true: "string", false: "none"}[exist[0]])
	})
}

func cmdStrlen(s *Server, c *client, args [][]byte) error {
	return s.lookup(c, args[1:], func(c *client, vals []int64, exist []bool) {
		n := 0
		if exist[0] {
			n = len(strconv.AppendInt(c.lower[:0], vals[0], 10))
		}
		c.writeInt(n)
	})
}

// cmdTTL is TTL and PTTL: sequences never expire.
func cmdTTL(s *Server, c *client, args [][]byte) error {
	return s.lookup(c, args[1:], func(c *client, vals []int64, exist []bool) {
		c.writeInt(map[bool]int{true: -1, false: -2}[exist[0]])
	})
}

// lookup has reply answer with the values of keys in this server's
// table, and whether each exists: inside EXEC, as the transaction's
// INCRs left them.
func (s *Server) lookup(c *client, keys [][]byte, reply func(c *client, vals []int64, exist []bool)) error {
	seq, err := s.sequences()
	if err != nil {
		return err
	}
	vals, exist := make([]int64, len(keys)), make([]bool, len(keys))
	for i, k := range keys {
		vals[i], exist[i] = c.value(seq, k)
	}
	reply(c, vals, exist)
	return nil
}

// value is key's value on this server: inside EXEC, as the transaction's
// INCRs so far left it.
func (c *client) value(seq *sequence.Table, key []byte) (int64, bool) {
	if c.inExec {
		if v, ok := c.txSeq.last(key); ok {
			return v, true
		}
	}
	return seq.Get(string(key))
}

// writeValue writes a value as GET replies: a bulk string, or nil.
func (c *client) writeValue(v int64, ok bool) {
	if !ok {
		c.writeNull()
		return
	}
	c.Out = redcon.AppendBulk(c.Out, strconv.AppendInt(c.lower[:0], v, 10))
}

// cmdSet is SET key value [NX|XX]: the write is durable before the
// reply (see set). Redis's other options set an expiry or read the old
// value, as GETSET does: refused.
func cmdSet(s *Server, c *client, args [][]byte) error {
	mode := sequence.Always
	for _, opt := range args[3:] {
		switch o := keyword(opt); {
		case o == "nx" && mode != sequence.IfOld: // twice is once, as in Redis
			mode = sequence.IfNew
		case o == "xx" && mode != sequence.IfNew:
			mode = sequence.IfOld
		case o == "ex" || o == "px" || o == "exat" || o == "pxat" || o == "keepttl" || o == "get":
			return replyerr.Errorf("SET ... %s is refused: sequences never expire, and SET only goes up (idserver never reuses a number)", strings.ToUpper(o))
		default:
			return errSyntax
		}
	}
	return s.set(c, args[1], args[2], mode, false)
}

func cmdSetNX(s *Server, c *client, args [][]byte) error {
	return s.set(c, args[1], args[2], sequence.IfNew, true)
}

// setOK is the reply of a SET (SETNX if setNX) that set its key.
func setOK(setNX bool) string {
	if setNX {
		return ":1\r\n"
	}
	return "+OK\r\n"
}

// writeSetReply writes the reply of a SET (SETNX if setNX) that set its
// key, or whose condition was not met: OK or nil, 1 or 0.
func (c *client) writeSetReply(set, setNX bool) {
	switch {
	case set:
		c.Out = append(c.Out, setOK(setNX)...)
	case setNX:
		c.writeInt(0)
	default:
		c.writeNull()
	}
}

// notMet reports whether err is SET's NX or XX not met: a nil reply (0
// for SETNX), as in Redis.
func notMet(err error) bool {
	return errors.Is(err, sequence.ErrExists) || errors.Is(err, sequence.ErrMissing)
}

// set stores value as key's value under mode, and replies once it is
// durable: the SET is queued for the table's writer, which writes the
// SETs queued together in one write, and its reply, written now as if it
// succeeds, is held with the batch's until that write ended
// (settleHeld puts it right if it failed). The SETs pipelined behind it
// run meanwhile and join the same write. Where a take or a SET of the
// key is under way, it waits for it off the loop (setLater).
func (s *Server) set(c *client, key, value []byte, mode sequence.SetMode, setNX bool) error {
	seq, err := s.sequences()
	if err != nil {
		return err
	}
	v, ok := parseInt(value)
	if !ok {
		return replyerr.New(replyerr.ERR, "value is not an integer or out of range (a sequence holds an integer)")
	}
	p, err := seq.TrySet(key, v, mode)
	switch {
	case err == nil:
		s.touches.touch(key)
		at := len(c.Out)
		c.writeSetReply(true, setNX)
		cmd := "set"
		if setNX {
			cmd = "setnx"
		}
		c.hold(seq, p, cmd, at)
	case notMet(err):
		c.writeSetReply(false, setNX)
	case errors.Is(err, sequence.ErrWouldWait), errors.Is(err, sequence.ErrNotServed): // Set waits for it
		c.setLater(seq, string(key), v, mode, setNX)
	default:
		return err
	}
	return nil
}

// setLater is set's wait, off the loop, for a take or SET of the key
// under way: then Table.Set writes it as TrySet would have.
func (c *client) setLater(seq *sequence.Table, key string, v int64, mode sequence.SetMode, setNX bool) {
	set := false
	c.later(waiting{
		off: func() error {
			err := seq.Set(key, v, mode)
			set = err == nil
			if set {
				c.touches.touch([]byte(key))
			}
			if notMet(err) {
				return nil
			}
			return err
		},
		then: func(c *client, err error) error {
			if err == nil {
				c.writeSetReply(set, setNX)
			}
			return err
		},
	})
}
