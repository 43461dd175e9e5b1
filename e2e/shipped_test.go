package e2e

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/idserver/idserver/conf"
	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/sequence"
)

// checkConfig runs idserver --check-config with args and env (the
// test's environment without its own IDSERVER_* variables) and returns
// its exit status, stdout and stderr.
func checkConfig(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary, append([]string{"--check-config"}, args...)...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "IDSERVER_") })
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// TestCheckConfig: --check-config accepts a good configuration and
// refuses a bad one with the start's one line, as nginx -t, and touches
// nothing a start would: no file in dir (not even while a server serves
// from it), no bind of a port in use, no dial of an etcd that does not
// answer.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, port, _ := net.SplitHostPort(busy.Addr().String())
	began := time.Now()
	code, out, errOut := checkConfig(t, nil, "--dir", dir, "--port", port,
		"--etcd-endpoints", "192.0.2.1:2379", "--etcd-dial-timeout", "30")
	if code != 0 || out != "configuration OK\n" || errOut != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and \"configuration OK\"", code, out, errOut)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("took %v: it waited for something (etcd's dial timeout is 30 s)", took)
	}
	if des, _ := os.ReadDir(dir); len(des) != 0 {
		t.Errorf("dir holds %v after --check-config; want nothing", des)
	}

	p := start(t, nil, "--dir", dir)
	before, _ := os.ReadDir(dir)
	if code, out, errOut := checkConfig(t, nil, "--dir", dir, "--port", port); code != 0 {
		t.Errorf("beside a server on the same dir: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("dir held %v, then %v after --check-config", before, after)
	}
	if p.Stop() != 0 {
		t.Error("the server beside it did not stop cleanly")
	}

	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--shard-range", "10"}, "invalid config: id-range 2 + shard-range 10 + random-range 10 = 22, must be 21"},
		{[]string{"IDSERVER_PROT=6553"}, nil, "IDSERVER_PROT"},
		{nil, []string{"--tls-port", "6552", "--tls-cert-file", "/nonexistent.crt", "--tls-key-file", "/nonexistent.key", "--tls-auth-clients", "no"}, "/nonexistent.crt"},
	} {
		code, out, errOut := checkConfig(t, c.env, append(c.args, "--dir", dir)...)
		if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v %v: exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", c.env, c.args, code, out, errOut, c.want)
		}
	}
}

// shippedConfig is a configuration that deploy/, the Dockerfile or the
// docs ship, as its deployment hands it to the server.
type shippedConfig struct {
	where string
	file  string   // the config file's text; "" for none
	env   []string // the IDSERVER_* variables the deployment sets
	args  []string // the flags it passes
}

// argv is c's command line: the file (written to a temporary one),
// then the flags.
func (c shippedConfig) argv(t *testing.T) []string {
	t.Helper()
	if c.file == "" {
		return c.args
	}
	name := filepath.Join(t.TempDir(), "idserver.conf")
	if err := os.WriteFile(name, []byte(c.file), 0o600); err != nil {
		t.Fatal(err)
	}
	return append([]string{name}, c.args...)
}

// load is the configuration c gives, read as the server reads it.
func (c shippedConfig) load(t *testing.T) *conf.Config {
	t.Helper()
	cfg, err := conf.Load(c.argv(t), c.env)
	if err != nil {
		t.Fatalf("%s: %v", c.where, err)
	}
	return cfg
}

// imageEnv is the IDSERVER_* variables the Dockerfile's final stage sets
// (ENV name=value ...).
func imageEnv(t *testing.T) []string {
	t.Helper()
	stages := dockerStages(t)
	var env []string
	for _, l := range stages[len(stages)-1].lines {
		if rest, ok := strings.CutPrefix(l, "ENV "); ok {
			for _, kv := range strings.Fields(rest) {
				if !strings.Contains(kv, "=") {
					t.Fatalf("Dockerfile: ENV %s: want name=value pairs", rest)
				}
				env = append(env, kv)
			}
		}
	}
	return env
}

// dockerRunEnv is the -e NAME=value variables of each docker run command
// of text (shell lines), with the image's own first.
func dockerRunEnv(image, lines []string) [][]string {
	var runs [][]string
	for _, line := range lines {
		for _, words := range shellCommands(line) {
			if len(words) < 2 || words[0] != "docker" || words[1] != "run" {
				continue
			}
			env := slices.Clone(image)
			for i, w := range words {
				if w == "-e" && i+1 < len(words) {
					env = append(env, strings.Trim(words[i+1], `'"`))
				}
			}
			runs = append(runs, env)
		}
	}
	return runs
}

