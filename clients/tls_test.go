package clients

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/testbin"
	"github.com/idserver/idserver/internal/testpki"
)

// startTLS runs idserver with TLS only (port 0) and extra args, and
// returns the TLS address.
func startTLS(t *testing.T, p testpki.PKI, args ...string) string {
	t.Helper()
	s := testbin.Listen(t, "tls-port")
	r := runServer(t, []testbin.Socket{s}, append([]string{"--port", "0", "--tls-port", s.Port,
		"--tls-cert-file", p.File("server.crt"), "--tls-key-file", p.File("server.key"),
		"--tls-ca-cert-file", p.File("ca.crt")}, args...)...)
	if r.Addr != "" || r.TLSAddr == "" {
		t.Fatalf("port 0 and a tls-port: ready with addr %q and tls_addr %q, want TLS only", r.Addr, r.TLSAddr)
	}
	return r.TLSAddr
}

// tlsClient is go-redis on its defaults, over TLS with cert (none if
// nil), which it sends whoever the server says it trusts.
func tlsClient(t *testing.T, p testpki.PKI, addr string, cert *tls.Certificate) *redis.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: p.Roots}
	if cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, TLSConfig: cfg})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTLS: with port 0 and a tls-port, idserver serves TLS only: go-redis
// (pipelines of whole and split records, a reply of many records),
// redis-cli --tls and redis-benchmark --tls get exact IDs.
func TestTLS(t *testing.T) {
	p := testpki.New(t)
	addr := startTLS(t, p)
	ctx := context.Background()
	c := tlsClient(t, p, addr, &p.Client)
	var ids []int64
	for range 20 {
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, 1000)
		for i := range cmds {
			cmds[i] = pipe.Do(ctx, "GETID")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range cmds {
			id, err := cmd.Int64()
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
	}
	many, err := c.Do(ctx, "MGETID", 10000).Int64Slice() // about 200 KB: a dozen records
	if err != nil {
		t.Fatal(err)
	}
	checkIncreasing(t, append(ids, many...))

	cli := need(t, "redis-cli", "apt install redis-tools")
	tlsArgs := append(cliConn(t, addr), "--tls", "--cacert", p.File("ca.crt"), "--cert", p.File("client.crt"), "--key", p.File("client.key"))
	out, code := runClientTool(t, "", cli, append(tlsArgs, "GETID")...)
	if id, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64); code != 0 || err != nil || id <= many[len(many)-1] {
		t.Fatalf("redis-cli --tls GETID: exit %d, %q; want an ID above %d", code, out, many[len(many)-1])
	}
	bench := need(t, "redis-benchmark", "apt install redis-tools")
	out, code = runClientTool(t, "", bench, append(tlsArgs, "-n", "20000", "-c", "10", "-P", "16", "-q", "GETID")...)
	if code != 0 || !strings.Contains(out, "GETID: ") || !strings.Contains(out, "requests per second") {
		t.Fatalf("redis-benchmark --tls: exit %d, %q", code, out)
	}
}

// checkIncreasing fails unless ids increase strictly.
func checkIncreasing(t *testing.T, ids []int64) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("id %d: %d after %d", i, ids[i], ids[i-1])
		}
	}
}

// TestTLSRefusesPlainText: a plain-text command on the TLS port gets no
// reply, only the close.
func TestTLSRefusesPlainText(t *testing.T) {
	addr := startTLS(t, testpki.New(t))
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := nc.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(nc); len(got) != 0 || err != nil {
		t.Fatalf("plain text on the TLS port: read %q, %v; want the close and nothing else", got, err)
	}
}

// TestTLSAuthClients: tls-auth-clients yes needs a certificate from
// tls-ca-cert-file, optional checks one only if sent, no asks for none.
func TestTLSAuthClients(t *testing.T) {
	p := testpki.New(t)
	for _, tt := range []struct {
		mode                  string
		none, ours, strangers bool
	}{
		{mode: "yes", none: false, ours: true, strangers: false},
		{mode: "optional", none: true, ours: true, strangers: false},
		{mode: "no", none: true, ours: true, strangers: true},
	} {
		addr := startTLS(t, p, "--tls-auth-clients", tt.mode)
		for _, c := range []struct {
			who  string
			cert *tls.Certificate
			want bool
		}{{"no certificate", nil, tt.none}, {"our CA's", &p.Client, tt.ours}, {"another CA's", &p.Stranger, tt.strangers}} {
			err := tlsClient(t, p, addr, c.cert).Ping(context.Background()).Err()
			if (err == nil) != c.want {
				t.Errorf("tls-auth-clients %s, a client with %s certificate: PING: %v; want served %v", tt.mode, c.who, err, c.want)
			}
		}
	}
}

