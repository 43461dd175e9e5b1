package respserver

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idserver/idserver/idgen"
)

// command is one entry of the command table.
type command struct {
	// arity as Redis counts it: the number of arguments including the
	// name; negative means at least -arity.
	arity int
	// noAuth commands run before AUTH.
	noAuth bool
	run    func(s *Server, c *client, args [][]byte) error
}

// commands is the dispatch table, by lower-case name. It is filled in init
// because handlers such as COMMAND read it.
var commands map[string]command

func init() {
	commands = map[string]command{
		"getid":    {arity: 1, run: cmdGetID},
		"mgetid":   {arity: 2, run: cmdMGetID},
		"decodeid": {arity: 2, run: cmdDecodeID},
		"ping":     {arity: -1, run: cmdPing},
		"echo":     {arity: 2, run: cmdEcho},
		"quit":     {arity: -1, noAuth: true, run: cmdQuit},
		"hello":    {arity: -1, noAuth: true, run: cmdHello},
		"auth":     {arity: -2, noAuth: true, run: cmdAuth},
		"select":   {arity: 2, run: cmdSelect},
		"client":   {arity: -2, run: cmdClient},
		"command":  {arity: -1, run: cmdCommand},
		"config":   {arity: -2, run: cmdConfig},
		"info":     {arity: -1, run: cmdInfo},
		"time":     {arity: 1, run: cmdTime},
		"debug":    {arity: -2, run: cmdDebug},
		"shutdown": {arity: -1, run: cmdShutdown},
	}
}

// Replies whose wording clients and users know from Redis.
var (
	errNotInteger = errors.New("ERR value is not an integer or out of range")
	errNoAuth     = errors.New("NOAUTH Authentication required.")
	errWrongPass  = errors.New("WRONGPASS invalid username-password pair or user is disabled.")
	errNoPassword = errors.New("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
)

func errArity(name string) error {
	return fmt.Errorf("ERR wrong number of arguments for '%s' command", name)
}

func errSubcommand(sub []byte, cmd string) error {
	return fmt.Errorf("ERR unknown subcommand '%.128s'. Try %s HELP.", sub, strings.ToUpper(cmd))
}

// errUnknown words the reply as Redis 7 does, quoting what the client sent.
func errUnknown(args [][]byte) error {
	var b strings.Builder
	fmt.Fprintf(&b, "ERR unknown command '%.128s', with args beginning with: ", args[0])
	for _, a := range args[1:] {
		if b.Len() > 256 {
			break
		}
		fmt.Fprintf(&b, "'%.128s' ", a)
	}
	return errors.New(b.String())
}

// dispatch runs one command, appending its reply to c.out; an error is
// the error reply to send.
func (s *Server) dispatch(c *client, args [][]byte) error {
	name := args[0]
	if len(name) > len(c.lower) {
		return errUnknown(args)
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
		return errUnknown(args)
	}
	if !c.authed && !cmd.noAuth {
		return errNoAuth
	}
	if cmd.arity > 0 && len(args) != cmd.arity || cmd.arity < 0 && len(args) < -cmd.arity {
		return errArity(string(lower))
	}
	return cmd.run(s, c, args)
}

// replyText turns an error into the text of an error reply: a Redis error
// code first, and no CR or LF, which would break the framing.
func replyText(err error) string {
	var le *idgen.LeadError
	var msg string
	switch {
	case errors.As(err, &le):
		msg = "BUSY " + le.Error()
	case errors.Is(err, idgen.ErrNotReserved):
		msg = "BUSY " + strings.TrimPrefix(err.Error(), "idgen: ")
	case errors.Is(err, idgen.ErrClosed):
		msg = "ERR server is shutting down"
	default:
		msg = strings.TrimPrefix(err.Error(), "idgen: ")
		if i := strings.IndexByte(msg, ' '); i <= 0 || strings.ToUpper(msg[:i]) != msg[:i] {
			msg = "ERR " + msg
		}
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, msg)
}

// parseInt parses a decimal int64 as Redis does: optional minus, digits,
// nothing else. It does not allocate, unlike strconv on a []byte.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + uint64(ch-'0')
	}
	switch {
	case !neg && n <= 1<<63-1:
		return int64(n), true
	case neg && n <= 1<<63:
		return int64(-n), true
	}
	return 0, false
}