// unitConfig is the configuration deploy/idserver.service runs with:
// ExecStart's flags, Environment= lines, and as the file
// redis.conf.example, which operations.md installs as
// /etc/idserver/idserver.conf.
func unitConfig(t *testing.T, example string) shippedConfig {
	t.Helper()
	text, err := os.ReadFile("../deploy/idserver.service")
	if err != nil {
		t.Fatal(err)
	}
	c := shippedConfig{where: "deploy/idserver.service", file: example}
	for line := range strings.Lines(string(text)) {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "ExecStart="); ok {
			words := strings.Fields(rest)[1:]
			for i := 0; i < len(words); i++ {
				if words[i] == "--config" { // the file: example
					i++
					continue
				}
				c.args = append(c.args, words[i])
			}
		}
		if rest, ok := strings.CutPrefix(line, "Environment="); ok {
			c.env = append(c.env, strings.Fields(rest)...)
		}
	}
	return c
}

// docConfBlocks are the ```conf blocks of the README and docs/.
func docConfBlocks(t *testing.T) []shippedConfig {
	var cs []shippedConfig
	for _, name := range docFiles(t) {
		for _, b := range fencedBlocks(t, name) {
			if b.lang == "conf" {
				cs = append(cs, shippedConfig{where: b.String(), file: strings.Join(b.lines, "\n") + "\n"})
			}
		}
	}
	return cs
}

// shippedConfigs finds every configuration deploy/, the Dockerfile,
// redis.conf.example and the docs ship.
func shippedConfigs(t *testing.T) []shippedConfig {
	t.Helper()
	example, err := os.ReadFile("../redis.conf.example")
	if err != nil {
		t.Fatal(err)
	}
	image := imageEnv(t)
	cs := []shippedConfig{
		{where: "redis.conf.example", file: string(example)},
		{where: "Dockerfile ENV", env: image},
		unitConfig(t, string(example)),
		kubernetesConfig(t, readManifest(t), image),
	}
	text, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var comments []string
	for line := range strings.Lines(string(text)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "#"); ok {
			comments = append(comments, rest)
		}
	}
	sources := map[string][]string{"Dockerfile's comment": joinContinued(comments)}
	for _, name := range docFiles(t) {
		for _, b := range fencedBlocks(t, name) {
			if b.lang == "sh" {
				sources[b.String()] = shellLines(b)
			}
		}
	}
	for where, lines := range sources {
		for _, env := range dockerRunEnv(image, lines) {
			cs = append(cs, shippedConfig{where: where + " docker run", env: env})
		}
	}
	return append(cs, docConfBlocks(t)...)
}

// joinContinued joins shell lines continued with a backslash.
func joinContinued(lines []string) []string {
	return shellLines(docBlock{lines: lines})
}

// TestShippedConfigsPass runs every configuration deploy/, the
// Dockerfile, redis.conf.example and the docs ship through the server's
// own --check-config, as each deployment hands it over.
func TestShippedConfigsPass(t *testing.T) {
	cs := shippedConfigs(t)
	for _, c := range cs {
		args := c.argv(t)
		code, out, errOut := checkConfig(t, c.env, args...)
		if code != 0 || out != "configuration OK\n" {
			t.Errorf("%s: idserver --check-config %v with %v: exit %d, %s%s", c.where, args, c.env, code, out, errOut)
		}
	}
	if len(cs) < 6 {
		t.Errorf("found %d configurations; want at least the example, the image, the unit, the manifest and two docker runs", len(cs))
	}
	t.Logf("%d configurations checked", len(cs))
}

// k8sObject holds the fields of a Kubernetes object these tests read.
type k8sObject struct {
	Kind     string
	Metadata struct{ Name string }
	Data     map[string]string // a ConfigMap's
	Spec     struct {
		Replicas       int
		MaxUnavailable any `yaml:"maxUnavailable"` // a PodDisruptionBudget's
		Selector       struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		}
		Template struct {
			Metadata struct{ Labels map[string]string }
			Spec     struct {
				Containers []k8sContainer
				Volumes    []struct {
					Name      string
					ConfigMap *struct{ Name string } `yaml:"configMap"`
				}
			}
		}
		VolumeClaimTemplates []struct {
			Metadata struct{ Name string }
			Spec     struct {
				Resources k8sResources
			}
		} `yaml:"volumeClaimTemplates"`
	}
}

