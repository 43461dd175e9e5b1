package respserver

import (
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen"
)

// monitorPrefix is what a MONITOR line has before the arguments: the
// time, the database and the client's address.
var monitorPrefix = regexp.MustCompile(`^\+(\d+)\.(\d{6}) \[0 (\S+)\] `)

// monitorSession is what TestMonitorLikeRedis sends, commands that both
// servers know: some shown, some hidden (admin, unknown), passwords, bytes
// that need quoting, a transaction, an inline command.
var monitorSession = []string{
	encode("PING"),
	encode("ping", "a", "b"), // refused by PING itself (its arity is -1): shown
	encode("ECHO"),           // wrong arity: hidden
	encode("ECHO", "a\x00\"\\\n\r\t\a\b\xe9 ~"),
	encode("auth", "secret"),
	encode("hello", "2", "AUTH", "default", "secret"),
	encode("CONFIG", "GET", "save"), // admin: hidden
	encode("CLIENT", "LIST"),        // admin: hidden
	encode("CLIENT", "SETNAME", "app"),
	encode("NOSUCHCOMMAND", "x"), // unknown: hidden
	encode("MULTI"),
	encode("PING"),
	encode("ECHO", "in exec"),
	encode("EXEC"),
	encode("SELECT", "0"),
	"PING inline\r\n",
	encode("ECHO", "end"),
}

// TestMonitorLikeRedis: the same session, watched by MONITOR on
// redis-server 7 and on idserver, shows the same lines after the prefix,
// and idserver's prefix holds the time and the client's address.
func TestMonitorLikeRedis(t *testing.T) {
	sock := startRedisSocket(t)
	_, addr := startServer(t, idgen.Settings{}, Options{})
	want := monitorLines(t, sock)
	begin := time.Now().Unix()
	got := monitorLines(t, addr)
	for i, line := range got {
		m := monitorPrefix.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("line %d %q: no MONITOR prefix", i, line)
		}
		if sec, _ := strconv.ParseInt(m[1], 10, 64); sec < begin || sec > time.Now().Unix() {
			t.Errorf("line %d %q: time %d outside the test's", i, line, sec)
		}
		got[i] = line[len(m[0]):]
	}
	for i := range want {
		want[i] = monitorPrefix.ReplaceAllString(want[i], "")
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("idserver's MONITOR lines:\n%s\nredis-server's:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// monitorLines runs monitorSession against addr while a monitor watches,
// and returns what the monitor saw, each line checked to name the
// session's client.
func monitorLines(t *testing.T, addr string) []string {
	mon := dialRaw(t, addr)
	if v := mon.do("MONITOR"); v != "OK" {
		t.Fatalf("MONITOR on %s: %v", addr, v)
	}
	c := dialRaw(t, addr)
	for _, cmd := range monitorSession {
		c.send(cmd)
		c.reply()
	}
	var lines []string
	for {
		line, err := mon.r.ReadString('\n')
		if err != nil {
			t.Fatalf("MONITOR on %s after %q: %v", addr, lines, err)
		}
		line = strings.TrimSuffix(line, "\r\n")
		if m := monitorPrefix.FindStringSubmatch(line); m != nil && !strings.HasPrefix(addr, "/") && m[3] != c.conn.LocalAddr().String() {
			t.Errorf("line %q: client %s, want %s", line, m[3], c.conn.LocalAddr())
		}
		lines = append(lines, line)
		if strings.HasSuffix(line, `"ECHO" "end"`) {
			return lines
		}
	}
}

// TestMonitorModes: a monitor is flagged O in CLIENT LIST, sees its own
// commands after their replies, ignores a second MONITOR (no reply, as
// Redis), and RESET ends it; MONITOR inside a transaction is refused.
func TestMonitorModes(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{})
	mon, other := dialRaw(t, addr), dialRaw(t, addr)
	mon.do("MULTI")
	mon.do("MONITOR")
	if v := mon.do("EXEC").([]any); len(v) != 1 || v[0] != respError(errMonitorInMulti.Error()) {
		t.Fatalf("MULTI MONITOR EXEC: %#v", v)
	}
	mon.do("MONITOR")
	mon.send(encode("MONITOR") + encode("PING"))
	if v := mon.reply(); v != "PONG" {
		t.Fatalf("MONITOR twice, PING: %v, want PONG (no reply to the second MONITOR)", v)
	}
	if line := mon.reply().(string); !strings.HasSuffix(line, `"PING"`) {
		t.Fatalf("the monitor's own PING: %q", line)
	}
	if list := other.do("CLIENT", "LIST").(string); !strings.Contains(list, " flags=O ") {
		t.Fatalf("CLIENT LIST shows no monitor:\n%s", list)
	}
	if v := mon.do("RESET"); v != "RESET" {
		t.Fatalf("RESET: %v", v)
	}
	other.do("ECHO", "unseen")
	if v := mon.do("PING"); v != "PONG" {
		t.Fatalf("after RESET, the monitor got %v, want PONG and no MONITOR line", v)
	}
}

// TestMonitorThatNeverReads: a monitor that does not read is closed once
// its unsent lines pass the hard output limit; the client whose commands
// it watched is served throughout, and another monitor, which reads each
// batch's lines as they come, sees every command and stays.
func TestMonitorThatNeverReads(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{ConnOptions: ConnOptions{Output: OutputLimits{Soft: 256 << 10, Hard: 1 << 20, SoftFor: time.Hour}}})
	stuck, reader, c := dialRaw(t, addr), dialRaw(t, addr), dialRaw(t, addr)
	for _, m := range []*rawClient{stuck, reader} {
		if v := m.do("MONITOR"); v != "OK" {
			t.Fatal("MONITOR:", v)
		}
	}
	const batches, perBatch = 40, 200 // about 8 MB of lines: eight times the hard limit
	arg := strings.Repeat("x", 1000)
	want := `"ECHO" "` + arg + `"`
	for i := range batches {
		c.send(strings.Repeat(encode("ECHO", arg), perBatch))
		for range perBatch {
			if v := c.reply(); v != arg {
				t.Fatalf("ECHO: %.40v", v)
			}
		}
		for j := range perBatch {
			if line := reader.reply().(string); !strings.HasSuffix(line, want) {
				t.Fatalf("batch %d, line %d of the reading monitor: %.80q", i, j, line)
			}
		}
	}
	awaitInfo(t, c, "client_output_buffer_limit_disconnections:1\r\n")
	stuck.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := io.Copy(io.Discard, stuck.r)
	if err != nil && !isReset(err) {
		t.Fatalf("the stuck monitor after %d bytes: %v, want the connection closed", n, err)
	}
	if n > 8<<20 {
		t.Errorf("the stuck monitor got %d bytes before its close, well past the 1 MiB limit and socket buffers", n)
	}
	if list := c.do("CLIENT", "LIST").(string); strings.Count(list, " flags=O ") != 1 {
		t.Errorf("CLIENT LIST, want the reading monitor alone flagged O:\n%s", list)
	}
}

