package respserver

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/redcon"

	"github.com/idserver/idserver/internal/replyerr"
	"github.com/idserver/idserver/respserver/internal/conns"
	"github.com/idserver/idserver/sequence"
)

// The commands whose replies may be deferred (deferred.add counts a
// deferred reply that fails by its command). Their start functions are
// set in init: they refer to these entries.
var (
	incrCommand = &command{name: "incr", arity: 2, flags: []string{"write", "denyoom", "fast"}, besideDeferred: true, takes: takesIncr, doc: doc{
		summary: "Returns the key's next value: 1 for a new key. Values never repeat, through crashes and restarts.",
		since:   "1.0.0", group: "string", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}},
	}}
	incrByCommand = &command{name: "incrby", arity: 3, flags: []string{"write", "denyoom", "fast"}, besideDeferred: true, takes: (*Server).takesIncrBy, doc: doc{
		summary: "Reserves the key's next increment values and returns the last of them (1 <= increment <= seq-max-incrby).",
		since:   "1.0.0", group: "string", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}, {name: "increment", typ: "integer"}},
	}}
	setCommand = &command{name: "set", arity: -3, flags: []string{"write", "denyoom", "no_multi"}, besideDeferred: true, doc: doc{
		summary: "Sets the key's value, only upward: the next INCR returns value + 1 (to start above an existing MAX(id)).",
		since:   "1.0.0", group: "string", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}, {name: "value", typ: "integer"}, oneOf("condition", optional, "NX", "XX")},
	}}
	setNXCommand = &command{name: "setnx", arity: 3, flags: []string{"write", "denyoom", "fast", "no_multi"}, besideDeferred: true, keyFlags: []string{"OW", "insert"}, doc: doc{
		summary: "Sets the value of a new key; 1 if it was set, 0 if the key exists.",
		since:   "1.0.0", group: "string", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}, {name: "value", typ: "integer"}},
	}}
)

func init() {
	incrCommand.start, incrByCommand.start = cmdIncr, cmdIncrBy
	setCommand.start, setNXCommand.start = cmdSet, cmdSetNX
}

// seqCommands are the sequences: Redis's commands and replies for
// counters (INCR, INCRBY, GET, SET, MGET, EXISTS, TYPE, SCAN, KEYS), so
// that code written for Redis counters points here unchanged. A sequence
// never goes back, so the writes that would move one back or remove it
// are refused (refusedCommands).
var seqCommands = []*command{
	incrCommand,
	incrByCommand,
	{name: "get", arity: 2, flags: []string{"readonly", "fast"}, start: cmdGet, doc: doc{
		summary: "Returns the key's value: at least every value handed out (after a restart, the durable mark); nil for a new key.",
		since:   "1.0.0", group: "string", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}},
	}},
	{name: "mget", arity: -2, flags: []string{"readonly", "fast"}, tips: []string{"request_policy:multi_shard"}, start: cmdMGet, doc: doc{
		summary: "Returns the values of the keys, as GET does each.",
		since:   "1.0.0", group: "string", complexity: "O(N) where N is the number of keys to retrieve.",
		args: []arg{{name: "key", typ: "key", flags: multiple}},
	}},
	setCommand,
	setNXCommand,
	{name: "exists", arity: -2, flags: []string{"readonly", "fast"}, tips: []string{"request_policy:multi_shard", "response_policy:agg_sum"}, keyFlags: roKey, start: cmdExists, doc: doc{
		summary: "Returns how many of the keys exist (a key named twice counts twice).",
		since:   "1.0.0", group: "generic", complexity: "O(N) where N is the number of keys to check.",
		args: []arg{{name: "key", typ: "key", flags: multiple}},
	}},
	{name: "type", arity: 2, flags: []string{"readonly", "fast"}, keyFlags: roKey, start: cmdType, doc: doc{
		summary: "Returns the type of the key: string for a sequence, none otherwise.",
		since:   "1.0.0", group: "generic", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}},
	}},
	{name: "strlen", arity: 2, flags: []string{"readonly", "fast"}, keyFlags: roKey, start: cmdStrlen, doc: doc{
		summary: "Returns the length of the key's value as a string of digits (redis-cli --bigkeys reads it); 0 for a new key.",
		since:   "2.2.0", group: "string", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}},
	}},
	{name: "ttl", arity: 2, flags: []string{"readonly", "fast"}, tips: nondeterministic, start: cmdTTL, doc: doc{
		summary: "Returns -1 for a sequence (they never expire), -2 for a key that does not exist.",
		since:   "1.0.0", group: "generic", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}},
	}},
	{name: "pttl", arity: 2, flags: []string{"readonly", "fast"}, tips: nondeterministic, start: cmdTTL, doc: doc{
		summary: "Returns -1 for a sequence (they never expire), -2 for a key that does not exist.",
		since:   "2.6.0", group: "generic", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}},
	}},
	{name: "touch", arity: -2, flags: []string{"readonly", "fast"}, tips: []string{"request_policy:multi_shard", "response_policy:agg_sum"}, keyFlags: roKey, start: cmdExists, doc: doc{
		summary: "Returns how many of the keys exist (nothing else changes: sequences have no access time).",
		since:   "3.2.1", group: "generic", complexity: "O(N) where N is the number of keys that will be touched.",
		args: []arg{{name: "key", typ: "key", flags: multiple}},
	}},
	{name: "keys", arity: 2, flags: []string{"readonly"}, tips: []string{"request_policy:all_shards", "nondeterministic_output_order"}, acl: []string{"dangerous"}, start: cmdKeys, doc: doc{
		summary: "Returns the keys that match the pattern (it examines every key: prefer SCAN).",
		since:   "1.0.0", group: "generic", complexity: "O(N) with N being the number of keys in the database",
		args: []arg{{name: "pattern", typ: "pattern"}},
	}},
}