// k8sContainer is a container of a pod template.
type k8sContainer struct {
	Args []string
	Env  []struct {
		Name      string
		Value     string
		ValueFrom *struct {
			SecretKeyRef *struct{ Name, Key string } `yaml:"secretKeyRef"`
			FieldRef     *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	}
	Ports          []k8sPort
	StartupProbe   k8sProbe     `yaml:"startupProbe"`
	ReadinessProbe k8sProbe     `yaml:"readinessProbe"`
	LivenessProbe  k8sProbe     `yaml:"livenessProbe"`
	Resources      k8sResources `yaml:"resources"`
	VolumeMounts   []struct {
		Name      string
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// k8sResources are requests and limits: cpu, memory, storage.
// k8sPort is a port of a container.
type k8sPort struct {
	Name          string
	ContainerPort int `yaml:"containerPort"`
}

type k8sResources struct {
	Requests map[string]string
	Limits   map[string]string
}

// k8sProbe is a container probe; Port is a number or a port's name.
type k8sProbe struct {
	HTTPGet struct {
		Path string
		Port string
	} `yaml:"httpGet"`
}

// readManifest parses deploy/kubernetes/idserver.yaml, each object by
// its kind (one of each).
func readManifest(t *testing.T) map[string]k8sObject {
	t.Helper()
	f, err := os.Open("../deploy/kubernetes/idserver.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objects := map[string]k8sObject{}
	for dec := yaml.NewDecoder(f); ; {
		var o k8sObject
		if err := dec.Decode(&o); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("deploy/kubernetes/idserver.yaml: %v", err)
		}
		if _, dup := objects[o.Kind]; dup {
			t.Fatalf("deploy/kubernetes/idserver.yaml: two %ss; this test reads one", o.Kind)
		}
		objects[o.Kind] = o
	}
	set := objects["StatefulSet"]
	if len(set.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("deploy/kubernetes/idserver.yaml: no StatefulSet with one container")
	}
	return objects
}

// kubernetesConfig is the configuration the StatefulSet's container
// runs with: the image's variables, then the container's (a secret's
// value stands in as "secret", a field's as pod 0's: "0"), and its
// arguments, a config file among
// them read from the ConfigMap mounted there.
func kubernetesConfig(t *testing.T, objects map[string]k8sObject, image []string) shippedConfig {
	t.Helper()
	pod := objects["StatefulSet"].Spec.Template.Spec
	c := pod.Containers[0]
	sc := shippedConfig{where: "deploy/kubernetes/idserver.yaml", env: slices.Clone(image)}
	for _, e := range c.Env {
		value := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			value = "secret"
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			value = "10.1.2.3"
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			value = "0" // metadata.labels['apps.kubernetes.io/pod-index'] of the first pod
		}
		sc.env = append(sc.env, e.Name+"="+value)
	}
	for _, a := range c.Args {
		if strings.HasPrefix(a, "-") {
			sc.args = append(sc.args, a)
			continue
		}
		sc.file = mountedFile(t, objects, c, a)
	}
	return sc
}

// mountedFile is the text of the file at path in container c: a key of
// the ConfigMap mounted on its directory.
func mountedFile(t *testing.T, objects map[string]k8sObject, c k8sContainer, path string) string {
	t.Helper()
	pod := objects["StatefulSet"].Spec.Template.Spec
	for _, m := range c.VolumeMounts {
		rel, err := filepath.Rel(m.MountPath, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && objects["ConfigMap"].Metadata.Name == v.ConfigMap.Name {
				if text, ok := objects["ConfigMap"].Data[rel]; ok {
					return text
				}
			}
		}
	}
	t.Fatalf("deploy/kubernetes/idserver.yaml: the argument %s is no file of a ConfigMap mounted in the container", path)
	return ""
}

// quantity parses a Kubernetes quantity of bytes: 2Gi, 1100Mi, 512M,
// 1000000. (k8s.io/apimachinery's resource.Quantity would parse every
// form; these are the forms of storage and memory, and the module is
// not worth its dependencies for a test.)
func quantity(t *testing.T, s string) int64 {
	t.Helper()
	units := []struct {
		suffix string
		factor int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				t.Fatalf("quantity %q: %v", s, err)
			}
			return n * u.factor
		}
	}
	panic("unreachable: the last unit matches every string")
}