// TestTLSRequestsBehindTheHandshake: commands a client sends right behind
// its side of the handshake, which the server may read with the
// handshake's last message, are answered.
func TestTLSRequestsBehindTheHandshake(t *testing.T) {
	p := testpki.New(t)
	addr := startTLS(t, p)
	for i := range 100 {
		tc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.Roots, Certificates: []tls.Certificate{p.Client}})
		if err != nil {
			t.Fatal(err)
		}
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := tc.Write([]byte("PING\r\nECHO x\r\n")); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(tc)
		for _, want := range []string{"+PONG\r\n", "$1\r\n", "x\r\n"} {
			if line, err := r.ReadString('\n'); line != want {
				t.Fatalf("connection %d: read %q, %v; want %q", i, line, err, want)
			}
		}
		tc.Close()
	}
}

// TestTLSMaxClients: past maxclients, a client on the TLS port gets
// Redis's reply through TLS, as on the plain port, not a bare close.
func TestTLSMaxClients(t *testing.T) {
	p := testpki.New(t)
	addr := startTLS(t, p, "--maxclients", "1")
	ctx := context.Background()
	first := tlsClient(t, p, addr, &p.Client)
	if err := first.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// Raw, as go-redis sends HELLO, SETINFO and PING before it reads.
	second, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.Roots, Certificates: []tls.Certificate{p.Client}})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	second.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := second.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(second); string(got) != "-ERR max number of clients reached\r\n" {
		t.Fatalf("a second TLS client at maxclients 1: read %q, %v; want Redis's error, then the close", got, err)
	}
	if err := first.Ping(ctx).Err(); err != nil {
		t.Fatalf("the first client after the refusal: %v", err)
	}
}

// TestClusterOverTLS: a cluster node with a plain and a TLS port tells
// each client the ports of its own kind, as Redis does (its "CLUSTER
// SLOTS with different connection type" test): a TLS client the TLS
// port, in CLUSTER SLOTS and NODES, so that go-redis's ClusterClient
// over TLS, given the TLS address, reaches the node over TLS for INCR
// and GETID; a plain client the plain port.
func TestClusterOverTLS(t *testing.T) {
	p := testpki.New(t)
	plain, tlsPort := testbin.Listen(t, "port"), testbin.Listen(t, "tls-port")
	r := runServer(t, []testbin.Socket{plain, tlsPort}, "--port", plain.Port, "--tls-port", tlsPort.Port,
		"--tls-cert-file", p.File("server.crt"), "--tls-key-file", p.File("server.key"),
		"--tls-ca-cert-file", p.File("ca.crt"), "--cluster-enabled", "yes")
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		c    *redis.Client
		port string
	}{
		{"plain", redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1}), plain.Port},
		{"TLS", tlsClient(t, p, r.TLSAddr, &p.Client), tlsPort.Port},
	} {
		slots, err := tt.c.ClusterSlots(ctx).Result()
		if err != nil || len(slots) != 1 || !strings.HasSuffix(slots[0].Nodes[0].Addr, ":"+tt.port) {
			t.Fatalf("%s client: CLUSTER SLOTS %+v, %v; want the node at port %s", tt.name, slots, err, tt.port)
		}
		nodes, err := tt.c.ClusterNodes(ctx).Result()
		if err != nil || !strings.Contains(nodes, ":"+tt.port+"@") {
			t.Fatalf("%s client: CLUSTER NODES %q, %v; want the node at port %s", tt.name, nodes, err, tt.port)
		}
		tt.c.Close()
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{r.TLSAddr}, MaxRedirects: -1,
		TLSConfig: &tls.Config{RootCAs: p.Roots, Certificates: []tls.Certificate{p.Client}}})
	defer cc.Close()
	for want := int64(1); want <= 3; want++ {
		if got, err := cc.Incr(ctx, "tls:k").Result(); err != nil || got != want {
			t.Fatalf("ClusterClient over TLS: INCR %d, %v; want %d", got, err, want)
		}
	}
	if id, err := cc.Do(ctx, "GETID").Int64(); err != nil || id <= 0 {
		t.Fatalf("ClusterClient over TLS: GETID %d, %v", id, err)
	}
}
