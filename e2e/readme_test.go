package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/conf"
	"github.com/idserver/idserver/internal/redisargs"
)

// The README and docs/ show commands and their output. These tests keep
// them true: a reply that changes, a flag that is renamed or a link whose
// section moved fails here, not in a newcomer's terminal.

// docBlock is one fenced code block of a Markdown file.
type docBlock struct {
	file  string
	line  int    // of the opening fence, from 1
	lang  string // the word after ```: console, sh, ...
	lines []string
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d (```%s)", b.file, b.line, b.lang) }

// docFiles are the Markdown files checked: the README and docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, docs...)
}

// fencedBlocks returns the fenced code blocks of the Markdown file name,
// with the fence's indentation (a block inside a list item) taken off
// their lines.
func fencedBlocks(t *testing.T, name string) []docBlock {
	t.Helper()
	text, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docBlock
	var cur *docBlock
	indent := ""
	for i, line := range strings.Split(string(text), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if cur == nil {
			if lang, ok := strings.CutPrefix(trimmed, "```"); ok {
				cur = &docBlock{file: name, line: i + 1, lang: strings.TrimSpace(lang)}
				indent = line[:len(line)-len(trimmed)]
			}
			continue
		}
		if strings.TrimSpace(line) == "```" {
			blocks = append(blocks, *cur)
			cur = nil
			continue
		}
		cur.lines = append(cur.lines, strings.TrimPrefix(line, indent))
	}
	if cur != nil {
		t.Fatalf("%s: the fence is never closed", cur)
	}
	return blocks
}

// needProgram returns the path of program, or skips the test without it
// (fails it under CI=true, where scripts/test.sh installed it).
func needProgram(t *testing.T, program, install string) string {
	t.Helper()
	path, err := exec.LookPath(program)
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing: %s", program, install)
	}
	t.Skipf("%s is missing (%s; scripts/test.sh does)", program, install)
	return ""
}

// consoleStep is one "$ command" line of a console block and the output
// lines that follow it.
type consoleStep struct {
	line    int // in the file
	command string
	want    []string
}

// consoleSteps splits a console block into its commands and their output.
func consoleSteps(t *testing.T, b docBlock) []consoleStep {
	t.Helper()
	var steps []consoleStep
	for i, l := range b.lines {
		if cmd, ok := strings.CutPrefix(l, "$ "); ok {
			steps = append(steps, consoleStep{line: b.line + 1 + i, command: cmd})
			continue
		}
		if len(steps) == 0 {
			t.Errorf("%s: line %d is output before any \"$ \" command: %q", b, b.line+1+i, l)
			continue
		}
		steps[len(steps)-1].want = append(steps[len(steps)-1].want, l)
	}
	if len(steps) == 0 {
		t.Errorf("%s: a console block with no \"$ \" command", b)
	}
	return steps
}

// cliArgs turns a documented redis-cli command line into the arguments
// that run it against the test's server: -p 6551 becomes its port, and
// --no-raw makes redis-cli print replies as it does on a terminal
// ("(integer) 1", quoted strings, numbered arrays), which the docs show,
// rather than raw as it does into a pipe.
func cliArgs(command, port string) ([]string, error) {
	args, _, err := redisargs.Split([]byte(command), nil, nil)
	if err != nil {
		return nil, err
	}
	if len(args) == 0 || string(args[0]) != "redis-cli" {
		return nil, fmt.Errorf("only redis-cli commands can run here (teach readme_test.go the others)")
	}
	out := []string{"--no-raw", "-h", "127.0.0.1"}
	hasPort := false
	for i := 1; i < len(args); i++ {
		a := string(args[i])
		switch {
		case a == "-h" || a == "-u" || a == "-s":
			return nil, fmt.Errorf("%s would point redis-cli away from the test's server", a)
		case a == "-p" && i+1 < len(args):
			out = append(out, "-p", port)
			hasPort = true
			i++
		default:
			out = append(out, a)
		}
	}
	if !hasPort {
		return nil, fmt.Errorf("no -p 6551: the test cannot point it at its server")
	}
	return out, nil
}

// digitRuns are what varies between runs: IDs, unix and ISO-8601 times,
// random fields. The rest of a line is matched exactly.
var digitRuns = regexp.MustCompile(`[0-9]+`)

// lineShape is the pattern an output line must match: want with each run
// of digits standing for any run of digits (so an ISO time matches any
// time written the same way), and every other byte exact.
func lineShape(want string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	last := 0
	for _, m := range digitRuns.FindAllStringIndex(want, -1) {
		b.WriteString(regexp.QuoteMeta(want[last:m[0]]))
		b.WriteString("[0-9]+")
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(want[last:]) + "$")
	return regexp.MustCompile(b.String())
}