// TestKubernetesManifest checks what the example deploys: several pods
// only over etcd (without it each pod keeps its own counters, and two
// answer INCR with the same numbers), a PodDisruptionBudget over them, a
// memory limit at or above the RSS ceiling its configuration states
// (conf.Config.Memory), a volume at or above the sequence file's bound
// (sequence.FileBound), no GOMEMLIMIT that would override the server's
// own limit, probes on the endpoints the server serves, and pods that
// can reach each other: an address announced (bound to every address, a
// pod announces none, and the others could neither pull its slots' keys
// at a handover nor forward it commands: every handover skipped values,
// and plain clients lost per-key order), and a fixed cluster-port among
// the container's ports.
func TestKubernetesManifest(t *testing.T) {
	objects := readManifest(t)
	set := objects["StatefulSet"]
	c := set.Spec.Template.Spec.Containers[0]
	cfg := kubernetesConfig(t, objects, imageEnv(t)).load(t)

	if set.Spec.Replicas < 1 {
		t.Errorf("replicas %d", set.Spec.Replicas)
	}
	if set.Spec.Replicas > 1 && cfg.EtcdEndpoints == "" {
		t.Errorf("replicas %d without etcd-endpoints: each pod hands out its own INCR values, the same numbers as the others", set.Spec.Replicas)
	}
	if pdb, ok := objects["PodDisruptionBudget"]; set.Spec.Replicas > 1 &&
		(!ok || !maps.Equal(pdb.Spec.Selector.MatchLabels, set.Spec.Template.Metadata.Labels)) {
		t.Errorf("no PodDisruptionBudget selecting the pods (labels %v)", set.Spec.Template.Metadata.Labels)
	}

	mem := cfg.Memory(sequence.KeyBytes)
	if mem.Ceiling == 0 {
		t.Error("maxmemory-clients 0: the configuration states no memory ceiling to size the pod by")
	}
	if limit := quantity(t, c.Resources.Limits["memory"]); limit < mem.Ceiling {
		t.Errorf("memory limit %s (%d MiB) is below the configuration's RSS ceiling, %d MiB", c.Resources.Limits["memory"], limit>>20, mem.Ceiling>>20)
	}
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			t.Errorf("GOMEMLIMIT %s: it overrides the Go memory limit the server derives from its configuration", e.Value)
		}
	}
	bound := sequence.FileBound(cfg.SeqMaxKeys, cfg.SeqMaxKeyBytes)
	var storage int64
	for _, v := range set.Spec.VolumeClaimTemplates {
		for _, m := range c.VolumeMounts {
			if m.Name == v.Metadata.Name && m.MountPath == cfg.Dir {
				storage = quantity(t, v.Spec.Resources.Requests["storage"])
			}
		}
	}
	if storage < bound {
		t.Errorf("the volume on dir %s holds %d MiB; the sequence file's bound is %d MiB (seq-max-keys %d of seq-max-key-bytes %d)",
			cfg.Dir, storage>>20, bound>>20, cfg.SeqMaxKeys, cfg.SeqMaxKeyBytes)
	}

	if set.Spec.Replicas > 1 && cfg.ClusterAnnounceIP == "" && slices.ContainsFunc(cfg.Bind.Addrs(), func(a conf.BindAddr) bool { return a.IP.IsUnspecified() }) {
		t.Errorf("bind %s without cluster-announce-ip: a pod announces no address the others can reach it at", cfg.Bind)
	}
	if cfg.ClusterPort != 0 && !slices.ContainsFunc(c.Ports, func(p k8sPort) bool { return p.ContainerPort == cfg.ClusterPort }) {
		t.Errorf("cluster-port %d is not among the container's ports %v", cfg.ClusterPort, c.Ports)
	}
	_, metricsPort, err := net.SplitHostPort(cfg.MetricsAddr)
	if err != nil {
		t.Fatalf("metrics-addr %q: %v", cfg.MetricsAddr, err)
	}
	for _, p := range []struct {
		name  string
		probe k8sProbe
		path  string
	}{{"startup", c.StartupProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		port := p.probe.HTTPGet.Port
		for _, cp := range c.Ports {
			if cp.Name == port {
				port = strconv.Itoa(cp.ContainerPort)
			}
		}
		if p.probe.HTTPGet.Path != p.path || port != metricsPort {
			t.Errorf("%s probe %+v: want GET %s on port %s (metrics-addr)", p.name, p.probe.HTTPGet, p.path, metricsPort)
		}
	}
	t.Logf("replicas %d, etcd-endpoints %s, memory limit %s against a ceiling of %d MiB, volume %d MiB against a bound of %d MiB",
		set.Spec.Replicas, cfg.EtcdEndpoints, c.Resources.Limits["memory"], mem.Ceiling>>20, storage>>20, bound>>20)
}

