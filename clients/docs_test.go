package clients

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// docProgram is a code block of docs/clients.md: a whole program.
type docProgram struct {
	line int // of its opening fence
	text string
}

// docPrograms returns the ```lang blocks of docs/clients.md.
func docPrograms(t *testing.T, lang string) []docProgram {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "clients.md"))
	if err != nil {
		t.Fatal(err)
	}
	var progs []docProgram
	var cur *docProgram
	for i, line := range strings.Split(string(doc), "\n") {
		switch {
		case cur == nil && line == "```"+lang:
			cur = &docProgram{line: i + 1}
		case cur != nil && line == "```":
			progs = append(progs, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	if len(progs) == 0 {
		t.Fatalf("docs/clients.md has no %s block", lang)
	}
	return progs
}

// runDocProgram runs prog, written to a file named name in dir, with
// name's interpreter args before it, against a fresh server (its port for
// the docs' 6551), and checks it exits 0 having printed the new
// sequence's first value, 1, last.
func runDocProgram(t *testing.T, prog docProgram, dir, name string, env []string, args ...string) {
	t.Helper()
	_, port, _ := net.SplitHostPort(startServer(t))
	text := regexp.MustCompile(`\b6551\b`).ReplaceAllString(prog.text, port)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second) // a cold go run included
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], append(args[1:], name)...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	words := strings.Fields(string(out))
	if err != nil || len(words) == 0 || words[len(words)-1] != "1" {
		t.Fatalf("docs/clients.md:%d: %v: %v; want exit 0 and the INCR's 1 last, it printed:\n%s", prog.line, args, err, out)
	}
	t.Logf("docs/clients.md:%d: %s", prog.line, out)
}

// TestDocsPython runs the Python programs of docs/clients.md with
// Debian's redis-py and, where scripts/test.sh made it, PyPI's.
func TestDocsPython(t *testing.T) {
	pythons := []string{needRedisPy(t)}
	if _, err := os.Stat(venvPython); err == nil {
		abs, err := filepath.Abs(venvPython) // the program runs in a directory of its own
		if err != nil {
			t.Fatal(err)
		}
		pythons = append(pythons, abs)
	}
	for _, prog := range docPrograms(t, "python") {
		for _, python := range pythons {
			runDocProgram(t, prog, t.TempDir(), "example.py", nil, python)
		}
	}
}

// TestDocsNode runs the JavaScript programs of docs/clients.md with the
// library each requires, as npm ci installs it in clients/node.
func TestDocsNode(t *testing.T) {
	node := need(t, "node", "apt-get install nodejs npm")
	modules, err := filepath.Abs(filepath.Join("node", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	for _, prog := range docPrograms(t, "js") {
		lib := regexp.MustCompile(`require\('([^']+)'\)`).FindStringSubmatch(prog.text)
		if lib == nil {
			t.Fatalf("docs/clients.md:%d: the program requires no library", prog.line)
		}
		needNodeModules(t, lib[1])
		runDocProgram(t, prog, t.TempDir(), "example.js", []string{"NODE_PATH=" + modules}, node)
	}
}

// TestDocsGo runs the Go programs of docs/clients.md in a module of
// their own, with the server module's requirements (go-redis v9 among
// them; this module's go.mod points at the server by a relative replace)
// from the module cache: no network.
func TestDocsGo(t *testing.T) {
	files := map[string][]byte{}
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	files["go.mod"] = regexp.MustCompile(`(?m)^module .*$`).ReplaceAll(files["go.mod"], []byte("module example"))
	for _, prog := range docPrograms(t, "go") {
		dir := t.TempDir()
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		runDocProgram(t, prog, dir, "main.go", []string{"GOFLAGS=-mod=mod", "GOPROXY=off"}, "go", "run")
	}
}

// TestRedisBenchmarkDefaults: redis-benchmark on its defaults measures
// PING and stops at SET, with the error docs/clients.md quotes and no
// other.
func TestRedisBenchmarkDefaults(t *testing.T) {
	need(t, "redis-benchmark", "apt-get install redis-tools")
	doc, err := os.ReadFile(filepath.Join("..", "docs", "clients.md"))
	if err != nil {
		t.Fatal(err)
	}
	quoted := regexp.MustCompile("stops at `SET` \\(`([^`]+)`\\)").FindSubmatch([]byte(strings.Join(strings.Fields(string(doc)), " ")))
	if quoted == nil {
		t.Fatal("docs/clients.md does not say where redis-benchmark on its defaults stops: stops at `SET` (`<error>`)")
	}
	addr := startServer(t)
	out, _ := runClientTool(t, "", "redis-benchmark", append(cliConn(t, addr), "-q", "-n", "1000")...)
	stop := "Error from server: " + string(quoted[1]) // printed as it stops, amid PING's progress
	measured := strings.Replace(out, stop, "", 1)
	if err := benchReport(measured, []string{"PING_INLINE", "PING_MBULK"}); err != nil || measured == out || strings.Contains(out, "SET:") {
		t.Fatalf("redis-benchmark on its defaults: %v; want PING measured, then %q; it printed:\n%s", err, quoted[1], out)
	}
}
