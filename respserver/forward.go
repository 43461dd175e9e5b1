package respserver

import (
	"errors"

	"github.com/idserver/idserver/forward"
	"github.com/idserver/idserver/internal/replyerr"
	"github.com/idserver/idserver/slots"
)

// Forwarding (Options.Owner, cluster-enabled no): a command with keys of
// a slot another server owns goes whole to that owner (forward.Pool)
// and its reply takes its place among the client's replies. The owner
// alone hands out a key's values, so a plain client on any server gets
// the owner's per-key order, as a cluster client does.
//
// The commands of one batch (one read of a client) for one owner go in
// one forward.Call, on one connection, in order: a client's pipeline
// reaches the owner as it sent it. Their replies are deferred
// (conns.Defer) until the Call's replies came, then spliced in at their
// places (settleDeferred), so the client's replies keep its order. The batch's
// commands served here run meanwhile: they touch other keys.
//
// A command whose keys have several owners, or this server and another,
// is refused (-CROSSSLOT), as is a transaction: never partly applied. A
// command that came forwarded is never forwarded again (forward.LibName).

// errCrossOwner is the reply to a command, or a transaction, whose keys
// are of slots of several servers: Redis Cluster's wording, which
// clients match on, and why.
var errCrossOwner = replyerr.New(replyerr.CROSSSLOT, "Keys in request don't hash to the same slot (nor to slots of one server: they would be applied in part)")

// errWatchForwarded refuses WATCH of a key another server owns: the
// transaction it guards would run there, and this server cannot see the
// key change.
var errWatchForwarded = replyerr.New(replyerr.ERR, "WATCH of a key another server owns is not supported here (cluster-enabled no): connect to the key's owner, or use a cluster client")

// errNotOwnerNow is the reply to a forwarded command of a slot this
// server does not own: the sender's view of the owners is behind or
// ahead of this one's, and a second hop could loop.
var errNotOwnerNow = replyerr.New(replyerr.TRYAGAIN, "the key's slot was forwarded here but this server does not own it now; retry shortly")

// ownerOf is where the keys of a call of cmd are served: "" for here,
// else the owner's address, or the error reply (no owner known, keys of
// several owners). "" for a command without keys, or without Owner.
func (s *Server) ownerOf(cmd *command, args [][]byte) (string, error) {
	if s.opts.Owner == nil || cmd.keys.first == 0 {
		return "", nil
	}
	to, first := "", true
	for i := range cmd.keyIndexes(len(args)) {
		addr, self, ok := s.opts.Owner(slots.Of(args[i]))
		switch {
		case !ok:
			return "", errSlotNotServed
		case self:
			addr = ""
		}
		if !first && addr != to {
			return "", errCrossOwner
		}
		to, first = addr, false
	}
	return to, nil
}

// route decides where a call of cmd is served, with Owner set: here
// (""), or the owner to forward it to; or why it is refused.
func (s *Server) routeOwner(c *client, cmd *command, args [][]byte) (string, error) {
	to, err := s.ownerOf(cmd, args)
	switch {
	case err != nil || to == "":
		return "", err
	case c.libName == forward.LibName:
		return "", errNotOwnerNow
	case cmd.unforwarded != nil && c.tx == nil: // inside MULTI, its own error (WATCH's)
		return "", cmd.unforwarded
	}
	return to, nil
}

// txOwner is where c's transaction is served: "" for here, else the one
// owner of every key of its commands; or why it is refused.
func (s *Server) txOwner(c *client, tx *transaction) (string, error) {
	if s.opts.Owner == nil {
		return "", nil
	}
	to, first := "", true
	for _, q := range tx.cmds {
		if q.cmd.keys.first == 0 {
			continue
		}
		addr, err := s.routeOwner(c, q.cmd, tx.args(q, c.execArgs[:0]))
		switch {
		case err != nil:
			return "", err
		case !first && addr != to:
			return "", errCrossOwner
		}
		to, first = addr, false
	}
	if to != "" && len(c.watched) > 0 { // the keys WATCHed are here, the transaction would run there
		return "", errWatchForwarded
	}
	return to, nil
}