// cmdGetID and cmdMGetID never wait on the loop: where the generator
// would, Server.finish issues their IDs instead.
func cmdGetID(s *Server, c *client, args [][]byte) error {
	return s.issue(c, 1, false, false)
}

func cmdMGetID(s *Server, c *client, args [][]byte) error {
	n, ok := parseInt(args[1])
	if !ok {
		return errNotInteger
	}
	if n < 1 || n > int64(s.opts.MGetIDMax) {
		return fmt.Errorf("ERR count %d out of range, must be 1..%d (mgetid-max)", n, s.opts.MGetIDMax)
	}
	return s.issue(c, n, true, false)
}

// issue issues n IDs and appends the reply: an integer for GETID, an
// array of bulk strings for MGETID (multi). Unless mayWait, where the
// generator would wait it returns errWait and keeps the command in c for
// finish.
func (s *Server) issue(c *client, n int64, multi, mayWait bool) error {
	if int64(cap(c.ids)) < n {
		c.ids = make([]int64, n)
	}
	ids := c.ids[:n]
	var err error
	if mayWait {
		err = s.gen.NextN(ids)
	} else {
		err = s.gen.TryNextN(ids)
	}
	if errors.Is(err, idgen.ErrWouldWait) {
		c.waitN, c.multi = n, multi
		return errWait
	}
	if err != nil {
		return err
	}
	if multi {
		c.appendIDs(ids)
	} else {
		c.writeInt64(ids[0])
	}
	if cap(c.ids) > keepBuf/8 {
		c.ids = nil
	}
	return nil
}

// appendIDs appends MGETID's reply: the IDs as bulk strings.
func (c *client) appendIDs(ids []int64) {
	b := append(c.out, '*')
	b = strconv.AppendInt(b, int64(len(ids)), 10)
	b = append(b, '\r', '\n')
	var f bulkIDs
	for _, id := range ids {
		b = f.append(b, id)
	}
	c.out = b
}