// isReset reports whether err is a connection reset, which a close with
// unread data in the server's socket gives.
func isReset(err error) bool {
	return err != nil && (errors.Is(err, io.EOF) || strings.Contains(err.Error(), "connection reset"))
}

// TestMonitorLineBounded: the line of the largest command a client may
// send, every byte quoted as \xHH (four times its size), is cut short
// soon after the limit instead of being built whole.
func TestMonitorLineBounded(t *testing.T) {
	arg := []byte(strings.Repeat("\xff", 64<<10))
	args := [][]byte{[]byte("ECHO")}
	for range 1023 {
		args = append(args, arg)
	}
	const limit = 1 << 20
	line := monitorLine(nil, time.Now(), "127.0.0.1:50000", commands["echo"], args, limit)
	if max := limit + 4*len(arg) + 100; len(line) > max {
		t.Fatalf("a line of %d bytes, want at most %d", len(line), max)
	}
	if len(line) <= limit {
		t.Fatalf("a line of %d bytes: cut below the limit, so it would be sent", len(line))
	}
}

// BenchmarkMonitorLine is the cost of one MONITOR line, made only while
// a monitor watches.
func BenchmarkMonitorLine(b *testing.B) {
	args := [][]byte{[]byte("MGETID"), []byte("100")}
	cmd := commands["mgetid"]
	var buf []byte
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		buf = monitorLine(buf[:0], now, "127.0.0.1:50000", cmd, args, 0)
	}
}
