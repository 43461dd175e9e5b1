package clients

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/internal/testbin"
)

// javaJar is the Maven project clients/java built (mvn -q package there;
// scripts/test.sh does it before the tests): its dependencies sit in
// java/target/lib, named by the jar's manifest.
var javaJar = filepath.Join("java", "target", "idserver-clients.jar")

// needJavaJar returns the java program, or skips the test without it or
// without the built jar (fails it under CI=true).
func needJavaJar(t *testing.T) string {
	t.Helper()
	java := need(t, "java", "apt-get install default-jdk-headless maven")
	if _, err := os.Stat(javaJar); err != nil {
		msg := "clients/" + javaJar + " is missing: run mvn -q package in clients/java"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return java
}

// TestJedisCluster and TestLettuceCluster run clients/java's cluster
// checks (Check.java): Jedis's JedisCluster and Lettuce's
// RedisClusterClient on their defaults (RESP3 both), given the one node's
// address, each also through its other way of sending a custom command.
func TestJedisCluster(t *testing.T)   { runJavaCluster(t, "jedis") }
func TestLettuceCluster(t *testing.T) { runJavaCluster(t, "lettuce") }

func runJavaCluster(t *testing.T, client string) {
	java := needJavaJar(t)
	addr := startClusterServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, java, "-jar", javaJar, "check", client, addr).CombinedOutput()
	if err != nil {
		t.Fatalf("java -jar %s check %s %s: %v\n%s", javaJar, client, addr, err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}

// TestJedis, TestLettuce, TestSpringDataRedis and TestRedisson run
// clients/java's single-server checks (Single.java) through Jedis's
// RedisClient, Lettuce's RedisClient (RESP3), Spring Data Redis's
// templates on Lettuce and Redisson, each on its defaults and each with
// the lines docs/clients.md shows: GETID an exact integer and increasing
// over a pipeline of 1,000, MGETID, DECODEID's fields, INCR, INCRBY, GET,
// SET, a transaction, an error reply, and the library's own checks
// (Spring: the untyped execute("GETID") fails as documented; Redisson:
// RLock and RIdGenerator.tryInit throw idserver's refusal within a
// second, RIdGenerator.nextId sends about one script a second and never
// answers). Then the order-number code of issue 33, in each library's
// words, over a kill -9 and restart of idserver on the same state: no
// order number twice, the second run's all above the first's.
func TestJedis(t *testing.T)           { runJavaSingle(t, "jedis") }
func TestLettuce(t *testing.T)         { runJavaSingle(t, "lettuce") }
func TestSpringDataRedis(t *testing.T) { runJavaSingle(t, "spring") }
func TestRedisson(t *testing.T)        { runJavaSingle(t, "redisson") }

// javaOrders is how many order numbers each run makes: enough for INCRs
// served from more than one sequence segment, few enough for seconds.
const javaOrders = 5000

func runJavaSingle(t *testing.T, client string) {
	java := needJavaJar(t)
	sock := testbin.Listen(t, "port")
	args := []string{"--port", sock.Port, "--dir", t.TempDir(), "--metrics-addr", "127.0.0.1:0"}
	p := testbin.Start(t, nil, []testbin.Socket{sock}, binary, args...)
	first := runJavaOrders(t, java, "single", client, p.Addr)
	if client == "redisson" {
		// The refusals Redisson's Lua-based objects met are counted where
		// an operator looks: lock, tryLock, tryInit, compareAndSet, and
		// nextId's tries.
		if n := scriptRefusalsMetric(t, p.MetricsAddr(t)); n < 5 {
			t.Errorf("idserver_script_calls_refused_total %d after Redisson's checks, want >= 5", n)
		}
	}
	p.Kill9()
	p = testbin.Start(t, nil, []testbin.Socket{sock}, binary, args...)
	second := runJavaOrders(t, java, "orders", client, p.Addr)
	seen := map[int64]bool{}
	for run, nums := range [][]int64{first, second} {
		for i, n := range nums {
			if seen[n] {
				t.Fatalf("run %d: order number %d twice", run+1, n)
			}
			seen[n] = true
			if i > 0 && n <= nums[i-1] {
				t.Fatalf("run %d: order number %d after %d", run+1, n, nums[i-1])
			}
		}
	}
	if second[0] <= first[len(first)-1] {
		t.Fatalf("after kill -9 and restart: order number %d, not above the last run's %d", second[0], first[len(first)-1])
	}
	t.Logf("order numbers %d..%d, then after kill -9 %d..%d", first[0], first[len(first)-1], second[0], second[len(second)-1])
}

// runJavaOrders runs the jar's command (single: the checks first; orders)
// for client against addr, and returns the javaOrders order numbers it
// printed.
func runJavaOrders(t *testing.T, java, command, client, addr string) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, java, "-jar", javaJar, command, client, addr, strconv.Itoa(javaOrders))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("java -jar %s %s %s %s %d: %v\n%s", javaJar, command, client, addr, javaOrders, err, stderr.Bytes())
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Log(s)
	}
	var nums []int64
	for _, line := range strings.Fields(string(out)) {
		n, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			t.Fatalf("%s %s: %q is not an order number", command, client, line)
		}
		nums = append(nums, n)
	}
	if len(nums) != javaOrders {
		t.Fatalf("%s %s: %d order numbers, want %d", command, client, len(nums), javaOrders)
	}
	return nums
}

// scriptRefusalsMetric reads idserver_script_calls_refused_total from
// the /metrics of metricsAddr.
func scriptRefusalsMetric(t *testing.T, metricsAddr string) int64 {
	t.Helper()
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "idserver_script_calls_refused_total "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("/metrics: %q", line)
			}
			return int64(n)
		}
	}
	t.Fatalf("/metrics has no idserver_script_calls_refused_total:\n%s", body)
	return 0
}

// TestJavaDocLines: every line of the Java examples in docs/clients.md is
// a line of clients/java's sources (comments and indentation aside), so
// that the lines the page shows are the ones the tests above run.
func TestJavaDocLines(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "clients.md"))
	if err != nil {
		t.Fatal(err)
	}
	code := map[string]bool{}
	err = filepath.WalkDir(filepath.Join("java", "src"), func(path string, d os.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(path, ".java") {
			return err
		}
		src, err := os.ReadFile(path)
		for _, line := range strings.Split(string(src), "\n") {
			code[javaCode(line)] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	blocks, lines := 0, 0
	in := false
	for i, line := range strings.Split(string(doc), "\n") {
		switch {
		case line == "```java":
			in = true
			blocks++
		case in && line == "```":
			in = false
		case in && javaCode(line) != "":
			lines++
			if !code[javaCode(line)] {
				t.Errorf("docs/clients.md:%d: %q is in no source of clients/java", i+1, line)
			}
		}
	}
	if blocks < 5 || lines < 40 {
		t.Errorf("docs/clients.md: %d Java blocks, %d lines; want the order code and each library's lines", blocks, lines)
	}
}

// javaCode is a line of Java without its indentation and its trailing //
// comment.
func javaCode(line string) string {
	if i := strings.Index(line, "//"); i >= 0 {
		line = line[:i]
	}
	return strings.TrimSpace(line)
}
