package respserver

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/await"
)

// TestGetIDReply: under getid-reply auto, GETID is a bulk string for
// JavaScript clients, told apart by the LIB-NAME they announce or by the
// bare lowercase "info" their older versions send first as a ready check
// (behind AUTH, SELECT, CLIENT SETNAME at most); anything else gets an
// integer. The other modes ignore what a client sends.
func TestGetIDReply(t *testing.T) {
	lib := func(name string) []string { return []string{"CLIENT", "SETINFO", "LIB-NAME", name} }
	info := []string{"info"} // ioredis < 5.8, iovalkey 0.x, node-redis 3
	tests := []struct {
		mode   GetIDReply
		before [][]string // sent first, in order
		want   string     // "integer" or "string"
	}{
		{GetIDAuto, nil, "integer"},
		{GetIDAuto, [][]string{lib("go-redis(,go1.26.8)")}, "integer"},
		{GetIDAuto, [][]string{lib("redis-py")}, "integer"},
		{GetIDAuto, [][]string{lib("ioredis")}, "string"},
		{GetIDAuto, [][]string{lib("node-redis")}, "string"},
		{GetIDAuto, [][]string{lib("node-redis(my-app)")}, "string"},
		{GetIDAuto, [][]string{lib("ioredis(my-app_v1)")}, "string"},
		{GetIDAuto, [][]string{lib("iovalkey")}, "string"},
		{GetIDAuto, [][]string{lib("GlideJS")}, "string"},
		{GetIDAuto, [][]string{lib("GlidePy")}, "integer"},
		{GetIDAuto, [][]string{lib("ioredisX")}, "integer"},
		{GetIDAuto, [][]string{info}, "string"},
		{GetIDAuto, [][]string{{"auth", "pw"}, {"client", "setname", "app"}, {"select", "0"}, info}, "string"},
		{GetIDAuto, [][]string{{"HELLO", "3"}, lib("ioredis"), info}, "string"},
		{GetIDAuto, [][]string{{"INFO"}}, "integer"},
		{GetIDAuto, [][]string{{"info", "server"}}, "integer"},
		{GetIDAuto, [][]string{{"PING"}, info}, "integer"},
		{GetIDAuto, [][]string{{"GETID"}, info}, "integer"},
		{GetIDAuto, [][]string{lib("go-redis"), info}, "integer"},
		{GetIDAuto, [][]string{info, lib("go-redis")}, "integer"},
		{GetIDInteger, [][]string{lib("ioredis")}, "integer"},
		{GetIDInteger, [][]string{info}, "integer"},
		{GetIDString, nil, "string"},
		{GetIDString, [][]string{lib("redis-py")}, "string"},
	}
	servers := map[GetIDReply]string{}
	for _, tt := range tests {
		if servers[tt.mode] == "" {
			_, servers[tt.mode] = startServer(t, idgen.Settings{}, Options{GetIDReply: tt.mode})
		}
		c := dialRaw(t, servers[tt.mode])
		for _, args := range tt.before {
			if v, ok := c.do(args...).(respError); ok && args[0] != "auth" {
				t.Fatalf("%q: %v", args, v)
			}
		}
		c.do("MULTI")
		c.do("GETID")
		inExec := c.do("EXEC").([]any)[0]
		for _, v := range []any{c.do("GETID"), inExec} {
			if got := replyKind(t, v); got != tt.want {
				t.Errorf("mode %d, after %q: GETID replied %#v, want %s", tt.mode, tt.before, v, tt.want)
			}
		}
		if info := fmt.Sprint(c.do("CLIENT", "INFO")); !strings.Contains(info, " getid-reply="+tt.want+"\n") {
			t.Errorf("mode %d, after %q: CLIENT INFO %q", tt.mode, tt.before, info)
		}
	}
}

// replyKind is "integer" for an integer reply, "string" for a bulk string
// holding a positive ID.
func replyKind(t *testing.T, v any) string {
	switch v := v.(type) {
	case int64:
		return "integer"
	case string:
		if id, err := strconv.ParseInt(v, 10, 64); err == nil && id > 0 {
			return "string"
		}
	}
	t.Fatalf("GETID reply %#v is neither an integer nor an ID string", v)
	return ""
}

