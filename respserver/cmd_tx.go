package respserver

import (
	"encoding/binary"
	"errors"
	"strings"
	"unsafe"

	"github.com/idserver/idserver/idgen"
)

// transactionCommands are MULTI, EXEC, DISCARD, WATCH and UNWATCH, with
// Redis's semantics: commands after MULTI are checked and queued, and EXEC
// runs them as one step. The IDs of one transaction are issued in one
// step, so they are consecutive. idserver has no keys, so nothing a
// client WATCHes ever changes, and EXEC never fails for it.
var transactionCommands = []*command{
	{name: "multi", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, run: cmdMulti, control: true, doc: doc{
		summary: "Starts a transaction.", since: "1.2.0", group: "transactions", complexity: "O(1)",
	}},
	{name: "exec", arity: 1, flags: []string{"noscript", "loading", "stale", "skip_slowlog"}, run: cmdExec, control: true, doc: doc{
		summary: "Executes all commands in a transaction.", since: "1.2.0", group: "transactions",
		complexity: "Depends on commands in the transaction",
	}},
	{name: "discard", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, run: cmdDiscard, control: true, doc: doc{
		summary: "Discards a transaction.", since: "2.0.0", group: "transactions", complexity: "O(N), when N is the number of queued commands",
	}},
	{name: "watch", arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, run: cmdWatch, control: true, doc: doc{
		summary: "Monitors changes to keys to determine the execution of a transaction (idserver has no keys: nothing watched ever changes).",
		since:   "2.2.0", group: "transactions", complexity: "O(1) for every key.",
		args: []arg{{name: "key", typ: "key", flags: multiple}},
	}},
	{name: "unwatch", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, run: cmdUnwatch, doc: doc{
		summary: "Forgets about watched keys of a transaction.", since: "2.2.0", group: "transactions", complexity: "O(1)",
	}},
}

// transaction is what a client queued since MULTI: each command's
// arguments in one buffer, each after its length, so that what a queued
// command holds is its bytes and a few more, not an allocation per
// argument, and bytes tells exactly what the transaction holds.
type transaction struct {
	cmds  []queued
	raw   []byte // every queued argument, each after its length (a uvarint)
	ids   int64  // the IDs its commands will issue
	dirty bool   // a command was refused: EXEC discards the transaction
}

// queued is one command of a transaction: its arguments are n in raw from
// at.
type queued struct {
	cmd   *command
	at, n int
}

// bytes is what tx holds, for the client's accounting (handler.Holds).
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

var errExecAbort = errReply("EXECABORT", "Transaction discarded because of previous errors.")

func cmdMulti(s *Server, c *client, args [][]byte) error {
	if c.tx != nil {
		return errReply("ERR", "MULTI calls can not be nested")
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
	var ids int64
	if err == nil { // else cmd may be nil: an unknown command
		ids = s.idsNeeded(cmd, args)
		err = s.fits(c, ids, args)
	}
	if err != nil {
		tx.dirty = true
		return err
	}
	tx.add(cmd, args)
	tx.ids += ids
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
		return errReplyf("ERR", "a transaction issues at most %d IDs (mgetid-max), this one would issue %d", s.opts.MGetIDMax, n)
	}
	size := int(unsafe.Sizeof(queued{}))
	for _, a := range args {
		size += binary.MaxVarintLen64 + len(a)
	}
	if hard, n := s.opts.Output.Hard, c.Holds()+size; hard > 0 && n > hard {
		return errReplyf("ERR", "the transaction would hold %d bytes with the client's other buffers, past its hard output limit (client-output-buffer-limit)", n)
	}
	return nil
}

// cmdExec runs the queued commands, their replies in one array. It takes
// the transaction's IDs first, in one step; where that would wait, the
// whole transaction waits off the loop, as a GETID does.
func cmdExec(s *Server, c *client, args [][]byte) error {
	tx := c.tx
	switch {
	case tx == nil:
		return errReply("ERR", "EXEC without MULTI")
	case tx.dirty:
		c.endTransaction()
		return errExecAbort
	}
	if tx.ids == 0 {
		return s.runTransaction(c, nil, nil)
	}
	ids := c.scratchIDs(tx.ids)
	err := s.tryNextN(ids)
	if errors.Is(err, idgen.ErrWouldWait) {
		c.wait = waiting{
			off: func() error { return s.nextN(ids) },
			then: func(c *client, err error) error {
				defer c.dropScratchIDs()
				return s.runTransaction(c, ids, err)
			},
		}
		return errWait
	}
	if err := s.runTransaction(c, ids, err); err != nil {
		return err
	}
	c.dropScratchIDs()
	return nil
}

// runTransaction runs c's transaction with the IDs taken for it, or, if
// taking them failed, discards it and returns the error.
func (s *Server) runTransaction(c *client, ids []int64, err error) error {
	tx := c.tx
	c.endTransaction()
	if err != nil {
		return err
	}
	c.inExec, c.txIDs = true, ids
	c.writeArray(len(tx.cmds))
	for _, q := range tx.cmds {
		s.commands.Add(1) // each counts as processed when it runs, as in Redis
		args := tx.args(q, c.execArgs[:0])
		c.execArgs = args
		if err := q.cmd.run(s, c, args); err != nil {
			s.errors.Add(1)
			c.writeError(replyText(err))
		}
		s.feed(c, q.cmd, args)
	}
	c.inExec, c.txIDs = false, nil
	return nil
}

// abortTransaction answers an EXEC that was refused before it ran, as
// Redis does: the transaction, if any, is discarded.
func (c *client) abortTransaction(err error) error {
	c.endTransaction()
	return errReplyf("EXECABORT", "Transaction discarded because of: %s", strings.TrimPrefix(replyText(err), "ERR "))
}

// endTransaction leaves MULTI.
func (c *client) endTransaction() {
	c.tx = nil
	c.refreshShown()
}

func cmdDiscard(s *Server, c *client, args [][]byte) error {
	if c.tx == nil {
		return errReply("ERR", "DISCARD without MULTI")
	}
	c.endTransaction()
	c.writeString("OK")
	return nil
}

func cmdWatch(s *Server, c *client, args [][]byte) error {
	if c.tx != nil {
		return errReply("ERR", "WATCH inside MULTI is not allowed")
	}
	c.writeString("OK")
	return nil
}

func cmdUnwatch(s *Server, c *client, args [][]byte) error {
	c.writeString("OK")
	return nil
}