// refusedCommands are Redis's writes that would move a sequence back or
// remove it: idserver never reuses a number, so they are refused, each
// with a reply that says so.
var refusedCommands = slices.Concat(
	refused(nil, "del", "unlink", "decr", "decrby", "incrbyfloat", "getset", "getdel", "getex", "setex", "psetex",
		"mset", "msetnx", "append", "setrange", "expire", "pexpire", "expireat", "pexpireat", "persist",
		"rename", "renamenx", "move", "copy"),
	refused([]string{"dangerous"}, "restore", "flushdb", "flushall", "swapdb"), // Redis's ACL category for these
)

// refused is the entries of the refused commands names, of the ACL
// categories acl besides those of their flags.
func refused(acl []string, names ...string) []*command {
	var cmds []*command
	for _, name := range names {
		cmds = append(cmds, &command{name: name, arity: -1, flags: []string{"write"}, acl: acl, run: cmdRefused, doc: doc{
			summary: "Refused: sequences never go back, expire or go away (idserver never reuses a number).",
			since:   idserverSince, group: "generic", complexity: "O(1)",
		}})
	}
	return cmds
}

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

func cmdIncr(s *Server, c *client, args [][]byte) (later, error) {
	return s.incr(c, incrCommand, args[1], 1)
}

func cmdIncrBy(s *Server, c *client, args [][]byte) (later, error) {
	n, err := s.increment(args[2])
	if err != nil {
		return later{}, err
	}
	return s.incr(c, incrByCommand, args[1], n)
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

// incr hands out n values of key for a call of cmd and replies with the
// last: at once, or, for the first values of a key prepared ahead, once
// the table says the reply may go (deferred). Inside EXEC they come from
// the values EXEC took for the whole transaction. Otherwise, where the
// key's segment lacks them, the rest is done off the loop.
func (s *Server) incr(c *client, cmd *command, key []byte, n int64) (later, error) {
	if c.inExec {
		v, err := c.txSeq.take(key, n)
		if err == nil {
			c.writeInt64(v)
		}
		return later{}, err
	}
	seq, err := s.sequences()
	if err != nil {
		return later{}, err
	}
	v, p, err := seq.TryIncr(key, n)
	switch {
	case errors.Is(err, sequence.ErrWouldWait):
		s.prepareAhead(c, seq)
		return incrOffLoop(seq, string(key), n), nil
	case errors.Is(err, sequence.ErrNotServed): // its slot is being taken: Incr waits for it
		return incrOffLoop(seq, string(key), n), nil
	case err != nil:
		return later{}, err
	}
	at := len(c.Out)
	c.writeInt64(v)
	if p.Ready() {
		return later{}, nil
	}
	return c.deferred.add(seq, p, cmd, setReplyNone, at, len(c.Out)), nil
}

// deferred is the replies of a batch that may go only once the
// sequences' table says so (sequence.Pending: a key's existence not yet
// durable, a SET's write), and the forwarded commands' (fwdBatch), with
// where each is in c.Out: written as if it may go, and put right if not.
// Its wait is made once per client: a batch defers with no allocation of
// its own. Between the batch's end and settleDeferred, the goroutine
// running awaitDeferred owns it.
type deferred struct {
	seq     *sequence.Table
	pending []sequence.Pending
	replies []deferredAt // pending's, in order
	errs    []error      // why each may not go, once awaited
	out     []byte       // the buffer settleDeferred copies c.Out into
	wait    conns.Wait   // awaitDeferred, then settleDeferred, for c
}

// deferredAt is where a deferred reply is in c.Out, the command whose
// failure it counts if it may not go, and what it says then if its SET's
// condition was not met.
type deferredAt struct {
	at, n int
	cmd   *command
	set   setReply
}

// add defers the reply of cmd at c.Out[at:end] until p, the table's say
// on it, and returns deferredReply, the command's later.
func (d *deferred) add(seq *sequence.Table, p sequence.Pending, cmd *command, set setReply, at, end int) later {
	d.seq = seq
	d.pending = append(d.pending, p)
	d.replies = append(d.replies, deferredAt{at: at, n: end - at, cmd: cmd, set: set})
	return deferredReply
}

// any reports whether the batch's replies so far are deferred: the
// commands that must see what those did run after (besideDeferred).
func (d *deferred) any() bool { return len(d.pending) > 0 }

// awaitDeferred waits, off the loop, until the table says whether each
// deferred reply may go, and the forwarded commands' replies came.
func (c *client) awaitDeferred() error {
	c.fwd.send()
	d := &c.deferred
	if len(d.pending) > 0 {
		d.errs = slices.Grow(d.errs[:0], len(d.pending))[:len(d.pending)]
		d.seq.Await(d.pending, d.errs)
	}
	c.fwd.wait()
	return nil
}

// settleDeferred, on the loop once awaitDeferred returned, puts right
// each deferred reply that may not go: its values are not sent (they are
// skipped), or its SET did not succeed (a failed write, a condition not
// met); the error reply, or SET's nil, takes its place. The forwarded
// commands' replies go in at their places. c.Out is copied once, into
// c.deferred.out, whose buffer it then takes: a batch settles without an
// allocation once the buffers have grown. Then it empties c.deferred and
// c.fwd.
func (s *Server) settleDeferred(c *client) {
	d := &c.deferred
	from, pos, fwd := c.Out, 0, c.fwd.replies
	c.Out = d.out[:0]
	for i, h := range d.replies {
		for len(fwd) > 0 && fwd[0].at <= h.at { // at one place, the forwarded reply came first
			c.Out = append(c.Out, from[pos:fwd[0].at]...)
			s.relay(c, fwd[0])
			pos, fwd = fwd[0].at, fwd[1:]
		}
		c.Out = append(c.Out, from[pos:h.at]...)
		pos = h.at + h.n
		switch err := d.errs[i]; {
		case err == nil:
			c.Out = append(c.Out, from[h.at:pos]...)
		case notMet(err):
			c.writeSetReply(false, h.set)
		default:
			s.fail(c, h.cmd, err)
		}
	}
	for _, r := range fwd {
		c.Out = append(c.Out, from[pos:r.at]...)
		s.relay(c, r)
		pos = r.at
	}
	c.Out = append(c.Out, from[pos:]...)
	d.out = from[:0]
	if cap(d.out) > keepBuf {
		d.out = nil
	}
	c.fwd.done()
	clear(d.pending)
	clear(d.errs)
	clear(d.replies) // their commands
	d.pending, d.replies, d.errs = d.pending[:0], d.replies[:0], d.errs[:0]
	if cap(d.pending) > keepBuf/32 {
		d.pending, d.replies, d.errs = nil, nil, nil
	}
}

// incrOffLoop is incr's later: Table.Incr waits for the values. (Its own
// function: what its closures share escapes to the heap, and incr's fast
// path must not.)
func incrOffLoop(seq *sequence.Table, key string, n int64) later {
	var v int64
	return offLoop(func() error {
		var err error
		v, err = seq.Incr(key, n)
		return err
	}, func(c *client, err error) (later, error) {
		if err == nil {
			c.writeInt64(v)
		}
		return later{}, err
	})
}

// prepareAhead has seq prepare the values the INCRs pipelined behind a
// waiting one will need, so that they all wait for one write. The
// entries it finds are kept with the commands (conns.Conn.Ahead): they
// are not looked up again when they run.
func (s *Server) prepareAhead(c *client, seq *sequence.Table) {
	c.Ahead(func(args [][]byte) (any, bool) {
		cmd, err := c.findCommand(args)
		if err != nil {
			return nil, true
		}
		if cmd.takes != nil {
			if t := cmd.takes(s, args); t.n > 0 {
				seq.Prepare(t.key, t.n)
			}
		}
		return cmd, true
	})
}

func cmdGet(s *Server, c *client, args [][]byte) (later, error) {
	return s.readKeys(c, args[1:], func(c *client, vals []int64, exist []bool) { c.writeValue(vals[0], exist[0]) })
}

func cmdMGet(s *Server, c *client, args [][]byte) (later, error) {
	return s.readKeys(c, args[1:], func(c *client, vals []int64, exist []bool) {
		c.writeArray(len(vals))
		for i, v := range vals {
			c.writeValue(v, exist[i])
		}
	})
}

func cmdExists(s *Server, c *client, args [][]byte) (later, error) {
	return s.readKeys(c, args[1:], func(c *client, vals []int64, exist []bool) {
		c.writeInt(len(slices.DeleteFunc(exist, func(ok bool) bool { return !ok })))
	})
}

func cmdType(s *Server, c *client, args [][]byte) (later, error) {
	return s.readKeys(c, args[1:], func(c *client, vals []int64, exist []bool) {
		c.writeString(map[bool]string{true: "string", false: "none"}[exist[0]])
	})
}

func cmdStrlen(s *Server, c *client, args [][]byte) (later, error) {
	return s.readKeys(c, args[1:], func(c *client, vals []int64, exist []bool) {
		n := 0
		if exist[0] {
			n = len(strconv.AppendInt(c.lower[:0], vals[0], 10))
		}
		c.writeInt(n)
	})
}

// cmdTTL is TTL and PTTL: sequences never expire.
func cmdTTL(s *Server, c *client, args [][]byte) (later, error) {
	return s.readKeys(c, args[1:], func(c *client, vals []int64, exist []bool) {
		c.writeInt(map[bool]int{true: -1, false: -2}[exist[0]])
	})
}

// readKeys has reply answer with the values of keys in this server's
// table, and whether each exists: inside EXEC, as the transaction's
// INCRs left them. A key whose slot is being taken (a Redis Cluster over
// etcd) is read once the take ends, off the loop, as INCR waits for it:
// until then this server may not hold its last owner's value.
func (s *Server) readKeys(c *client, keys [][]byte, reply func(c *client, vals []int64, exist []bool)) (later, error) {
	seq, err := s.sequences()
	if err != nil {
		return later{}, err
	}
	vals, exist := c.read.scratch(len(keys))
	defer c.read.drop()
	var taken []int // the keys of slots being taken
	for i, k := range keys {
		vals[i], exist[i], err = c.value(seq, k)
		if errors.Is(err, sequence.ErrNotServed) {
			taken = append(taken, i)
		}
	}
	if taken == nil {
		reply(c, vals, exist)
		return later{}, nil
	}
	// Their own: inside EXEC, each command read off the loop has its reply
	// written after the others ran.
	vals, exist = slices.Clone(vals), slices.Clone(exist)
	wait := make([]string, len(taken)) // keys' bytes are the loop's
	for j, i := range taken {
		wait[j] = string(keys[i])
	}
	return offLoop(func() error {
		for j, i := range taken {
			var err error
			if vals[i], exist[i], err = seq.Get(wait[j]); err != nil {
				return err
			}
		}
		return nil
	}, func(c *client, err error) (later, error) {
		if err == nil {
			reply(c, vals, exist)
		}
		return later{}, err
	}), nil
}

// keyReads is a client's scratch space for the keys a command reads, kept
// between its requests: GET allocates nothing.
type keyReads struct {
	vals  []int64
	exist []bool
}

// scratch returns room for n keys' values and whether each exists.
func (r *keyReads) scratch(n int) ([]int64, []bool) {
	if cap(r.vals) < n {
		r.vals, r.exist = make([]int64, n), make([]bool, n)
	}
	return r.vals[:n], r.exist[:n]
}

// drop lets a scratch space grown for a rare big request go.
func (r *keyReads) drop() {
	if cap(r.vals) > keepBuf/8 {
		r.vals, r.exist = nil, nil
	}
}

// value is key's value on this server: inside EXEC, as the transaction's
// INCRs so far left it; or ErrNotServed while its slot is being taken.
func (c *client) value(seq *sequence.Table, key []byte) (int64, bool, error) {
	if c.inExec {
		if v, ok := c.txSeq.last(key); ok {
			return v, true, nil
		}
	}
	return seq.TryGet(string(key))
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
func cmdSet(s *Server, c *client, args [][]byte) (later, error) {
	mode := sequence.Always
	for _, opt := range args[3:] {
		switch o := keyword(opt); {
		case o == "nx" && mode != sequence.IfOld: // twice is once, as in Redis
			mode = sequence.IfNew
		case o == "xx" && mode != sequence.IfNew:
			mode = sequence.IfOld
		case o == "ex" || o == "px" || o == "exat" || o == "pxat" || o == "keepttl" || o == "get":
			return later{}, replyerr.Errorf("SET ... %s is refused: sequences never expire, and SET only goes up (idserver never reuses a number)", strings.ToUpper(o))
		default:
			return later{}, errSyntax
		}
	}
	return s.set(c, setCommand, args[1], args[2], mode, setReplyOK)
}

func cmdSetNX(s *Server, c *client, args [][]byte) (later, error) {
	return s.set(c, setNXCommand, args[1], args[2], sequence.IfNew, setReplyNX)
}

// setReply is how a command that sets a key replies: SET's OK or nil,
// SETNX's 1 or 0.
type setReply uint8

const (
	setReplyNone setReply = iota // not a set
	setReplyOK                   // SET: OK, or nil if its condition was not met
	setReplyNX                   // SETNX: 1, or 0 if the key exists
)

// writeSetReply writes r's reply for a key set, or a condition not met.
func (c *client) writeSetReply(set bool, r setReply) {
	switch {
	case set && r == setReplyNX:
		c.writeInt(1)
	case set:
		c.Out = append(c.Out, "+OK\r\n"...)
	case r == setReplyNX:
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

// set stores value as key's value under mode for a call of cmd, which
// replies as r says, once it is durable: the SET is queued for the
// table's writer, which writes the SETs queued together in one write, and
// its reply, written now as if it succeeds, is deferred with the batch's
// until that write ended (settleDeferred puts it right if it failed). The
// SETs pipelined behind it run meanwhile and join the same write. Where
// a take or a SET of the key is under way, it waits for it off the loop
// (setOffLoop).
func (s *Server) set(c *client, cmd *command, key, value []byte, mode sequence.SetMode, r setReply) (later, error) {
	seq, err := s.sequences()
	if err != nil {
		return later{}, err
	}
	v, ok := parseInt(value)
	if !ok {
		return later{}, replyerr.New(replyerr.ERR, "value is not an integer or out of range (a sequence holds an integer)")
	}
	p, err := seq.TrySet(key, v, mode)
	switch {
	case err == nil:
		s.touches.touch(key)
		at := len(c.Out)
		c.writeSetReply(true, r)
		return c.deferred.add(seq, p, cmd, r, at, len(c.Out)), nil
	case notMet(err):
		c.writeSetReply(false, r)
	case errors.Is(err, sequence.ErrWouldWait), errors.Is(err, sequence.ErrNotServed): // Set waits for it
		return c.setOffLoop(seq, string(key), v, mode, r), nil
	default:
		return later{}, err
	}
	return later{}, nil
}

// setOffLoop is set's later, for a take or SET of the key under way:
// Table.Set writes it as TrySet would have.
func (c *client) setOffLoop(seq *sequence.Table, key string, v int64, mode sequence.SetMode, r setReply) later {
	set := false
	return offLoop(func() error {
		err := seq.Set(key, v, mode)
		set = err == nil
		if set {
			c.touches.touch([]byte(key))
		}
		if notMet(err) {
			return nil
		}
		return err
	}, func(c *client, err error) (later, error) {
		if err == nil {
			c.writeSetReply(set, r)
		}
		return later{}, err
	})
}
