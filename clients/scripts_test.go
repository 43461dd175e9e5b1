package clients

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The clients of other languages, from Debian's packages, each on its
// defaults. Each runs one program (clients/c, ruby, php, perl) with the
// same six checks: connect; 100 pipelines of 1000 GETIDs, each an integer
// reply above the one before; MGETID 10; MULTI, GETID, GETID, MGETID 2,
// EXEC through the library's transaction API; DECODEID of a fresh GETID;
// MGETID 0's error, then GETID on the same client.

// scriptChecks is how many "ok" lines a passing program prints.
const scriptChecks = 6

// hiredisVersion is C source whose preprocessed last line is "hiredis
// MAJOR.MINOR.PATCH"; without hiredis's header the preprocessor fails.
const hiredisVersion = `#include <hiredis/hiredis.h>
#define P(a, b, c) a##.##b##.##c
#define V(a, b, c) P(a, b, c)
hiredis V(HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH)
`

// TestHiredis compiles clients/c/check.c against hiredis (libhiredis-dev
// 0.14.1 on Debian 12) and runs it. hiredis has no transaction API: the
// program sends MULTI and EXEC itself.
func TestHiredis(t *testing.T) {
	gcc := need(t, "gcc", "apt-get install gcc")
	version := needLibrary(t, "apt-get install libhiredis-dev", hiredisVersion, gcc, "-E", "-P", "-x", "c", "-")
	bin := filepath.Join(t.TempDir(), "check")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, gcc, "-Wall", "-Wextra", "-O2", "-o", bin, filepath.Join("c", "check.c"), "-lhiredis").CombinedOutput()
	if err != nil {
		t.Fatalf("gcc c/check.c -lhiredis: %v\n%s", err, out)
	}
	if len(out) > 0 {
		t.Logf("gcc c/check.c -lhiredis:\n%s", out)
	}
	runScript(t, version, bin)
}

// TestRedisRb runs clients/ruby/check.rb, redis-rb (ruby-redis 4.8.0 on
// Debian 12).
func TestRedisRb(t *testing.T) {
	ruby := need(t, "ruby", "apt-get install ruby-redis")
	version := needLibrary(t, "apt-get install ruby-redis", "", ruby, "-e", `require "redis"; print "redis-rb ", Redis::VERSION`)
	runScript(t, version, ruby, filepath.Join("ruby", "check.rb"))
}

// TestPHPRedis runs clients/php/phpredis.php, the phpredis extension
// (php-redis 5.3.7 on Debian 12).
func TestPHPRedis(t *testing.T) {
	php := need(t, "php", "apt-get install php-cli php-redis")
	version := needLibrary(t, "apt-get install php-redis", "", php, "-r",
		`if (!extension_loaded("redis")) { fwrite(STDERR, "no redis extension\n"); exit(1); } echo "phpredis ", phpversion("redis");`)
	runScript(t, version, php, filepath.Join("php", "phpredis.php"))
}

// TestPredis runs clients/php/predis.php, Predis (php-predis 1.1.10 on
// Debian 12, also named php-nrk-predis), raw commands through executeRaw.
func TestPredis(t *testing.T) {
	php := need(t, "php", "apt-get install php-cli php-predis")
	version := needLibrary(t, "apt-get install php-predis", "", php, "-r",
		`require "Predis/autoload.php"; echo "Predis ", Predis\Client::VERSION;`)
	runScript(t, version, php, filepath.Join("php", "predis.php"))
}

// TestPerlRedis runs clients/perl/check.pl, Perl's Redis (libredis-perl
// 2.000 on Debian 12).
func TestPerlRedis(t *testing.T) {
	perl := need(t, "perl", "apt-get install libredis-perl")
	version := needLibrary(t, "apt-get install libredis-perl", "", perl, "-MRedis", "-e", `print "Redis.pm $Redis::VERSION"`)
	runScript(t, version, perl, filepath.Join("perl", "check.pl"))
}

// runScript runs the client program command (with the address of a server
// of its own as its last argument), which prints one line per check and
// exits non-zero if any failed. Its output is logged either way, for the
// timings; the test fails unless it exited 0 with every check ok.
func runScript(t *testing.T, library string, command ...string) {
	t.Helper()
	addr := startServer(t)
	// The checks take about a second; this only bounds a program stuck on a
	// reply that never comes.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	args := append(command[1:len(command):len(command)], addr)
	start := time.Now()
	out, err := exec.CommandContext(ctx, command[0], args...).CombinedOutput()
	took := time.Since(start).Round(time.Millisecond)
	run := strings.Join(append([]string{filepath.Base(command[0])}, args...), " ")
	if err != nil {
		t.Fatalf("%s: %s, %v after %v\n%s", library, run, err, took, out)
	}
	if ok := strings.Count("\n"+string(out), "\nok "); ok != scriptChecks {
		t.Fatalf("%s: %s printed %d ok lines, want %d\n%s", library, run, ok, scriptChecks, out)
	}
	t.Logf("%s: %s (%v):\n%s", library, run, took, out)
}

// needLibrary runs probe (with stdin as its input), a command that fails
// without a client library, and returns the last line it printed, the
// library's version. Without the library it skips the test, or fails it
// under CI=true, where scripts/test.sh installed it.
func needLibrary(t *testing.T, install, stdin string, probe ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, probe[0], probe[1:]...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[len(lines)-1]
	}
	msg := strings.Join(probe, " ") + ": " + err.Error()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		msg += "\n" + strings.TrimSpace(string(ee.Stderr))
	}
	msg = "client library missing (" + install + "; scripts/test.sh does): " + msg
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
