package respserver

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/redisinfo"
)

// startRedisSocket runs redis-server 7 on a unix socket in a temporary
// directory, so that no port is shared, until the test ends, and returns
// the socket's path once the server answers. args are more options.
func startRedisSocket(t *testing.T, args ...string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "redis.sock")
	cmd := exec.Command("redis-server", append([]string{"--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no"}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server (scripts/test.sh installs it): %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
	defer rdb.Close()
	await.True(t, time.Minute, "redis-server answers", func() bool {
		err := rdb.Ping(context.Background()).Err()
		return err == nil || strings.HasPrefix(err.Error(), "NOAUTH")
	})
	return sock
}

// likeRedis are sessions whose every reply idserver must give exactly as
// redis-server 7 does: transactions, client-side caching, CLIENT's
// errors, and the empty keyspace redis-cli's tools scan. Each runs on a
// new connection to each server.
var likeRedis = []struct {
	name  string
	resp3 bool
	cmds  [][]string
}{
	{"transaction", false, [][]string{{"MULTI"}, {"PING"}, {"ECHO", "x"}, {"UNWATCH"}, {"EXEC"}, {"EXEC"}}},
	{"transaction resp3", true, [][]string{{"MULTI"}, {"PING"}, {"ECHO", "x"}, {"EXEC"}}},
	{"without multi", false, [][]string{{"EXEC"}, {"DISCARD"}, {"EXEC", "x"}}},
	{"nested multi", false, [][]string{{"MULTI"}, {"MULTI"}, {"PING"}, {"EXEC"}}},
	{"unknown command's arguments cut", false, [][]string{
		{"NOSUCH", strings.Repeat("a", 200), "b"}, {"NOSUCH", strings.Repeat("a", 100), strings.Repeat("b", 100), "c"},
		{strings.Repeat("n", 130), "x"}, {"NOSUCH", "a\x00b", "c\u00e9"}, {"n\x00sh", "x"}, {"NOSUCH", strings.Repeat("\u00e9", 65)},
		{"NOSUCH", strings.Repeat("a", 125), "bcdef"}, {"CLIENT", strings.Repeat("\u00e9", 65)}, {"CLIENT", "a\x00b"},
	}},
	{"unknown command queued", false, [][]string{{"MULTI"}, {"NOSUCH", "a"}, {"PING"}, {"EXEC"}, {"PING"}}},
	{"wrong arity queued", false, [][]string{{"MULTI"}, {"PING", "a", "b"}, {"PING"}, {"EXEC"}}},
	{"unknown subcommand queued", false, [][]string{{"MULTI"}, {"CLIENT", "NOSUCH"}, {"EXEC"}}},
	{"exec with arguments", false, [][]string{{"MULTI"}, {"PING"}, {"EXEC", "x"}, {"EXEC"}}},
	{"runtime error inside", false, [][]string{{"MULTI"}, {"SELECT", "x"}, {"PING"}, {"EXEC"}}},
	{"watch", false, [][]string{{"WATCH", "k"}, {"WATCH"}, {"MULTI"}, {"WATCH", "k"}, {"PING"}, {"EXEC"}, {"UNWATCH"}}},
	{"discard", false, [][]string{{"MULTI"}, {"PING"}, {"DISCARD"}, {"EXEC"}, {"MULTI"}, {"EXEC"}}},
	{"reset", false, [][]string{{"MULTI"}, {"PING"}, {"RESET"}, {"EXEC"}, {"CLIENT", "TRACKING", "ON"}, {"RESET"}, {"CLIENT", "GETREDIR"}}},
	{"tracking", false, [][]string{{"CLIENT", "GETREDIR"}, {"CLIENT", "TRACKINGINFO"}, {"CLIENT", "TRACKING", "ON"}, {"CLIENT", "TRACKINGINFO"}, {"CLIENT", "GETREDIR"}, {"CLIENT", "CACHING", "YES"}, {"CLIENT", "TRACKING", "OFF"}, {"CLIENT", "CACHING", "YES"}}},
	{"tracking optin", true, [][]string{{"CLIENT", "TRACKING", "ON", "OPTIN"}, {"CLIENT", "CACHING", "YES"}, {"CLIENT", "TRACKINGINFO"}, {"CLIENT", "CACHING", "NO"}, {"CLIENT", "CACHING", "MAYBE"}, {"CLIENT", "TRACKING", "ON", "OPTOUT"}, {"CLIENT", "TRACKING", "ON", "BCAST"}}},
	{"tracking optout", false, [][]string{{"CLIENT", "TRACKING", "ON", "OPTOUT", "NOLOOP"}, {"CLIENT", "CACHING", "NO"}, {"CLIENT", "TRACKINGINFO"}, {"CLIENT", "CACHING", "YES"}, {"CLIENT", "TRACKING", "ON", "OPTIN"}}},
	{"tracking bcast", false, [][]string{{"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "b"}, {"CLIENT", "TRACKINGINFO"}, {"CLIENT", "TRACKING", "ON"}}},
	{"tracking prefixes", false, [][]string{
		{"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOOBAR", "PREFIX", "FOO"}, {"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOO", "PREFIX", "FOOBAR"},
		{"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "a"}, {"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "y", "PREFIX", "x"},
		{"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "xy"}, {"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "b"}, {"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "TRACKING", "ON", "BCAST"}, {"CLIENT", "TRACKINGINFO"}, {"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "c"},
		{"CLIENT", "TRACKING", "OFF"}, {"CLIENT", "TRACKING", "ON", "BCAST"}, {"CLIENT", "TRACKINGINFO"}, {"CLIENT", "TRACKING", "ON", "BCAST"}, {"CLIENT", "TRACKINGINFO"},
	}},
	{"tracking bcast resp3", true, [][]string{{"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "k:"}, {"CLIENT", "TRACKINGINFO"}}},
	{"auth without a password", false, [][]string{{"AUTH", "default", "x"}, {"AUTH", "x"}, {"AUTH", "nobody", "x"}, {"AUTH", "a", "b", "c"}, {"HELLO", "2", "AUTH", "default", "x", "SETNAME", "a b"}, {"HELLO", "2", "AUTH", "nobody", "x"}}},
	{"integers as written", false, [][]string{{"SELECT", "00"}, {"SELECT", "-0"}, {"SELECT", "0"}, {"ECHO", "007"}}},
	{"tracking errors", false, [][]string{
		{"CLIENT", "TRACKING", "ON", "PREFIX", "a"}, {"CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"}, {"CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"},
		{"CLIENT", "TRACKING", "ON", "REDIRECT", "999999"}, {"CLIENT", "TRACKING", "ON", "REDIRECT", "x"}, {"CLIENT", "TRACKING", "MAYBE"},
		{"CLIENT", "TRACKING", "ON", "FOO"}, {"CLIENT", "TRACKING", "ON", "PREFIX"}, {"CLIENT", "TRACKING"}, {"CLIENT", "CACHING", "YES"},
	}},
	{"client errors", false, [][]string{
		{"CLIENT", "KILL", "ID", "999999"}, {"CLIENT", "KILL", "ID", "0"}, {"CLIENT", "KILL", "ID", "x"}, {"CLIENT", "KILL", "1.2.3.4:5"},
		{"CLIENT", "KILL", "TYPE", "bogus"}, {"CLIENT", "KILL", "TYPE", "master"}, {"CLIENT", "KILL", "USER", "nobody"},
		{"CLIENT", "KILL", "SKIPME", "maybe"}, {"CLIENT", "KILL", "ID"}, {"CLIENT", "KILL", "FOO", "bar"}, {"CLIENT", "KILL", "ID", "1", "TYPE"},
		{"CLIENT", "LIST", "TYPE", "bogus"}, {"CLIENT", "LIST", "ID", "x"}, {"CLIENT", "LIST", "FOO"}, {"CLIENT", "LIST", "TYPE", "pubsub"},
		{"CLIENT", "LIST", "ID", "999999"}, {"CLIENT", "NO-EVICT", "ON"}, {"CLIENT", "NO-EVICT", "maybe"}, {"CLIENT", "NO-EVICT", "OFF"},
		{"CLIENT", "SETNAME", "a b"}, {"CLIENT", "SETNAME", "ok"}, {"CLIENT", "GETNAME"}, {"CLIENT", "SETNAME", ""}, {"CLIENT", "GETNAME"},
	}},
	{"role", false, [][]string{{"ROLE"}, {"ROLE", "x"}}},
	{"role resp3", true, [][]string{{"ROLE"}}},
	{"empty keyspace resp3", true, [][]string{{"INFO", "keyspace"}, {"SCAN", "0"}, {"DBSIZE"}}},
	{"empty keyspace", false, [][]string{
		{"INFO", "keyspace"}, {"DBSIZE"}, {"SCAN", "0"}, {"SCAN", "0", "MATCH", "*", "COUNT", "10", "TYPE", "string"}, {"SCAN", "x"},
		{"SCAN", "0", "COUNT", "0"}, {"SCAN", "0", "COUNT", "x"}, {"SCAN", "0", "FOO", "x"}, {"SCAN", "0", "COUNT"},
	}},
}

// TestRepliesLikeRedis runs the likeRedis sessions against redis-server
// and idserver and compares every reply.
func TestRepliesLikeRedis(t *testing.T) {
	sock := startRedisSocket(t)
	_, addr := startServer(t, idgen.Settings{}, Options{})
	for _, sess := range likeRedis {
		t.Run(sess.name, func(t *testing.T) {
			want, got := runSession(t, sock, sess.resp3, sess.cmds), runSession(t, addr, sess.resp3, sess.cmds)
			for i, cmd := range sess.cmds {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Errorf("%q: idserver replied %#v, redis-server %#v", cmd, got[i], want[i])
				}
			}
		})
	}
}

// rawLikeRedis are byte streams whose replies must be redis-server's,
// byte for byte: empty and negative arrays, and inline lines split by
// whitespace other than spaces, with escapes and bad quotes. (Not a NUL
// byte in an inline line: Redis looks for its end with strchr, which
// stops there, and waits for more; idserver ends the line there.)
var rawLikeRedis = []string{
	"*0\r\n", "*-1\r\n", "*-5\r\n", "*00\r\n", "*0\r\n*1\r\n$4\r\nPING\r\n",
	"ECHO\ta\r\n", "ECHO\v\fa\r\n", " \t \r\n", "PING\r\r\n", " \v a\r\n",
	`ECHO "a\x00b"` + "\r\n", `ECHO "a\x4g"` + "\r\n", `ECHO "\x41\xfF\n\r\t\b\a\q\\"` + "\r\n",
	`ECHO 'it\'s'` + "\r\n", `ECHO 'a\nb'` + "\r\n", `ECHO x"a b"y` + "\r\n", `ECHO "a"b` + "\r\n",
	`ECHO "abc` + "\r\n", `ECHO 'abc` + "\r\n", `ECHO "a\` + "\r\n", "ECHO \"a\"\v\r\n",
	`ECHO ""` + "\r\n", "ECHO ''\r\n", "\x01\x02 \x03\n",
	// Tips are bulk strings where flags are simple ones.
	"COMMAND INFO dbsize keys scan ping exists touch ttl time\r\n",
}

// TestRawLikeRedis sends each of rawLikeRedis, then a PING, to
// redis-server and idserver, and compares all they reply, up to the PONG
// or the close.
func TestRawLikeRedis(t *testing.T) {
	sock := startRedisSocket(t)
	_, addr := startServer(t, idgen.Settings{}, Options{})
	for _, in := range rawLikeRedis {
		if got, want := rawReplies(t, addr, in), rawReplies(t, sock, in); got != want {
			t.Errorf("%q: idserver replied %q, redis-server %q", in, got, want)
		}
	}
}

// unauthLikeRedis are byte streams from a client that has not
// authenticated, to servers with a password: the sizes Redis refuses
// before AUTH (more than 10 arguments, a bulk over 16 KiB, refused as
// soon as their length is read), and the same after an AUTH in the same
// write, which lifts the limits for what follows it. HELLO's options take
// effect in turn: AUTH then a bad SETNAME authenticates, SETNAME then a
// wrong password names the client.
var unauthLikeRedis = []string{
	"*11\r\n", "*10\r\n", "*1\r\n$16385\r\n", encode("ECHO", strings.Repeat("x", 16384)), "*2\r\n$4\r\nECHO\r\n$100000\r\nabc",
	encode(append([]string{"PING"}, strings.Split("a b c d e f g h i", " ")...)...),
	encode(append([]string{"PING"}, strings.Split("a b c d e f g h i j", " ")...)...),
	encode("AUTH", "pw") + encode(append([]string{"PING"}, strings.Split("a b c d e f g h i j", " ")...)...),
	encode("AUTH", "pw") + encode("ECHO", strings.Repeat("x", 20000)),
	encode("AUTH", "wrong") + encode("ECHO", strings.Repeat("x", 20000)),
	encode("AUTH", "default", "pw") + encode("ECHO", strings.Repeat("x", 20000)) + encode("ECHO", "a"),
	encode("HELLO", "2", "AUTH", "default", "pw", "SETNAME", "a b") + encode("ECHO", "a") + encode("CLIENT", "GETNAME"),
	encode("HELLO", "3", "SETNAME", "nm", "AUTH", "default", "wrong") + encode("AUTH", "pw") + encode("CLIENT", "GETNAME") + encode("ECHO", "a"),
	encode("HELLO", "3", "AUTH", "default", "pw", "SETNAME", "ok", "FOO") + encode("CLIENT", "GETNAME") + encode("ECHO", "a"),
}

// TestUnauthenticatedLikeRedis sends each of unauthLikeRedis, then AUTH
// and a PING, to redis-server and idserver with requirepass, and compares all
// they reply, up to the PONG or the close.
func TestUnauthenticatedLikeRedis(t *testing.T) {
	sock := startRedisSocket(t, "--requirepass", "pw")
	_, addr := startServer(t, idgen.Settings{}, Options{RequirePass: "pw"})
	for _, in := range unauthLikeRedis {
		in += encode("AUTH", "pw") // for the PING's PONG, where the connection stays
		if got, want := rawReplies(t, addr, in), rawReplies(t, sock, in); got != want {
			t.Errorf("%.60q: idserver replied %.300q, redis-server %.300q", in, got, want)
		}
	}
}

// rawReplies sends in, then a PING, on a new connection to addr, and
// returns all it replies up to the PONG or the close.
func rawReplies(t *testing.T, addr, in string) string {
	replies := func(addr, in string) string {
		c := dialRaw(t, addr)
		c.conn.SetDeadline(time.Now().Add(5 * time.Second))
		c.send(in + "PING\r\n")
		var out []byte
		for !bytes.HasSuffix(out, []byte("+PONG\r\n")) {
			b, err := c.r.ReadByte()
			if err != nil {
				break // closed after a protocol error
			}
			out = append(out, b)
		}
		return string(out)
	}
	return replies(addr, in)
}

// TestInfoReplicationLikeRedis: INFO replication has redis-server's
// fields for a primary without replicas, in its order, with its values,
// but for the replication ID (new at each start) and the backlog
// (idserver has none). Valkey GLIDE will not connect without role:master.
func TestInfoReplicationLikeRedis(t *testing.T) {
	sock := startRedisSocket(t)
	_, addr := startServer(t, idgen.Settings{}, Options{})
	want, got := infoFields(t, sock, "replication"), infoFields(t, addr, "REPLICATION")
	if len(got) != len(want) {
		t.Fatalf("idserver's INFO replication %q, redis-server's %q", got, want)
	}
	for i, kv := range got {
		switch {
		case kv[0] != want[i][0]:
			t.Errorf("field %d is %s, redis-server's %s", i, kv[0], want[i][0])
		case kv[0] == "master_replid":
			if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(kv[1]) {
				t.Errorf("master_replid %q, want 40 hex digits", kv[1])
			}
		case kv[0] == "repl_backlog_size":
			if kv[1] != "0" {
				t.Errorf("repl_backlog_size %s, want 0", kv[1])
			}
		case kv[1] != want[i][1]:
			t.Errorf("%s:%s, redis-server's %s", kv[0], kv[1], want[i][1])
		}
	}
	if !slices.Contains(got, [2]string{"role", "master"}) {
		t.Errorf("no role:master in %q", got)
	}
}

// TestConfigGetRedisKeys: CONFIG GET answers the Redis keys that GUIs,
// client libraries and redis-benchmark read, by Redis's own names (each
// one redis-server 7 knows), one pattern or many, as Redis replies.
func TestConfigGetRedisKeys(t *testing.T) {
	sock := startRedisSocket(t)
	_, addr := startServer(t, idgen.Settings{}, Options{Config: [][2]string{{"port", "6551"}}})
	redisKeys := map[string]bool{}
	all := dialRaw(t, sock).do("CONFIG", "GET", "*").([]any)
	for i := 0; i < len(all); i += 2 {
		redisKeys[all[i].(string)] = true
	}
	c := dialRaw(t, addr)
	for _, kv := range redisConfig() {
		if !redisKeys[kv[0]] {
			t.Errorf("%s is not a key of redis-server 7", kv[0])
		}
		if got := c.do("CONFIG", "GET", kv[0]); !reflect.DeepEqual(got, []any{kv[0], kv[1]}) {
			t.Errorf("CONFIG GET %s = %#v", kv[0], got)
		}
	}
	want := []any{"databases", "1", "maxmemory", strconv.FormatInt(memoryLimit(), 10), "maxmemory-policy", "noeviction", "save", ""}
	got := c.do("CONFIG", "GET", "maxmemory*", "databases", "save").([]any)
	if pairs := sortedPairs(got); !reflect.DeepEqual(pairs, want) {
		t.Errorf("CONFIG GET maxmemory* databases save = %#v, want %#v", pairs, want)
	}
}

// sortedPairs sorts a flat key, value list by key.
func sortedPairs(kvs []any) []any {
	var pairs [][2]any
	for i := 0; i+1 < len(kvs); i += 2 {
		pairs = append(pairs, [2]any{kvs[i], kvs[i+1]})
	}
	slices.SortFunc(pairs, func(a, b [2]any) int { return strings.Compare(a[0].(string), b[0].(string)) })
	var flat []any
	for _, p := range pairs {
		flat = append(flat, p[0], p[1])
	}
	return flat
}

// infoFields returns the name:value lines of INFO section from addr.
func infoFields(t *testing.T, addr, section string) [][2]string {
	var fields [][2]string
	for _, f := range redisinfo.Parse(dialRaw(t, addr).do("INFO", section).(string)) {
		fields = append(fields, [2]string{f.Name, f.Value})
	}
	return fields
}

// runSession runs cmds on a new connection to addr and returns the replies.
func runSession(t *testing.T, addr string, resp3 bool, cmds [][]string) []any {
	c := dialRaw(t, addr)
	if resp3 {
		if _, ok := c.do("HELLO", "3").(map[string]any); !ok {
			t.Fatalf("HELLO 3 to %s: no map", addr)
		}
	}
	replies := make([]any, len(cmds))
	for i, cmd := range cmds {
		replies[i] = c.do(cmd...)
	}
	return replies
}

// TestNotServedLikeUnknown: Redis's commands of other data types and of
// persistence (notServed), each a command of redis-server 7, get the
// reply redis-server gives when it does not know it (the command renamed
// away), and the hint after it; COMMAND does not know them; inside MULTI
// they discard the transaction, as an unknown command does.
func TestNotServedLikeUnknown(t *testing.T) {
	plain := dialRaw(t, startRedisSocket(t))
	var renamed []string
	for name := range notServed {
		renamed = append(renamed, "--rename-command", name, "")
	}
	without := dialRaw(t, startRedisSocket(t, renamed...))
	_, addr := startServer(t, idgen.Settings{}, Options{})
	c := dialRaw(t, addr)
	for name, hint := range notServed {
		if info := plain.do("COMMAND", "INFO", name).([]any); info[0] == nil {
			t.Errorf("%s is not a command of redis-server 7", name)
		}
		upper := strings.ToUpper(name)
		want, got := without.do(upper, "k", "v"), c.do(upper, "k", "v")
		if e, ok := got.(respError); !ok || string(e) != fmt.Sprintf("%s(%s)", want, hint) {
			t.Errorf("%s: idserver replied %q, redis-server without it %q", upper, got, want)
		}
		if info := c.do("COMMAND", "INFO", name).([]any); info[0] != nil {
			t.Errorf("COMMAND INFO %s: %v, want nil", name, info)
		}
	}
	for _, cmd := range [][]string{{"MULTI"}, {"HSET", "h", "f", "v"}, {"INCR", "k"}, {"EXEC"}} {
		want, got := without.do(cmd...), c.do(cmd...)
		if e, ok := got.(respError); ok && cmd[0] == "HSET" {
			got = respError(strings.TrimSuffix(string(e), "("+notServed["hset"]+")"))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: idserver replied %#v, redis-server without HSET %#v", cmd, got, want)
		}
	}
}

// TestDebugAndShutdownLikeRedis: DEBUG refused by enable-debug-command
// no (HELP too) before AUTH and before MULTI queues it, so that EXEC
// discards the transaction; DEBUG's subcommand errors and HELP's frame
// where it is allowed; SHUTDOWN ABORT and SHUTDOWN's syntax errors: all
// as redis-server 7 replies.
func TestDebugAndShutdownLikeRedis(t *testing.T) {
	stop := func() { t.Error("SHUTDOWN stopped the server") }
	refused := [][]string{
		{"DEBUG", "HELP"}, {"DEBUG"}, {"MULTI"}, {"DEBUG", "CLOCK-OFFSET"}, {"PING"}, {"EXEC"},
		{"SHUTDOWN", "ABORT"}, {"SHUTDOWN", "abort", "NOW"}, {"SHUTDOWN", "FOO"}, {"SHUTDOWN", "NOSAVE", "SAVE"},
		{"MULTI"}, {"SHUTDOWN", "ABORT"}, {"EXEC"},
	}
	allowed := [][]string{{"DEBUG", "NOSUCH"}, {"DEBUG", "HELP", "x"}, {"DEBUG", "clock-offset", "1", "2"}, {"DEBUG", "x\x00y"}}
	for _, tt := range []struct {
		name  string
		redis []string
		opts  Options
		cmds  [][]string
	}{
		{"not allowed", nil, Options{Shutdown: stop}, refused},
		{"not allowed before AUTH", []string{"--requirepass", "pw"}, Options{Shutdown: stop, RequirePass: "pw"}, [][]string{{"DEBUG", "HELP"}, {"DEBUG"}}},
		{"allowed", []string{"--enable-debug-command", "yes"}, Options{Shutdown: stop, EnableDebug: DebugAll}, allowed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sock := startRedisSocket(t, tt.redis...)
			_, addr := startServer(t, idgen.Settings{}, tt.opts)
			want, got := runSession(t, sock, false, tt.cmds), runSession(t, addr, false, tt.cmds)
			for i, cmd := range tt.cmds {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Errorf("%q: idserver replied %#v, redis-server %#v", cmd, got[i], want[i])
				}
			}
		})
	}
	t.Run("help", func(t *testing.T) {
		want := dialRaw(t, startRedisSocket(t, "--enable-debug-command", "yes")).do("DEBUG", "HELP").([]any)
		_, addr := startServer(t, idgen.Settings{}, Options{EnableDebug: DebugAll})
		got, ok := dialRaw(t, addr).do("DEBUG", "help").([]any)
		if !ok || len(got) < 5 || got[0] != want[0] || !reflect.DeepEqual(got[len(got)-2:], want[len(want)-2:]) || !slices.Contains(got, any("CLOCK-OFFSET [<ms>]")) {
			t.Errorf("DEBUG HELP: %q; redis-server's begins %q and ends %q", got, want[0], want[len(want)-2:])
		}
	})
}

// TestClientKillLikeRedis: a client killed is gone at once, as in Redis:
// a second CLIENT KILL of its ID, pipelined behind the first, counts
// none, and CLIENT LIST shows it no more. (Not the old form, CLIENT KILL addr: on redis-server's unix
// socket every client has the same address.)
func TestClientKillLikeRedis(t *testing.T) {
	replies := func(addr string) []any {
		c := dialRaw(t, addr)
		var all []any
		for range 3 {
			id := fmt.Sprint(dialRaw(t, addr).do("CLIENT", "ID"))
			kill := encode("CLIENT", "KILL", "ID", id)
			c.send(kill + kill + encode("CLIENT", "LIST", "ID", id)) // in one batch: no time to close between them
			all = append(all, c.reply(), c.reply(), c.reply())
		}
		return all
	}
	sock := startRedisSocket(t)
	_, addr := startServer(t, idgen.Settings{}, Options{})
	if want, got := replies(sock), replies(addr); !reflect.DeepEqual(got, want) {
		t.Errorf("idserver replied %#v, redis-server %#v", got, want)
	}
}
