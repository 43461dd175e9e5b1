package clients

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cliTimeout bounds every redis-cli and redis-benchmark run, so a tool
// that waits on the server forever fails its test instead of hanging it.
const cliTimeout = 30 * time.Second

// cliConn returns redis-cli's and redis-benchmark's -h and -p for addr.
func cliConn(t *testing.T, addr string) []string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return []string{"-h", host, "-p", port}
}

// runClientTool runs program with args and stdin (none if empty), and
// returns its stdout and stderr together, CRs dropped, and its exit code.
func runClientTool(t *testing.T, stdin, program string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, program, args...)
	// TERM=dumb: linenoise would otherwise ask the terminal for its
	// cursor position and wait for an answer no one sends.
	cmd.Env = append(os.Environ(), "TERM=dumb")
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	text := strings.ReplaceAll(string(out), "\r", "")
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s %q did not finish in %v:\n%s", program, args, cliTimeout, text)
	case errors.As(err, &exit):
		return text, exit.ExitCode()
	case err != nil:
		t.Fatalf("%s %q: %v", program, args, err)
	}
	return text, 0
}

// redisCLI runs redis-cli against addr with its output not a terminal,
// so replies come out raw, as scripts see them.
func redisCLI(t *testing.T, addr, stdin string, args ...string) (string, int) {
	t.Helper()
	need(t, "redis-cli", "apt-get install redis-tools")
	return runClientTool(t, stdin, "redis-cli", append(cliConn(t, addr), args...)...)
}

// redisCLITTY runs redis-cli on a pseudo-terminal (via script(1), whose
// -e passes on the exit code), as a person sees it: "(integer) 1",
// "(error) ERR ...", and with no command the interactive prompt.
func redisCLITTY(t *testing.T, addr, stdin string, args ...string) (string, int) {
	t.Helper()
	need(t, "redis-cli", "apt-get install redis-tools")
	need(t, "script", "apt-get install bsdutils")
	line := strings.Join(append(append([]string{"redis-cli"}, cliConn(t, addr)...), args...), " ")
	return runClientTool(t, stdin, "script", "-qec", line, "/dev/null")
}

