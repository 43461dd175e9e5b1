package respserver

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/replyerr"
	"github.com/idserver/idserver/respserver/internal/conns"
	"github.com/idserver/idserver/sequence"
)

// transactionCommands are MULTI, EXEC, DISCARD, WATCH and UNWATCH, with
// Redis's semantics: commands after MULTI are checked and queued, and EXEC
// runs them as one step. The IDs of one transaction are issued in one
// step, so they are consecutive, and so are the values of its INCRs: no
// other client's come between them. EXEC fails (a nil reply) when a key
// WATCHed has changed since, as in Redis.
var transactionCommands = []*command{
	{name: "multi", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, run: cmdMulti, control: true, doc: doc{
		summary: "Starts a transaction.", since: "1.2.0", group: "transactions", complexity: "O(1)",
	}},
	execCommand,
	{name: "discard", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, run: cmdDiscard, control: true, doc: doc{
		summary: "Discards a transaction.", since: "2.0.0", group: "transactions", complexity: "O(N), when N is the number of queued commands",
	}},
	{name: "watch", arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, run: cmdWatch, control: true, keyFlags: roKey, unforwarded: errWatchForwarded, doc: doc{
		summary: "Monitors changes to keys to determine the execution of a transaction.",
		since:   "2.2.0", group: "transactions", complexity: "O(1) for every key.",
		args: []arg{{name: "key", typ: "key", flags: multiple}},
	}},
	{name: "unwatch", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, run: cmdUnwatch, doc: doc{
		summary: "Forgets about watched keys of a transaction.", since: "2.2.0", group: "transactions", complexity: "O(1)",
	}},
}

// execCommand is EXEC, which dispatch knows: refused (an argument
// given), it discards the transaction.
var execCommand = &command{name: "exec", arity: 1, flags: []string{"noscript", "loading", "stale", "skip_slowlog"}, start: cmdExec, control: true, doc: doc{
	summary: "Executes all commands in a transaction.", since: "1.2.0", group: "transactions",
	complexity: "Depends on commands in the transaction",
}}

// transaction is what a client queued since MULTI: each command's
// arguments in one buffer, each after its length, so that what a queued
// command holds is its bytes and a few more, not an allocation per
// argument, and bytes tells exactly what the transaction holds.
type transaction struct {
	cmds  []queued
	raw   []byte // every queued argument, each after its length (a uvarint)
	ids   int64  // the IDs its commands will issue
	incrs bool   // it has INCRs: EXEC takes their values first
	dirty bool   // a command was refused: EXEC discards the transaction
}

// queued is one command of a transaction: its arguments are n in raw from
// at.
type queued struct {
	cmd   *command
	at, n int
}

// bytes is what tx holds, for the client's accounting (handler.Bytes).
func (tx *transaction) bytes() int {
	if tx == nil {
		return 0
	}
	return len(tx.cmds)*int(unsafe.Sizeof(queued{})) + len(tx.raw)
}

// add queues cmd with a copy of args.
func (tx *transaction) add(cmd *command, args [][]byte) {
	tx.cmds = append(tx.cmds, queued{cmd: cmd, at: len(tx.raw), n: len(args)})
	for _, a := range args {
		tx.raw = append(binary.AppendUvarint(tx.raw, uint64(len(a))), a...)
	}
}

// args returns q's arguments in scratch, as slices of tx.raw.
func (tx *transaction) args(q queued, scratch [][]byte) [][]byte {
	raw := tx.raw[q.at:]
	for range q.n {
		n, k := binary.Uvarint(raw)
		scratch = append(scratch, raw[k:k+int(n)])
		raw = raw[k+int(n):]
	}
	return scratch
}

var errExecAbort = replyerr.New(replyerr.EXECABORT, "Transaction discarded because of previous errors.")

func cmdMulti(s *Server, c *client, args [][]byte) error {
	if c.tx != nil {
		return replyerr.New(replyerr.ERR, "MULTI calls can not be nested")
	}
	c.tx = &transaction{}
	c.queued.Store(0)
	c.refreshShown()
	c.writeString("OK")
	return nil
}

// enqueue queues a command sent inside MULTI, or, if it was refused (err,
// or too big for a transaction), flags the transaction so that EXEC
// discards it, as Redis does.
func (s *Server) enqueue(c *client, cmd *command, args [][]byte, err error) error {
	tx := c.tx
	var t take
	if err == nil && cmd.noMulti {
		err = replyerr.New(replyerr.ERR, "Command not allowed inside a transaction")
	}
	if err == nil { // else cmd may be nil: an unknown command
		if cmd.takes != nil {
			t = cmd.takes(s, args)
		}
		err = s.fits(c, t.ids, args)
	}
	if err != nil {
		tx.dirty = true
		return err
	}
	tx.add(cmd, args)
	tx.ids += t.ids
	tx.incrs = tx.incrs || t.key != nil
	c.queued.Store(int64(len(tx.cmds)))
	c.writeString("QUEUED")
	return nil
}

