package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/await"
)

// TestSequenceKillLoop kills the server with SIGKILL, over and over,
// while clients pipeline INCRs and INCRBYs over many keys, and stops it
// gracefully now and then: per key no value is handed out twice, every
// restart continues above everything handed out before, and one after a
// graceful stop continues with the very next value: GET of every key is
// the same before the stop and after the restart.
func TestSequenceKillLoop(t *testing.T) {
	dir := t.TempDir()
	const runs, keys = 24, 300
	set := newSeqSet()
	var lastValues []any // of every key, at a graceful stop
	for run := range runs {
		p := start(t, nil, "--dir", dir, "--seq-segment-ms", "200")
		if lastValues != nil {
			if after := mgetAll(t, p.Addr, keys); !slices.Equal(after, lastValues) {
				t.Fatalf("run %d: the keys' values after a graceful restart differ from before it:\n%v\n%v", run, lastValues, after)
			}
			lastValues = nil
		}
		before := set.count()
		stop := set.loadAll(newFleet(p), 4, keys, uint64(run)*100)
		await.True(t, time.Minute, "values are handed out", func() bool { return set.count() > before+200 })
		time.Sleep(time.Duration(20+run*7%60) * time.Millisecond) // a while under load: the kill comes at no set point
		if run%6 == 5 {
			stop()
			settled(t, p)
			lastValues = mgetAll(t, p.Addr, keys)
			if code := p.Stop(); code != 0 {
				t.Fatalf("run %d: exit code %d after SIGTERM", run, code)
			}
		} else {
			p.Cmd.Process.Signal(syscall.SIGKILL)
			p.Cmd.Wait()
		}
		stop()
		set.nextRun()
	}
	values := set.check(t)
	if set.fails["BUSY"] != 0 {
		t.Fatalf("%d -BUSY replies", set.fails["BUSY"])
	}
	t.Logf("%d runs, %d replies, %d values checked; errors (the kills) %v", runs, set.count(), values, set.fails)
}

// settled waits until p has ended what the load's closed connections
// left under way: an INCR waiting for its segment when its client closed
// still takes its values, after the client is gone.
func settled(t *testing.T, p *process) {
	t.Helper()
	await.True(t, time.Minute, "the load's connections closed and no command waiting", func() bool {
		return processInfo(p, "clients", "connected_clients") == "1" && processInfo(p, "clients", "blocked_clients") == "0"
	})
}

// mgetAll is the value of each of the load's keys at addr.
func mgetAll(t *testing.T, addr string, keys int) []any {
	t.Helper()
	names := make([]string, keys)
	for i := range names {
		names[i] = seqKey(i)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	vals, err := c.MGet(context.Background(), names...).Result()
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// TestSequenceFileRefused: a sequences file that is not idserver's, or is
// damaged, stops the start with one line naming it, and is left as it
// is; a failed start creates none.
func TestSequenceFileRefused(t *testing.T) {
	for name, content := range map[string][]byte{
		"text":   []byte("not a database\n"),
		"zeroed": make([]byte, 32768),
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "idserver.seq")
		os.WriteFile(path, content, 0o600)
		out, code := runToExit(t, "--dir", dir)
		if code != 1 || !strings.Contains(out, "sequence file "+path) || !strings.Contains(out, "left as it is") || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("%s: exit %d, output %q", name, code, out)
		}
		if after, _ := os.ReadFile(path); string(after) != string(content) {
			t.Errorf("%s: the file changed", name)
		}
	}
	dir := t.TempDir()
	out, code := runToExit(t, "--dir", dir, "--metrics-addr", "192.0.2.1:0")
	if _, err := os.Stat(filepath.Join(dir, "idserver.seq")); code == 0 || !os.IsNotExist(err) {
		t.Fatalf("a failed start (exit %d, %q) left a sequences file: %v", code, out, err)
	}
}

// TestSequenceFullDisk: on a disk that fills up, INCR of a key past its
// segment is refused with -BUSY naming the cause, values in hand go on,
// and once space returns the sequences go on by themselves, above
// everything before. (As root: a tmpfs of 2 MiB.)
func TestSequenceFullDisk(t *testing.T) {
	dir := smallDisk(t, "2m")
	p := start(t, nil, "--dir", dir)
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	ctx := context.Background()
	last := c.Incr(ctx, "orders").Val()
	filler := filepath.Join(dir, "filler")
	fill(t, filler)
	// New keys need writes: the file grows until the disk refuses.
	var busy error
	for i := 0; i < 200_000 && busy == nil; i++ {
		busy = c.Incr(ctx, "k:"+strings.Repeat("x", 200)+":"+strconv.Itoa(i)).Err()
	}
	if busy == nil || !strings.HasPrefix(busy.Error(), "BUSY sequence values ahead are not yet reserved durably: the last write failed") || !strings.Contains(busy.Error(), "no space left on device") {
		t.Fatalf("INCR of new keys on a full disk: %v", busy)
	}
	info, err := readInfo(c, "persistence")
	if failures, ok := info.get("seq_save_failures"); !ok || failures == "0" {
		t.Fatalf("INFO persistence after failed writes: seq_save_failures %q, %v\n%s", failures, err, info.text)
	}
	os.Remove(filler)
	// The writer tries again after its back-off (a second at most);
	// meanwhile a key that needs a write gets -BUSY at once.
	await.True(t, time.Minute, "INCR of a new key works again once space returns", func() bool {
		return c.Incr(ctx, "after:recovery").Err() == nil
	})
	if v, err := c.Incr(ctx, "orders").Result(); err != nil || v <= last {
		t.Fatalf("INCR after recovery: %d, %v; not above %d", v, err, last)
	}
}

// smallDisk mounts a tmpfs of size (mount's syntax: 2m) on a directory
// of t's, until t ends: a disk that fills up for real. It needs root; a
// test without is skipped, or fails under CI=true.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount a tmpfs (the test needs root): %v %s", err, out)
		}
		t.Skipf("mount a tmpfs: %v %s: a full disk needs root", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes path until the disk is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}
