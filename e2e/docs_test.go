package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testbin"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/internal/testpki"
)

// The sh blocks of the README and docs/ that start servers are run as a
// reader pastes them, line by line, with these changes, each so that
// the test owns what the block would take from the machine:
//
//   - The block runs in a directory of its own, holding a link to each
//     file of the repository (as a clone), ./idserver, the binary the
//     suite built (as the README's set-up leaves it), and the
//     certificates of testpki (ca.crt, server.crt, ...); /tmp/ is that
//     directory.
//   - `go build ... -o X` links that binary as X (the same package from
//     the same tree), and `idserver` on the PATH is it too, as after
//     `go install`.
//   - The ports the docs use (docPorts) become ports the test reserved,
//     each number consistently; the default port 6551 through
//     IDSERVER_PORT as well, for a server that names none.
//   - A line that starts etcd is not run: the test's etcd
//     (internal/testetcd) stands in, at the port that 2379 becomes.
//   - A server started in the foreground runs in the background, as in
//     a second terminal, and the next line waits until it answers (and,
//     in cluster mode, is past connecting to etcd), as a reader would.
//   - redis-cli prints as on a terminal (--no-raw); a redis-cli line
//     with a comment is retried until its output holds each
//     comma-separated part of the comment (a trailing ... cut), as a
//     reader would retry a server still starting.
//   - Each logical line runs in an sh of its own: such a block keeps no
//     variables and no loops across lines.
//   - Lines of programs the test cannot run here (docker, kubectl,
//     systemctl, scripts/test.sh, go install, ...) are skipped, and
//     logged.

// docPorts are the port numbers of the docs' commands: idserver's
// (6551 and the cluster quick start's), their metrics ports, etcd's.
var docPorts = regexp.MustCompile(`\b(655[0-9]|1655[0-9]|2379|9121)\b`)

// goBuild is a go build command line up to its end, with its -o.
var goBuild = regexp.MustCompile(`go build\b[^&;|]*?-o\s+(\S+)[^&;|]*`)

// docLine is a logical line of a shell block: its command and comment.
type docLine struct {
	number           int
	command, comment string
}

// docLines splits an sh block into logical lines (continuations
// joined), each with its trailing comment apart.
func docLines(b docBlock) []docLine {
	var lines []docLine
	logical, first := "", 0
	for i, l := range b.lines {
		if logical == "" {
			first = b.line + 1 + i
		}
		if rest, ok := strings.CutSuffix(l, `\`); ok {
			logical += rest + " "
			continue
		}
		logical += l
		line := docLine{number: first, command: logical}
		if at := regexp.MustCompile(`(^|\s)#`).FindStringIndex(logical); at != nil {
			line.command, line.comment = logical[:at[0]], strings.TrimSpace(logical[at[1]:])
		}
		if line.command = strings.TrimSpace(line.command); line.command != "" {
			lines = append(lines, line)
		}
		logical = ""
	}
	return lines
}

// programs are the names of the programs line runs.
func programs(line string) []string {
	var names []string
	for _, words := range shellCommands(line) {
		names = append(names, filepath.Base(words[0]))
	}
	return names
}

// startsServer reports whether line starts an idserver (not --version,
// --help or a --check-*).
func startsServer(line string) bool {
	for _, words := range shellCommands(line) {
		if filepath.Base(words[0]) == "idserver" && !slices.ContainsFunc(words[1:], func(w string) bool {
			return w == "--version" || w == "--help" || strings.HasPrefix(w, "--check-")
		}) {
			return true
		}
	}
	return false
}

// docRun is one block being run.
type docRun struct {
	t     *testing.T
	dir   string
	ports map[string]string // a doc's port number: the test's
	env   []string
}

