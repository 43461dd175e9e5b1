package respserver

import (
	"slices"
	"strings"
	"sync/atomic"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/replyerr"
	"github.com/idserver/idserver/respserver/internal/conns"
	"github.com/idserver/idserver/stats"
)

// command is one entry of the command table: how dispatch runs it and how
// COMMAND, COMMAND DOCS and HELP describe it.
type command struct {
	name string // lower case; "client|kill" for a subcommand
	// arity as Redis counts it: the number of arguments including the
	// name (and the subcommand's); negative means at least -arity.
	arity int
	flags []string // Redis's command flags, as COMMAND lists them
	// tips are Redis 7's command tips, exactly as redis-server gives
	// them for a command of that name, in its order: cluster clients
	// that read them (go-redis's dynamic resolver) fan DBSIZE, KEYS and
	// PING out to every node, sum what DBSIZE answers and split MGET by
	// slot. The refused writes carry none: they take no key here and are
	// refused alike on every node, and a client splitting DEL by its
	// multi_shard tip would find no key and fail before the server says
	// why (go-redis: "multi-shard command del has no key arguments").
	tips []string
	// acl is the ACL categories Redis gives the command beside those its
	// flags and group imply (aclCategories): "dangerous", "keyspace".
	acl []string
	// run runs a command that finishes on the loop: it writes its
	// reply, or returns the error reply to send. start runs one that
	// may finish off the loop instead: it also returns what is left of
	// it (later). A command has one of them (a container neither).
	run   func(s *Server, c *client, args [][]byte) error
	start func(s *Server, c *client, args [][]byte) (later, error)
	subs  []*command // for a container command such as CLIENT
	doc   doc

	// takes is what a call takes from the generator and the sequences,
	// for EXEC, which takes a whole transaction's in one step before it
	// runs it, and for the INCRs pipelined behind one that waits, which
	// are prepared to wait together; nil for none.
	takes func(s *Server, args [][]byte) take
	// redact is which arguments MONITOR hides (passwords); nil for none.
	redact func(args [][]byte) span

	keys keyPositions
	// keyFlags are the flags of its key spec, as Redis 7's COMMAND
	// gives them: set in the table where Redis's differ from what
	// keySpecFlags derives (roKey, SETNX's), else derived.
	keyFlags []string
	noAuth   bool // runs before AUTH: the flag no_auth
	noMulti  bool // refused inside MULTI: the flag no_multi
	// protected: refused unless enable-debug-command lets the client run
	// it, after the arity check and before AUTH's and MULTI's, as
	// Redis's CMD_PROTECTED (DEBUG): inside MULTI it discards the
	// transaction.
	protected bool
	control   bool // runs at once inside MULTI instead of being queued
	// setup marks what client libraries send on connect before their
	// ready check (AUTH, HELLO, SELECT, CLIENT SETNAME and SETINFO):
	// it does not count as the connection's first command (see greet).
	setup bool
	// noMonitor keeps it out of MONITOR's stream: the flag admin, as
	// in Redis.
	noMonitor bool
	// besideDeferred: it may run while the replies pipelined before it
	// are deferred (SETs being written, first values of keys whose
	// existence is not durable yet): it reads nothing they change, or
	// the sequences' table has it wait for them, or defers its reply
	// too. Any other runs once they settled (behindDeferred), so that a
	// GET, an EXISTS or a WATCH pipelined after them sees them done, as
	// in Redis.
	besideDeferred bool
	// unforwarded, if set, refuses the command when its keys' owner is
	// another server (Options.Owner) outside MULTI (WATCH).
	unforwarded error
	aclCats     []string // every ACL category, "@read", in Redis's order
	bySub       map[string]*command
	id          int // its figures' index in Server.calls
}

// calls are a server's figures of one command (each server its own: a
// test runs several in one process).
type calls struct {
	latency stats.Latency // of the calls that ran, until their reply
	// busy is the time the calls ran on their event loop, ns: not their
	// waits off it (for the disk, etcd, the clock), as Redis's usec
	// counts the time its commands ran.
	busy atomic.Uint64
	// rejected counts the calls refused before they ran (arity, NOAUTH,
	// refused inside MULTI), failed those that ran and replied with an
	// error, as Redis's rejected_calls and failed_calls.
	rejected, failed atomic.Uint64
}

// calls are cmd's figures on s.
func (s *Server) calls(cmd *command) *calls { return &s.callStats[cmd.id] }

// take is what one call of a command takes: IDs, and values of a
// sequence.
type take struct {
	ids int64  // IDs it issues
	key []byte // the sequence whose values it takes; nil for none
	n   int64  // how many values; 0 when the call will fail (a bad increment)
}

// keyPositions are where a command's keys are, as COMMAND INFO tells
// them: the first, the last (-1: every argument from the first on), and
// the step between them; zeros for a command without keys.
type keyPositions struct{ first, last, step int }

