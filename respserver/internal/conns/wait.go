package conns

import (
	"unsafe"

	"github.com/idserver/idserver/internal/replyerr"
)

// Wait is what a command leaves to finish off the loop: the Handler's
// Command returns it, and the connection alone keeps it until it ended.
// The zero Wait: the command finished, its reply is in c.Out.
type Wait struct {
	// Off runs on a goroutine of its own. It may block; it owns what it
	// touches of the session until it returns.
	Off func() error
	// Then runs on the loop once Off returned, with Off's error: it
	// writes the reply, or puts the deferred ones right in c.Out. A
	// Block's may return a next Block, for a command that finishes in
	// more than one step off the loop (EXEC); a Defer's returns the zero
	// Wait.
	Then func(err error) Wait
	Mode Mode
}

// Mode is what waits for a Wait.
type Mode uint8

const (
	// Done: nothing; the command finished on the loop.
	Done Mode = iota
	// Block: the command's reply is Then's; the connection's later
	// commands run after it, in order.
	Block
	// Defer: the replies of the batch running now are written only once
	// Off returned and Then ran, before any later command's reply: for
	// replies that may go only once something is durable. The batch's
	// later commands run meanwhile (their replies wait too), but for one
	// that returns Behind. A second Defer in the batch replaces the
	// first: its functions must cover both.
	Defer
	// Behind: the command did not run, and runs again, first, once the
	// batch's Defer ended: it must see what the deferred commands did.
	Behind
)

// waitDeferred has c's deferred replies wait: for c.deferred alone, or,
// if a command of the batch waits too (c.busy), for c.deferred and then
// that command's Wait, whose reply comes after theirs.
func (s *Server[S]) waitDeferred(c *Conn[S]) {
	d := c.deferred
	c.deferred = Wait{}
	if !c.busy {
		c.busy, c.wait = true, Wait{Off: d.Off, Then: d.Then, Mode: Block}
		s.blocked.Add(1)
		return
	}
	w := c.wait
	var err error
	c.wait.Off = func() error { err = d.Off(); return w.Off() }
	c.wait.Then = func(e error) Wait { d.Then(err); return w.Then(e) }
}

// aheadMax bounds the commands Ahead keeps, aheadMaxArgs their
// arguments: its work, and what it holds, stay bounded however deep the
// pipeline.
const (
	aheadMax     = 1024
	aheadMaxArgs = 16 << 10
)

// ahead is the commands Ahead split, from the front of what is left to
// run, each with the handler's note: the pass that runs them takes their
// arguments from here (nextCommand), so that each command is split, and
// looked at by the handler, once. Its slices are reused.
type ahead struct {
	cmds    []aheadCmd
	spans   []span   // the arguments of cmds, as spans of their bytes
	head    int      // cmds[head] is the next to run
	running bool     // the command running now is cmds[head]
	peek    Splitter // Ahead's own: the running command's args stay valid
	args    [][]byte // scratch: a command's arguments, rebuilt from spans
}

// aheadCmd is one command Ahead split: its bytes, its arguments (first,
// n in ahead.spans; n < 0: an inline command, split again when it runs,
// its arguments being unescaped copies), and the handler's note.
type aheadCmd struct {
	size     int
	first, n int
	note     any
}

// span is where an argument is in its command's bytes.
type span struct{ off, n int }

// nextCommand splits the first command off buf: from what Ahead kept of
// it, if it did, with the handler's note, else with c's splitter.
func (c *Conn[S]) nextCommand(buf []byte) (args [][]byte, note any, rest []byte, err *replyerr.Error) {
	a := &c.ahead
	a.running = a.head < len(a.cmds)
	if !a.running {
		args, rest, err = c.split.Next(buf)
		return args, nil, rest, err
	}
	cmd := a.cmds[a.head]
	if cmd.n < 0 {
		args, rest, err = c.split.Next(buf)
		return args, cmd.note, rest, err
	}
	a.args = a.args[:0]
	for _, sp := range a.spans[cmd.first : cmd.first+cmd.n] {
		a.args = append(a.args, buf[sp.off:sp.off+sp.n])
	}
	return a.args, cmd.note, buf[cmd.size:], nil
}

// consumed drops the command that ran from what Ahead kept, if it was
// there.
func (a *ahead) consumed() {
	if !a.running {
		return
	}
	a.running = false
	a.head++
	if a.head == len(a.cmds) {
		a.reset()
	}
}

// reset forgets what Ahead kept: the bytes it describes are gone.
func (a *ahead) reset() {
	clear(a.cmds) // the notes
	a.cmds, a.spans, a.head, a.running = a.cmds[:0], a.spans[:0], 0, false
	if cap(a.cmds) > aheadMax || cap(a.spans) > aheadMaxArgs {
		a.cmds, a.spans = nil, nil
	}
}

// compact drops the commands that ran from the front of what Ahead kept,
// so that it keeps at most aheadMax however long the pipeline.
func (a *ahead) compact() {
	if a.head == 0 {
		return
	}
	keep := a.cmds[a.head:]
	base := len(a.spans)
	if len(keep) > 0 {
		base = keep[0].first
	}
	a.spans = a.spans[:copy(a.spans, a.spans[base:])]
	for i := range keep {
		keep[i].first -= base
	}
	n := copy(a.cmds, keep)
	clear(a.cmds[n:])
	a.cmds, a.head = a.cmds[:n], 0
}

// bytes is what a keeps, for the accountant: its contents, as
// Conn.Bytes counts.
func (a *ahead) bytes() int {
	return (len(a.cmds)-a.head)*int(unsafe.Sizeof(aheadCmd{})) + len(a.spans)*int(unsafe.Sizeof(span{}))
}

// Ahead calls fn with the arguments of each command the client sent
// after the one running (those already read, up to aheadMax and
// aheadMaxArgs), that no
// Ahead saw before, until fn returns false; fn's note is kept with the
// command and given to the handler's Command when it runs. It consumes
// nothing: they run in turn as usual, each split once. A command that
// will wait calls it to prepare what the commands behind it will need,
// so that a pipeline waits once rather than once for each. On c's loop,
// from Handler.Command.
func (c *Conn[S]) Ahead(fn func(args [][]byte) (note any, more bool)) {
	a := &c.ahead
	a.compact()
	buf := c.next
	kept := a.cmds[a.head:] // the running one, and those behind it kept already
	if a.running {
		kept = kept[1:]
	}
	for _, k := range kept {
		buf = buf[k.size:]
	}
	for len(a.cmds)-a.head < aheadMax && len(buf) > 0 {
		args, rest, err := a.peek.Next(buf)
		if err != nil {
			return
		}
		cmd := aheadCmd{size: len(buf) - len(rest), first: len(a.spans), n: -1}
		if len(a.spans)+len(args) > aheadMaxArgs {
			return
		}
		if buf[0] == '*' { // redcon's args are slices of buf
			cmd.n = len(args)
			for _, arg := range args {
				a.spans = append(a.spans, span{cap(buf) - cap(arg), len(arg)})
			}
		}
		buf = rest
		more := true
		if len(args) > 0 {
			cmd.note, more = fn(args)
		}
		a.cmds = append(a.cmds, cmd)
		if !more {
			return
		}
	}
}
