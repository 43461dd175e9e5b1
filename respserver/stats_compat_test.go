package respserver

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

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
