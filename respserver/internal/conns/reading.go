package conns

import "github.com/panjf2000/gnet/v2"

// Backpressure on input. A client whose command waits off the loop (a new
// key's first write, SET's write, the ID lead bound), or whose batch's
// replies are deferred (Defer), is not read until it runs again, as Redis does
// not read a blocked client: the kernel's socket buffers and TCP's flow
// control hold it back, and what the server holds for it stays one read.
// Reading it all the same would hold, unrun, whatever it pipelines behind
// the wait, up to client-query-buffer-limit, and then close it: a
// redis-cli --pipe of new keys was closed after 31 of them.
//
// gnet v2.10 reads every connection whenever epoll finds it readable, and
// offers no call to stop: stopReading takes the read event off the
// connection in its loop's epoll itself (pollerFD), and startReading puts
// it back. gnet puts it back on its own after it has written out replies
// the socket did not take at once; the one read that then comes is kept
// as any read while waiting is, and the client is stopped again.

// stopReading has c's loop stop reading c, which waits. On c's loop.
func (s *Server[S]) stopReading(c *Conn[S]) {
	if c.paused {
		return
	}
	gc, ok := c.link.(gnet.Conn)
	if !ok { // a Pipe
		return
	}
	if c.pollFD == 0 {
		c.pollFD = pollerFD(gc)
	}
	if c.pollFD < 0 {
		return
	}
	if err := setReadEvents(c.pollFD, gc, false); err != nil {
		s.log.Debug().Err(err).Str("client", c.addr).Msg("cannot stop reading a waiting client: it is read as it waits")
		c.pollFD = -1
		return
	}
	c.paused = true
}

// startReading has c's loop read c again. On c's loop.
func (s *Server[S]) startReading(c *Conn[S]) {
	if !c.paused {
		return
	}
	c.paused = false
	if err := setReadEvents(c.pollFD, c.link.(gnet.Conn), true); err != nil {
		s.log.Debug().Err(err).Str("client", c.addr).Msg("cannot read a client again")
	}
}
