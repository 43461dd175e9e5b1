package respserver

import (
	"strings"

	"github.com/idserver/idserver/internal/replyerr"
)

// scriptCommands are Redis's scripting commands, which idserver does not
// serve: a Lua script could read and write sequences in ways their
// promises (only up, never reused) do not survive. Each is answered with
// an error naming what to use instead, and counted (INFO's
// script_calls_refused), so that an operator sees which clients try.
//
// The reply must not begin "ERR unknown command": Redisson takes that
// reply to EVALSHA_RO for a server without it and sends EVALSHA again at
// once, and again, for as long as the caller waits (issue 33). NOSCRIPT
// would make it send SCRIPT LOAD and fail only then. A plain ERR fails
// its call at once; its RIdGenerator still tries again once a second on
// any error (docs/clients.md).
var scriptCommands = func() []*command {
	var cmds []*command
	for _, c := range []struct {
		name  string
		arity int
		since string
	}{
		{"eval", -3, "2.6.0"}, {"evalsha", -3, "2.6.0"}, {"eval_ro", -3, "7.0.0"}, {"evalsha_ro", -3, "7.0.0"},
		{"script", -2, "2.6.0"}, {"function", -2, "7.0.0"}, {"fcall", -3, "7.0.0"}, {"fcall_ro", -3, "7.0.0"},
	} {
		cmds = append(cmds, &command{name: c.name, arity: c.arity, flags: []string{"noscript"}, acl: []string{"scripting"}, run: cmdNoScripts, doc: doc{
			summary: "Refused: idserver runs no scripts; GETID/MGETID for IDs, INCR/INCRBY for counters.",
			since:   c.since, group: "scripting", complexity: "O(1)",
		}})
	}
	return cmds
}()

func cmdNoScripts(s *Server, c *client, args [][]byte) error {
	s.scriptRefusals.Add(1)
	return replyerr.Errorf("idserver does not run scripts (%s): it serves IDs and counters, not Lua; "+
		"use GETID or MGETID for IDs and INCR or INCRBY for counters (Redisson: RAtomicLong, not RIdGenerator or RLock)",
		strings.ToUpper(string(args[0])))
}
