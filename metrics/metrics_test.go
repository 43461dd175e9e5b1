package metrics

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/respserver"
	"github.com/idserver/idserver/stats"
)

// TestReadyzReasons: /readyz is 503 with the reason until the server
// serves, while the reservation is not on disk, and once it shuts down;
// 200 in between. /healthz is 200 throughout. INFO idgen's ready (the
// metric idserver_ready, which alerts read) is 1 exactly when /readyz
// is 200.
func TestReadyzReasons(t *testing.T) {
	gen, err := idgen.New(idgen.Settings{Ceiling: 1}) // nothing reserved on disk yet
	if err != nil {
		t.Fatal(err)
	}
	srv := respserver.New(respserver.Options{Generator: gen})
	h := New(Options{Server: srv, Version: "test", Ready: srv.Ready})
	expect := func(path string, code int, body string) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		got, _ := io.ReadAll(rec.Result().Body)
		if rec.Code != code || !strings.Contains(string(got), body) {
			t.Fatalf("GET %s: %d %q, want %d and %q", path, rec.Code, got, code, body)
		}
		if ready := idgenField(t, srv, "ready"); path == "/readyz" && (ready == 1) != (code == 200) {
			t.Fatalf("INFO idgen ready:%d while /readyz answers %d", ready, code)
		}
	}
	expect("/readyz", 503, "not ready: not serving yet")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	waitServing(t, srv)
	expect("/readyz", 503, "not ready: GETID would get -BUSY IDs ahead are not yet reserved durably")
	expect("/healthz", 200, "OK")

	gen.Raise(gen.Now() + 60_000)
	expect("/readyz", 200, "OK")

	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-served
	expect("/readyz", 503, "not ready: shutting down")
	expect("/healthz", 200, "OK")
}

// idgenField is the numeric field name of srv's INFO idgen.
func idgenField(t *testing.T, srv *respserver.Server, name string) int64 {
	t.Helper()
	for _, f := range srv.Snapshot("idgen")[0].Fields {
		if f.Name == name {
			return f.Num
		}
	}
	t.Fatalf("INFO idgen has no %s", name)
	return 0
}

// waitServing waits until Serve has started the event loops.
func waitServing(t *testing.T, srv *respserver.Server) {
	t.Helper()
	await.True(t, time.Minute, "Serve started", func() bool {
		err := srv.Ready()
		return err == nil || !strings.Contains(err.Error(), "not serving yet")
	})
}

var _ Source = (*respserver.Server)(nil)

