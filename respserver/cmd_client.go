package respserver

import (
	"fmt"
	"slices"
	"strings"

	"github.com/idserver/idserver/internal/replyerr"
)

// clientCommand is CLIENT and the subcommands client libraries send on
// connect (SETINFO, SETNAME, TRACKING, NO-EVICT, ...) or operators use
// (LIST, KILL, INFO).
var clientCommand = &command{
	name: "client", arity: -2, flags: []string{},
	doc: doc{summary: "A container for client connection commands.", since: "2.4.0", group: "connection", complexity: "Depends on subcommand."},
	subs: []*command{
		{name: "client|caching", arity: 3, flags: []string{"noscript", "loading", "stale"}, run: cmdClientCaching, doc: doc{
			summary: "Instructs the server whether to track the keys in the next request.", since: "6.0.0", group: "connection", complexity: "O(1)",
			args: []arg{oneOf("mode", nil, "YES", "NO")},
		}},
		{name: "client|getname", arity: 2, flags: []string{"noscript", "loading", "stale"}, run: cmdClientGetName, doc: doc{
			summary: "Returns the name of the connection.", since: "2.6.9", group: "connection", complexity: "O(1)",
		}},
		{name: "client|getredir", arity: 2, flags: []string{"noscript", "loading", "stale"}, run: cmdClientGetRedir, doc: doc{
			summary: "Returns the client ID to which the connection's tracking notifications are redirected.", since: "6.0.0", group: "connection", complexity: "O(1)",
		}},
		{name: "client|help", arity: 2, flags: []string{"loading", "stale"}, run: cmdHelp, doc: doc{
			summary: "Returns helpful text about the different subcommands.", since: "5.0.0", group: "connection", complexity: "O(1)",
		}},
		{name: "client|id", arity: 2, flags: []string{"noscript", "loading", "stale"}, run: cmdClientID, doc: doc{
			summary: "Returns the unique client ID of the connection.", since: "5.0.0", group: "connection", complexity: "O(1)",
		}},
		{name: "client|info", arity: 2, flags: []string{"noscript", "loading", "stale"}, tips: nondeterministic, run: cmdClientInfo, doc: doc{
			summary: "Returns information about the connection, including how GETID replies to it (getid-reply).", since: "6.2.0", group: "connection", complexity: "O(1)",
		}},
		{name: "client|kill", arity: -3, flags: []string{"admin", "noscript", "loading", "stale"}, run: cmdClientKill, doc: doc{
			summary: "Terminates open connections.", since: "2.4.0", group: "connection", complexity: "O(N) where N is the number of client connections",
			args: []arg{{name: "filter", typ: "oneof", args: []arg{
				{name: "ip:port", typ: "string"},
				{name: "new-format", typ: "oneof", flags: multiple, args: []arg{
					{name: "client-id", typ: "integer", token: "ID", flags: optional},
					{name: "client-type", typ: "oneof", token: "TYPE", flags: optional, args: []arg{token("NORMAL"), token("MASTER"), token("SLAVE"), token("REPLICA"), token("PUBSUB")}},
					{name: "username", typ: "string", token: "USER", flags: optional},
					{name: "addr", typ: "string", token: "ADDR", flags: optional},
					{name: "laddr", typ: "string", token: "LADDR", flags: optional},
					{name: "skipme", typ: "oneof", token: "SKIPME", flags: optional, args: []arg{token("YES"), token("NO")}},
				}},
			}}},
		}},
		{name: "client|list", arity: -2, flags: []string{"admin", "noscript", "loading", "stale"}, tips: nondeterministic, run: cmdClientList, doc: doc{
			summary: "Lists open connections.", since: "2.4.0", group: "connection", complexity: "O(N) where N is the number of client connections",
			args: []arg{
				{name: "client-type", typ: "oneof", token: "TYPE", flags: optional, args: []arg{token("NORMAL"), token("MASTER"), token("REPLICA"), token("PUBSUB")}},
				{name: "client-id", typ: "integer", token: "ID", flags: optMulti},
			},
		}},
		{name: "client|no-evict", arity: 3, flags: []string{"admin", "noscript", "loading", "stale"}, run: cmdClientFlag, doc: doc{
			summary: "Sets the client eviction mode of the connection (idserver never evicts clients).", since: "7.0.0", group: "connection", complexity: "O(1)",
			args: []arg{oneOf("enabled", nil, "ON", "OFF")},
		}},
		{name: "client|no-touch", arity: 3, flags: []string{"noscript", "loading", "stale"}, run: cmdClientFlag, doc: doc{
			summary: "Controls whether commands sent by the client affect the LRU/LFU of accessed keys (idserver has no keys).", since: "7.2.0", group: "connection", complexity: "O(1)",
			args: []arg{oneOf("enabled", nil, "ON", "OFF")},
		}},
		{name: "client|setinfo", arity: 4, flags: []string{"noscript", "loading", "stale"}, run: cmdClientSetInfo, setup: true, doc: doc{
			summary: "Sets information specific to the client or connection; LIB-NAME of a JavaScript client (ioredis, iovalkey, node-redis, GlideJS) makes GETID reply with bulk strings (getid-reply auto).", since: "7.2.0", group: "connection", complexity: "O(1)",
			args: []arg{{name: "attr", typ: "oneof", args: []arg{{name: "libname", typ: "string", token: "LIB-NAME"}, {name: "libver", typ: "string", token: "LIB-VER"}}}},
		}},
		{name: "client|setname", arity: 3, flags: []string{"noscript", "loading", "stale"}, run: cmdClientSetName, setup: true, doc: doc{
			summary: "Sets the connection name.", since: "2.6.9", group: "connection", complexity: "O(1)",
			args: []arg{{name: "connection-name", typ: "string"}},
		}},
		{name: "client|tracking", arity: -3, flags: []string{"noscript", "loading", "stale"}, run: cmdClientTracking, doc: doc{
			summary: "Controls server-assisted client-side caching for the connection (idserver has no keys: no invalidation is ever due).", since: "6.0.0", group: "connection",
			complexity: "O(1). Some options may introduce additional complexity.",
			args: []arg{
				oneOf("status", nil, "ON", "OFF"),
				{name: "client-id", typ: "integer", token: "REDIRECT", flags: optional},
				{name: "prefix", typ: "string", token: "PREFIX", flags: []string{"optional", "multiple", "multiple_token"}},
				{name: "bcast", typ: "pure-token", token: "BCAST", flags: optional},
				{name: "optin", typ: "pure-token", token: "OPTIN", flags: optional},
				{name: "optout", typ: "pure-token", token: "OPTOUT", flags: optional},
				{name: "noloop", typ: "pure-token", token: "NOLOOP", flags: optional},
			},
		}},
		{name: "client|trackinginfo", arity: 2, flags: []string{"noscript", "loading", "stale"}, run: cmdClientTrackingInfo, doc: doc{
			summary: "Returns information about server-assisted client-side caching for the connection.", since: "6.2.0", group: "connection", complexity: "O(1)",
		}},
	},
}