// fits checks that c's transaction may take one more command, which
// issues ids IDs and has args: its IDs, like one MGETID's, are at most
// mgetid-max, and what the client holds with it stays within its hard
// output limit (client-output-buffer-limit).
func (s *Server) fits(c *client, ids int64, args [][]byte) error {
	if n := c.tx.ids + ids; n > int64(s.opts.MGetIDMax) {
		return replyerr.Errorf("a transaction issues at most %d IDs (mgetid-max), this one would issue %d", s.opts.MGetIDMax, n)
	}
	size := int(unsafe.Sizeof(queued{}))
	for _, a := range args {
		size += binary.MaxVarintLen64 + len(a)
	}
	if hard, n := s.opts.Output.Hard, c.Bytes()+size; hard > 0 && n > hard {
		return replyerr.Errorf("the transaction would hold %d bytes with the client's other buffers, past its hard output limit (client-output-buffer-limit)", n)
	}
	return nil
}

// cmdExec runs the queued commands, their replies in one array. It takes
// the transaction's IDs and its INCRs' values first, each in one step;
// where that would wait, the whole transaction waits off the loop, as a
// GETID does.
func cmdExec(s *Server, c *client, args [][]byte) (later, error) {
	tx := c.tx
	if tx == nil {
		return later{}, replyerr.New(replyerr.ERR, "EXEC without MULTI")
	}
	// The slots of its commands first, as Redis checks a command's
	// slots before it runs: a transaction whose keys another node
	// serves is discarded with -MOVED (or -CROSSSLOT, -TRYAGAIN).
	if err := s.routeTransaction(c, tx); err != nil {
		c.endTransaction()
		return later{}, err
	}
	to, err := s.txOwner(c, tx)
	switch {
	case tx.dirty:
		c.endTransaction()
		return later{}, errExecAbort
	case err != nil: // nothing of it runs anywhere
		return later{}, c.abortTransaction(err)
	case to != "": // it runs there, whole
		c.endTransaction()
		return s.forwardTx(c, to, tx), nil
	case s.watchedChanged(c):
		c.endTransaction()
		c.writeNullArray()
		return later{}, nil
	}
	r := &txReserve{ids: c.scratchIDs(tx.ids)}
	if tx.incrs {
		r.incrs, r.over = s.overflowing(s.txIncrs(c, tx))
	}
	err = s.reserve(r, noWait)
	if errors.Is(err, idgen.ErrWouldWait) || errors.Is(err, sequence.ErrWouldWait) {
		return offLoop(func() error { return s.reserve(r, mayWait) }, func(c *client, err error) (later, error) {
			defer c.dropScratchIDs()
			return s.runTransaction(c, r, err)
		}), nil
	}
	defer c.dropScratchIDs()
	return s.runTransaction(c, r, err)
}

// txReserve is what EXEC takes for a transaction before running it: its
// IDs, and the values of its INCRs, one want per key.
type txReserve struct {
	ids     []int64
	idsDone bool
	incrs   []sequence.Want
	over    []string // keys whose INCRs would overflow: they take nothing
}

// waitMode is whether taking what a transaction needs may wait.
type waitMode int

const (
	noWait  waitMode = iota // on the loop: ErrWouldWait where it would wait
	mayWait                 // off the loop
)

// reserve takes r: the IDs (once), then the INCRs' values.
func (s *Server) reserve(r *txReserve, w waitMode) error {
	if len(r.ids) > 0 && !r.idsDone {
		next := s.tryNextN
		if w == mayWait {
			next = s.nextN
		}
		if err := next(r.ids); err != nil {
			return err
		}
		r.idsDone = true
	}
	if len(r.incrs) == 0 {
		return nil
	}
	seq, err := s.sequences()
	switch {
	case err != nil:
		return err
	case w == mayWait:
		return seq.IncrAll(r.incrs)
	}
	return seq.TryIncrAll(r.incrs)
}

// txIncrs sums the values tx's INCRs and INCRBYs will take, per key, in
// the order the keys first come. A command that will fail (a bad
// increment) takes none.
func (s *Server) txIncrs(c *client, tx *transaction) []sequence.Want {
	at := map[string]int{}
	var wants []sequence.Want
	for _, q := range tx.cmds {
		if q.cmd.takes == nil {
			continue
		}
		args := tx.args(q, c.execArgs[:0])
		c.execArgs = args
		t := q.cmd.takes(s, args)
		if t.n == 0 {
			continue
		}
		i, ok := at[string(t.key)]
		if !ok {
			i = len(wants)
			at[string(t.key)] = i
			wants = append(wants, sequence.Want{Key: string(t.key)})
		}
		wants[i].N += t.n
	}
	return wants
}

