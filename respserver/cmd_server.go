package respserver

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"strconv"
	"time"

	"github.com/idserver/idserver/internal/replyerr"
)

// connection is the ACL category of COMMAND and its subcommands, as in
// Redis: a client library reads them on connect.
var connection = []string{"connection"}

// serverCommands are the commands about the server: introspection
// (COMMAND, CONFIG GET, INFO, DBSIZE, SCAN) for clients and redis-cli's
// tools, and the operator's DEBUG and SHUTDOWN. (DBSIZE and SCAN are in
// cmd_keys.go, with KEYS.)
var serverCommands = []*command{
	{name: "command", arity: -1, flags: []string{"loading", "stale"}, tips: nondeterministicOrder, acl: connection, run: cmdCommand, doc: doc{
		summary: "Returns detailed information about all commands.", since: "2.8.13", group: "server", complexity: "O(N) where N is the total number of commands",
	}, subs: []*command{
		{name: "command|count", arity: 2, flags: []string{"loading", "stale"}, acl: connection, run: cmdCommandCount, doc: doc{
			summary: "Returns a count of commands.", since: "2.8.13", group: "server", complexity: "O(1)",
		}},
		{name: "command|docs", arity: -2, flags: []string{"loading", "stale"}, tips: nondeterministicOrder, acl: connection, run: cmdCommandDocs, doc: doc{
			summary: "Returns documentary information about one, multiple or all commands.", since: "7.0.0", group: "server", complexity: "O(N) where N is the number of commands to look up",
			args: []arg{{name: "command-name", typ: "string", flags: optMulti}},
		}},
		{name: "command|help", arity: 2, flags: []string{"loading", "stale"}, acl: connection, run: cmdHelp, doc: doc{
			summary: "Returns helpful text about the different subcommands.", since: "5.0.0", group: "server", complexity: "O(1)",
		}},
		{name: "command|info", arity: -2, flags: []string{"loading", "stale"}, tips: nondeterministicOrder, acl: connection, run: cmdCommandInfo, doc: doc{
			summary: "Returns information about one, multiple or all commands.", since: "2.8.13", group: "server", complexity: "O(N) where N is the number of commands to look up",
			args: []arg{{name: "command-name", typ: "string", flags: optMulti}},
		}},
		{name: "command|list", arity: -2, flags: []string{"loading", "stale"}, tips: nondeterministicOrder, acl: connection, run: cmdCommandList, doc: doc{
			summary: "Returns a list of command names.", since: "7.0.0", group: "server", complexity: "O(N) where N is the total number of commands",
		}},
	}},
	{name: "config", arity: -2, doc: doc{
		summary: "A container for server configuration commands.", since: "2.0.0", group: "server", complexity: "Depends on subcommand.",
	}, subs: []*command{
		{name: "config|get", arity: -3, flags: []string{"admin", "noscript", "loading", "stale"}, run: cmdConfigGet, doc: doc{
			summary: "Returns the effective values of configuration parameters.", since: "2.0.0", group: "server", complexity: "O(N) when N is the number of configuration parameters provided",
			args: []arg{{name: "parameter", typ: "string", flags: multiple}},
		}},
		{name: "config|help", arity: 2, flags: []string{"loading", "stale"}, run: cmdHelp, doc: doc{
			summary: "Returns helpful text about the different subcommands.", since: "5.0.0", group: "server", complexity: "O(1)",
		}},
		{name: "config|set", arity: -4, flags: []string{"admin", "noscript", "loading", "stale"}, tips: []string{"request_policy:all_nodes", "response_policy:all_succeeded"}, run: cmdConfigSet, doc: doc{
			summary: "Sets configuration parameters in-flight (idserver refuses: it reads its configuration at start).", since: "2.0.0", group: "server", complexity: "O(N) when N is the number of configuration parameters provided",
			args: []arg{{name: "data", typ: "block", flags: multiple, args: []arg{{name: "parameter", typ: "string"}, {name: "value", typ: "string"}}}},
		}},
	}},
	{name: "info", arity: -1, flags: []string{"loading", "stale"}, tips: []string{"nondeterministic_output", "request_policy:all_shards", "response_policy:special"}, acl: []string{"dangerous"}, start: cmdInfo, doc: doc{
		summary: "Returns information and statistics about the server.", since: "1.0.0", group: "server", complexity: "O(1)",
		args: []arg{{name: "section", typ: "string", flags: optMulti}},
	}},
	{name: "dbsize", arity: 1, flags: []string{"readonly", "fast"}, tips: []string{"request_policy:all_shards", "response_policy:agg_sum"}, acl: []string{"keyspace"}, start: cmdDBSize, doc: doc{
		summary: "Returns the number of keys in the database: the sequences.", since: "1.0.0", group: "server", complexity: "O(1)",
	}},
	{name: "scan", arity: -2, flags: []string{"readonly"}, tips: []string{"nondeterministic_output", "request_policy:special"}, run: cmdScan, doc: doc{
		summary: "Iterates over the key names in the database: the sequences, each once, new ones last.", since: "2.8.0", group: "generic", complexity: "O(1) for every call. O(N) for a complete iteration.",
		args: []arg{
			{name: "cursor", typ: "integer"},
			{name: "pattern", typ: "pattern", token: "MATCH", flags: optional},
			{name: "count", typ: "integer", token: "COUNT", flags: optional},
			{name: "type", typ: "string", token: "TYPE", flags: optional},
		},
	}},
	{name: "role", arity: 1, flags: []string{"noscript", "loading", "stale", "fast"}, acl: []string{"admin", "dangerous"}, run: cmdRole, doc: doc{
		summary: "Returns the replication role: a primary with no replicas.", since: "2.8.12", group: "server", complexity: "O(1)",
	}},
	{name: "time", arity: 1, flags: []string{"loading", "stale", "fast"}, tips: nondeterministic, run: cmdTime, doc: doc{
		summary: "Returns the server time.", since: "2.6.0", group: "server", complexity: "O(1)",
	}},
	{name: "debug", arity: -2, flags: []string{"admin", "noscript", "loading", "stale"}, protected: true, run: cmdDebug, doc: doc{
		summary: "DEBUG CLOCK-OFFSET [ms]: shows or shifts the generator's clock, for tests; DEBUG HELP lists it (enable-debug-command).", since: idserverSince, group: "server", complexity: "O(1)",
		args: []arg{token("CLOCK-OFFSET"), {name: "ms", typ: "integer", flags: optional}},
	}},
	{name: "shutdown", arity: -1, flags: []string{"admin", "noscript", "loading", "stale", "no_multi", "allow_busy"}, run: cmdShutdown, doc: doc{
		summary: "Stops the server as SIGTERM does, writing the reservation.", since: "1.0.0", group: "server", complexity: "O(1)",
		args: []arg{oneOf("save-selector", optional, "NOSAVE", "SAVE"), token("NOW"), token("FORCE"), token("ABORT")},
	}},
}