// doc is what COMMAND DOCS tells about a command.
type doc struct {
	summary    string
	since      string // the Redis or idserver version that added it
	group      string
	complexity string
	args       []arg
}

// arg is one argument of a command as COMMAND DOCS describes it.
type arg struct {
	name  string
	typ   string // string, integer, unix-time, pure-token, oneof, block, pattern, key
	token string // the literal word before it, if any
	flags []string
	args  []arg // of a oneof or block
}

// Shorthands for the table.
var (
	optional = []string{"optional"}
	multiple = []string{"multiple"}
	optMulti = []string{"optional", "multiple"}

	nondeterministic      = []string{"nondeterministic_output"}
	nondeterministicOrder = []string{"nondeterministic_output_order"}
)

func token(t string) arg { return arg{name: strings.ToLower(t), typ: "pure-token", token: t} }

// oneOf is an argument that is exactly one of the tokens.
func oneOf(name string, flags []string, tokens ...string) arg {
	a := arg{name: name, typ: "oneof", flags: flags}
	for _, t := range tokens {
		a.args = append(a.args, token(t))
	}
	return a
}

// idserverSince is the idserver version that added the ID commands.
const idserverSince = "1.0.0"

// table lists every command idserver answers. It is filled in init
// because some commands (COMMAND, CLIENT HELP) read it.
var table []*command

// commands indexes table by lower-case name, for dispatch.
var commands map[string]*command

// numCommands is how many commands and subcommands there are.
var numCommands int

// longestName is the length of the longest name of a command or
// subcommand ("client|no-evict").
var longestName int

func init() {
	table = slices.Concat(idCommands, publicIDCommands, seqCommands, refusedCommands, scriptCommands, connectionCommands, transactionCommands, serverCommands, clusterCommands, []*command{monitorCommand})
	commands = map[string]*command{}
	for _, cmd := range table {
		index(cmd)
		commands[cmd.name] = cmd
	}
}

// notServed are Redis's common commands for other data types and for
// persistence, which idserver has no counterpart for, each with the hint
// its reply adds. They stay unknown commands, in COMMAND too: the reply
// begins as Redis's "ERR unknown command '<name>'", which clients and
// tools match on, and the hint follows.
var notServed = func() map[string]string {
	served := "idserver serves IDs and counters (GETID, MGETID, INCR, INCRBY, GET, SET)"
	hints := map[string][]string{
		served + "; it has no lists": {"lpush", "rpush", "lpushx", "rpushx", "lpop", "rpop", "lrange", "llen", "lindex", "lset",
			"lrem", "ltrim", "linsert", "lpos", "lmove", "rpoplpush", "lmpop", "blpop", "brpop", "brpoplpush", "blmove", "blmpop"},
		served + "; it has no hashes": {"hset", "hsetnx", "hmset", "hget", "hmget", "hgetall", "hdel", "hexists", "hincrby",
			"hincrbyfloat", "hkeys", "hvals", "hlen", "hstrlen", "hscan", "hrandfield"},
		served + "; it has no sets": {"sadd", "srem", "smembers", "sismember", "smismember", "scard", "spop", "srandmember",
			"smove", "sinter", "sintercard", "sinterstore", "sunion", "sunionstore", "sdiff", "sdiffstore", "sscan"},
		served + "; it has no sorted sets": {"zadd", "zrem", "zincrby", "zscore", "zmscore", "zcard", "zcount", "zlexcount",
			"zrange", "zrangestore", "zrangebyscore", "zrangebylex", "zrevrange", "zrevrangebyscore", "zrevrangebylex", "zrank",
			"zrevrank", "zpopmin", "zpopmax", "bzpopmin", "bzpopmax", "zmpop", "bzmpop", "zremrangebyrank", "zremrangebyscore",
			"zremrangebylex", "zunion", "zunionstore", "zinter", "zinterstore", "zintercard", "zdiff", "zdiffstore", "zrandmember", "zscan"},
		served + "; it has no streams": {"xadd", "xread", "xreadgroup", "xrange", "xrevrange", "xlen", "xdel", "xtrim", "xgroup",
			"xack", "xpending", "xclaim", "xautoclaim", "xinfo", "xsetid"},
		"there is nothing to save: idserver's state is durable on every write; to back it up, copy the files in dir (CONFIG GET dir)": {
			"save", "bgsave", "bgrewriteaof", "lastsave"},
	}
	byName := map[string]string{}
	for hint, names := range hints {
		for _, name := range names {
			byName[name] = hint
		}
	}
	return byName
}()

