package respserver

import (
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/redisinfo"
)

// TestErrorStatsLikeRedis runs one session of refused and failing
// commands on a new redis-server and a new idserver, both with a
// password, and compares what INFO then counts: errorstats (each code's
// count), total_error_replies, and commandstats' calls, rejected_calls
// and failed_calls of every command (not the time they took). Refused
// before running: a command before AUTH (NOAUTH), of the wrong arity,
// refused inside MULTI, and EXEC with an argument; failed: what the
// command itself refused, inside EXEC or not.
func TestErrorStatsLikeRedis(t *testing.T) {
	sock := startRedisSocket(t, "--requirepass", "pw")
	_, addr := startServer(t, idgen.Settings{}, Options{RequirePass: "pw"})
	// Not SELECT 1: Redis has 16 databases, idserver one.
	session := [][]string{
		{"PING"}, {"AUTH", "wrong"}, {"AUTH", "pw"}, {"GET"}, {"PING", "a", "b"}, {"CLIENT", "NOSUCH"}, {"NOSUCH"},
		{"SELECT", "x"}, {"HELLO", "4"}, {"AUTH", "nobody", "x"}, {"EXEC"}, {"DISCARD"},
		{"MULTI"}, {"PING", "a", "b"}, {"EXEC"},
		{"MULTI"}, {"SELECT", "x"}, {"PING"}, {"WATCH", "k"}, {"EXEC"},
		{"MULTI"}, {"SHUTDOWN"}, {"PING"}, {"EXEC", "x"},
		{"CLIENT", "KILL", "ID", "x"}, {"CLIENT", "SETNAME", "a b"}, {"ECHO", "ok"},
	}
	// What redis-server counted of the test's waiting for it to answer
	// is reset first; the reset counts itself.
	reset := dialRaw(t, sock)
	reset.do("AUTH", "pw")
	if v := reset.do("CONFIG", "RESETSTAT"); v != "OK" {
		t.Fatalf("CONFIG RESETSTAT: %v", v)
	}
	stats := func(addr string) map[string]string {
		c := dialRaw(t, addr)
		for _, cmd := range session {
			c.do(cmd...)
		}
		got := map[string]string{}
		for _, sec := range []string{"errorstats", "commandstats", "stats"} {
			for _, line := range strings.Split(c.do("INFO", sec).(string), "\r\n") {
				name, v, _ := strings.Cut(line, ":")
				switch {
				case strings.HasPrefix(name, "cmdstat_"):
					got[name] = regexp.MustCompile(`usec=\d+,usec_per_call=[\d.]+,`).ReplaceAllString(v, "")
				case strings.HasPrefix(name, "errorstat_"), name == "total_error_replies":
					got[name] = v
				}
			}
		}
		return got
	}
	want, got := stats(sock), stats(addr)
	delete(want, "cmdstat_config|resetstat")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("idserver:\n%s\nredis-server:\n%s", sortedLines(got), sortedLines(want))
	}
}

