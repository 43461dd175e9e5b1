package respserver

import (
	"errors"
	"fmt"
	"strings"

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

// transaction is what a client queued since MULTI.
type transaction struct {
	cmds  []queued
	ids   int64 // the IDs its commands will issue
	size  int   // the bytes it holds, held to the hard output limit
	dirty bool  // a command was refused: EXEC discards the transaction
}

// queued is one command of a transaction, with its own copy of the
// arguments: the parser's are reused.
type queued struct {
	cmd  *command
	args [][]byte
}

// queuedOverhead is what a queued command is counted for beyond its
// arguments, so that a flood of tiny commands is bounded too: each one
// adds a reply to EXEC's.
const queuedOverhead = 64

var errExecAbort = errors.New("EXECABORT Transaction discarded because of previous errors.")

func cmdMulti(s *Server, c *client, args [][]byte) error {
	if c.tx != nil {
		return errors.New("ERR MULTI calls can not be nested")
	}
	c.tx = &transaction{}
	c.queued.Store(0)
	c.publish()
	c.writeString("OK")
	return nil
}

// enqueue queues a command sent inside MULTI, or, if it was refused (err,
// or too big for a transaction), flags the transaction so that EXEC
// discards it, as Redis does.
func (s *Server) enqueue(c *client, cmd *command, args [][]byte, err error) error {
	tx := c.tx
	argsLen := 0
	for _, a := range args {
		argsLen += len(a)
	}
	var ids int64
	size := queuedOverhead + argsLen
	if err == nil { // else cmd may be nil: an unknown command
		ids = s.idsNeeded(cmd, args)
		err = s.fits(tx, ids, size)
	}
	if err != nil {
		tx.dirty = true
		return err
	}
	q := queued{cmd: cmd, args: make([][]byte, len(args))}
	buf := make([]byte, 0, argsLen)
	for i, a := range args {
		buf = append(buf, a...)
		q.args[i] = buf[len(buf)-len(a):]
	}
	tx.cmds = append(tx.cmds, q)
	tx.ids += ids
	tx.size += size
	c.queued.Store(int64(len(tx.cmds)))
	c.writeString("QUEUED")
	return nil
}

// fits checks that a transaction may take one more command, which issues
// ids IDs and holds size bytes: its IDs, like one MGETID's, are at most
// mgetid-max, and what it holds stays within the client's hard output
// limit.
func (s *Server) fits(tx *transaction, ids int64, size int) error {
	if n := tx.ids + ids; n > int64(s.opts.MGetIDMax) {
		return fmt.Errorf("ERR a transaction issues at most %d IDs (mgetid-max), this one would issue %d", s.opts.MGetIDMax, n)
	}
	if hard, n := s.opts.Output.Hard, tx.size+size; hard > 0 && n > hard {
		return fmt.Errorf("ERR the transaction would hold %d bytes, past the client's hard output limit (client-output-buffer-limit)", n)
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
		return errors.New("ERR EXEC without MULTI")
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
		c.wait = waiting{n: tx.ids, then: s.runTransaction}
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
		if err := q.cmd.run(s, c, q.args); err != nil {
			s.errors.Add(1)
			c.writeError(replyText(err))
		}
		s.feed(c, q.cmd, q.args)
	}
	c.inExec, c.txIDs = false, nil
	return nil
}

// abortTransaction answers an EXEC that was refused before it ran, as
// Redis does: the transaction, if any, is discarded.
func (c *client) abortTransaction(err error) error {
	c.endTransaction()
	return fmt.Errorf("EXECABORT Transaction discarded because of: %s", strings.TrimPrefix(err.Error(), "ERR "))
}

// endTransaction leaves MULTI.
func (c *client) endTransaction() {
	c.tx = nil
	c.publish()
}

func cmdDiscard(s *Server, c *client, args [][]byte) error {
	if c.tx == nil {
		return errors.New("ERR DISCARD without MULTI")
	}
	c.endTransaction()
	c.writeString("OK")
	return nil
}

func cmdWatch(s *Server, c *client, args [][]byte) error {
	if c.tx != nil {
		return errors.New("ERR WATCH inside MULTI is not allowed")
	}
	c.writeString("OK")
	return nil
}

func cmdUnwatch(s *Server, c *client, args [][]byte) error {
	c.writeString("OK")
	return nil
}