// TestDirLossDescribed: every place that tells an operator to keep dir
// says what losing it costs: IDs start max-lead-ms ahead, which is safe,
// but the sequences restart at 1 (or, in cluster mode, lose their guard
// against etcd losing data), which repeats numbers.
func TestDirLossDescribed(t *testing.T) {
	help, _ := exec.Command(binary, "--help").CombinedOutput()
	texts := map[string]string{"idserver --help": string(help)}
	for _, name := range []string{"../README.md", "../Dockerfile", "../deploy/idserver.service", "../deploy/kubernetes/idserver.yaml",
		"../docs/operations.md", "../docs/configuration.md", "../redis.conf.example"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		texts[name] = string(b)
	}
	said := regexp.MustCompile(`restarts?( every counter)? at 1|etcd loses a mark`)
	for name, text := range texts {
		flat := strings.Join(strings.Fields(strings.NewReplacer("#", " ", "*", " ").Replace(text)), " ")
		if !strings.Contains(flat, "max-lead-ms") || !said.MatchString(flat) {
			t.Errorf("%s describes dir without what losing it costs the sequences (want %q beside max-lead-ms)", name, said)
		}
	}
}

// filesWritten runs a server with args on a new dir until it has handed
// out a value of a sequence, stops it, and returns the names of the
// files it held there while running and left there, with those it writes only for a moment: a
// sequence file's fold (<name>.fold) and an atomic write's temporary
// file (.<name>.tmp<random>).
func filesWritten(t *testing.T, args ...string) []string {
	t.Helper()
	dir := t.TempDir()
	p := start(t, nil, append(args, "--dir", dir)...)
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	await.True(t, 30*time.Second, "INCR answered", func() bool { return c.Incr(context.Background(), "orders").Err() == nil })
	running, err := os.ReadDir(dir) // the dir lock is there only while it runs
	if err != nil {
		t.Fatal(err)
	}
	if p.Stop() != 0 {
		t.Fatal("the server did not stop cleanly")
	}
	stopped, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range append(running, stopped...) {
		names = append(names, de.Name(), "."+de.Name()+".tmp4021337")
		if strings.HasPrefix(de.Name(), "idserver.seq") {
			names = append(names, de.Name()+".fold")
		}
	}
	return names
}

// dockerIgnored reports whether a file name at the root of the build
// context matches a pattern of .dockerignore: **/ matches any directory
// (the root too), a leading / anchors at the root, and the rest is
// filepath.Match's, as Docker's matcher has it (moby/patternmatcher,
// not a dependency of this module, for these forms).
func dockerIgnored(patterns []string, name string) bool {
	for _, p := range patterns {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "**/"), "/")
		if ok, _ := filepath.Match(p, name); ok {
			return true
		}
	}
	return false
}

// TestIgnoreFilesCoverDir runs a server in single-server mode and in
// cluster mode (etcd, cluster-enabled yes) on the default file names and
// wants each file it writes in dir to be ignored by git (.gitignore: the
// README's examples run in the clone) and left out of the image's build
// context (.dockerignore).
func TestIgnoreFilesCoverDir(t *testing.T) {
	git := needProgram(t, "git", "apt-get install git")
	e := testetcd.Start(t)
	names := append(filesWritten(t), filesWritten(t, "--etcd-endpoints", e.Endpoint, "--cluster-enabled", "yes")...)
	slices.Sort(names)
	names = slices.Compact(names)
	text, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for line := range strings.Lines(string(text)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, line)
		}
	}
	for _, name := range names {
		cmd := exec.Command(git, "check-ignore", "--no-index", "-q", name)
		cmd.Dir = ".."
		if err := cmd.Run(); err != nil {
			t.Errorf("%s: not in .gitignore (git check-ignore: %v)", name, err)
		}
		if !dockerIgnored(patterns, name) {
			t.Errorf("%s: not in .dockerignore", name)
		}
	}
	t.Logf("checked %v", names)
}

// TestKubernetesManifestSchema validates the manifest against
// Kubernetes's own schemas, strictly (an unknown or misspelt field
// fails), at 1.28, the oldest version it is for, with kubernetes-validate
// (PyPI, schemas included: no cluster or network needed), which
// scripts/test.sh installs into clients/python/.venv as
// deploy/kubernetes/validate-requirements.txt pins it; kubectl's own
// validation needs a cluster.
func TestKubernetesManifestSchema(t *testing.T) {
	validate := "../clients/python/.venv/bin/kubernetes-validate"
	if _, err := os.Stat(validate); err != nil {
		validate = needProgram(t, "kubernetes-validate", "scripts/test.sh installs it into clients/python/.venv")
	}
	out, err := exec.Command(validate, "--strict", "-k", "1.28.0", "../deploy/kubernetes/idserver.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("kubernetes-validate: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
