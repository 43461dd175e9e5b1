package respserver

import (
	"crypto/subtle"

	"github.com/idserver/idserver/internal/replyerr"
)

// connectionCommands are the commands about the connection itself, which
// client libraries send on connect and tools such as redis-cli use.
var connectionCommands = []*command{
	{name: "ping", arity: -1, flags: []string{"fast"}, tips: []string{"request_policy:all_shards", "response_policy:all_succeeded"}, run: cmdPing, doc: doc{
		summary: "Returns the server's liveliness response.", since: "1.0.0", group: "connection", complexity: "O(1)",
		args: []arg{{name: "message", typ: "string", flags: optional}},
	}},
	{name: "echo", arity: 2, flags: []string{"loading", "stale", "fast"}, run: cmdEcho, doc: doc{
		summary: "Returns the given string.", since: "1.0.0", group: "connection", complexity: "O(1)",
		args: []arg{{name: "message", typ: "string"}},
	}},
	{name: "quit", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, run: cmdQuit, control: true, doc: doc{
		summary: "Closes the connection.", since: "1.0.0", group: "connection", complexity: "O(1)",
	}},
	{name: "reset", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, run: cmdReset, control: true, doc: doc{
		summary: "Resets the connection.", since: "6.2.0", group: "connection", complexity: "O(1)",
	}},
	{name: "hello", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, run: cmdHello, setup: true, redact: redactHello, doc: doc{
		summary: "Handshakes with the Redis server.", since: "6.0.0", group: "connection", complexity: "O(1)",
		args: []arg{{name: "arguments", typ: "block", flags: optional, args: []arg{
			{name: "protover", typ: "integer"},
			{name: "username-password", typ: "block", token: "AUTH", flags: optional, args: []arg{{name: "username", typ: "string"}, {name: "password", typ: "string"}}},
			{name: "clientname", typ: "string", token: "SETNAME", flags: optional},
		}}},
	}},
	{name: "auth", arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, run: cmdAuth, setup: true, redact: redactAuth, doc: doc{
		summary: "Authenticates the connection.", since: "1.0.0", group: "connection", complexity: "O(N) where N is the number of passwords defined for the user",
		args: []arg{{name: "username", typ: "string", flags: optional}, {name: "password", typ: "string"}},
	}},
	{name: "select", arity: 2, flags: []string{"loading", "stale", "fast"}, run: cmdSelect, setup: true, doc: doc{
		summary: "Changes the selected database (idserver has only database 0).", since: "1.0.0", group: "connection", complexity: "O(1)",
		args: []arg{{name: "index", typ: "integer"}},
	}},
	clientCommand,
}

func cmdPing(s *Server, c *client, args [][]byte) error {
	switch len(args) {
	case 1:
		c.writeString("PONG")
	case 2:
		c.writeBulk(args[1])
	default:
		return errArity("ping")
	}
	return nil
}

func cmdEcho(s *Server, c *client, args [][]byte) error {
	c.writeBulk(args[1])
	return nil
}

func cmdQuit(s *Server, c *client, args [][]byte) error {
	c.writeString("OK")
	c.Quit() // after the reply
	return nil
}

// cmdReset makes the connection as new, as Redis does: no MONITOR, no
// transaction, no tracking, RESP2, no name, not authenticated if a password is set.
// What the client library announced stays, and with it how GETID replies.
func cmdReset(s *Server, c *client, args [][]byte) error {
	s.unmonitor(c)
	c.mon = nil
	c.tx = nil
	c.unwatch()
	c.track = tracking{}
	c.resp3, c.name = false, ""
	c.setAuthed(s.opts.RequirePass == "")
	c.refreshShown()
	c.writeString("RESET")
	return nil
}

func cmdSelect(s *Server, c *client, args [][]byte) error {
	db, ok := parseInt(args[1])
	switch {
	case !ok:
		return errNotInteger
	case db != 0 && s.opts.Slots != nil:
		return replyerr.New(replyerr.ERR, "SELECT is not allowed in cluster mode")
	case db != 0:
		return replyerr.New(replyerr.ERR, "DB index is out of range")
	}
	c.writeString("OK")
	return nil
}

// checkPass checks a password, and user if not nil, as Redis 7 does with
// only its default user: without requirepass that user has nopass (any
// password will do), though AUTH with a password alone is an error then.
// It compares in constant time so the reply time does not leak how much
// of the password was right.
func (s *Server) checkPass(user, pass []byte) error {
	switch {
	case user != nil && string(user) != "default":
		return errWrongPass
	case s.opts.RequirePass == "" && user == nil:
		return errNoPassword
	case s.opts.RequirePass == "":
		return nil
	case subtle.ConstantTimeCompare(pass, []byte(s.opts.RequirePass)) != 1:
		return errWrongPass
	}
	return nil
}

func cmdAuth(s *Server, c *client, args [][]byte) error {
	var err error
	switch len(args) {
	case 2:
		err = s.checkPass(nil, args[1])
	case 3:
		err = s.checkPass(args[1], args[2])
	default:
		return errSyntax
	}
	if err != nil {
		return err
	}
	c.setAuthed(true)
	c.writeString("OK")
	return nil
}

// cmdHello is HELLO [protover [AUTH user pass] [SETNAME name]].
func cmdHello(s *Server, c *client, args [][]byte) error {
	resp3 := c.resp3
	if len(args) > 1 {
		v, ok := parseInt(args[1])
		if !ok {
			return replyerr.New(replyerr.ERR, "Protocol version is not an integer or out of range")
		}
		if v != 2 && v != 3 {
			return replyerr.New(replyerr.NOPROTO, "unsupported protocol version")
		}
		resp3 = v == 3
	}
	// Each option takes effect as it is read, as in Redis: AUTH then a
	// bad SETNAME leaves the client authenticated, SETNAME then a wrong
	// password named; only the protocol waits for the end.
	defer c.refreshShown()
	for i := 2; i < len(args); i++ {
		switch opt := keyword(args[i]); {
		case opt == "auth" && i+2 < len(args):
			if err := s.checkPass(args[i+1], args[i+2]); err != nil {
				return err
			}
			c.setAuthed(true)
			i += 2
		case opt == "setname" && i+1 < len(args):
			if err := checkClientAttr(args[i+1], "Client names cannot contain spaces, newlines or special characters."); err != nil {
				return err
			}
			c.name = string(args[i+1])
			i++
		default:
			return replyerr.Errorf("Syntax error in HELLO option '%.128s'", args[i])
		}
	}
	if !c.authed {
		return replyerr.New(replyerr.NOAUTH, "HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
	}
	c.resp3 = resp3
	c.writeMap(7)
	c.writeBulkString("server")
	c.writeBulkString("idserver")
	c.writeBulkString("version")
	c.writeBulkString(RedisVersion)
	c.writeBulkString("proto")
	c.writeInt(c.proto())
	c.writeBulkString("id")
	c.writeInt64(c.ID())
	c.writeBulkString("mode")
	c.writeBulkString(s.redisMode())
	c.writeBulkString("role")
	c.writeBulkString("master")
	c.writeBulkString("modules")
	c.writeArray(0)
	return nil
}

// checkClientAttr refuses a client name or library attribute that would
// break CLIENT LIST's space-separated fields, as Redis does.
func checkClientAttr(v []byte, reply string) error {
	for _, ch := range v {
		if ch < '!' || ch > '~' {
			return replyerr.New(replyerr.ERR, reply)
		}
	}
	return nil
}
