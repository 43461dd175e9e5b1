package clients

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/testpki"
)

// remoteIP is a second address of loopback inside the namespace: a client
// that connects to it comes from it, as a remote client would.
const remoteIP = testpki.RemoteIP

// inNamespace runs the test that calls it again in a private network
// namespace (unshare -n, as root) whose loopback also has remoteIP, and
// reports whether the caller is that copy and should go on; the outer
// test only checks that the copy passed.
func inNamespace(t *testing.T) bool {
	t.Helper()
	if os.Getenv("CLIENTS_TEST_NETNS") != "" {
		for _, args := range [][]string{{"link", "set", "lo", "up"}, {"addr", "add", remoteIP + "/32", "dev", "lo"}} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		return true
	}
	need(t, "ip", "apt install iproute2")
	need(t, "unshare", "apt install util-linux")
	if err := exec.Command("unshare", "-n", "true").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("unshare -n: %v (the test needs root, or user namespaces)", err)
		}
		t.Skipf("unshare -n: %v: a private network namespace needs root", err)
	}
	cmd := exec.Command("unshare", "-n", os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count", "1", "-test.v")
	cmd.Env = append(os.Environ(), "CLIENTS_TEST_NETNS=1", builtBinary+"="+binary)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("in a network namespace: %v\n%s", err, out)
	}
	return false
}

// ping connects to port of ip, through TLS if cfg is set, sends PING and
// returns the reply's first line; after an error reply, err is io.EOF if
// the server closed the connection.
func ping(t *testing.T, ip, port string, cfg *tls.Config) (string, error) {
	t.Helper()
	var nc net.Conn
	var err error
	if cfg != nil {
		nc, err = tls.Dial("tcp", net.JoinHostPort(ip, port), cfg)
	} else {
		nc, err = net.Dial("tcp", net.JoinHostPort(ip, port))
	}
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	nc.Write([]byte("PING\r\n")) // may fail: the server refuses at once
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err == nil && strings.HasPrefix(line, "-") { // a refusal: the close must follow
		_, err = io.ReadAll(nc)
		if err == nil || errors.Is(err, syscall.ECONNRESET) {
			// Closed after the line (reset if the PING went unread).
			err = io.EOF
		}
	}
	return line, err
}

// TestProtectedMode: with protected-mode yes (the default) and no
// requirepass, a server bound beyond loopback answers clients that are
// not on loopback with Redis's -DENIED, through TLS too, and closes
// them; loopback clients are served. A password, or protected-mode no,
// lets remote clients in. redis-cli shows the reason.
func TestProtectedMode(t *testing.T) {
	if !inNamespace(t) {
		return
	}
	p := testpki.New(t)
	tlsArgs := []string{"--tls-cert-file", p.File("server.crt"), "--tls-key-file", p.File("server.key"), "--tls-ca-cert-file", p.File("ca.crt")}
	tlsCfg := &tls.Config{RootCAs: p.Roots, Certificates: []tls.Certificate{p.Client}}
	// The namespace is this test's own: nothing else binds ports there.
	port, tlsPort := "6551", "6552"
	runServer(t, nil, append([]string{"--bind", "0.0.0.0", "--port", port, "--tls-port", tlsPort}, tlsArgs...)...)

	for _, cfg := range []*tls.Config{nil, tlsCfg} {
		port := map[bool]string{true: tlsPort, false: port}[cfg != nil]
		line, err := ping(t, remoteIP, port, cfg)
		if !strings.HasPrefix(line, "-DENIED idserver is running in protected mode because protected mode is enabled and no password is set") || !errors.Is(err, io.EOF) {
			t.Fatalf("remote client (TLS %v): %q, %v; want -DENIED and the close", cfg != nil, line, err)
		}
		if line, _ := ping(t, "127.0.0.1", port, cfg); line != "+PONG\r\n" {
			t.Fatalf("loopback client (TLS %v): %q, want +PONG", cfg != nil, line)
		}
	}
	cli := need(t, "redis-cli", "apt install redis-tools")
	out, _ := runClientTool(t, "", cli, "-h", remoteIP, "-p", port, "PING")
	if !strings.Contains(out, "DENIED idserver is running in protected mode") || !strings.Contains(out, "'--protected-mode no'") {
		t.Fatalf("redis-cli from a remote address: %q", out)
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
	defer c.Close()
	info, err := c.Info(context.Background(), "stats").Result()
	if err != nil || !strings.Contains(info, "rejected_connections:3\r\n") {
		t.Fatalf("INFO stats after 3 refusals: %q, %v", info, err)
	}

	port = "6553"
	runServer(t, nil, "--bind", "0.0.0.0", "--port", port, "--requirepass", "s3cret")
	remote := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(remoteIP, port), Password: "s3cret"})
	defer remote.Close()
	if err := remote.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("remote client with requirepass set: %v", err)
	}

	port = "6554"
	runServer(t, nil, "--bind", "0.0.0.0", "--port", port, "--protected-mode", "no")
	if line, err := ping(t, remoteIP, port, nil); line != "+PONG\r\n" {
		t.Fatalf("remote client with protected-mode no: %q, %v", line, err)
	}
}
