package respserver

import (
	"slices"
	"strings"
)

// The COMMAND family and the HELP subcommands read the command table:
// what dispatch runs is exactly what they describe.

// cmdCommand is COMMAND: Redis 7's entry for every command.
func cmdCommand(s *Server, c *client, args [][]byte) error {
	c.writeArray(len(table))
	for _, cmd := range table {
		c.writeCommandInfo(cmd)
	}
	return nil
}

func cmdCommandCount(s *Server, c *client, args [][]byte) error {
	c.writeInt(len(table))
	return nil
}

// cmdCommandList is COMMAND LIST [FILTERBY MODULE name | ACLCAT category
// | PATTERN pattern]: the name of every command and subcommand, each
// command before its subcommands, as Redis lists them; a filter keeps
// those of the ACL category, or whose name matches the pattern (in any
// case); idserver has no modules. Of several filters, the last counts,
// as in Redis.
func cmdCommandList(s *Server, c *client, args [][]byte) error {
	keep := func(*command) bool { return true }
	for i := 2; i < len(args); i += 3 {
		if i+2 >= len(args) || keyword(args[i]) != "filterby" {
			return errSyntax
		}
		arg := args[i+2]
		switch keyword(args[i+1]) {
		case "module":
			keep = func(*command) bool { return false }
		case "aclcat":
			cat := "@" + keyword(arg)
			keep = func(cmd *command) bool { return slices.Contains(cmd.aclCats, cat) }
		case "pattern":
			g := compileGlob(arg, longestName)
			keep = func(cmd *command) bool { return g.match(cmd.name) }
		default:
			return errSyntax
		}
	}
	var names []string
	var walk func(cmds []*command)
	walk = func(cmds []*command) {
		for _, cmd := range cmds {
			if keep(cmd) {
				names = append(names, cmd.name)
			}
			walk(cmd.subs)
		}
	}
	walk(table)
	c.writeArray(len(names))
	for _, name := range names {
		c.writeBulkString(name)
	}
	return nil
}

// cmdCommandInfo is COMMAND INFO [name ...]: an entry per name, null for
// an unknown one; no names mean every command.
func cmdCommandInfo(s *Server, c *client, args [][]byte) error {
	if len(args) == 2 {
		return cmdCommand(s, c, args)
	}
	c.writeArray(len(args) - 2)
	for _, a := range args[2:] {
		if cmd := findCommand(string(a)); cmd != nil {
			c.writeCommandInfo(cmd)
		} else {
			c.writeNull()
		}
	}
	return nil
}

// cmdCommandDocs is COMMAND DOCS [name ...]: a map of name to docs,
// without the unknown names; no names mean every command. redis-cli
// reads it for HELP and its hints.
func cmdCommandDocs(s *Server, c *client, args [][]byte) error {
	cmds := table
	if len(args) > 2 {
		cmds = nil
		for _, a := range args[2:] {
			if cmd := findCommand(string(a)); cmd != nil {
				cmds = append(cmds, cmd)
			}
		}
	}
	c.writeMap(len(cmds))
	for _, cmd := range cmds {
		c.writeBulkString(cmd.name)
		c.writeDocs(cmd)
	}
	return nil
}

// findCommand finds a command by name, or a subcommand by its full name
// ("client|kill"), in any case. A name longer than any is none, at once:
// its cost does not grow with its length.
func findCommand(name string) *command {
	if len(name) > longestName {
		return nil
	}
	parent, sub, isSub := strings.Cut(strings.ToLower(name), "|")
	cmd := commands[parent]
	if cmd == nil || !isSub {
		return cmd
	}
	return cmd.bySub[sub]
}

// writeCommandInfo writes Redis 7's COMMAND entry for cmd: the positions
// of its keys (the sequences' commands and WATCH take keys; the ID
// commands none, so cluster clients send them to any node), its ACL
// categories, its tips, and the key spec of its keys. As Redis 7.0 does
// in RESP3, the flags, categories, tips and key specs are sets, and so
// is the list of subcommands when empty (an array otherwise).
func (c *client) writeCommandInfo(cmd *command) {
	c.writeArray(10)
	c.writeBulkString(cmd.name)
	c.writeInt(cmd.arity)
	c.writeFlags(cmd.flags)
	c.writeInt(cmd.keys.first)
	c.writeInt(cmd.keys.last)
	c.writeInt(cmd.keys.step)
	c.writeFlags(cmd.aclCats)
	c.writeSet(len(cmd.tips)) // bulk strings, unlike the flags, as Redis writes them
	for _, tip := range cmd.tips {
		c.writeBulkString(tip)
	}
	c.writeKeySpecs(cmd)
	if len(cmd.subs) == 0 {
		c.writeSet(0)
		return
	}
	c.writeArray(len(cmd.subs))
	for _, sub := range cmd.subs {
		c.writeCommandInfo(sub)
	}
}