func sortedLines(m map[string]string) string {
	var lines []string
	for k, v := range m {
		lines = append(lines, k+":"+v)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestInfoCPULikeRedis: INFO cpu has redis-server's fields, in its
// order, each in seconds to the microsecond; they count this process's
// time, which grows as it works.
func TestInfoCPULikeRedis(t *testing.T) {
	sock := startRedisSocket(t)
	_, addr := startServer(t, idgen.Settings{}, Options{})
	want, got := infoFields(t, sock, "cpu"), infoFields(t, addr, "CPU")
	if len(got) != len(want) || len(got) == 0 {
		t.Fatalf("idserver's INFO cpu %q, redis-server's %q", got, want)
	}
	for i, kv := range got {
		if kv[0] != want[i][0] || !regexp.MustCompile(`^\d+\.\d{6}$`).MatchString(kv[1]) {
			t.Errorf("field %d is %s:%s, redis-server's %s:%s", i, kv[0], kv[1], want[i][0], want[i][1])
		}
	}
	all := redisinfo.Parse(dialRaw(t, addr).do("INFO").(string))
	if !slices.ContainsFunc(all, func(f redisinfo.Field) bool { return f.Name == "used_cpu_user" }) {
		t.Errorf("the default INFO has no used_cpu_user: %q", all)
	}
}

// TestCommandInfoLikeRedis compares, in RESP3, the COMMAND INFO entry of
// every command idserver answers that redis-server 7.0 has too (not the
// ones idserver refuses, DEL and the rest: they are not Redis's), and of
// each of their subcommands that both have: name, arity, flags, key
// positions, ACL categories and tips alike (DBSIZE's
// request_policy:all_shards, response_policy:agg_sum and the rest,
// which cluster clients route by), and the same RESP3 types throughout
// (flags, categories, tips and key specs sets; the subcommands a set
// when there are none, an array otherwise). Key specs are compared by
// TestKeySpecsLikeRedis. SET and
// SETNX have the flag no_multi here (they wait for their write, which a
// transaction cannot): the one difference allowed.
func TestCommandInfoLikeRedis(t *testing.T) {
	sock := startRedisSocket(t)
	_, addr := startServer(t, idgen.Settings{}, Options{})
	r, c := dialRaw(t, sock), dialRaw(t, addr)
	r.do("HELLO", "3")
	c.do("HELLO", "3")
	refused := map[string]bool{}
	for _, cmd := range slices.Concat(refusedCommands, scriptCommands) {
		refused[cmd.name] = true
	}
	compared, tipped := 0, 0
	var compare func(name string, got, want []any)
	compare = func(name string, got, want []any) {
		compared++
		if name == "set" || name == "setnx" {
			got[2] = slices.DeleteFunc(got[2].(set), func(f any) bool { return f == "no_multi" })
		}
		if !reflect.DeepEqual(got[:8], want[:8]) {
			t.Errorf("%s: idserver %#v, redis-server %#v", name, got[:8], want[:8])
		}
		if len(want[7].(set)) > 0 {
			tipped++
		}
		for i, what := range []string{7: "tips", 8: "key specs", 9: "subcommands"} {
			if i >= 7 && reflect.TypeOf(got[i]) != reflect.TypeOf(want[i]) {
				t.Errorf("%s: %s a %T, redis-server's a %T", name, what, got[i], want[i])
			}
		}
		subs, ok := got[9].([]any)
		if !ok {
			return
		}
		theirs := map[any][]any{}
		for _, sub := range want[9].([]any) {
			theirs[sub.([]any)[0]] = sub.([]any)
		}
		for _, sub := range subs {
			if w := theirs[sub.([]any)[0]]; w != nil {
				compare(sub.([]any)[0].(string), sub.([]any), w)
			}
		}
	}
	for _, cmd := range table {
		if refused[cmd.name] {
			continue
		}
		want := r.do("COMMAND", "INFO", cmd.name).([]any)[0]
		if want == nil {
			continue // idserver's own: GETID and the rest
		}
		compare(cmd.name, c.do("COMMAND", "INFO", cmd.name).([]any)[0].([]any), want.([]any))
	}
	for _, name := range []string{"get", "incr", "set", "exists", "type", "keys", "scan", "dbsize", "ping", "echo", "multi", "exec", "client", "info", "config"} {
		if findCommand(name) == nil {
			t.Errorf("%s is not in the table", name)
		}
	}
	if compared < 50 || tipped < 20 {
		t.Errorf("only %d entries compared, %d with tips", compared, tipped)
	}
}

// TestCommandListLikeRedis: COMMAND LIST names the subcommands too, each
// command before its own; its filters (a pattern, in any case; an ACL
// category; a module, of which idserver has none) pick what redis-server
// 7.0 picks among the commands both have; FILTERBY's errors are Redis's.
func TestCommandListLikeRedis(t *testing.T) {
	sock := startRedisSocket(t)
	_, addr := startServer(t, idgen.Settings{}, Options{})
	r, c := dialRaw(t, sock), dialRaw(t, addr)
	names := func(reply any) []string {
		var ns []string
		for _, n := range reply.([]any) {
			ns = append(ns, n.(string))
		}
		return ns
	}
	all := names(c.do("COMMAND", "LIST"))
	var ours []string
	var walk func(cmds []*command)
	walk = func(cmds []*command) {
		for _, cmd := range cmds {
			ours = append(ours, cmd.name)
			walk(cmd.subs)
		}
	}
	walk(table)
	if !reflect.DeepEqual(all, ours) {
		t.Errorf("COMMAND LIST %q, want %q", all, ours)
	}
	theirs := names(r.do("COMMAND", "LIST"))
	both := func(ns []string) []string {
		ns = slices.DeleteFunc(slices.Clone(ns), func(n string) bool {
			return !slices.Contains(theirs, n) || !slices.Contains(all, n) || refusedCommand(n)
		})
		slices.Sort(ns)
		return ns
	}
	if n := len(both(all)); n < 50 {
		t.Errorf("only %d names in both lists", n)
	}
	for _, filter := range [][]string{
		{"PATTERN", "incr*"}, {"PATTERN", "CLIENT|*"}, {"PATTERN", "*watch"}, {"PATTERN", "nosuch*"}, {"PATTERN", "[a-c]*"},
		{"ACLCAT", "connection"}, {"ACLCAT", "DANGEROUS"}, {"ACLCAT", "fast"}, {"ACLCAT", "slow"}, {"ACLCAT", "read"},
		{"ACLCAT", "write"}, {"ACLCAT", "keyspace"}, {"ACLCAT", "string"}, {"ACLCAT", "admin"}, {"ACLCAT", "transaction"},
		{"ACLCAT", "nosuch"}, {"MODULE", "nosuch"},
	} {
		args := append([]string{"COMMAND", "LIST", "FILTERBY"}, filter...)
		got, want := both(names(c.do(args...))), both(names(r.do(args...)))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: idserver %q, redis-server %q", args, got, want)
		}
	}
	for _, args := range [][]string{
		{"COMMAND", "LIST", "FILTERBY"}, {"COMMAND", "LIST", "FILTERBY", "PATTERN"}, {"COMMAND", "LIST", "FILTERBY", "FOO", "x"},
		{"COMMAND", "LIST", "x"}, {"COMMAND", "LIST", "FILTERBY", "PATTERN", "a", "x"},
	} {
		if got, want := c.do(args...), r.do(args...); !reflect.DeepEqual(got, want) {
			t.Errorf("%q: idserver %#v, redis-server %#v", args, got, want)
		}
	}
}

// refusedCommand reports whether name is one of the writes idserver
// refuses (refusedCommands), or a scripting command (scriptCommands).
func refusedCommand(name string) bool {
	return slices.ContainsFunc(slices.Concat(refusedCommands, scriptCommands), func(cmd *command) bool { return cmd.name == name })
}

// TestCommandStatsBusyLikeRedis: INFO commandstats' usec is the time a
// command ran, not the time it waited: a BLPOP that blocks on
// redis-server, and an MGETID that waits for the clock on idserver (the
// second of two), each for waited, count far less. (Tools read
// usec_per_call as the cost of a call.)
func TestCommandStatsBusyLikeRedis(t *testing.T) {
	const waited = 300 * time.Millisecond
	usecPerCall := func(addr, cmd string) float64 {
		t.Helper()
		line := ""
		for _, f := range redisinfo.Parse(dialRaw(t, addr).do("INFO", "commandstats").(string)) {
			if f.Name == "cmdstat_"+cmd {
				line = f.Value
			}
		}
		m := regexp.MustCompile(`^calls=\d+,usec=\d+,usec_per_call=([\d.]+),`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("cmdstat_%s:%s", cmd, line)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	sock := startRedisSocket(t)
	start := time.Now()
	if v := dialRaw(t, sock).do("BLPOP", "nolist", strconv.FormatFloat(waited.Seconds(), 'f', -1, 64)); v != nil || time.Since(start) < waited {
		t.Fatalf("BLPOP: %v after %v", v, time.Since(start))
	}
	if us := usecPerCall(sock, "blpop"); us > float64(waited.Microseconds())/3 {
		t.Fatalf("redis-server: a BLPOP blocked %v, usec_per_call=%.0f", waited, us)
	}
	_, a, b, last, clk := startWaiting(t, Options{}, encode("MGETID", "1000"))
	time.Sleep(waited) // how long MGETID waits, off the loop
	clk.Advance(time.Second)
	checkIDs(t, a.reply(), 1000, last)
	if us := usecPerCall(b.conn.RemoteAddr().String(), "mgetid"); us > float64(waited.Microseconds())/3 {
		t.Errorf("idserver: an MGETID waited %v, usec_per_call=%.0f; redis-server counts a blocked BLPOP's run only", waited, us)
	}
}
