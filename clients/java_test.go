package clients

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