func cmdDecodeID(s *Server, c *client, args [][]byte) error {
	id, ok := parseInt(args[1])
	if !ok {
		return errNotInteger
	}
	p, err := s.gen.Decode(id)
	if err != nil {
		return fmt.Errorf("ERR invalid id: %w", err)
	}
	c.writeMap(5)
	c.writeBulkString("unix-ms")
	c.writeInt64(p.Time.UnixMilli())
	c.writeBulkString("time")
	c.writeBulkString(p.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	c.writeBulkString("server-id")
	c.writeInt64(p.ServerID)
	c.writeBulkString("shard")
	c.writeInt64(p.Shard)
	c.writeBulkString("random")
	c.writeInt64(p.Random)
	return nil
}

// proto is the RESP version the client speaks.
func (c *client) proto() int {
	if c.resp3 {
		return 3
	}
	return 2
}

// writeMap writes the header of a map of n pairs: a map in RESP3, a flat
// array of 2n elements in RESP2, as Redis does.
func (c *client) writeMap(n int) {
	if !c.resp3 {
		c.writeArray(2 * n)
		return
	}
	c.out = append(strconv.AppendInt(append(c.out, '%'), int64(n), 10), '\r', '\n')
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
	c.quit = true // after the reply
	return nil
}

func cmdSelect(s *Server, c *client, args [][]byte) error {
	db, ok := parseInt(args[1])
	switch {
	case !ok:
		return errNotInteger
	case db != 0:
		return errors.New("ERR DB index is out of range")
	}
	c.writeString("OK")
	return nil
}

// checkPass compares in constant time so the reply time does not leak
// how much of the password was right.
func (s *Server) checkPass(user, pass []byte) error {
	if s.opts.RequirePass == "" {
		return errNoPassword
	}
	ok := subtle.ConstantTimeCompare(pass, []byte(s.opts.RequirePass)) == 1
	if !ok || user != nil && string(user) != "default" {
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
		return errArity("auth")
	}
	if err != nil {
		return err
	}
	c.authed = true
	c.writeString("OK")
	return nil
}

// cmdHello is HELLO [protover [AUTH user pass] [SETNAME name]].
func cmdHello(s *Server, c *client, args [][]byte) error {
	resp3 := c.resp3
	if len(args) > 1 {
		v, ok := parseInt(args[1])
		if !ok {
			return errors.New("ERR Protocol version is not an integer or out of range")
		}
		if v != 2 && v != 3 {
			return errors.New("NOPROTO unsupported protocol version")
		}
		resp3 = v == 3
	}
	authed, name := c.authed, c.name
	for i := 2; i < len(args); i++ {
		switch opt := strings.ToLower(string(args[i])); {
		case opt == "auth" && i+2 < len(args):
			if err := s.checkPass(args[i+1], args[i+2]); err != nil {
				return err
			}
			authed = true
			i += 2
		case opt == "setname" && i+1 < len(args):
			name = string(args[i+1])
			i++
		default:
			return fmt.Errorf("ERR Syntax error in HELLO option '%.128s'", args[i])
		}
	}
	if !authed {
		return errors.New("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
	}
	c.resp3, c.authed, c.name = resp3, authed, name
	c.writeMap(7)
	c.writeBulkString("server")
	c.writeBulkString("idserver")
	c.writeBulkString("version")
	c.writeBulkString(RedisVersion)
	c.writeBulkString("proto")
	c.writeInt(c.proto())
	c.writeBulkString("id")
	c.writeInt64(c.id)
	c.writeBulkString("mode")
	c.writeBulkString("standalone")
	c.writeBulkString("role")
	c.writeBulkString("master")
	c.writeBulkString("modules")
	c.writeArray(0)
	return nil
}

// clientArity is the arity of each CLIENT subcommand idserver answers.
var clientArity = map[string]int{"setinfo": 4, "setname": 3, "getname": 2, "id": 2, "info": 2, "no-evict": 3, "no-touch": 3}

func cmdClient(s *Server, c *client, args [][]byte) error {
	sub := strings.ToLower(string(args[1]))
	n, ok := clientArity[sub]
	if !ok {
		return errSubcommand(args[1], "client")
	}
	if len(args) != n {
		return errArity("client|" + sub)
	}
	switch sub {
	case "setinfo":
		switch strings.ToLower(string(args[2])) {
		case "lib-name", "lib-ver":
		default:
			return fmt.Errorf("ERR Unrecognized option '%.128s'", args[2])
		}
		c.writeString("OK")
	case "setname":
		if strings.ContainsAny(string(args[2]), " \n") {
			return errors.New("ERR Client names cannot contain spaces, newlines or special characters.")
		}
		c.name = string(args[2])
		c.writeString("OK")
	case "getname":
		if c.name == "" {
			c.writeNull()
		} else {
			c.writeBulkString(c.name)
		}
	case "id":
		c.writeInt64(c.id)
	case "info":
		c.writeBulkString(fmt.Sprintf("id=%d addr=%s name=%s resp=%d\n", c.id, c.addr, c.name, c.proto()))
	default: // no-evict, no-touch: nothing to evict or touch here
		c.writeString("OK")
	}
	return nil
}

// cmdCommand answers COMMAND, COMMAND COUNT, COMMAND INFO, COMMAND LIST
// and COMMAND DOCS enough for redis-cli's hints and clients' key routing.
func cmdCommand(s *Server, c *client, args [][]byte) error {
	names := commandNames()
	if len(args) == 1 {
		c.writeArray(len(names))
		for _, n := range names {
			c.writeCommandInfo(n)
		}
		return nil
	}
	switch sub := strings.ToLower(string(args[1])); sub {
	case "count":
		c.writeInt(len(names))
	case "list":
		c.writeArray(len(names))
		for _, n := range names {
			c.writeBulkString(n)
		}
	case "info":
		c.writeArray(len(args) - 2)
		for _, a := range args[2:] {
			if _, ok := commands[strings.ToLower(string(a))]; ok {
				c.writeCommandInfo(strings.ToLower(string(a)))
			} else {
				c.writeNull()
			}
		}
	case "docs":
		c.writeMap(0) // no docs: redis-cli then shows no hints
	default:
		return errSubcommand(args[1], "command")
	}
	return nil
}

func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// writeCommandInfo writes Redis 7's COMMAND entry for name: no command
// here takes a key, so the key positions are 0.
func (c *client) writeCommandInfo(name string) {
	cmd := commands[name]
	c.writeArray(10)
	c.writeBulkString(name)
	c.writeInt(cmd.arity)
	c.writeArray(1)
	if name == "getid" || name == "mgetid" {
		c.writeString("write")
	} else {
		c.writeString("fast")
	}
	c.writeInt(0)
	c.writeInt(0)
	c.writeInt(0)
	for range 4 { // ACL categories, tips, key specs, subcommands
		c.writeArray(0)
	}
}

func cmdConfig(s *Server, c *client, args [][]byte) error {
	switch sub := strings.ToLower(string(args[1])); sub {
	case "get":
		if len(args) < 3 {
			return errArity("config|get")
		}
		globs := make([]glob, len(args)-2)
		for i, pat := range args[2:] {
			globs[i] = compileGlob(string(pat), s.configKeyLen)
		}
		var hits [][2]string
		for _, kv := range s.opts.Config {
			for _, g := range globs {
				if g.match(kv[0]) {
					hits = append(hits, kv)
					break
				}
			}
		}
		c.writeMap(len(hits))
		for _, kv := range hits {
			c.writeBulkString(kv[0])
			c.writeBulkString(kv[1])
		}
	case "set":
		if len(args) < 4 {
			return errArity("config|set")
		}
		return fmt.Errorf("ERR CONFIG SET is not supported: idserver reads its configuration at start ('%.128s')", args[2])
	default:
		return errSubcommand(args[1], "config")
	}
	return nil
}

// debugAllowed reports whether enable-debug-command lets this client run
// DEBUG, as Redis 7 decides it.
func (s *Server) debugAllowed(c *client) bool {
	switch s.opts.EnableDebug {
	case "yes":
		return true
	case "local":
		host, _, err := net.SplitHostPort(c.addr)
		ip := net.ParseIP(host)
		return err == nil && ip != nil && ip.IsLoopback()
	}
	return false
}

// cmdDebug is DEBUG CLOCK-OFFSET [ms]: shift the generator's clock (a
// negative offset steps it back) or show the shift, so the real binary
// can be tested black-box against clock steps.
func cmdDebug(s *Server, c *client, args [][]byte) error {
	if !s.debugAllowed(c) {
		return errors.New(`ERR DEBUG command not allowed. If the enable-debug-command option is set to "local", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.`)
	}
	if strings.ToLower(string(args[1])) != "clock-offset" {
		return errSubcommand(args[1], "debug")
	}
	switch len(args) {
	case 2:
		c.writeInt64(s.gen.ClockOffset().Milliseconds())
	case 3:
		ms, ok := parseInt(args[2])
		if !ok || ms < -1<<40 || ms > 1<<40 {
			return errNotInteger
		}
		s.gen.SetClockOffset(time.Duration(ms) * time.Millisecond)
		s.log.Warn().Int64("offset_ms", ms).Str("client", c.addr).Msg("DEBUG CLOCK-OFFSET: generator clock shifted")
		c.writeString("OK")
	default:
		return errArity("debug|clock-offset")
	}
	return nil
}

// cmdShutdown is SHUTDOWN [NOSAVE|SAVE|NOW|FORCE]: the same graceful stop
// as SIGTERM (the reservation is always written). Like Redis, it sends no
// reply; the connection closes.
func cmdShutdown(s *Server, c *client, args [][]byte) error {
	if s.opts.Shutdown == nil || !s.debugAllowed(c) && s.opts.RequirePass == "" {
		return errors.New("ERR SHUTDOWN is not allowed: set requirepass, or enable-debug-command yes or local")
	}
	for _, a := range args[1:] {
		switch strings.ToLower(string(a)) {
		case "nosave", "save", "now", "force":
		default:
			return fmt.Errorf("ERR syntax error, unsupported SHUTDOWN option '%.128s'", a)
		}
	}
	s.log.Info().Str("client", c.addr).Msg("SHUTDOWN requested")
	s.opts.Shutdown()
	return nil
}

func cmdTime(s *Server, c *client, args [][]byte) error {
	now := time.Now()
	c.writeArray(2)
	c.writeBulkString(strconv.FormatInt(now.Unix(), 10))
	c.writeBulkString(strconv.FormatInt(int64(now.Nanosecond()/1000), 10))
	return nil
}