// overflowing takes out of wants the keys whose values would pass the
// largest integer, as this server knows them: their INCRs fail inside
// EXEC, as Redis's do, while the others' run. (Were one key's INCRs to
// pass it only in part, Redis would run the first ones; here all fail.)
func (s *Server) overflowing(wants []sequence.Want) (rest []sequence.Want, over []string) {
	seq, err := s.sequences()
	if err != nil {
		return wants, nil
	}
	return slices.DeleteFunc(wants, func(w sequence.Want) bool {
		v, _, _ := seq.TryGet(w.Key) // one being taken fails in IncrAll
		if v > math.MaxInt64-w.N {
			over = append(over, w.Key)
			return true
		}
		return false
	}), over
}

// txSeq is the values EXEC took for a transaction's INCRs: per key, the
// next one to hand out, or txOverflow. (No key's next value is 0: a
// sequence never goes below 0.)
type txSeq map[string]int64

const txOverflow = 0

// take hands out n values of key and returns the last, or errOverflow.
func (t txSeq) take(key []byte, n int64) (int64, error) {
	v := t[string(key)]
	if v == txOverflow {
		return 0, errOverflow
	}
	t[string(key)] = v + n
	return v + n - 1, nil
}

// last is key's value as the transaction's INCRs so far left it.
func (t txSeq) last(key []byte) (int64, bool) {
	v, ok := t[string(key)]
	return v - 1, ok && v != txOverflow
}

// runTransaction runs c's transaction with what EXEC took for it, or, if
// taking it failed, discards it and returns the error. Commands that
// finish off the loop (KEYS; DBSIZE of a Redis Cluster node) do so
// after the others, and their replies take their places: what it returns
// is that wait (execLater), the zero later if there is none. Inside EXEC
// no command defers its reply: its values and IDs are taken already, and
// SET is refused inside MULTI.
func (s *Server) runTransaction(c *client, r *txReserve, err error) (later, error) {
	tx := c.tx
	c.endTransaction()
	if err != nil {
		return later{}, err
	}
	c.txSeq = nil
	if len(r.incrs)+len(r.over) > 0 {
		c.txSeq = txSeq{}
		for _, w := range r.incrs {
			c.txSeq[w.Key] = w.Last - w.N + 1
		}
		for _, k := range r.over {
			c.txSeq[k] = txOverflow
		}
	}
	c.inExec, c.txIDs = true, r.ids
	var offs execLater
	c.writeArray(len(tx.cmds))
	for _, q := range tx.cmds {
		s.commands.Add(1) // each counts as processed when it runs, as in Redis
		args := tx.args(q, c.execArgs[:0])
		c.execArgs = args
		start := time.Now()
		l, err := q.cmd.call(s, c, args)
		ran := time.Since(start)
		s.calls(q.cmd).busy.Add(uint64(ran))
		if l.mode == conns.Block { // observed once it has its reply
			offs.add(c, l, q.cmd, start)
		} else {
			s.calls(q.cmd).latency.Observe(ran) // a call, as Redis counts those inside EXEC
		}
		if err != nil {
			s.fail(c, q.cmd, err)
		}
		s.feed(c, q.cmd, args)
	}
	c.inExec, c.txIDs, c.txSeq = false, nil, nil
	return offs.later(s, c), nil
}

// execLater is the commands of a transaction that finish off the loop,
// each with where its reply goes among the replies of the others after
// the first of them, which wait with it.
type execLater struct {
	cmds  []execOff
	first int // where in c.Out the replies after the first of them began
}

type execOff struct {
	later
	cmd   *command  // for its figures
	start time.Time // when it began
	at    int       // where its reply goes: the replies after the first before it
	err   error     // its off's
}

// add takes l, the later of cmd, which began at start, to finish with
// the others.
func (l *execLater) add(c *client, w later, cmd *command, start time.Time) {
	if len(l.cmds) == 0 {
		l.first = len(c.Out)
	}
	l.cmds = append(l.cmds, execOff{later: w, cmd: cmd, start: start, at: len(c.Out) - l.first})
}

// later is what finishes the commands of l: their offs in turn off the
// loop, then their replies in their places. The replies before the first
// of them go out meanwhile; those after it wait. The zero later if there
// are none. (A command inside EXEC finishes in one step off the loop:
// EXEC is the one command whose then has a next.)
func (l *execLater) later(s *Server, c *client) later {
	if len(l.cmds) == 0 {
		return later{}
	}
	after := slices.Clone(c.Out[l.first:])
	c.Out = c.Out[:l.first]
	return offLoop(func() error {
		for i := range l.cmds {
			l.cmds[i].err = l.cmds[i].off()
		}
		return nil
	}, func(c *client, _ error) (later, error) {
		for i, w := range l.cmds {
			s.finished(c, w.cmd, w.start, w.then, w.err) // one step: no next (see above)
			end := len(after)
			if i+1 < len(l.cmds) {
				end = l.cmds[i+1].at
			}
			c.Out = append(c.Out, after[w.at:end]...)
		}
		return later{}, nil
	})
}