// sameShape reports the first line where got differs from want in shape,
// or -1 if they match line for line.
func sameShape(want, got []string) int {
	for i := range max(len(want), len(got)) {
		if i >= len(want) || i >= len(got) || !lineShape(want[i]).MatchString(got[i]) {
			return i
		}
	}
	return -1
}

// TestReadmeConsole runs every console block of the README and docs/
// against a server on its defaults and compares what redis-cli prints
// with what the docs show, numbers by shape.
func TestReadmeConsole(t *testing.T) {
	cli := needProgram(t, "redis-cli", "apt-get install redis-tools")
	p := start(t, nil)
	_, port, err := net.SplitHostPort(p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]int{}
	for _, name := range docFiles(t) {
		for _, b := range fencedBlocks(t, name) {
			if b.lang != "console" {
				// A command shown with its output outside a console
				// block would go unchecked.
				if slices.ContainsFunc(b.lines, func(l string) bool { return strings.HasPrefix(l, "$ ") }) {
					t.Errorf("%s: has \"$ \" lines: make it a console block, so this test runs it", b)
				}
				continue
			}
			for _, s := range consoleSteps(t, b) {
				args, err := cliArgs(s.command, port)
				if err != nil {
					t.Errorf("%s:%d: %q: %v", name, s.line, s.command, err)
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
				cancel()
				var got []string
				if text := strings.TrimRight(string(out), "\n"); text != "" {
					got = strings.Split(text, "\n")
				}
				if i := sameShape(s.want, got); i >= 0 {
					t.Errorf("%s:%d: $ %s\nfirst difference at output line %d (exit: %v)\nthe docs show:\n%s\nthe server printed:\n%s",
						name, s.line, s.command, i+1, err, strings.Join(s.want, "\n"), strings.Join(got, "\n"))
				}
				ran[name]++
			}
		}
	}
	if ran["../README.md"] == 0 {
		t.Error("README.md has no console command: the demo should be one, so that it is checked")
	}
	t.Logf("ran %v", ran)
}

// TestReadmeShapeCatchesMistakes checks the comparison itself: the
// README's demo matches a real transcript, and the mistakes a doc edit
// makes (a wrong reply type, a missing field, an extra line, a field
// renamed) do not.
func TestReadmeShapeCatchesMistakes(t *testing.T) {
	want := []string{
		` 1) "unix-ms"`,
		` 2) (integer) 1795351966861`,
		` 3) "time"`,
		` 4) "2026-11-22T12:52:46.861Z"`,
		` 5) "server-id"`,
		` 6) (integer) 0`,
	}
	transcript := []string{
		` 1) "unix-ms"`,
		` 2) (integer) 1795514531076`,
		` 3) "time"`,
		` 4) "2026-11-24T09:42:11.076Z"`,
		` 5) "server-id"`,
		` 6) (integer) 3`,
	}
	if i := sameShape(want, transcript); i >= 0 {
		t.Fatalf("another run's transcript differs at line %d", i+1)
	}
	edit := func(f func(l []string) []string) []string { return f(slices.Clone(want)) }
	for name, wrong := range map[string][]string{
		"a string for an integer": edit(func(l []string) []string { l[1] = ` 2) "1795351966861"`; return l }),
		"a missing field":         edit(func(l []string) []string { return l[:4] }),
		"an extra line":           edit(func(l []string) []string { return append(l, ` 7) "shard"`) }),
		"a renamed field":         edit(func(l []string) []string { l[4] = ` 5) "server_id"`; return l }),
		"a time without ms":       edit(func(l []string) []string { l[3] = ` 4) "2026-11-22T12:52:46Z"`; return l }),
		"a negative number":       edit(func(l []string) []string { l[5] = ` 6) (integer) -1`; return l }),
	} {
		if sameShape(wrong, transcript) < 0 {
			t.Errorf("%s: docs showing\n%s\nwould pass against\n%s", name, strings.Join(wrong, "\n"), strings.Join(transcript, "\n"))
		}
	}
}

// shellCommands splits a shell line into its simple commands, each as
// its words after the prefixes that do not name the program (sudo,
// VAR=value, do, ...).
func shellCommands(line string) [][]string {
	var cmds [][]string
	for _, seg := range regexp.MustCompile(`&&|\|\||[|;&]`).Split(line, -1) {
		words := strings.Fields(seg)
		for len(words) > 0 && (slices.Contains([]string{"sudo", "exec", "do", "then", "else", "nohup"}, words[0]) ||
			regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(words[0])) {
			words = words[1:]
		}
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
	}
	return cmds
}

// shellLines are the logical lines of a shell block: continuation lines
// joined, comments taken off.
func shellLines(b docBlock) []string {
	var lines []string
	logical := ""
	for _, l := range b.lines {
		if rest, ok := strings.CutSuffix(l, `\`); ok {
			logical += rest + " "
			continue
		}
		logical += l
		if i := regexp.MustCompile(`(^|\s)#`).FindStringIndex(logical); i != nil {
			logical = logical[:i[0]]
		}
		lines = append(lines, logical)
		logical = ""
	}
	return lines
}

// helpOptions are the options program --help lists (redis-cli,
// redis-benchmark): the first word of each option line.
func helpOptions(t *testing.T, program string) map[string]bool {
	t.Helper()
	path := needProgram(t, program, "apt-get install redis-tools")
	out, _ := exec.Command(path, "--help").CombinedOutput() // exit status varies by version
	opts := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s{1,2}(--?[A-Za-z0-9][A-Za-z0-9-]*)`).FindAllStringSubmatch(string(out), -1) {
		opts[m[1]] = true
	}
	if !opts["-p"] {
		t.Fatalf("%s --help lists no -p: cannot read its options from\n%s", program, out)
	}
	return opts
}

// TestReadmeShellFlags checks the sh blocks of the README and docs/:
// every --flag given to idserver (or go run .) is a configuration key or
// one of its own flags, every IDSERVER_* variable names a key, and every
// option given to redis-cli or redis-benchmark is one it has. The server
// refuses an unknown key, so a renamed one would otherwise show only when
// a reader pastes the line.
func TestReadmeShellFlags(t *testing.T) {
	keys := conf.Keys()
	// Flags of the command line only, not keys (conf.Load).
	idserverFlags := append([]string{"config", "version", "check-ready", "check-config", "help"}, keys...)
	envKey := func(env string) string {
		return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(env, "IDSERVER_"), "_", "-"))
	}
	flag := regexp.MustCompile(`^--?[A-Za-z][A-Za-z0-9-]*`)
	type use struct {
		where   string
		program string
		option  string
	}
	var uses []use
	checked := 0
	for _, name := range docFiles(t) {
		for _, b := range fencedBlocks(t, name) {
			if b.lang != "sh" && b.lang != "bash" && b.lang != "shell" {
				continue
			}
			for _, env := range regexp.MustCompile(`\bIDSERVER_[A-Z0-9_]+`).FindAllString(strings.Join(b.lines, "\n"), -1) {
				if !slices.Contains(keys, envKey(env)) {
					t.Errorf("%s: %s names no key %q", b, env, envKey(env))
				}
			}
			for _, line := range shellLines(b) {
				for _, words := range shellCommands(line) {
					program, args := filepath.Base(words[0]), words[1:]
					if program == "go" && len(words) > 2 && words[1] == "run" && words[2] == "." {
						program, args = "idserver", words[3:]
					}
					if program != "idserver" && program != "redis-cli" && program != "redis-benchmark" {
						continue
					}
					checked++
					for _, a := range args {
						if f := flag.FindString(a); f != "" {
							uses = append(uses, use{b.String(), program, f})
						}
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no idserver, redis-cli or redis-benchmark command found in any sh block: is the parsing broken?")
	}
	options := map[string]map[string]bool{}
	for _, u := range uses {
		if u.program == "idserver" {
			if !strings.HasPrefix(u.option, "--") || !slices.Contains(idserverFlags, strings.TrimPrefix(u.option, "--")) {
				t.Errorf("%s: idserver %s is no configuration key or flag (idserver --help lists them)", u.where, u.option)
			}
			continue
		}
		if options[u.program] == nil {
			options[u.program] = helpOptions(t, u.program)
		}
		if !options[u.program][u.option] {
			t.Errorf("%s: %s has no option %s", u.where, u.program, u.option)
		}
	}
	t.Logf("%d commands, %d options checked", checked, len(uses))
}

// headingSlug is the anchor GitHub gives a heading: lower case, spaces as
// hyphens, punctuation other than hyphens and underscores dropped.
func headingSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestReadmeLinks checks every relative link of the README and docs/:
// the file exists, and a #section names a heading in it.
func TestReadmeLinks(t *testing.T) {
	anchors := func(name string) map[string]bool {
		text, err := os.ReadFile(name)
		if err != nil {
			return nil
		}
		found := map[string]bool{}
		inFence := false
		for line := range strings.Lines(string(text)) {
			if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
				inFence = !inFence
			}
			if h, ok := strings.CutPrefix(line, "#"); ok && !inFence {
				found[headingSlug(strings.TrimLeft(h, "#"))] = true
			}
		}
		return found
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	n := 0
	for _, name := range docFiles(t) {
		text, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			path, anchor, _ := strings.Cut(target, "#")
			file := name
			if path != "" {
				file = filepath.Join(filepath.Dir(name), path)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s: link %s: %v", name, target, err)
					continue
				}
			}
			if anchor != "" && !anchors(file)[anchor] {
				t.Errorf("%s: link %s: %s has no heading with the anchor #%s", name, target, file, anchor)
			}
		}
	}
	t.Logf("%d links checked", n)
}
