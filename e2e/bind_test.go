package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testbin"
	"github.com/idserver/idserver/internal/testpki"
)

// absent is an address no interface of this machine has (TEST-NET-1;
// some machines have 192.0.2.0/24 on an interface, none this host).
const absent = "192.0.2.99"

// needAbsent skips t unless absent is truly absent here: listening on it
// must fail with EADDRNOTAVAIL.
func needAbsent(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp4", absent+":0")
	if err == nil {
		ln.Close()
		t.Skipf("this machine has %s", absent)
	}
	if !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Skipf("listening on %s: %v, not EADDRNOTAVAIL", absent, err)
	}
}

// needIPv6 skips t unless this machine has IPv6 loopback (ip -6 addr
// shows ::1 on lo).
func needIPv6(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	ln.Close()
}

// getID asks the server at addr for an ID, and reports the error.
func getID(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 2 * time.Second})
	defer c.Close()
	_, err := c.Do(context.Background(), "GETID").Int64()
	return err
}

// TestBindAddresses: bind takes several addresses as Redis 7 does, from
// a flag, the environment and the file: the server serves GETID on each
// (port and tls-port alike share them), * is every IPv4 address and ::*
// every IPv6 one, and an optional address this machine lacks is skipped
// with a warning.
func TestBindAddresses(t *testing.T) {
	needIPv6(t)
	port := testbin.ReservedPort(t)
	file := func(bind string) string {
		name := t.TempDir() + "/idserver.conf"
		os.WriteFile(name, []byte("bind "+bind+"\n"), 0o600)
		return name
	}
	for _, tt := range []struct {
		name    string
		env     []string
		args    []string
		serves  []string // hosts that must answer
		refuses []string // hosts that must refuse the connection
		shown   string   // CONFIG GET bind
	}{
		{"flag", nil, []string{"--bind", "127.0.0.1 ::1"}, []string{"127.0.0.1", "::1"}, nil, "127.0.0.1 ::1"},
		{"env", []string{"IDSERVER_BIND=127.0.0.1 ::1"}, nil, []string{"127.0.0.1", "::1"}, nil, "127.0.0.1 ::1"},
		{"file", nil, []string{file("127.0.0.1 ::1")}, []string{"127.0.0.1", "::1"}, nil, "127.0.0.1 ::1"},
		{"redis.conf's", nil, []string{file("127.0.0.1 -::1")}, []string{"127.0.0.1", "::1"}, nil, "127.0.0.1 -::1"},
		{"only IPv6", nil, []string{"--bind", "::1"}, []string{"::1"}, []string{"127.0.0.1"}, "::1"},
		{"every IPv4", nil, []string{"--bind", "*"}, []string{"127.0.0.1"}, []string{"::1"}, "*"},
		{"every address", nil, []string{"--bind", "* -::*"}, []string{"127.0.0.1", "::1"}, nil, "* -::*"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, tt.env, append(tt.args, "--port", port)...)
			for _, host := range tt.serves {
				if err := getID(net.JoinHostPort(host, port)); err != nil {
					t.Errorf("GETID at %s: %v", host, err)
				}
			}
			for _, host := range tt.refuses {
				if err := getID(net.JoinHostPort(host, port)); !errors.Is(err, syscall.ECONNREFUSED) {
					t.Errorf("GETID at %s: %v, want the connection refused", host, err)
				}
			}
			c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(tt.serves[0], port)})
			defer c.Close()
			if got, err := c.ConfigGet(context.Background(), "bind").Result(); err != nil || got["bind"] != tt.shown {
				t.Errorf("CONFIG GET bind: %v, %v; want %q", got, err, tt.shown)
			}
			if code := p.Stop(); code != 0 {
				t.Fatalf("exit %d", code)
			}
		})
	}
}

// TestBindTLS: tls-port listens on every address of bind too, as in
// Redis.
func TestBindTLS(t *testing.T) {
	needIPv6(t)
	pki := testpki.New(t)
	port, tlsPort := testbin.ReservedPort(t), testbin.ReservedPort(t)
	start(t, nil, "--bind", "127.0.0.1 ::1", "--port", port, "--tls-port", tlsPort,
		"--tls-cert-file", pki.File("server.crt"), "--tls-key-file", pki.File("server.key"), "--tls-ca-cert-file", pki.File("ca.crt"))
	for _, host := range []string{"127.0.0.1", "::1"} {
		c := redis.NewClient(&redis.Options{
			Addr:       net.JoinHostPort(host, tlsPort),
			MaxRetries: -1,
			// The server's certificate is for 127.0.0.1: the same key serves ::1.
			TLSConfig: &tls.Config{RootCAs: pki.Roots, Certificates: []tls.Certificate{pki.Client}, ServerName: "127.0.0.1"},
		})
		if _, err := c.Do(context.Background(), "GETID").Int64(); err != nil {
			t.Errorf("GETID over TLS at %s: %v", host, err)
		}
		c.Close()
	}
}