// index derives the fields the table does not spell out.
func index(cmd *command) {
	cmd.id = numCommands
	numCommands++
	longestName = max(longestName, len(cmd.name))
	for i, a := range cmd.doc.args {
		if a.typ == "key" {
			cmd.keys = keyPositions{i + 1, i + 1, 1}
			if slices.Contains(a.flags, "multiple") {
				cmd.keys.last = -1
			}
			break
		}
	}
	if cmd.keys.first > 0 && cmd.keyFlags == nil {
		cmd.keyFlags = keySpecFlags(cmd)
	}
	cmd.aclCats = aclCategories(cmd)
	cmd.noAuth = slices.Contains(cmd.flags, "no_auth")
	cmd.noMulti = slices.Contains(cmd.flags, "no_multi")
	cmd.noMonitor = slices.Contains(cmd.flags, "admin")
	if len(cmd.subs) == 0 {
		return
	}
	cmd.bySub = map[string]*command{}
	for _, sub := range cmd.subs {
		index(sub)
		cmd.bySub[sub.name[strings.IndexByte(sub.name, '|')+1:]] = sub
	}
}

// roKey is the key spec flags of the commands that only test a key's
// existence or metadata and read no value (EXISTS, TYPE, TOUCH, STRLEN,
// WATCH), as Redis 7 gives them.
var roKey = []string{"RO"}

// keySpecFlags are the flags of cmd's key spec where the table does not
// give them: RW access update for a write and RO access for a read, as
// Redis 7's. Cluster clients route by the key spec's positions; the
// flags tell a reader what the command does to the key.
func keySpecFlags(cmd *command) []string {
	if slices.Contains(cmd.flags, "write") {
		return []string{"RW", "access", "update"}
	}
	return []string{"RO", "access"}
}

// aclOrder is Redis's ACL categories, in the order COMMAND lists them.
var aclOrder = []string{"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
	"hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking", "dangerous", "connection",
	"transaction", "scripting"}

// groupACL is the ACL category of the commands of a group (in Redis,
// each command's own file names it).
var groupACL = map[string]string{"string": "string", "generic": "keyspace", "connection": "connection", "transactions": "transaction"}

// aclCategories derives cmd's ACL categories as Redis does
// (setImplicitACLCategories): write gives @write, readonly @read, admin
// @admin and @dangerous, fast @fast and anything else @slow; its group's
// category, unless it is a container without a call of its own (CLIENT,
// CONFIG: only @slow, as in Redis); and those of cmd.acl.
func aclCategories(cmd *command) []string {
	has := map[string]bool{}
	for _, cat := range cmd.acl {
		has[cat] = true
	}
	if cat, ok := groupACL[cmd.doc.group]; ok && (cmd.callable() || len(cmd.subs) == 0) {
		has[cat] = true
	}
	for flag, cats := range map[string][]string{"write": {"write"}, "readonly": {"read"}, "admin": {"admin", "dangerous"}, "fast": {"fast"}} {
		if slices.Contains(cmd.flags, flag) {
			for _, cat := range cats {
				has[cat] = true
			}
		}
	}
	has["slow"] = !has["fast"]
	var cats []string
	for _, cat := range aclOrder {
		if has[cat] {
			cats = append(cats, "@"+cat)
		}
	}
	return cats
}

// commandFor is the command args names: note, the entry a look ahead
// found for it, if any, else looked up.
func (c *client) commandFor(args [][]byte, note any) (*command, error) {
	if cmd, ok := note.(*command); ok {
		return cmd, nil
	}
	return c.findCommand(args)
}

// findCommand finds the command args names, and its subcommand for a
// container command, and checks the arity, as Redis does before running
// or queuing a command. A command of the wrong arity is returned with the
// error.
func (c *client) findCommand(args [][]byte) (*command, error) {
	name := args[0]
	if len(name) > len(c.lower) {
		return nil, errUnknown(args, "")
	}
	lower := c.lower[:len(name)]
	for i, ch := range name {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		lower[i] = ch
	}
	cmd, ok := commands[string(lower)] // no allocation: the compiler sees the lookup
	if !ok {
		return nil, errUnknown(args, notServed[string(lower)])
	}
	if cmd.bySub != nil && len(args) > 1 {
		sub, ok := cmd.bySub[keyword(args[1])]
		if !ok {
			return nil, errSubcommand(args[1], cmd.name)
		}
		cmd = sub
	}
	if cmd.arity > 0 && len(args) != cmd.arity || cmd.arity < 0 && len(args) < -cmd.arity {
		return cmd, errArity(cmd.name)
	}
	return cmd, nil
}