// newDocRun prepares the directory, the PATH and the ports of block b.
func newDocRun(t *testing.T, b docBlock) *docRun {
	r := &docRun{t: t, dir: t.TempDir(), ports: map[string]string{}}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != ".git" && e.Name() != "idserver" {
			if err := os.Symlink(filepath.Join(repo, e.Name()), filepath.Join(r.dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Symlink(binary, filepath.Join(r.dir, "idserver")); err != nil { // as the README's set-up leaves it
		t.Fatal(err)
	}
	pki := testpki.New(t)
	for _, name := range []string{"ca.crt", "server.crt", "server.key", "client.crt", "client.key"} {
		if err := os.Symlink(pki.File(name), filepath.Join(r.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	bin := t.TempDir()
	if err := os.Symlink(binary, filepath.Join(bin, "idserver")); err != nil {
		t.Fatal(err)
	}
	for _, l := range docLines(b) {
		if slices.Contains(programs(l.command), "etcd") {
			_, port, _ := net.SplitHostPort(testetcd.Start(t).Endpoint)
			r.ports["2379"] = port
		}
	}
	r.env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "IDSERVER_") || strings.HasPrefix(kv, "PATH=")
	})
	r.env = append(r.env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "IDSERVER_PORT="+r.port("6551"))
	return r
}

// port is the test's port for the docs' port p.
func (r *docRun) port(p string) string {
	if r.ports[p] == "" {
		r.ports[p] = testbin.ReservedPort(r.t)
	}
	return r.ports[p]
}

// rewrite is line as the test runs it (see the top of this file).
func (r *docRun) rewrite(line string) string {
	line = docPorts.ReplaceAllStringFunc(line, r.port)
	line = strings.ReplaceAll(line, "/tmp/", r.dir+"/")
	line = goBuild.ReplaceAllString(line, "ln -sf '"+binary+"' $1 ")
	return regexp.MustCompile(`(^|[;&|]\s*)redis-cli\b`).ReplaceAllString(line, "${1}redis-cli --no-raw")
}

// runnable are the programs the test runs (go build having become ln).
var runnable = []string{"idserver", "redis-cli", "mkdir", "ln"}

// command is sh running line in the block's directory, in a process
// group of its own.
func (r *docRun) command(ctx context.Context, line string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir, cmd.Env = r.dir, r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// startServer runs a line that starts a server in the background, and
// waits until each port it serves answers: its --port (or the default's),
// its --tls-port.
func (r *docRun) startServer(l docLine, line string) {
	t := r.t
	cmd := r.command(context.Background(), strings.TrimSuffix(strings.TrimSpace(line), "&"))
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the group this test made: sh and the server
		<-exited
	})
	flag := func(name string) string {
		if m := regexp.MustCompile(`--` + name + `\s+(\d+)`).FindStringSubmatch(line); m != nil {
			return m[1]
		}
		return ""
	}
	plain := flag("port")
	if plain == "" {
		plain = r.port("6551")
	}
	ready := func() bool {
		if tls := flag("tls-port"); tls != "" && tls != "0" {
			c, err := net.Dial("tcp", "127.0.0.1:"+tls)
			if err != nil {
				return false
			}
			c.Close()
		}
		if plain == "0" {
			return true
		}
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + plain, Protocol: 2, MaxRetries: -1})
		defer c.Close()
		info, err := readInfo(c, "cluster")
		state, _ := info.get("cluster_state")
		return err == nil && state != "connecting"
	}
	gone := func() bool {
		select {
		case <-exited:
			return true
		default:
			return false
		}
	}
	if !await.Within(30*time.Second, func() bool { return gone() || ready() }) || gone() {
		t.Fatalf("line %d: %s\nran as: %s\nthe server exited, or did not answer within 30 s; it printed:\n%s", l.number, l.command, line, out.String())
	}
}

// run runs a line that starts no server, to its end: a redis-cli line
// until its output holds what its comment says.
func (r *docRun) run(l docLine, line string) {
	t := r.t
	var want []string
	if slices.Contains(programs(line), "redis-cli") && l.comment != "" {
		for _, part := range strings.Split(l.comment, ", ") {
			if part = strings.TrimSpace(strings.TrimSuffix(part, "...")); part != "" {
				want = append(want, part)
			}
		}
	}
	var out []byte
	var err error
	held := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err = r.command(ctx, line).CombinedOutput()
		return err == nil && !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(string(out), w) })
	}
	if len(want) == 0 && !held() || len(want) > 0 && !await.Within(20*time.Second, held) {
		t.Errorf("line %d: %s\nran as: %s\nexit: %v, want the output to hold %q; it printed:\n%s", l.number, l.command, line, err, want, out)
	}
}

// TestDocsStartServers runs each sh block of the README and docs/ that
// starts a server, as a reader pastes it (with the changes the top of
// this file lists): the README's set-up builds the binary the other
// docs call and runs it, the cluster quick start runs three servers on
// one etcd, each on its own dir, and their redis-cli lines print what
// their comments say.
func TestDocsStartServers(t *testing.T) {
	needProgram(t, "redis-cli", "apt-get install redis-tools")
	ran := map[string]bool{}
	for _, name := range docFiles(t) {
		for _, b := range fencedBlocks(t, name) {
			lines := docLines(b)
			if b.lang != "sh" || !slices.ContainsFunc(lines, func(l docLine) bool { return startsServer(l.command) }) {
				continue
			}
			ran[filepath.Base(name)] = true
			t.Run(fmt.Sprintf("%s:%d", filepath.Base(name), b.line), func(t *testing.T) {
				r := newDocRun(t, b)
				for _, l := range lines {
					line := r.rewrite(l.command)
					switch names := programs(line); {
					case slices.Contains(names, "etcd"):
						t.Logf("line %d: %s: the test's etcd stands in, at 127.0.0.1:%s", l.number, l.command, r.ports["2379"])
					case slices.ContainsFunc(names, func(n string) bool { return !slices.Contains(runnable, n) }):
						t.Logf("line %d: %s: not run here", l.number, l.command)
					case startsServer(line):
						r.startServer(l, line)
					default:
						r.run(l, line)
					}
				}
			})
		}
	}
	if !ran["README.md"] || !ran["cluster.md"] {
		t.Errorf("ran blocks of %v; want at least the README's set-up and the cluster quick start: each must start a server", slices.Sorted(maps.Keys(ran)))
	}
}