// TestBindOptionalAbsent: an optional address this machine lacks is
// skipped with a warning naming it; the server serves the others.
func TestBindOptionalAbsent(t *testing.T) {
	needAbsent(t)
	port := testbin.ReservedPort(t)
	p := start(t, nil, "--bind", "127.0.0.1 -"+absent, "--port", port)
	if err := getID("127.0.0.1:" + port); err != nil {
		t.Fatalf("GETID at 127.0.0.1: %v", err)
	}
	if !p.Logged(`"bind":"-`+absent+`"`) || !p.Logged("skipping an address of bind") {
		t.Fatalf("the skipped address is not logged:\n%s", strings.Join(p.Lines(), "\n"))
	}
}

// TestBindRefused: a bind that cannot be listened on, or is not valid,
// and a metrics-addr that is not host:port or cannot be had, stop the
// start with one line naming the key, before the state file is locked
// or anything is logged as started: dir stays empty.
func TestBindRefused(t *testing.T) {
	needAbsent(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--bind", "127.0.0.1 " + absent}, "cannot listen on bind " + absent + ": this machine has no such address"},
		{[]string{"--bind", "-" + absent}, `cannot listen on any address of bind \"-` + absent + `\": none is this machine's`},
		{[]string{"--bind", "127.0.0.1 localhost"}, `invalid config: bind "127.0.0.1 localhost": localhost is not an IP address`},
		{[]string{"--bind", "127.0.0.1:6551"}, `invalid config: bind "127.0.0.1:6551"`},
		{[]string{"--bind", "* 127.0.0.1"}, `invalid config: bind "* 127.0.0.1": * already covers 127.0.0.1`},
		{[]string{"--metrics-addr", "127.0.0.1"}, `invalid config: metrics-addr "127.0.0.1"`},
		{[]string{"--metrics-addr", absent + ":0"}, "cannot listen on metrics-addr " + absent + ":0"},
	} {
		dir := t.TempDir()
		// A port of its own: a socket passed for it would serve instead of bind.
		out, code := runToExit(t, append(tt.args, "--dir", dir, "--port", testbin.ReservedPort(t))...)
		if code != 1 || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, tt.want) {
			t.Errorf("idserver %q: exit %d, output %q; want exit 1 and one line with %q", tt.args, code, out, tt.want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("idserver %q wrote %v in dir", tt.args, entries)
		}
	}
}

// TestBindAsRedis: idserver starts with the bind lines Redis 7 starts
// with, and refuses those Redis refuses (at start, for Redis: a bind it
// cannot listen on), but for host names, which idserver does not take
// (docs/configuration.md).
func TestBindAsRedis(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server here")
	}
	needAbsent(t)
	needIPv6(t)
	for _, tt := range []struct {
		bind    string
		differs bool // a deliberate difference
	}{
		{"127.0.0.1 ::1", false},
		{"127.0.0.1 -::1", false},
		{"127.0.0.1 -" + absent, false},
		{"127.0.0.1 " + absent, false},
		{"-" + absent, false},
		{"*", false},
		{"* -::*", false},
		{"0.0.0.0 ::", false},
		{"127.0.0.1 127.0.0.1", false},
		{"* 127.0.0.1", false},
		{"999.1.1.1", false},
		{"[::1]", false},
		{"localhost", true},
	} {
		redisStarts, ours := redisStarts(t, tt.bind), idserverStarts(t, tt.bind)
		if (redisStarts == ours) == tt.differs {
			t.Errorf("bind %s: redis-server starts %v, idserver %v", tt.bind, redisStarts, ours)
		}
	}
}

// redisStarts reports whether redis-server starts with bind (the words
// of a bind line): it says it is ready, or exits.
func redisStarts(t *testing.T, bind string) bool {
	t.Helper()
	args := append([]string{"--port", testbin.ReservedPort(t), "--save", "", "--appendonly", "no", "--dir", t.TempDir(), "--bind"}, strings.Fields(bind)...)
	return startsOrExits(t, exec.Command("redis-server", args...), "Ready to accept connections")
}

// idserverStarts reports whether idserver starts with bind.
func idserverStarts(t *testing.T, bind string) bool {
	t.Helper()
	cmd := exec.Command(binary, "--bind", bind, "--port", testbin.ReservedPort(t), "--dir", t.TempDir())
	return startsOrExits(t, cmd, `"message":"idserver ready"`)
}

// startsOrExits runs cmd until its output has ready (true) or it exits
// (false), and then stops it.
func startsOrExits(t *testing.T, cmd *exec.Cmd, ready string) bool {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	found := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), ready) {
				found <- true
				return
			}
		}
		found <- false // exited
	}()
	var started bool
	await.True(t, 20*time.Second, cmd.Path+" ready or exited", func() bool {
		select {
		case started = <-found:
			return true
		default:
			return false
		}
	})
	return started
}
