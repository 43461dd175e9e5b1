package e2e

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// checkConfig runs idserver --check-config with args and env (added to
// none of the test's own IDSERVER_* variables) and returns its exit
// status, stdout and stderr.
func checkConfig(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary, append([]string{"--check-config"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
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