// TestSetInfoChecks: CLIENT SETINFO refuses what would break CLIENT
// LIST's fields, with Redis 7.2's errors.
func TestSetInfoChecks(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{})
	c := dialRaw(t, addr)
	for _, tt := range []struct{ args, want []string }{
		{[]string{"LIB-NAME", "a b"}, []string{"ERR lib-name cannot contain spaces, newlines or special characters."}},
		{[]string{"lib-ver", "1\n2"}, []string{"ERR lib-ver cannot contain spaces, newlines or special characters."}},
		{[]string{"LIB-COLOR", "x"}, []string{"ERR Unrecognized option 'LIB-COLOR'"}},
	} {
		if v := c.do(append([]string{"CLIENT", "SETINFO"}, tt.args...)...); v != respError(tt.want[0]) {
			t.Errorf("CLIENT SETINFO %q: %v, want %s", tt.args, v, tt.want[0])
		}
	}
}

// clientLine is CLIENT LIST's line format, with getid-reply last.
var clientLine = regexp.MustCompile(`^id=(\d+) addr=127\.0\.0\.1:\d+ laddr=127\.0\.0\.1:\d+ fd=\d+ name=(\S*) age=\d+ idle=\d+ flags=(\S+) db=0 sub=0 psub=0 ssub=0 multi=(-?\d+) qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=\d+ user=default redir=(-?\d+) resp=([23]) lib-name=(\S*) lib-ver=(\S*) getid-reply=(integer|string)$`)

// TestClientListAndKill: CLIENT LIST shows every connection's state as
// its own loop last published it, CLIENT KILL closes another connection
// by id or address, and the old form may close the caller itself.
func TestClientListAndKill(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{})
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	b.do("HELLO", "3", "SETNAME", "bee")
	b.do("CLIENT", "SETINFO", "LIB-NAME", "node-redis")
	b.do("CLIENT", "SETINFO", "LIB-VER", "5.12.0")
	b.do("CLIENT", "TRACKING", "ON", "OPTIN")
	b.do("MULTI")
	b.do("GETID")
	bID := b.do("CLIENT", "ID")
	if bID != "QUEUED" {
		t.Fatalf("CLIENT ID inside MULTI: %v", bID)
	}
	lines := strings.Split(strings.TrimSuffix(a.do("CLIENT", "LIST").(string), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("CLIENT LIST: %q", lines)
	}
	want := [][]string{{"", "N", "-1", "-1", "2", "", "", "integer"}, {"bee", "xt", "2", "0", "3", "node-redis", "5.12.0", "string"}}
	for i, line := range lines {
		m := clientLine.FindStringSubmatch(line)
		if m == nil || fmt.Sprint(m[2:]) != fmt.Sprint(want[i]) {
			t.Fatalf("CLIENT LIST line %d: %q, want fields %q", i, line, want[i])
		}
	}
	aID := clientLine.FindStringSubmatch(lines[0])[1]
	if v := a.do("CLIENT", "LIST", "ID", aID, "999"); !strings.HasPrefix(v.(string), "id="+aID+" ") || strings.Count(v.(string), "\n") != 1 {
		t.Fatalf("CLIENT LIST ID %s 999: %q", aID, v)
	}
	bAddr := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(lines[1])[1]
	if v := a.do("CLIENT", "KILL", "ADDR", bAddr, "SKIPME", "yes"); v != int64(1) {
		t.Fatalf("CLIENT KILL ADDR %s: %v", bAddr, v)
	}
	if _, err := b.r.ReadByte(); err == nil {
		t.Fatal("the killed connection is still open")
	}
	if v := a.do("CLIENT", "KILL", "ID", aID); v != int64(0) {
		t.Fatalf("CLIENT KILL of itself with SKIPME yes (the default): %v", v)
	}
	if v := a.do("CLIENT", "KILL", regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(lines[0])[1]); v != "OK" {
		t.Fatalf("old-form CLIENT KILL of itself: %v", v)
	}
	if _, err := a.r.ReadByte(); err == nil {
		t.Fatal("the connection that killed itself is still open")
	}
}