// shown is what CLIENT LIST shows of a client. A client belongs to its
// event loop, so the loop stores a copy after each change, which
// others read.
type shown struct {
	name, libName, libVer string
	resp                  int
	flags                 string
	redir                 int64
	getidReply            string
}

// refreshShown makes c's current state visible to CLIENT LIST and CLIENT KILL
// on other connections.
func (c *client) refreshShown() {
	flags := ""
	if c.mon != nil {
		flags += "O"
	}
	if c.tx != nil {
		flags += "x"
	}
	if c.track.on {
		flags += "t"
		if c.track.bcast {
			flags += "B"
		}
	}
	if c.noEvict {
		flags += "e"
	}
	if c.noTouch {
		flags += "T"
	}
	if flags == "" {
		flags = "N"
	}
	redir := int64(-1)
	if c.track.on {
		redir = c.track.redirect
	}
	reply := "integer"
	if c.stringIDs {
		reply = "string"
	}
	c.shown.Store(&shown{name: c.name, libName: c.libName, libVer: c.libVer, resp: c.proto(), flags: flags, redir: redir, getidReply: reply})
}

// infoLine is c's line of CLIENT LIST: Redis's fields that have a meaning
// here, in Redis's order (tot-mem: what c holds, as last accounted for),
// and getid-reply. Redis's breakdown of that memory (qbuf ... omem) is
// written as 0, as it is kept here as one figure: redis-py 4.x and
// valkey-py parse those six as ints that must be there (client_info()
// and client_list() raise KeyError without them).
func (s *Server) infoLine(b []byte, c *client) []byte {
	sh := c.shown.Load()
	multi := int64(-1)
	if strings.Contains(sh.flags, "x") {
		multi = c.queued.Load()
	}
	return fmt.Appendf(b, "id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=%d flags=%s db=0 sub=0 psub=0 ssub=0 multi=%d qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=%d user=default redir=%d resp=%d lib-name=%s lib-ver=%s getid-reply=%s\n",
		c.ID(), c.RemoteAddr(), c.LocalAddr(), c.FD(), sh.name, c.Age(), c.Idle(), sh.flags, multi, c.Mem(), sh.redir, sh.resp, sh.libName, sh.libVer, sh.getidReply)
}