// writeKeySpecs writes cmd's key specs as Redis 7 does: one, its keys
// found from an index on as a range (lastkey relative to the first, -1
// for up to the last argument).
func (c *client) writeKeySpecs(cmd *command) {
	k := cmd.keys
	if k.first == 0 {
		c.writeSet(0)
		return
	}
	last := -1
	if k.last >= 0 {
		last = k.last - k.first
	}
	c.writeSet(1)
	c.writeMap(3)
	c.writeBulkString("flags")
	c.writeFlags(cmd.keyFlags)
	c.writeBulkString("begin_search")
	c.writeMap(2)
	c.writeBulkString("type")
	c.writeBulkString("index")
	c.writeBulkString("spec")
	c.writeMap(1)
	c.writeBulkString("index")
	c.writeInt(k.first)
	c.writeBulkString("find_keys")
	c.writeMap(2)
	c.writeBulkString("type")
	c.writeBulkString("range")
	c.writeBulkString("spec")
	c.writeMap(3)
	c.writeBulkString("lastkey")
	c.writeInt(last)
	c.writeBulkString("keystep")
	c.writeInt(k.step)
	c.writeBulkString("limit")
	c.writeInt(0)
}

// writeDocs writes Redis 7's COMMAND DOCS map for cmd.
func (c *client) writeDocs(cmd *command) {
	d := cmd.doc
	n := 4
	if len(d.args) > 0 {
		n++
	}
	if len(cmd.subs) > 0 {
		n++
	}
	c.writeMap(n)
	for _, kv := range [][2]string{{"summary", d.summary}, {"since", d.since}, {"group", d.group}, {"complexity", d.complexity}} {
		c.writeBulkString(kv[0])
		c.writeBulkString(kv[1])
	}
	if len(d.args) > 0 {
		c.writeBulkString("arguments")
		c.writeArgs(d.args)
	}
	if len(cmd.subs) > 0 {
		c.writeBulkString("subcommands")
		c.writeMap(len(cmd.subs))
		for _, sub := range cmd.subs {
			c.writeBulkString(sub.name)
			c.writeDocs(sub)
		}
	}
}

func (c *client) writeArgs(args []arg) {
	c.writeArray(len(args))
	for _, a := range args {
		n := 2
		for _, present := range []bool{a.token != "", len(a.flags) > 0, len(a.args) > 0} {
			if present {
				n++
			}
		}
		c.writeMap(n)
		c.writeBulkString("name")
		c.writeBulkString(a.name)
		c.writeBulkString("type")
		c.writeBulkString(a.typ)
		if a.token != "" {
			c.writeBulkString("token")
			c.writeBulkString(a.token)
		}
		if len(a.flags) > 0 {
			c.writeBulkString("flags")
			c.writeFlags(a.flags)
		}
		if len(a.args) > 0 {
			c.writeBulkString("arguments")
			c.writeArgs(a.args)
		}
	}
}

// cmdHelp is the HELP subcommand of a container command (CLIENT HELP,
// COMMAND HELP, CONFIG HELP): a usage line and the summary of each
// subcommand, as Redis prints them.
func cmdHelp(s *Server, c *client, args [][]byte) error {
	parent := commands[keyword(args[0])]
	lines := []string{helpHeader(parent.name)}
	if parent.callable() {
		lines = append(lines, "(no subcommand)", "    "+parent.doc.summary)
	}
	for _, sub := range parent.subs {
		lines = append(lines, usage(sub), "    "+sub.doc.summary)
	}
	c.writeStrings(lines)
	return nil
}

// helpHeader is the first line of the HELP of the command name, as
// Redis's.
func helpHeader(name string) string {
	return strings.ToUpper(name) + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
}

// usage is a subcommand's name and arguments, as in Redis's help texts:
// "KILL <ip:port>|...", "TRACKING (ON|OFF) [REDIRECT <client-id>] ...".
func usage(cmd *command) string {
	_, name, _ := strings.Cut(cmd.name, "|")
	parts := []string{strings.ToUpper(name)}
	for _, a := range cmd.doc.args {
		parts = append(parts, a.usage())
	}
	return strings.Join(parts, " ")
}

func (a arg) usage() string {
	var u string
	switch a.typ {
	case "pure-token":
		u = a.token
	case "oneof", "block":
		var parts []string
		for _, sub := range a.args {
			parts = append(parts, sub.usage())
		}
		if a.typ == "block" {
			u = strings.Join(parts, " ")
		} else {
			u = "(" + strings.Join(parts, "|") + ")"
		}
	default:
		u = "<" + a.name + ">"
	}
	if a.token != "" && a.typ != "pure-token" {
		u = a.token + " " + u
	}
	if slices.Contains(a.flags, "multiple") {
		u += " [" + u + " ...]"
	}
	if slices.Contains(a.flags, "optional") {
		u = "[" + u + "]"
	}
	return u
}

// writeFlags writes flags as a set of simple strings, as Redis writes
// command and argument flags and ACL categories (redis-cli stops on bulk
// strings there).
func (c *client) writeFlags(flags []string) {
	c.writeSet(len(flags))
	for _, f := range flags {
		c.writeString(f)
	}
}
