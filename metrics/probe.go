package metrics

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Probe asks the server whose metrics-addr is addr whether it is ready
// (GET /readyz, as --check-ready does for a container's health check),
// and returns the answer's body and whether it was 200 OK. An address
// that listens on every address (":9121", "0.0.0.0:9121") is asked on
// loopback.
func Probe(addr string) (body string, ready bool, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false, fmt.Errorf("metrics-addr: %w", err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1" // listening on every address: ask loopback
	}
	hc := &http.Client{Timeout: 3 * time.Second}
	resp, err := hc.Get("http://" + net.JoinHostPort(host, port) + "/readyz")
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return string(b), resp.StatusCode == http.StatusOK, nil
}