func cmdConfigGet(s *Server, c *client, args [][]byte) error {
	// One pattern at a time, its buffers reused; a key matched once is
	// not tried again. Keys come out in the order of s.config.
	var g glob
	hit, hits := make([]bool, len(s.config)), 0
	for _, pat := range args[2:] {
		g.compile(pat, s.configKeyLen)
		for i, kv := range s.config {
			if !hit[i] && g.match(kv[0]) {
				hit[i] = true
				hits++
			}
		}
	}
	c.writeMap(hits)
	for i, kv := range s.config {
		if hit[i] {
			c.writeBulkString(kv[0])
			c.writeBulkString(kv[1])
		}
	}
	return nil
}

// redisConfig is what CONFIG GET answers for Redis's own keys that client
// libraries, GUIs and redis-benchmark read, each with the value that is
// true of idserver.
func redisConfig() [][2]string {
	return [][2]string{
		{"databases", "1"},   // SELECT takes only 0
		{"save", ""},         // no RDB snapshots
		{"appendonly", "no"}, // no AOF: the reservation is idserver's persistence
		{"maxmemory", strconv.FormatInt(memoryLimit(), 10)}, // as INFO memory shows it
		{"maxmemory-policy", "noeviction"},                  // nothing to evict
		{"cluster-enabled", "no"},                           // yes with Options.Slots (conf's cluster-enabled)
		{"notify-keyspace-events", ""},                      // no keyspace notifications
		{"daemonize", "no"},                                 // never forks
		{"logfile", ""},                                     // logs go to standard error
	}
}