// clientList returns the connected clients, in the order they connected.
func (s *Server) clientList() []*client {
	var all []*client
	for _, cn := range s.conns.Conns() {
		all = append(all, cn.Session)
	}
	slices.SortFunc(all, func(a, b *client) int { return int(a.ID() - b.ID()) })
	return all
}

func cmdClientInfo(s *Server, c *client, args [][]byte) error {
	c.writeVerbatim(s.infoLine(nil, c))
	return nil
}

// cmdClientList is CLIENT LIST [TYPE type] [ID id ...]. Every client here
// is of type normal.
func cmdClientList(s *Server, c *client, args [][]byte) error {
	all := s.clientList()
	switch {
	case len(args) == 2:
	case len(args) == 4 && keyword(args[2]) == "type":
		switch keyword(args[3]) {
		case "normal":
		case "master", "replica", "slave", "pubsub":
			all = nil
		default:
			return replyerr.Errorf("Unknown client type '%.128s'", args[3])
		}
	case len(args) > 3 && keyword(args[2]) == "id":
		var ids []int64
		for _, a := range args[3:] {
			id, ok := parseInt(a)
			if !ok {
				return replyerr.New(replyerr.ERR, "Invalid client ID")
			}
			ids = append(ids, id)
		}
		all = slices.DeleteFunc(all, func(o *client) bool { return !slices.Contains(ids, o.ID()) })
	default:
		return errSyntax
	}
	var b []byte
	for _, o := range all {
		b = s.infoLine(b, o)
	}
	c.writeVerbatim(b)
	return nil
}

// killFilter is what CLIENT KILL matches clients on.
type killFilter struct {
	id          int64
	addr, laddr string
	noneOfType  bool // TYPE master, replica or pubsub: no client here is
	skipMe      bool
}

func (f killFilter) matches(self, o *client) bool {
	return !f.noneOfType && (f.id == 0 || o.ID() == f.id) && (f.addr == "" || o.RemoteAddr() == f.addr) &&
		(f.laddr == "" || o.LocalAddr() == f.laddr) && !(f.skipMe && o == self)
}

// cmdClientKill is CLIENT KILL addr:port, which replies OK or an error,
// and CLIENT KILL filter value ..., which replies how many it closed.
func cmdClientKill(s *Server, c *client, args [][]byte) error {
	f, err := parseKillFilter(args)
	if err != nil {
		return err
	}
	killed := 0
	for _, o := range s.clientList() {
		if !f.matches(c, o) {
			continue
		}
		killed++
		if o == c {
			c.Quit() // after the reply, as Redis does
			continue
		}
		o.Close()
	}
	switch {
	case len(args) > 3:
		c.writeInt(killed)
	case killed == 0:
		return replyerr.New(replyerr.ERR, "No such client")
	default:
		c.writeString("OK")
	}
	return nil
}

