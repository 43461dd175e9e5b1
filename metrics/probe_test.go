package metrics

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestProbe: Probe reads /readyz at metrics-addr, on loopback when that
// is every address, and says whether it was 200.
func TestProbe(t *testing.T) {
	var down atomic.Bool // the handler runs on the server's goroutines
	h := New(Options{Ready: func() error {
		if down.Load() {
			return errors.New("shutting down")
		}
		return nil
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	for _, tc := range []struct {
		addr  string
		down  bool
		body  string
		ready bool
	}{
		{"127.0.0.1:" + port, false, "OK\n", true},
		{":" + port, false, "OK\n", true},
		{"0.0.0.0:" + port, true, "not ready: shutting down\n", false},
	} {
		down.Store(tc.down)
		body, ready, err := Probe(tc.addr)
		if err != nil || body != tc.body || ready != tc.ready {
			t.Errorf("Probe(%q) = %q, %v, %v; want %q, %v", tc.addr, body, ready, err, tc.body, tc.ready)
		}
	}
	if _, _, err := Probe("no port"); err == nil || !strings.HasPrefix(err.Error(), "metrics-addr: ") {
		t.Errorf("Probe of an address without a port: %v, want a metrics-addr error", err)
	}
}