// cliIDs parses lines as IDs, each above the one before.
func cliIDs(lines []string) ([]int64, error) {
	var ids []int64
	for _, l := range lines {
		id, err := strconv.ParseInt(l, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("%q is not an ID", l)
		}
		if len(ids) > 0 && id <= ids[len(ids)-1] {
			return nil, fmt.Errorf("ID %d not above %d", id, ids[len(ids)-1])
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// cliWantIDs checks output of n IDs, one per line, each line matching
// line, whose group is the ID.
func cliWantIDs(n int, line string) func(string) error {
	re := regexp.MustCompile(`^` + line + `$`)
	return func(out string) error {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != n {
			return fmt.Errorf("%d lines, want %d", len(lines), n)
		}
		for i, l := range lines {
			m := re.FindStringSubmatch(strings.TrimSpace(l))
			if m == nil {
				return fmt.Errorf("line %q is not %s", l, line)
			}
			lines[i] = m[1]
		}
		_, err := cliIDs(lines)
		return err
	}
}

func cliWantText(s string) func(string) error {
	return func(out string) error {
		if !strings.Contains(out, s) {
			return fmt.Errorf("lacks %q", s)
		}
		return nil
	}
}

// TestRedisCLIOneShot runs the ID commands as arguments, raw (output
// piped) and on a terminal, where redis-cli formats the reply types.
// Without -e an error reply still exits 0, as with Redis.
func TestRedisCLIOneShot(t *testing.T) {
	addr := startServer(t)
	out, code := redisCLI(t, addr, "", "GETID")
	id := strings.TrimSpace(out)
	if _, err := cliIDs([]string{id}); err != nil || code != 0 {
		t.Fatalf("redis-cli GETID: exit %d, %v", code, err)
	}
	for _, c := range []struct {
		name  string
		tty   bool
		args  []string
		code  int
		check func(string) error
	}{
		{"GETID", false, []string{"GETID"}, 0, cliWantIDs(1, `(\d+)`)},
		{"GETID/tty", true, []string{"GETID"}, 0, cliWantIDs(1, `\(integer\) (\d+)`)},
		{"MGETID", false, []string{"MGETID", "3"}, 0, cliWantIDs(3, `(\d+)`)},
		{"MGETID/tty", true, []string{"MGETID", "3"}, 0, cliWantIDs(3, `\d\) "(\d+)"`)},
		{"DECODEID", false, []string{"DECODEID", id}, 0, cliWantText("\nserver-id\n0\nshard\n")},
		{"DECODEID/tty", true, []string{"DECODEID", id}, 0, cliWantText(`"server-id"`)},
		// -e: exit 1 on an error reply, which then goes to stderr.
		{"error", false, []string{"-e", "MGETID", "0"}, 1, cliWantText("ERR count 0 out of range")},
		{"error/tty", true, []string{"MGETID", "0"}, 0, cliWantText("(error) ERR count 0 out of range")},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := redisCLI
			if c.tty {
				run = redisCLITTY
			}
			out, code := run(t, addr, "", c.args...)
			if err := c.check(out); err != nil || code != c.code {
				t.Fatalf("redis-cli %q: exit %d (want %d), %v:\n%s", c.args, code, c.code, err, out)
			}
		})
	}
}

// TestRedisCLISequences runs the sequences' commands one-shot, in turn,
// raw and on a terminal (where redis-cli shows INCR's integer and GET's
// string apart); a refusal prints Redis's "ERR ..." and, without -e,
// exits 0. --scan lists the keys of a pattern (in any order), and INFO
// keyspace counts them as Redis does.
func TestRedisCLISequences(t *testing.T) {
	addr := startServer(t)
	for _, c := range []struct {
		tty  bool
		args []string
		want string
	}{
		{false, []string{"INCR", "x:a"}, "1"},
		{true, []string{"INCR", "x:a"}, "(integer) 2"},
		{false, []string{"INCRBY", "x:a", "10"}, "12"},
		{false, []string{"GET", "x:a"}, "12"},
		{true, []string{"GET", "x:a"}, `"12"`},
		{false, []string{"SET", "x:a", "5"}, `ERR sequences only go up: "x:a" is at 12 (idserver never reuses a number)`},
		{true, []string{"SET", "x:a", "5"}, `(error) ERR sequences only go up: "x:a" is at 12 (idserver never reuses a number)`},
		{false, []string{"DEL", "x:a"}, "ERR DEL is refused: sequences never go back, expire or go away (idserver never reuses a number)"},
		{false, []string{"GET", "x:a"}, "12"},
		{false, []string{"INCR", "x:b"}, "1"},
		{false, []string{"INCR", "y:a"}, "1"},
		{false, []string{"--scan", "--pattern", "x:*"}, "x:a\nx:b"},
		{false, []string{"INFO", "keyspace"}, "# Keyspace\ndb0:keys=3,expires=0,avg_ttl=0"},
	} {
		run := redisCLI
		if c.tty {
			run = redisCLITTY
		}
		out, code := run(t, addr, "", c.args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if c.args[0] == "--scan" {
			slices.Sort(lines)
		}
		if got := strings.Join(lines, "\n"); got != c.want || code != 0 {
			t.Fatalf("redis-cli %q (tty %v): exit %d, output\n%s\nwant exit 0 and\n%s", c.args, c.tty, code, got, c.want)
		}
	}
}

// TestRedisCLITransaction pipes a transaction into redis-cli, which runs
// one command per line: MULTI's OK, two QUEUED, then EXEC's two IDs.
func TestRedisCLITransaction(t *testing.T) {
	addr := startServer(t)
	out, code := redisCLI(t, addr, "MULTI\nGETID\nGETID\nEXEC\n")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 5 || lines[0] != "OK" || lines[1] != "QUEUED" || lines[2] != "QUEUED" {
		t.Fatalf("exit %d, want 0 and OK, QUEUED, QUEUED, two IDs:\n%s", code, out)
	}
	if _, err := cliIDs(lines[3:]); err != nil {
		t.Fatalf("EXEC's replies: %v:\n%s", err, out)
	}
}

// ansiEscape matches the colour escapes redis-cli puts in HELP even when piped.
var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestRedisCLIHelp wants HELP GETID to show what the server's COMMAND
// DOCS says, as HELP INCRBY shows against Redis 7:
//
//	INCRBY key increment
//	summary: Increment the integer value of a key by the given amount
//	since: 1.0.0
//	group: string
//
// redis-cli builds its help table from COMMAND DOCS, one-shot and
// interactive alike. With an empty table HELP prints nothing; if COMMAND
// DOCS fails it falls back to COMMAND, and shows "Help not available"
// and "since: Not known" for commands Redis itself lacks.
func TestRedisCLIHelp(t *testing.T) {
	addr := startServer(t)
	for _, c := range []struct {
		name  string
		tty   bool
		stdin string
		args  []string
	}{
		{"one-shot", false, "", []string{"HELP", "GETID"}},
		{"interactive", true, "HELP GETID\nquit\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := redisCLI
			if c.tty {
				run = redisCLITTY
			}
			out, code := run(t, addr, c.stdin, c.args...)
			out = ansiEscape.ReplaceAllString(out, "")
			if err := cliHelpEntry(out, "GETID"); err != nil || code != 0 {
				t.Fatalf("HELP GETID: exit %d, %v:\n%s", code, err, out)
			}
		})
	}
}

// cliHelpEntry wants redis-cli's help entry for name in out: a line
// starting with the name, then summary, since and group with real values.
func cliHelpEntry(out, name string) error {
	fields := map[string]string{}
	seen := false
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			seen = true
		}
		if k, v, ok := strings.Cut(l, ": "); ok && seen {
			fields[k] = strings.TrimSpace(v)
		}
	}
	if !seen {
		return fmt.Errorf("no line starting with %s", name)
	}
	for k, placeholder := range map[string]string{"summary": "Help not available", "since": "Not known", "group": ""} {
		if v := fields[k]; v == "" || v == placeholder {
			return fmt.Errorf("%s: %q, want the server's COMMAND DOCS value", k, v)
		}
	}
	return nil
}

