package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/respserver"
)

// TestReadyzReasons: /readyz is 503 with the reason until the server
// serves, while the reservation is not on disk, and once it shuts down;
// 200 in between. /healthz is 200 throughout.
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

// waitServing waits until Serve has started the event loops.
func waitServing(t *testing.T, srv *respserver.Server) {
	t.Helper()
	for range 10_000 {
		if err := srv.Ready(); err == nil || !strings.Contains(err.Error(), "not serving yet") {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("Serve did not start")
}

// TestProfiles: the CPU profile and the execution trace of the live
// server are served, for go tool pprof and go tool trace.
func TestProfiles(t *testing.T) {
	h := New(Options{Server: respserver.New(respserver.Options{}), Version: "test"})
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