// TestInfoMetric: idserver_info is labelled with the layout INFO idgen
// shows.
func TestInfoMetric(t *testing.T) {
	gen, err := idgen.New(idgen.Settings{Layout: idgen.Layout{IDBits: 3, ShardBits: 8, RandomBits: 10}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	New(Options{Server: respserver.New(respserver.Options{Generator: gen}), Version: "test"}).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	want := "\nidserver_info{id_range=\"3\",random_range=\"10\",shard_range=\"8\",version=\"test\"} 1\n"
	if !strings.Contains(rec.Body.String(), want) {
		t.Errorf("no %q in the scrape", strings.TrimSpace(want))
	}
}

// TestProfiles: the CPU profile and the execution trace of the live
// server are served when asked for (Pprof), for go tool pprof and go tool
// trace.
func TestProfiles(t *testing.T) {
	h := New(Options{Server: respserver.New(respserver.Options{}), Version: "test", Pprof: true})
	for path, starts := range map[string]string{
		"/debug/pprof/profile?seconds=1": "\x1f\x8b", // gzip
		"/debug/pprof/trace?seconds=1":   "go 1.",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if body := rec.Body.String(); rec.Code != 200 || !strings.HasPrefix(body, starts) {
			t.Errorf("GET %s: %d, %q...", path, rec.Code, body[:min(len(body), 40)])
		}
	}
}

// TestLimits: the HTTP side serves at most Conns connections at once (the
// next waits in the backlog) and closes each one that idles, sends half a
// request, or sends a huge header, so a client that opens connections and
// lets them idle delays a probe by Timeout, no more; a profile longer
// than Timeout is still served.
func TestLimits(t *testing.T) {
	lim := Limits{Conns: 2, Timeout: 500 * time.Millisecond}
	h := New(Options{Server: respserver.New(respserver.Options{}), Version: "test", Ready: func() error { return nil }, Pprof: true})
	hs := NewServer(h, lim)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(Limit(ln, lim))
	t.Cleanup(func() { hs.Close() })
	addr := ln.Addr().String()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// get sends a GET of path on c and returns the reply's status line
	// ("" if none came within wait).
	get := func(c net.Conn, path string, wait time.Duration, header ...string) string {
		c.SetDeadline(time.Now().Add(wait))
		c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: x\r\n" + strings.Join(header, "") + "\r\n"))
		buf := make([]byte, 4096)
		n, _ := c.Read(buf)
		line, _, _ := strings.Cut(string(buf[:n]), "\r\n")
		return line
	}

	idle := []net.Conn{dial(), dial()}
	for _, c := range idle {
		if line := get(c, "/healthz", 5*time.Second); line != "HTTP/1.1 200 OK" {
			t.Fatalf("keep-alive GET: %q", line)
		}
	}
	began := time.Now()
	probe := dial()
	if line := get(probe, "/healthz", 5*time.Second); line != "HTTP/1.1 200 OK" {
		t.Fatalf("a probe behind %d idle connections: %q", len(idle), line)
	}
	// Not before an idle connection was closed: the probe waited in the
	// backlog, not beside them.
	if waited := time.Since(began); waited < lim.Timeout/2 {
		t.Fatalf("a probe was served after %v, beside %d connections at a limit of %d", waited, len(idle), lim.Conns)
	}
	for i, c := range idle {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("idle connection %d: read %d, %v; want it closed", i, n, err)
		}
	}

	half := dial()
	half.Write([]byte("GET /healthz HTTP/1.1\r\nHost:"))
	half.SetDeadline(time.Now().Add(5 * time.Second))
	began = time.Now()
	if n, err := half.Read(make([]byte, 1)); err != io.EOF || time.Since(began) > 4*time.Second {
		t.Fatalf("half a request: read %d, %v after %v; want the close after %v", n, err, time.Since(began), lim.Timeout)
	}

	big := dial()
	if line := get(big, "/healthz", 5*time.Second, "X: "+strings.Repeat("x", 64<<10)+"\r\n"); line != "HTTP/1.1 431 Request Header Fields Too Large" {
		t.Fatalf("a 64 KiB header: %q", line)
	}

	// A profile longer than the timeout is served whole.
	if line := get(dial(), "/debug/pprof/profile?seconds=1", 5*time.Second); line != "HTTP/1.1 200 OK" {
		t.Fatalf("a profile of 1 s, the timeout %v: %q", lim.Timeout, line)
	}
}

// TestLimitsSlowReader: a client that asks for a reply and does not read
// it is closed once Timeout passes, not kept while the reply waits.
func TestLimitsSlowReader(t *testing.T) {
	lim := Limits{Conns: 1, Timeout: 500 * time.Millisecond}
	wrote := make(chan error, 1)
	hs := NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var err error
		for chunk := make([]byte, 64<<10); err == nil; {
			_, err = w.Write(chunk) // more than the sockets hold
		}
		wrote <- err
	}), lim)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(Limit(ln, lim))
	t.Cleanup(func() { hs.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	select {
	case err := <-wrote:
		t.Logf("the reply's write ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatalf("a reply not read still writes after 10 s; the timeout is %v", lim.Timeout)
	}
}

// TestPromtool: a scrape of a server that has answered commands, refused
// some and failed others passes promtool check metrics (Prometheus's
// naming rules), and exports what INFO shows: the CPU time
// (idserver_used_cpu_*_seconds_total), the error replies by code and the
// calls rejected and failed by command.
func TestPromtool(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Skip("promtool is not installed (Debian: prometheus)")
	}
	gen, err := idgen.New(idgen.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	srv := respserver.New(respserver.Options{Generator: gen})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	waitServing(t, srv)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// GETID, then GET of the wrong arity, a bad MGETID count, an unknown
	// command, each answered before the PING's PONG.
	c.Write([]byte("GETID\r\nGET\r\nMGETID 0\r\nNOSUCH\r\nPING\r\n"))
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "+PONG\r\n" {
			break
		}
	}
	// A batch's latencies are counted once its replies are written,
	// which may be after the client has read them.
	await.True(t, 10*time.Second, "the batch's calls counted", func() bool {
		return slices.ContainsFunc(srv.Calls(), func(cs stats.Calls) bool { return cs.Name == "ping" && cs.Count == 1 })
	})

	rec := httptest.NewRecorder()
	New(Options{Server: srv, Version: "test"}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	scrape := rec.Body.String()
	check := exec.Command("promtool", "check", "metrics")
	check.Stdin = strings.NewReader(scrape)
	if out, err := check.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	for _, want := range []string{
		"\nidserver_used_cpu_user_seconds_total ", "\nidserver_used_cpu_sys_main_thread_seconds_total ",
		"\nidserver_error_replies_by_code_total{code=\"ERR\"} 3\n", "\nidserver_error_replies_total 3\n",
		// A code never sent is there at 0, so that an alert on its increase
		// sees the first one (IdserverClusterDown).
		"\nidserver_error_replies_by_code_total{code=\"CLUSTERDOWN\"} 0\n",
		"\nidserver_command_rejected_calls_total{command=\"get\"} 1\n", "\nidserver_command_failed_calls_total{command=\"mgetid\"} 1\n",
		"\nidserver_command_duration_seconds_count{command=\"getid\"} 1\n", "\nidserver_command_busy_seconds_total{command=\"getid\"} ",
	} {
		if !strings.Contains(scrape, want) {
			t.Errorf("no %q in the scrape", strings.TrimSpace(want))
		}
	}
}