// forwardTo sends args to the owner at addr in c's batch, its reply to
// go where c's next reply would, once the batch's deferred replies
// settled: it returns deferredReply.
func (s *Server) forwardTo(c *client, addr string, args [][]byte) later {
	call := c.fwd.call(addr, c.resp3)
	c.fwd.replies = append(c.fwd.replies, fwdReply{at: len(c.Out), call: call, reply: call.Command(args)})
	return deferredReply
}

// forwardTx sends c's transaction whole to the owner at addr, in c's
// batch: MULTI, its commands and EXEC, EXEC's reply relayed, as
// forwardTo's.
func (s *Server) forwardTx(c *client, addr string, tx *transaction) later {
	call := c.fwd.call(addr, c.resp3)
	call.Command([][]byte{[]byte("MULTI")})
	for _, q := range tx.cmds {
		c.execArgs = tx.args(q, c.execArgs[:0])
		call.Command(c.execArgs)
	}
	c.fwd.replies = append(c.fwd.replies, fwdReply{at: len(c.Out), call: call, reply: call.Command([][]byte{[]byte("EXEC")})})
	return deferredReply
}

// fwdBatch is what a client's batch forwards: a Call per owner, and
// where each relayed reply goes in c.Out. Its Calls are made once and
// reused. Between the batch's end and settleDeferred, the goroutine
// running awaitDeferred owns it.
type fwdBatch struct {
	pool    *forward.Pool
	calls   []*forward.Call // this batch's
	spare   []*forward.Call // made before, free
	replies []fwdReply      // in the order the commands came
}

// fwdReply is a relayed reply: the reply of index reply of call goes at
// c.Out[at:].
type fwdReply struct {
	at    int
	call  *forward.Call
	reply int
}

// call is the batch's Call to addr, made or taken from spare.
func (b *fwdBatch) call(addr string, resp3 bool) *forward.Call {
	for _, call := range b.calls {
		if call.Addr == addr && call.RESP3 == resp3 {
			return call
		}
	}
	var call *forward.Call
	if n := len(b.spare); n > 0 {
		call, b.spare = b.spare[n-1], b.spare[:n-1]
		call.Reset(addr, resp3)
	} else {
		call = forward.NewCall(addr, resp3)
	}
	b.calls = append(b.calls, call)
	return call
}

// send sends the batch's Calls, off the loop.
func (b *fwdBatch) send() {
	for _, call := range b.calls {
		b.pool.Send(call)
	}
}

// wait waits for the replies of the batch's Calls, off the loop: bounded
// by the pool's timeouts.
func (b *fwdBatch) wait() {
	for _, call := range b.calls {
		call.Wait()
	}
}

// bytes is what the batch holds, for the client's accounting.
func (b *fwdBatch) bytes() int {
	n := 0
	for _, call := range b.calls {
		n += call.Size()
	}
	return n
}

// done makes the batch's Calls spare again.
func (b *fwdBatch) done() {
	b.spare = append(b.spare, b.calls...)
	clear(b.calls)
	b.calls, b.replies = b.calls[:0], b.replies[:0]
}

// relay appends the reply r stands for to c.Out: the owner's, or why it
// did not come.
func (s *Server) relay(c *client, r fwdReply) {
	if err := r.call.Err(); err != nil {
		s.writeError(c, forwardError(r.call.Addr, err))
		return
	}
	c.Out = append(c.Out, r.call.Reply(r.reply)...)
}

// forwardError is the reply to a command whose owner did not answer:
// -TRYAGAIN, as for a slot being moved, since the owner may be moving or
// starting again.
func forwardError(addr string, err error) error {
	var oe *forward.OwnerError
	if errors.As(err, &oe) {
		return replyerr.New(replyerr.TRYAGAIN, oe.Error())
	}
	return replyerr.Newf(replyerr.TRYAGAIN, "forwarding to the owner %s: %v", addr, err)
}