// dispatch runs one command, appending its reply, or its error reply, to
// c.Out, and returns it (nil if it did not run) and what is left of it.
// Inside MULTI, it queues the command instead. note is the command's
// entry if a look ahead found it (prepareAhead): it is not looked up
// again.
func (s *Server) dispatch(c *client, args [][]byte, note any) (*command, later) {
	cmd, err := c.commandFor(args, note)
	if err == nil && c.deferred.any() && !cmd.besideDeferred {
		return nil, behindDeferred
	}
	if err == nil && cmd.protected && !s.debugAllowed(c) {
		err = errDebugNotAllowed
	}
	if err == nil && !c.authed && !cmd.noAuth {
		err = errNoAuth
	}
	if err == nil && s.opts.Slots != nil { // after AUTH, before MULTI queues it, as in Redis
		err = s.route(c, cmd, args)
	}
	var to string // the owner it goes to (Options.Owner), "" for here
	if err == nil && s.opts.Owner != nil {
		to, err = s.routeOwner(c, cmd, args)
	}
	switch {
	case err != nil && cmd == execCommand:
		s.reject(c, cmd, c.abortTransaction(err))
		return nil, later{}
	case c.tx != nil && !(err == nil && cmd.control):
		if err := s.enqueue(c, cmd, args, err); err != nil {
			s.reject(c, cmd, err)
		}
		return nil, later{}
	case err != nil: // MONITOR shows no command refused before it ran, as Redis
		s.reject(c, cmd, err)
		return nil, later{}
	}
	if !c.greeted && !cmd.setup {
		s.greet(c, args)
	}
	var l later
	if to != "" && c.tx == nil { // inside MULTI, EXEC forwards the transaction
		l = s.forwardTo(c, to, args)
	} else {
		l, err = cmd.call(s, c, args)
	}
	s.feed(c, cmd, args)
	if l.mode == conns.Block { // observed once it has its reply (finished)
		return cmd, l
	}
	c.batch.add(cmd)
	if err != nil {
		s.fail(c, cmd, err)
	}
	return cmd, l
}

// callable reports whether cmd runs by itself: not a container whose
// subcommands alone run (CLIENT, CONFIG).
func (cmd *command) callable() bool { return cmd.run != nil || cmd.start != nil }

// call runs cmd, by run or start.
func (cmd *command) call(s *Server, c *client, args [][]byte) (later, error) {
	if cmd.start != nil {
		return cmd.start(s, c, args)
	}
	return later{}, cmd.run(s, c, args)
}

// reject sends err, the error reply of a call of cmd refused before it
// ran (cmd nil: an unknown command), and counts it.
func (s *Server) reject(c *client, cmd *command, err error) {
	if cmd != nil {
		s.calls(cmd).rejected.Add(1)
	}
	s.writeError(c, err)
}

// fail sends err, the error reply of a call of cmd that ran, and counts
// it.
func (s *Server) fail(c *client, cmd *command, err error) {
	s.calls(cmd).failed.Add(1)
	s.writeError(c, err)
}

// writeError sends err's error reply and counts it by its code: the one
// place respserver's error replies are written.
func (s *Server) writeError(c *client, err error) {
	if le, ok := err.(*idgen.LeadError); ok { // a flood's refusal, once per request: no value made
		s.errorCodes[replyerr.BUSY].Add(1)
		c.Out = replyerr.AppendText(c.Out, replyerr.BUSY, le)
		return
	}
	re := reply(err)
	s.errorCodes[re.Code].Add(1)
	c.Out = re.Append(c.Out)
}

// Calls returns the figures of every command called: the latencies of
// the calls that ran (each run's, or each batch's), the calls rejected
// and those that failed. INFO commandstats and /metrics read them.
func (s *Server) Calls() []stats.Calls {
	var all []stats.Calls
	var walk func(cmds []*command)
	walk = func(cmds []*command) {
		for _, cmd := range cmds {
			c := s.calls(cmd)
			cs := stats.Calls{Histogram: c.latency.Read(cmd.name), Busy: float64(c.busy.Load()) / 1e9, Rejected: c.rejected.Load(), Failed: c.failed.Load()}
			if cs.Count+cs.Rejected+cs.Failed > 0 {
				all = append(all, cs)
			}
			walk(cmd.subs)
		}
	}
	walk(table)
	return all
}

// ErrorReplies returns how many error replies of each code were sent
// (those the framing sent included), in the order of the codes' names:
// every code, those never sent at 0, so that a metric of each exists from
// the start and the first reply of a code is an increase (Redis's
// errorstats, which INFO gives, leaves out codes never sent).
func (s *Server) ErrorReplies() []stats.Count {
	proto := s.conns.Stats().ProtocolErrors
	counts := make([]stats.Count, 0, replyerr.NCodes)
	for code := range replyerr.Code(replyerr.NCodes) {
		n := s.errorCodes[code].Load() + proto[code]
		counts = append(counts, stats.Count{Name: code.String(), N: n})
	}
	slices.SortFunc(counts, func(a, b stats.Count) int { return strings.Compare(a.Name, b.Name) })
	return counts
}