// abortTransaction answers an EXEC that was refused before it ran, as
// Redis does: the transaction, if any, is discarded.
func (c *client) abortTransaction(err error) error {
	c.endTransaction()
	because := reply(err)
	msg := because.Msg
	if because.Code != replyerr.ERR { // as Redis, which drops only ERR's
		msg = because.Error()
	}
	return replyerr.New(replyerr.EXECABORT, "Transaction discarded because of: "+msg)
}

// endTransaction leaves MULTI, and forgets the keys WATCHed.
func (c *client) endTransaction() {
	c.tx = nil
	c.unwatch()
	c.refreshShown()
}

func cmdDiscard(s *Server, c *client, args [][]byte) error {
	if c.tx == nil {
		return replyerr.New(replyerr.ERR, "DISCARD without MULTI")
	}
	c.endTransaction()
	c.writeString("OK")
	return nil
}

// watchedKey is a key a client WATCHes, its value then, and the writes
// of it counted then (touches). A sequence's value only goes up, so an
// unchanged value, and no write since, means an unchanged key.
type watchedKey struct {
	key     string
	v       int64
	exists  bool
	touches uint64
}

// watchedBytes is what a watched key costs beside its name.
const watchedBytes = int(unsafe.Sizeof(watchedKey{}))

func cmdWatch(s *Server, c *client, args [][]byte) error {
	if c.tx != nil {
		return replyerr.New(replyerr.ERR, "WATCH inside MULTI is not allowed")
	}
	if seq, err := s.sequences(); err == nil {
		for _, key := range args[1:] {
			// A key whose slot is being taken reads as absent: if it
			// exists, that differs from its value, and EXEC fails.
			v, ok, _ := seq.TryGet(string(key))
			c.watched = append(c.watched, watchedKey{string(key), v, ok, s.touches.watch(string(key))})
		}
	}
	c.writeString("OK")
	return nil
}

// watchedChanged reports whether a key c WATCHes changed since, or was
// written (touched), or may have: its slot is being taken.
func (s *Server) watchedChanged(c *client) bool {
	seq, err := s.sequences()
	if err != nil {
		return false
	}
	for _, w := range c.watched {
		if v, ok, err := seq.TryGet(w.key); err != nil || v != w.v || ok != w.exists || s.touches.count(w.key) != w.touches {
			return true
		}
	}
	return false
}

// unwatch forgets the keys c WATCHes.
func (c *client) unwatch() {
	for _, w := range c.watched {
		c.touches.unwatch(w.key)
	}
	c.watched = nil
}

// touches counts the writes of the keys clients WATCH, so that EXEC
// aborts after a write of a watched key that left its value as it was
// (a SET to the value it holds), as Redis's signalModifiedKey has every
// write do. INCR and INCRBY always change the value, which EXEC compares
// too; SET and SETNX touch. Only watched keys are counted: a write of a
// key no one watches costs an atomic load.
type touches struct {
	watches atomic.Int64 // WATCHes of all keys not yet ended; 0: touch returns at once
	mu      sync.Mutex
	keys    map[string]*touched
}

// touched is a watched key's count.
type touched struct {
	watches int    // its WATCHes not yet ended
	n       uint64 // its writes since the first of them
}

// watch counts a WATCH of key, and returns its writes so far.
func (t *touches) watch(key string) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.keys[key]
	if k == nil {
		if t.keys == nil {
			t.keys = map[string]*touched{}
		}
		k = &touched{}
		t.keys[key] = k
	}
	k.watches++
	t.watches.Add(1)
	return k.n
}

// unwatch ends a WATCH of key.
func (t *touches) unwatch(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if k := t.keys[key]; k != nil {
		t.watches.Add(-1)
		if k.watches--; k.watches == 0 {
			delete(t.keys, key)
		}
	}
}

// touch counts a write of key, if it is watched.
func (t *touches) touch(key []byte) {
	if t.watches.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if k := t.keys[string(key)]; k != nil {
		k.n++
	}
}

// count is the writes of key, watched, since the first WATCH of it.
func (t *touches) count(key string) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if k := t.keys[key]; k != nil {
		return k.n
	}
	return 0
}

// empty reports whether no key is watched.
func (t *touches) empty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys) == 0 && t.watches.Load() == 0
}

func cmdUnwatch(s *Server, c *client, args [][]byte) error {
	c.unwatch()
	c.writeString("OK")
	return nil
}
