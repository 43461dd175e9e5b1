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
	{name: "incr", arity: 2, flags: []string{"write", "denyoom", "fast"}, run: cmdIncr, besideSets: true, takes: takesIncr, doc: doc{
		summary: "Returns the key's next value: 1 for a new key. Values never repeat, through crashes and restarts.",
		since:   "1.0.0", group: "string", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}},
	}},
	{name: "incrby", arity: 3, flags: []string{"write", "denyoom", "fast"}, run: cmdIncrBy, besideSets: true, takes: (*Server).takesIncrBy, doc: doc{
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
	{name: "set", arity: -3, flags: []string{"write", "denyoom", "no_multi"}, run: cmdSet, besideSets: true, doc: doc{
		summary: "Sets the key's value, only upward: the next INCR returns value + 1 (to start above an existing MAX(id)).",
		since:   "1.0.0", group: "string", complexity: "O(1)",
		args: []arg{{name: "key", typ: "key"}, {name: "value", typ: "integer"}, oneOf("condition", optional, "NX", "XX")},
	}},
	{name: "setnx", arity: 3, flags: []string{"write", "denyoom", "fast", "no_multi"}, run: cmdSetNX, besideSets: true, doc: doc{
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

func cmdIncr(s *Server, c *client, args [][]byte) error { return s.incr(c, args[1], 1) }

func cmdIncrBy(s *Server, c *client, args [][]byte) error {
	n, err := s.increment(args[2])
	if err != nil {
		return err
	}
	return s.incr(c, args[1], n)
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

// incr hands out n values of key and replies with the last. Inside EXEC
// they come from the values EXEC took for the whole transaction.
// Otherwise, where the key's segment lacks them, the rest is done off
// the loop (later).
func (s *Server) incr(c *client, key []byte, n int64) error {
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
	v, err := seq.TryIncr(key, n)
	switch {
	case errors.Is(err, sequence.ErrWouldWait):
		s.prepareAhead(c, seq)
		c.incrLater(seq, string(key), n)
		return nil
	case errors.Is(err, sequence.ErrBirthPending):
		c.holdForBirths(seq)
	case err != nil:
		return err
	}
	c.writeInt64(v)
	return nil
}

// seqHeld is what the replies of a batch wait for (conns.Conn.Hold): the
// keys born in it, and its SETs. Its await and then are made once per
// client: a batch holds with no allocation of its own. Between the Hold
// and then, the goroutine running await owns it.
type seqHeld struct {
	seq     *sequence.Table
	births  bool                     // keys were born in the batch
	sets    []heldSet                // its SETs, in order
	err     error                    // why awaiting the last SET ended before its write did
	await   func() error             // c.awaitHeld
	then    func(error)              // settleHeld for c
	waitFor func(args [][]byte) bool // c.waitsForSets
}

// heldSet is a SET of the batch whose write is under way, and where its
// reply is in c.Out: written as if it succeeds, and corrected if not.
type heldSet struct {
	p     sequence.PendingSet
	at    int  // where its reply begins in c.Out
	setNX bool // SETNX: 1 or 0, rather than OK or nil
}

// hold has the batch's replies wait for what c.held lists.
func (c *client) hold(seq *sequence.Table) {
	c.held.seq = seq
	c.Hold(c.held.await, c.held.then, c.held.waitFor)
}

// waitsForSets reports whether the command args must run only once the
// batch's SETs are written: all but those that see no SET under way
// (IDs) or that see it as it is (SET and INCR of its key wait for it;
// the table knows it is under way), so that a GET, an EXISTS or a WATCH
// pipelined after a SET sees it done, as in Redis.
func (c *client) waitsForSets(args [][]byte) bool {
	if len(c.held.sets) == 0 {
		return false
	}
	cmd, err := c.lookup(args)
	return err != nil || !cmd.besideSets
}

// holdForBirths holds the batch's replies until the keys born in it are
// durable (a pipelined INCR's key, prepared ahead, got its first value):
// no client is given a value of a key a crash would forget. The values
// are handed out either way; if the store does not record the keys in
// time, the replies go out all the same (the values are reserved, so
// none repeats) and the failure is counted as the store's.
func (c *client) holdForBirths(seq *sequence.Table) {
	c.held.births = true
	c.hold(seq)
}

// awaitHeld waits, off the loop, for what the batch's replies wait for:
// the keys born in it, and the write of its last SET (the writer writes
// them in order: the others' writes have ended too).
func (c *client) awaitHeld() error {
	if c.held.births {
		c.held.seq.AwaitBirths()
	}
	if n := len(c.held.sets); n > 0 {
		c.held.err = c.held.seq.AwaitSet(c.held.sets[n-1].p)
	}
	return nil
}

// settleHeld, on the loop once awaitHeld returned, puts right the reply
// of each of the batch's SETs that did not succeed (a failed write, or,
// in cluster mode, etcd's refusal), and empties c.held.
func (s *Server) settleHeld(c *client) {
	for i := len(c.held.sets) - 1; i >= 0; i-- { // from the last: the earlier ones' places stay
		h := c.held.sets[i]
		err := c.held.err
		if h.p.Done() {
			err = h.p.Err()
		}
		if err == nil {
			continue
		}
		tail := slices.Clone(c.Out[h.at+len(setOK(h.setNX)):])
		c.Out = c.Out[:h.at]
		if notMet(err) {
			c.writeSetReply(false, h.setNX)
		} else {
			cmd := commands["set"]
			if h.setNX {
				cmd = commands["setnx"]
			}
			s.fail(c, cmd, err)
		}
		c.Out = append(c.Out, tail...)
	}
	clear(c.held.sets)
	c.held.sets, c.held.births, c.held.err = c.held.sets[:0], false, nil
	if cap(c.held.sets) > keepBuf/32 {
		c.held.sets = nil
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

// lookup has reply answer with the values of keys, and whether each
// exists: at once from this server's table, or, when the sequences are
// shared (cluster mode), from etcd, off the loop. Inside EXEC it answers
// at once, as the transaction's INCRs left them on this server.
func (s *Server) lookup(c *client, keys [][]byte, reply func(c *client, vals []int64, exist []bool)) error {
	seq, err := s.sequences()
	if err != nil {
		return err
	}
	if c.inExec || !seq.Shared() {
		vals, exist := make([]int64, len(keys)), make([]bool, len(keys))
		for i, k := range keys {
			vals[i], exist[i] = c.value(seq, k)
		}
		reply(c, vals, exist)
		return nil
	}
	ks := make([]string, len(keys))
	for i, k := range keys {
		ks[i] = string(k)
	}
	var vals []int64
	var exist []bool
	c.later(waiting{
		off: func() error { vals, exist, err = seq.Lookup(ks); return err },
		then: func(c *client, err error) error {
			if err == nil {
				reply(c, vals, exist)
			}
			return err
		},
	})
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
		c.held.sets = append(c.held.sets, heldSet{p: p, at: len(c.Out), setNX: setNX})
		c.writeSetReply(true, setNX)
		c.hold(seq)
	case notMet(err):
		c.writeSetReply(false, setNX)
	case errors.Is(err, sequence.ErrWouldWait):
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
