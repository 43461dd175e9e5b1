package e2e

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idserver/idserver/conf"
)

// dockerStage is one FROM ... stage of a Dockerfile: its image and its
// instructions, upper-cased keyword first, continuation lines joined.
type dockerStage struct {
	from  string
	lines []string
}

// dockerStages reads the Dockerfile's stages, in order.
func dockerStages(t *testing.T) []dockerStage {
	t.Helper()
	text, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var stages []dockerStage
	logical := ""
	for line := range strings.Lines(string(text)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || line == "" && logical == "" {
			continue
		}
		if rest, ok := strings.CutSuffix(line, `\`); ok {
			logical += rest + " "
			continue
		}
		logical += line
		keyword, args, _ := strings.Cut(logical, " ")
		keyword, logical = strings.ToUpper(keyword), ""
		if keyword == "FROM" {
			stages = append(stages, dockerStage{from: args})
		} else if len(stages) > 0 {
			stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, keyword+" "+args)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and a final one", len(stages))
	}
	return stages
}

// TestDockerfileBuild runs the build stage's own go build line, as the
// image build would, and checks its output can run on distroless/static:
// no dynamic loader or shared libraries (cgo creeping in would make the
// binary fail there with a bare "not found"), no symbols or build paths,
// and it runs. It also checks the final stage runs as non-root, keeps its
// state on a volume, and probes itself for health.
func TestDockerfileBuild(t *testing.T) {
	stages := dockerStages(t)
	build, final := stages[0], stages[len(stages)-1]
	var command string
	for _, l := range build.lines {
		if strings.HasPrefix(l, "RUN ") && strings.Contains(l, "go build") {
			command = strings.TrimPrefix(l, "RUN ")
		}
	}
	out := regexp.MustCompile(`-o\s+(\S+)`).FindStringSubmatch(command)
	if !strings.HasPrefix(command, "CGO_ENABLED=0 ") || out == nil {
		t.Fatalf("build stage's go build line %q: want CGO_ENABLED=0 and -o", command)
	}
	bin := filepath.Join(t.TempDir(), "idserver")
	cmd := exec.Command("sh", "-c", strings.Replace(command, out[0], "-o '"+bin+"'", 1))
	cmd.Dir = ".." // the build context
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, msg)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has a PT_INTERP header: it is dynamically linked")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
	if f.Section(".symtab") != nil {
		t.Error("the binary has a .symtab: not built with -ldflags=-s")
	}
	data, _ := os.ReadFile(bin)
	if root, _ := filepath.Abs(".."); bytes.Contains(data, []byte(root)) {
		t.Errorf("the binary contains the build directory %s: not built with -trimpath", root)
	}
	version, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.HasPrefix(string(version), "idserver ") {
		t.Errorf("%s --version: %v, %q", bin, err, version)
	}

	want := map[string]func(args string) bool{
		"COPY": func(args string) bool { return strings.HasSuffix(args, " "+out[1]+" /idserver") },
		"USER": func(args string) bool {
			uid, err := strconv.Atoi(strings.Split(args, ":")[0])
			return err == nil && uid > 0
		},
		"VOLUME":      func(args string) bool { return args == "/data" || args == `["/data"]` },
		"HEALTHCHECK": func(args string) bool { return jsonCmd(args, "CMD ") == `["/idserver","--check-ready"]` },
		"ENTRYPOINT":  func(args string) bool { return jsonCmd(args, "") == `["/idserver"]` },
	}
	var missing []string
	for keyword, ok := range want {
		var args []string // of every line with the keyword
		for _, l := range final.lines {
			if a, found := strings.CutPrefix(l, keyword+" "); found {
				args = append(args, a)
			}
		}
		if keyword == "USER" || keyword == "HEALTHCHECK" || keyword == "ENTRYPOINT" {
			args = args[max(len(args)-1, 0):] // the last one wins
		}
		if !slices.ContainsFunc(args, ok) {
			missing = append(missing, keyword)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Errorf("the final stage (FROM %s) lacks the expected %s:\n%s", final.from, strings.Join(missing, ", "), strings.Join(final.lines, "\n"))
	}
}

// jsonCmd returns the JSON array that follows prefix (after any --option)
// in args, compacted, or "" if there is none.
func jsonCmd(args, prefix string) string {
	_, cmd, ok := strings.Cut(args, prefix+"[")
	var words []string
	if !ok || json.Unmarshal([]byte("["+cmd), &words) != nil {
		return ""
	}
	b, _ := json.Marshal(words)
	return string(b)
}

// TestPackagingUsesKnownKeys checks that every IDSERVER_* variable the
// packaging files mention, and every --flag the systemd unit passes, is a
// configuration key: the server refuses to start on one that is not, so a
// misspelt or renamed key would only show when an operator deploys.
func TestPackagingUsesKnownKeys(t *testing.T) {
	known := map[string]bool{"config": true} // --config is a flag, not a key
	for _, k := range conf.Keys() {
		known[k] = true
	}
	key := func(env string) string {
		return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(env, "IDSERVER_"), "_", "-"))
	}
	for _, name := range []string{"../Dockerfile", "../deploy/idserver.service", "../deploy/kubernetes/idserver.yaml"} {
		text, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		// Comments count too: they tell operators what to set.
		for _, env := range regexp.MustCompile(`\bIDSERVER_[A-Z0-9_]+`).FindAllString(string(text), -1) {
			if !known[key(env)] {
				t.Errorf("%s: %s names no key %q", name, env, key(env))
			}
		}
		for _, exec := range regexp.MustCompile(`(?m)^ExecStart=.*$`).FindAllString(string(text), -1) {
			for _, flag := range regexp.MustCompile(`\s--([a-z0-9-]+)`).FindAllStringSubmatch(exec, -1) {
				if !known[flag[1]] {
					t.Errorf("%s: ExecStart passes --%s, which is no key", name, flag[1])
				}
			}
		}
	}
}

// TestMetricsPublishedOnLoopback: every docker run the Dockerfile, docs/,
// deploy/ and README.md show publishes the metrics port (9121: no
// authentication) on the host's 127.0.0.1 only, never on every
// interface; it publishes the port at all in the Dockerfile's example.
func TestMetricsPublishedOnLoopback(t *testing.T) {
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := filepath.Glob("../deploy/*/*")
	if err != nil {
		t.Fatal(err)
	}
	published := regexp.MustCompile(`(?:-p|--publish)[ =](\S*:)?9121\b`)
	seen := 0
	for _, name := range slices.Concat([]string{"../Dockerfile", "../README.md"}, files, deploy) {
		text, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range published.FindAllStringSubmatch(string(text), -1) {
			seen++
			if m[1] != "127.0.0.1:9121:" {
				t.Errorf("%s: %q publishes the metrics port beyond the host's loopback; want -p 127.0.0.1:9121:9121", name, m[0])
			}
		}
	}
	if seen == 0 {
		t.Error("no example publishes the metrics port: this test reads none")
	}
}