func parseKillFilter(args [][]byte) (killFilter, error) {
	if len(args) == 3 {
		return killFilter{addr: string(args[2])}, nil // may kill the caller
	}
	f := killFilter{skipMe: true}
	for i := 2; i < len(args); i += 2 {
		if i+1 == len(args) {
			return f, errSyntax
		}
		v := string(args[i+1])
		switch keyword(args[i]) {
		case "id":
			id, ok := parseInt(args[i+1])
			if !ok || id < 1 {
				return f, replyerr.New(replyerr.ERR, "client-id should be greater than 0")
			}
			f.id = id
		case "type":
			switch strings.ToLower(v) {
			case "normal":
			case "master", "replica", "slave", "pubsub":
				f.noneOfType = true
			default:
				return f, replyerr.Errorf("Unknown client type '%.128s'", v)
			}
		case "addr":
			f.addr = v
		case "laddr":
			f.laddr = v
		case "user":
			if v != "default" {
				return f, replyerr.Errorf("No such user '%.128s'", v)
			}
		case "skipme":
			switch strings.ToLower(v) {
			case "yes", "no":
				f.skipMe = strings.EqualFold(v, "yes")
			default:
				return f, errSyntax
			}
		default:
			return f, errSyntax
		}
	}
	return f, nil
}

// cmdClientSetInfo is CLIENT SETINFO LIB-NAME|LIB-VER value. Under
// getid-reply auto, LIB-NAME decides how GETID replies.
func cmdClientSetInfo(s *Server, c *client, args [][]byte) error {
	attr := keyword(args[2])
	if attr != "lib-name" && attr != "lib-ver" {
		return replyerr.Errorf("Unrecognized option '%.128s'", args[2])
	}
	if err := checkClientAttr(args[3], attr+" cannot contain spaces, newlines or special characters."); err != nil {
		return err
	}
	if attr == "lib-ver" {
		c.libVer = string(args[3])
	} else {
		c.libName = string(args[3])
		if s.opts.GetIDReply == GetIDAuto {
			c.stringIDs = javaScriptClient(c.libName)
		}
	}
	c.refreshShown()
	c.writeString("OK")
	return nil
}

// javaScriptClient reports whether a library name, as CLIENT SETINFO
// LIB-NAME gives it ("ioredis", or "node-redis(tag)" with a clientInfoTag),
// is one of the JavaScript clients that turn integer replies into
// Numbers, which cannot hold IDs above 2^53 exactly.
func javaScriptClient(libName string) bool {
	base, _, _ := strings.Cut(libName, "(")
	switch base {
	case "ioredis", "iovalkey", "node-redis", "GlideJS":
		return true
	}
	return false
}

// greet looks at a connection's first command other than connection
// setup (see command.setup). JavaScript clients that name no library
// (ioredis before 5.8, iovalkey 0.x, node-redis 3) begin with their ready
// check, the bare lowercase "info"; typed clients send INFO only when
// their application asks, so only an application whose very first command
// is a lowercase info (redis-rb's info, go-redis v8's Info) is taken for
// one. Under getid-reply auto such a connection gets GETID as a bulk
// string. A LIB-NAME the client sends still decides.
func (s *Server) greet(c *client, args [][]byte) {
	c.greeted = true
	if s.opts.GetIDReply == GetIDAuto && c.libName == "" && len(args) == 1 && string(args[0]) == "info" {
		c.stringIDs = true
		c.refreshShown()
	}
}

func cmdClientSetName(s *Server, c *client, args [][]byte) error {
	if err := checkClientAttr(args[2], "Client names cannot contain spaces, newlines or special characters."); err != nil {
		return err
	}
	c.name = string(args[2])
	c.refreshShown()
	c.writeString("OK")
	return nil
}

func cmdClientGetName(s *Server, c *client, args [][]byte) error {
	if c.name == "" {
		c.writeNull()
	} else {
		c.writeBulkString(c.name)
	}
	return nil
}

func cmdClientID(s *Server, c *client, args [][]byte) error {
	c.writeInt64(c.ID())
	return nil
}

// cmdClientFlag is CLIENT NO-EVICT and CLIENT NO-TOUCH ON|OFF: accepted
// and shown in CLIENT LIST; idserver neither evicts clients nor has keys.
func cmdClientFlag(s *Server, c *client, args [][]byte) error {
	var on bool
	switch keyword(args[2]) {
	case "on":
		on = true
	case "off":
	default:
		return errSyntax
	}
	if keyword(args[1]) == "no-evict" {
		c.noEvict = on
	} else {
		c.noTouch = on
	}
	c.refreshShown()
	c.writeString("OK")
	return nil
}
