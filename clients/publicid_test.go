package clients

import (
	"bufio"
	"encoding/hex"
	"math/rand/v2"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/testbin"
	"github.com/idserver/idserver/internal/testseed"
)

// TestPublicIDKeyHidden: public-id-key is a secret. With one set,
// PUBLICID's strings are keyed (11 characters), and the key shows in
// none of CONFIG GET *, INFO everything, MONITOR (of a CONFIG GET of it
// and the public ID commands) or the server's log at debug level; a key
// refused at start is not quoted either.
func TestPublicIDKeyHidden(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	raw := make([]byte, 16)
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	key := hex.EncodeToString(raw)
	leaks := func(where, text string) {
		t.Helper()
		if strings.Contains(strings.ToLower(text), key) {
			t.Errorf("%s shows the key: %q", where, text)
		}
	}

	s := testbin.Listen(t, "port")
	p := runServer(t, []testbin.Socket{s}, "--port", s.Port, "--public-id-key", key, "--loglevel", "debug")
	ctx := t.Context()
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()

	mon, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	mon.SetDeadline(time.Now().Add(20 * time.Second))
	monr := bufio.NewReader(mon)
	mon.Write([]byte("MONITOR\r\n"))
	if line, err := monr.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q, %v", line, err)
	}

	str, err := c.Do(ctx, "PUBLICID", "42").Text()
	if err != nil || len(str) != 11 {
		t.Fatalf("PUBLICID 42 = %q, %v; want a keyed string of 11 characters", str, err)
	}
	if n, err := c.Do(ctx, "PRIVATEID", str).Int64(); err != nil || n != 42 {
		t.Fatalf("PRIVATEID %s = %d, %v", str, n, err)
	}
	conf, err := c.ConfigGet(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if conf["public-id-key"] != "(redacted)" {
		t.Errorf("CONFIG GET * shows public-id-key as %q, want (redacted)", conf["public-id-key"])
	}
	for k, v := range conf {
		leaks("CONFIG GET * ("+k+")", v)
	}
	if v, err := c.ConfigGet(ctx, "public-id-key").Result(); err != nil || v["public-id-key"] != "(redacted)" {
		t.Errorf("CONFIG GET public-id-key = %v, %v", v, err)
	}
	info, err := c.Info(ctx, "everything").Result()
	if err != nil {
		t.Fatal(err)
	}
	leaks("INFO everything", info)
	c.Do(ctx, "PING", "done")
	var seen []string
	for {
		line, err := monr.ReadString('\n')
		if err != nil {
			t.Fatalf("MONITOR: %v after %q", err, seen)
		}
		seen = append(seen, line)
		if strings.Contains(line, `"done"`) {
			break
		}
	}
	leaks("MONITOR", strings.Join(seen, ""))
	if !strings.Contains(strings.Join(seen, ""), `"PRIVATEID"`) {
		t.Errorf("MONITOR did not show PRIVATEID: %q", seen)
	}
	leaks("the log", strings.Join(p.Lines(), "\n"))

	// A key refused at start (before any port is bound): the reason, not
	// the key.
	bad := key[:30] + "zz"
	out, err := exec.Command(binary, "--port", "1", "--dir", t.TempDir(), "--public-id-key", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "public-id-key must be 32, 48 or 64 hex digits") || strings.Contains(string(out), bad) {
		t.Errorf("idserver with a bad key: %v\n%s", err, out)
	}
}