// TestRedisCLIStat reads five rows of redis-cli --stat, one per 0.1 s,
// then stops it. Each row comes from INFO: a missing field shows as
// -9223372036854775808, so the numbers must parse and make sense.
func TestRedisCLIStat(t *testing.T) {
	addr := startServer(t)
	sc, stderr := redisCLIStream(t, addr, "--stat", "-i", "0.1")
	var lines []string
	var prev int64 = -1
	for rows := 0; rows < 5; {
		if !sc.Scan() {
			t.Fatalf("--stat stopped after %d rows:\n%s\n%s", rows, strings.Join(lines, "\n"), stderr.String())
		}
		lines = append(lines, sc.Text())
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] == "keys" || strings.HasPrefix(f[0], "-") {
			continue // the two header lines
		}
		requests, err := cliStatRow(f)
		if err == nil && requests <= prev {
			err = fmt.Errorf("requests %d, not above the row before's %d (--stat's own INFO counts)", requests, prev)
		}
		if err != nil {
			t.Fatalf("--stat row %q: %v\n%s", sc.Text(), err, strings.Join(lines, "\n"))
		}
		prev = requests
		rows++
	}
}

// TestRedisCLIMonitor: redis-cli MONITOR shows what another redis-cli
// sends, in Redis's format, until it is stopped.
func TestRedisCLIMonitor(t *testing.T) {
	addr := startServer(t)
	sc, stderr := redisCLIStream(t, addr, "MONITOR")
	if !sc.Scan() || sc.Text() != "OK" {
		t.Fatalf("redis-cli MONITOR: %q, want OK\n%s", sc.Text(), stderr.String())
	}
	if out, code := redisCLI(t, addr, "", "GETID"); code != 0 {
		t.Fatalf("redis-cli GETID: exit %d\n%s", code, out)
	}
	line := regexp.MustCompile(`^\d{10}\.\d{6} \[0 127\.0\.0\.1:\d+\] "GETID"$`)
	if !sc.Scan() || !line.MatchString(sc.Text()) {
		t.Fatalf("redis-cli MONITOR showed %q for a GETID, want a line like 1700000000.123456 [0 127.0.0.1:50000] \"GETID\"\n%s", sc.Text(), stderr.String())
	}
}

