package main

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/idgen"
)

// get fetches url and returns the status code and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// runCheckReady runs idserver --check-ready against metrics-addr addr and
// returns its exit code and output.
func runCheckReady(t *testing.T, addr string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, "--check-ready", "--metrics-addr", addr)
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// TestHealthAndReadiness: a restart whose reservation is 60 s ahead of the
// clock (the clock was set back while the server was down) is ready while
// it may still issue max-lead-ms of IDs; past them GETID gets -BUSY,
// /readyz says 503 and why, and /healthz stays 200: the process is fine,
// and restarting it would not help. --check-ready agrees with /readyz.
func TestHealthAndReadiness(t *testing.T) {
	dir := t.TempDir()
	reserved := time.Now().UnixMilli() - idgen.DefaultEpoch.UnixMilli() + 60_000
	writeState(t, dir, reserved)
	const maxLead = 20
	p := start(t, nil, "--dir", dir, "--metrics-addr", "127.0.0.1:0", "--max-lead-ms", "20")
	base := "http://" + p.metricsAddr(t)
	expect := func(path string, code int, body string) {
		t.Helper()
		if got, b := get(t, base+path); got != code || !strings.Contains(b, body) {
			t.Fatalf("GET %s: %d %q, want %d and %q", path, got, b, code, body)
		}
	}
	expect("/healthz", 200, "OK")
	expect("/readyz", 200, "OK")
	if code, out := runCheckReady(t, p.metricsAddr(t)); code != 0 || out != "OK\n" {
		t.Fatalf("--check-ready while ready: exit %d, %q", code, out)
	}

	checkAbove(t, mgetid(t, p.addr, (maxLead+1)<<9), 0) // the budget: max-lead-ms and the floor's own ms
	c := redis.NewClient(&redis.Options{Addr: p.addr})
	defer c.Close()
	if err := c.Do(context.Background(), "GETID").Err(); err == nil || !strings.HasPrefix(err.Error(), "BUSY ") {
		t.Fatalf("GETID past the budget: %v, want -BUSY", err)
	}
	expect("/readyz", 503, "not ready: GETID would get -BUSY lead ")
	expect("/healthz", 200, "OK")
	if code, out := runCheckReady(t, p.metricsAddr(t)); code != 1 || !strings.Contains(out, "retry in ") {
		t.Fatalf("--check-ready while refusing: exit %d, %q", code, out)
	}
}

// TestCheckReadyNoServer: --check-ready fails, with the reason, when
// nothing answers or metrics-addr is not set.
func TestCheckReadyNoServer(t *testing.T) {
	if code, out := runCheckReady(t, "127.0.0.1:"+freePort(t)); code != 1 || !strings.Contains(out, "connection refused") {
		t.Fatalf("no server: exit %d, %q", code, out)
	}
	if code, out := runCheckReady(t, ""); code != 1 || !strings.Contains(out, "needs metrics-addr") {
		t.Fatalf("no metrics-addr: exit %d, %q", code, out)
	}
}