// TestIDRange: IDRANGE's bounds hold the IDs issued in a window and
// exclude the milliseconds around it; bad windows get errors.
func TestIDRange(t *testing.T) {
	s, addr := startServer(t, idgen.Settings{}, Options{})
	c := dialRaw(t, addr)
	first := c.do("GETID").(int64)
	p1, _ := s.opts.Generator.Decode(first)
	var last int64
	var p2 idgen.Parts
	await.True(t, 10*time.Second, "an ID of a later millisecond", func() bool {
		last = c.do("GETID").(int64)
		p2, _ = s.opts.Generator.Decode(last)
		return p2.Time.After(p1.Time)
	})
	from, to := strconv.FormatInt(p1.Time.UnixMilli(), 10), strconv.FormatInt(p2.Time.UnixMilli(), 10)
	r := c.do("IDRANGE", from, to).([]any)
	lo, hi := r[0].(int64), r[1].(int64)
	if first < lo || last > hi || lo != (p1.Time.UnixMilli()-idgen.DefaultEpoch.UnixMilli())<<idgen.Bits || hi+1 != (p2.Time.UnixMilli()+1-idgen.DefaultEpoch.UnixMilli())<<idgen.Bits {
		t.Fatalf("IDRANGE %s %s = %d, %d; issued %d and %d", from, to, lo, hi, first, last)
	}
	epoch := idgen.DefaultEpoch.UnixMilli()
	end := s.opts.Generator.End().UnixMilli()
	for _, args := range [][]string{{"1700000000001", "1700000000000"}, {fmt.Sprint(epoch - 1), to}, {from, fmt.Sprint(end)}, {"x", "1"}} {
		if _, ok := c.do(append([]string{"IDRANGE"}, args...)...).(respError); !ok {
			t.Errorf("IDRANGE %q was not refused", args)
		}
	}
	if v := c.do("IDRANGE", fmt.Sprint(epoch), fmt.Sprint(end-1)).([]any); v[0] != int64(1<<10) || v[1] != int64(1<<63-1) {
		t.Fatalf("IDRANGE over the whole time field: %v", v)
	}
}

// TestCommandTable: COMMAND and COMMAND INFO give each table entry's
// arity and subcommands, COMMAND DOCS its summary and arguments, and
// every container's HELP lists its subcommands, so what clients and
// redis-cli are told is what dispatch runs.
func TestCommandTable(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{})
	c := dialRaw(t, addr)
	for _, cmd := range table {
		info := c.do("COMMAND", "INFO", cmd.name).([]any)[0].([]any)
		if info[0] != cmd.name || info[1] != int64(cmd.arity) || len(info[9].([]any)) != len(cmd.subs) {
			t.Errorf("COMMAND INFO %s: %v", cmd.name, info)
		}
		docs := c.do("COMMAND", "DOCS", strings.ToUpper(cmd.name)).([]any)
		if len(docs) != 2 || docs[0] != cmd.name || !containsPair(docs[1].([]any), "summary", cmd.doc.summary) {
			t.Errorf("COMMAND DOCS %s: %v", cmd.name, docs)
		}
		if len(cmd.subs) == 0 {
			continue
		}
		help := fmt.Sprint(c.do(cmd.name, "HELP"))
		for _, sub := range cmd.subs {
			if !strings.Contains(help, " "+usage(sub)+" ") || !strings.Contains(help, sub.doc.summary) {
				t.Errorf("%s HELP lacks %q: %s", cmd.name, usage(sub), help)
			}
			if d := c.do("COMMAND", "DOCS", sub.name).([]any); len(d) != 2 {
				t.Errorf("COMMAND DOCS %s: %v", sub.name, d)
			}
		}
	}
	want := "TRACKING (ON|OFF) [REDIRECT <client-id>] [PREFIX <prefix> [PREFIX <prefix> ...]] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]"
	if u := usage(findCommand("client|tracking")); u != want {
		t.Errorf("usage of CLIENT TRACKING: %q, want %q", u, want)
	}
}

func containsPair(flat []any, k, v string) bool {
	for i := 0; i+1 < len(flat); i += 2 {
		if flat[i] == k && flat[i+1] == v {
			return true
		}
	}
	return false
}

// TestInfoForRedisCLI: the INFO fields redis-cli --stat reads are there
// and real.
func TestInfoForRedisCLI(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{})
	c := dialRaw(t, addr)
	info := c.do("INFO").(string)
	for _, f := range []string{"used_memory", "used_memory_rss", "maxmemory", "blocked_clients", "connected_clients", "total_connections_received", "total_commands_processed"} {
		m := regexp.MustCompile(`\r\n` + f + `:(\d+)\r\n`).FindStringSubmatch(info)
		if m == nil {
			t.Fatalf("INFO lacks %s:\n%s", f, info)
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		switch f {
		case "used_memory", "used_memory_rss", "connected_clients", "total_connections_received":
			if n < 1 {
				t.Errorf("%s is %d", f, n)
			}
		}
	}
	if !strings.Contains(info, "# Keyspace\r\n") || !regexp.MustCompile(`used_memory_human:\d+\.\d\dM\r\n`).MatchString(info) {
		t.Fatalf("INFO keyspace or used_memory_human:\n%s", info)
	}
}