// redisCLIStream starts redis-cli with args against addr, for a mode that
// streams lines until stopped (--stat, MONITOR), and returns its output
// line by line and its stderr; it is stopped when the test ends.
func redisCLIStream(t *testing.T, addr string, args ...string) (*bufio.Scanner, *bytes.Buffer) {
	t.Helper()
	need(t, "redis-cli", "apt-get install redis-tools")
	need(t, "stdbuf", "apt-get install coreutils")
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	// Piped, redis-cli's output is block-buffered: stdbuf makes it lines.
	cmd := exec.CommandContext(ctx, "stdbuf", append(append([]string{"-oL", "redis-cli"}, cliConn(t, addr)...), args...)...)
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
	})
	return bufio.NewScanner(stdout), stderr
}

// memFigure is how redis-cli --stat prints used_memory: 896B, 1.23M.
var memFigure = regexp.MustCompile(`^\d+(\.\d+)?[BKMGTP]$`)

// cliStatRow checks the fields of a --stat row (keys, mem, clients,
// blocked, requests, (+delta), connections) and returns its requests.
func cliStatRow(f []string) (int64, error) {
	if len(f) < 7 {
		return 0, fmt.Errorf("%d fields, want 7: keys, mem, clients, blocked, requests, (+delta), connections", len(f))
	}
	n := make(map[string]int64)
	for i, name := range []string{0: "keys", 2: "clients", 3: "blocked", 4: "requests", 6: "connections"} {
		if name == "" {
			continue
		}
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%s %q is not a count", name, f[i])
		}
		n[name] = v
	}
	switch {
	case n["keys"] != 0:
		return 0, fmt.Errorf("keys %d, want 0: idserver stores none", n["keys"])
	case !memFigure.MatchString(f[1]):
		return 0, fmt.Errorf("mem %q is not a size", f[1])
	case n["clients"] < 1 || n["connections"] < 1:
		return 0, fmt.Errorf("clients %d, connections %d; want redis-cli's own counted", n["clients"], n["connections"])
	}
	return n["requests"], nil
}

// TestRedisCLIKeyScans runs --bigkeys and --memkeys, which ask DBSIZE
// and then SCAN the keyspace: on idserver's empty one they must finish
// cleanly with 0 keys.
func TestRedisCLIKeyScans(t *testing.T) {
	addr := startServer(t)
	for _, flag := range []string{"--bigkeys", "--memkeys"} {
		t.Run(flag, func(t *testing.T) {
			out, code := redisCLI(t, addr, "", flag)
			if code != 0 || !strings.Contains(out, "Sampled 0 keys in the keyspace!") {
				t.Fatalf("redis-cli %s: exit %d, want 0 and \"Sampled 0 keys\":\n%s", flag, code, out)
			}
		})
	}
}

// TestRedisCLILatency runs --latency with --raw and --csv, where it
// samples (PING) for -i seconds, prints one line, "min max avg samples",
// and exits.
func TestRedisCLILatency(t *testing.T) {
	addr := startServer(t)
	for _, c := range []struct{ flag, sep string }{{"--raw", " "}, {"--csv", ","}} {
		t.Run(c.flag, func(t *testing.T) {
			out, code := redisCLI(t, addr, "", "--latency", c.flag, "-i", "0.2")
			if err := cliLatencyLine(strings.TrimSpace(out), c.sep); err != nil || code != 0 {
				t.Fatalf("redis-cli --latency %s: exit %d, %v:\n%s", c.flag, code, err, out)
			}
		})
	}
}

// cliLatencyLine checks "min max avg samples": numbers, in that order of
// size, from at least one sample.
func cliLatencyLine(line, sep string) error {
	f := strings.Split(line, sep)
	if len(f) != 4 {
		return fmt.Errorf("%d fields, want min, max, avg, samples", len(f))
	}
	var v [4]float64
	for i := range f {
		var err error
		if v[i], err = strconv.ParseFloat(f[i], 64); err != nil {
			return err
		}
	}
	if minMS, maxMS, avg, samples := v[0], v[1], v[2], v[3]; samples < 1 || minMS > avg || avg > maxMS {
		return fmt.Errorf("min %v, max %v, avg %v, samples %v", minMS, maxMS, avg, samples)
	}
	return nil
}