func cmdConfigSet(s *Server, c *client, args [][]byte) error {
	return replyerr.Errorf("CONFIG SET is not supported: idserver reads its configuration at start ('%.128s')", args[2])
}

// debugAllowed reports whether enable-debug-command lets this client run
// DEBUG, as Redis 7 decides it.
func (s *Server) debugAllowed(c *client) bool {
	switch s.opts.EnableDebug {
	case DebugAll:
		return true
	case DebugLocal:
		host, _, err := net.SplitHostPort(c.RemoteAddr())
		ip := net.ParseIP(host)
		return err == nil && ip != nil && ip.IsLoopback()
	}
	return false
}

// errDebugNotAllowed is Redis's reply to DEBUG when enable-debug-command
// does not let the client run it.
var errDebugNotAllowed = replyerr.New(replyerr.ERR, `DEBUG command not allowed. If the enable-debug-command option is set to "local", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.`)

// debugHelp is DEBUG HELP's reply, in Redis's words for its own
// subcommands.
var debugHelp = []string{
	helpHeader("debug"),
	"CLOCK-OFFSET [<ms>]",
	"    Show the generator clock's shift, or shift it by <ms> (negative: back), for tests.",
	"HELP",
	"    Prints this help.",
}

// cmdDebug is DEBUG CLOCK-OFFSET [ms]: shift the generator's clock (a
// negative offset steps it back) or show the shift, so the real binary
// can be tested black-box against clock steps; and DEBUG HELP. Who may
// run it is checked before (command.protected).
func cmdDebug(s *Server, c *client, args [][]byte) error {
	switch sub := keyword(args[1]); {
	case sub == "help" && len(args) == 2:
		c.writeStrings(debugHelp)
	case sub == "clock-offset" && len(args) == 2:
		c.writeInt64(s.offset.Load())
	case sub == "clock-offset" && len(args) == 3:
		ms, ok := parseInt(args[2])
		if !ok || ms < -1<<40 || ms > 1<<40 {
			return errNotInteger
		}
		s.offset.Store(ms)
		if g, _ := s.generator(); g != nil {
			g.SetClockOffset(time.Duration(ms) * time.Millisecond)
		}
		s.log.Warn().Int64("offset_ms", ms).Str("client", c.RemoteAddr()).Msg("DEBUG CLOCK-OFFSET: generator clock shifted")
		c.writeString("OK")
	default:
		return errSubcommandSyntax(args)
	}
	return nil
}

// cmdShutdown is SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: the same
// graceful stop as SIGTERM (the reservation is always written). Like
// Redis, it sends no reply; the connection closes. The stop does not
// wait for anything a client could abort (Redis waits for its replicas),
// so ABORT always finds no shutdown in progress, as Redis words it.
func cmdShutdown(s *Server, c *client, args [][]byte) error {
	opts := map[string]bool{}
	for _, a := range args[1:] {
		switch o := keyword(a); o {
		case "nosave", "save", "now", "force", "abort":
			opts[o] = true
		default:
			return errSyntax
		}
	}
	switch {
	case opts["abort"] && len(opts) > 1, opts["nosave"] && opts["save"]:
		return errSyntax
	case opts["abort"]:
		return replyerr.New(replyerr.ERR, "No shutdown in progress.")
	case s.opts.Shutdown == nil || !s.debugAllowed(c) && s.opts.RequirePass == "":
		return replyerr.New(replyerr.ERR, "SHUTDOWN is not allowed: set requirepass, or enable-debug-command yes or local")
	}
	s.log.Info().Str("client", c.RemoteAddr()).Msg("SHUTDOWN requested")
	s.opts.Shutdown()
	return nil
}

// cmdRole answers as a Redis primary with no replicas: "master", its
// replication offset and an empty list of replicas.
func cmdRole(s *Server, c *client, args [][]byte) error {
	c.writeArray(3)
	c.writeBulkString("master")
	c.writeInt(0)
	c.writeArray(0)
	return nil
}

// replicationID is a new random replication ID, 40 hex digits as Redis's.
func replicationID() string {
	b := make([]byte, 20)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

func cmdTime(s *Server, c *client, args [][]byte) error {
	now := time.Now()
	c.writeArray(2)
	c.writeBulkString(strconv.FormatInt(now.Unix(), 10))
	c.writeBulkString(strconv.FormatInt(int64(now.Nanosecond()/1000), 10))
	return nil
}
