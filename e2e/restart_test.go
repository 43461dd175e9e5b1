package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testbin"
	"github.com/idserver/idserver/reservation"
)

// TestKillRestartLoop kills the server with SIGKILL under MGETID load over
// and over, stepping its clock back by up to 10 s between some restarts and
// during some runs, and checks that no ID ever repeats and that every run
// starts above every ID of the runs before.
func TestKillRestartLoop(t *testing.T) {
	dir := t.TempDir()
	const runs = 22
	var prevMax int64 = -1
	seen := map[int64]bool{}
	offset := int64(0)
	for run := range runs {
		switch run % 4 {
		case 1:
			offset -= 10_000 // the clock was set back 10 s while the server was down
		case 3:
			offset -= 3_000
		}
		p := start(t, nil, "--dir", dir, "--enable-debug-command", "yes",
			"--debug-clock-offset-ms", strconv.FormatInt(offset, 10))
		set := newIDSet(idgen.DefaultLayout)
		stop := set.loadAll(newFleet(p), 4, 100)
		await.True(t, time.Minute, "IDs are served", func() bool { return set.count() > 0 })
		if run%3 == 2 {
			// A step back within max-lead-ms while serving: absorbed.
			c := redis.NewClient(&redis.Options{Addr: p.Addr})
			if err := c.Do(context.Background(), "DEBUG", "CLOCK-OFFSET", offset-2000).Err(); err != nil {
				t.Fatalf("run %d: DEBUG CLOCK-OFFSET: %v", run, err)
			}
			c.Close()
		}
		time.Sleep(60 * time.Millisecond) // a while under load: the kill comes at no set point
		p.Cmd.Process.Signal(syscall.SIGKILL)
		p.Cmd.Wait()
		stop()
		ids := set.ids
		// The jump to the reservation, even 10 s ahead of the clock, never
		// turns requests away by itself.
		if b := set.fails["BUSY"]; b != 0 {
			t.Fatalf("run %d (clock offset %dms): %d -BUSY replies after the restart", run, offset, b)
		}
		runMin, runMax := ids[0], ids[0]
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("run %d: id %d repeated", run, id)
			}
			seen[id] = true
			runMin, runMax = min(runMin, id), max(runMax, id)
		}
		if runMin <= prevMax {
			t.Fatalf("run %d (clock offset %dms): smallest id %d not above %d from earlier runs", run, offset, runMin, prevMax)
		}
		prevMax = max(prevMax, runMax)
	}
	t.Logf("%d runs, %d unique IDs", runs, len(seen))
}

// TestBadStateFiles: each is refused with one clear line and left as it
// is, with no other file left beside it.
func TestBadStateFiles(t *testing.T) {
	good := reservation.State{ServerID: 0, Epoch: 1420041600000, Reserved: 375310358272}
	good.Layout.IDBits, good.Layout.ShardBits, good.Layout.RandomBits = 2, 9, 10
	otherLayout := good
	otherLayout.Layout.ShardBits, otherLayout.Layout.RandomBits = 10, 9
	otherServer := good
	otherServer.ServerID = 3
	data := good.Marshal()
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"corrupt", append(append([]byte(nil), data[:30]...), append([]byte("X"), data[31:]...)...), "checksum"},
		{"truncated", data[:len(data)-12], "truncated"},
		{"empty", nil, "the file is empty"},
		{"garbage", []byte("\x00\x01\x02"), "not a valid idserver state file"},
		{"other layout", otherLayout.Marshal(), "shard-range 10"},
		{"other server-id", otherServer.Marshal(), "written for server-id 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "idserver.state")
			if err := os.WriteFile(path, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			out, code := runToExit(t, "--dir", dir)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code != 1 || len(lines) != 1 || !strings.Contains(lines[0], tt.want) || !strings.Contains(lines[0], path) {
				t.Fatalf("exit %d, output %q; want exit 1 and one line naming %s and %q", code, out, path, tt.want)
			}
			if after, _ := os.ReadFile(path); string(after) != string(tt.data) {
				t.Fatalf("state file changed: %q", after)
			}
			if files := dirFiles(t, dir); len(files) != 1 {
				t.Fatalf("the dir holds %v after the refused start; want only the state file", files)
			}
		})
	}
	t.Run("dir missing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "nope")
		out, code := runToExit(t, "--dir", dir)
		if code != 1 || !strings.Contains(out, "refusing to start") || !strings.Contains(out, filepath.Join(dir, "idserver.lock")+": no such file or directory") ||
			strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("exit %d, output %q", code, out)
		}
	})
}

// runToExit runs the binary, which should stop by itself, and returns its
// output and exit code.
func runToExit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	args, sockets := withPort(t, args)
	cmd := testbin.Command(binary, nil, sockets, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stuck := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	stuck.Stop()
	var exit interface{ ExitCode() int }
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// TestSigtermUnderLoad: every reply before the close is a valid ID, the
// exit code is 0, and the reservation on disk is above every ID issued.
func TestSigtermUnderLoad(t *testing.T) {
	dir := t.TempDir()
	p := start(t, nil, "--dir", dir)
	set := newIDSet(idgen.DefaultLayout)
	stop := set.loadAll(newFleet(p), 8, 100)
	defer stop()
	await.True(t, time.Minute, "IDs are served", func() bool { return set.count() > 1000 })
	begin := time.Now()
	if code := p.Stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("SIGTERM took %v", d)
	}
	stop()
	ids := set.ids
	s, found, err := reservation.ReadFile(filepath.Join(dir, "idserver.state"))
	if err != nil || !found {
		t.Fatalf("state after SIGTERM: %v, found %v", err, found)
	}
	seen := map[int64]bool{}
	for _, id := range ids {
		if id <= 0 || seen[id] || id>>21 >= s.Reserved {
			t.Fatalf("id %d invalid, repeated, or not below the stored reservation %d", id, s.Reserved)
		}
		seen[id] = true
	}
	if len(ids) == 0 {
		t.Fatal("no IDs before SIGTERM")
	}
	log := strings.Join(p.Lines(), "\n")
	if !strings.Contains(log, "reservation written") {
		t.Fatalf("log lacks the final reservation:\n%s", log)
	}
}

func TestDebugAndShutdownCommands(t *testing.T) {
	ctx := context.Background()
	t.Run("refused by default", func(t *testing.T) {
		p := start(t, nil)
		c := redis.NewClient(&redis.Options{Addr: p.Addr})
		defer c.Close()
		if err := c.Do(ctx, "DEBUG", "CLOCK-OFFSET", "-1000").Err(); err == nil || !strings.Contains(err.Error(), "DEBUG command not allowed") {
			t.Fatalf("DEBUG by default: %v", err)
		}
		if err := c.Do(ctx, "SHUTDOWN").Err(); err == nil || !strings.Contains(err.Error(), "SHUTDOWN is not allowed") {
			t.Fatalf("SHUTDOWN by default: %v", err)
		}
		if code := p.Stop(); code != 0 {
			t.Fatalf("exit %d", code)
		}
	})
	t.Run("enabled", func(t *testing.T) {
		dir := t.TempDir()
		// The lead is counted from a start's floor until the clock passes
		// it: start from a reservation a minute old, as a server that has
		// run a while (a first start would begin max-lead-ms ahead).
		writeState(t, dir, time.Now().UnixMilli()-idgen.DefaultEpoch.UnixMilli()-60_000)
		p := start(t, nil, "--dir", dir, "--enable-debug-command", "yes", "--max-wait-ms", "0")
		c := redis.NewClient(&redis.Options{Addr: p.Addr})
		defer c.Close()
		before, _ := c.Do(ctx, "GETID").Int64()
		// Within max-lead-ms: absorbed, IDs go on increasing.
		if err := c.Do(ctx, "DEBUG", "CLOCK-OFFSET", "-3000").Err(); err != nil {
			t.Fatal(err)
		}
		if off, err := c.Do(ctx, "DEBUG", "CLOCK-OFFSET").Int64(); off != -3000 || err != nil {
			t.Fatalf("DEBUG CLOCK-OFFSET shows %d, %v", off, err)
		}
		after, err := c.Do(ctx, "GETID").Int64()
		if err != nil || after <= before {
			t.Fatalf("GETID after a 3 s step back: %d (before %d), %v", after, before, err)
		}
		// Beyond it: refused with a clear error until the clock catches up.
		c.Do(ctx, "DEBUG", "CLOCK-OFFSET", "-8000")
		err = c.Do(ctx, "GETID").Err()
		if err == nil || !strings.HasPrefix(err.Error(), "BUSY lead ") || !strings.Contains(err.Error(), "backward clock step") {
			t.Fatalf("GETID after an 8 s step back: %v", err)
		}
		info, err := readInfo(c, "idgen")
		if steps, _ := info.get("clock_steps_back"); steps != "2" {
			t.Fatalf("two steps not counted once each: clock_steps_back %q, %v\n%s", steps, err, info.text)
		}
		c.Do(ctx, "DEBUG", "CLOCK-OFFSET", "0")
		if _, err := c.Do(ctx, "GETID").Int64(); err != nil {
			t.Fatalf("GETID once the clock is back: %v", err)
		}
		if err := c.Do(ctx, "SHUTDOWN").Err(); err == nil {
			t.Fatal("SHUTDOWN replied; Redis closes the connection instead")
		}
		if code := p.Wait(); code != 0 {
			t.Fatalf("exit %d after SHUTDOWN", code)
		}
		if _, found, err := reservation.ReadFile(filepath.Join(dir, "idserver.state")); !found || err != nil {
			t.Fatalf("no reservation after SHUTDOWN: %v", err)
		}
	})
}

// TestForwardClockStepHeld: the clock steps a day forward (a bad time
// source), then is put right, as NTP would. The server keeps to the time
// it went by meanwhile: no ID a day ahead, and no -BUSY once the clock is
// right again (it was refused for the whole day before). It counts and
// logs the step.
func TestForwardClockStepHeld(t *testing.T) {
	p := start(t, nil, "--enable-debug-command", "yes")
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	ctx := context.Background()
	if err := c.Do(ctx, "DEBUG", "CLOCK-OFFSET", strconv.Itoa(24*3600*1000)).Err(); err != nil {
		t.Fatal(err)
	}
	id, err := c.Do(ctx, "GETID").Int64()
	if err != nil {
		t.Fatal(err)
	}
	parts, err := idgen.Decode(id, idgen.DefaultLayout, idgen.DefaultEpoch)
	if err != nil || time.Until(parts.Time) > time.Minute {
		t.Fatalf("ID %d with the clock a day ahead has time %v (%v): want about now", id, parts.Time, err)
	}
	if held, _ := strconv.ParseInt(processInfo(p, "idgen", "clock_step_held_ms"), 10, 64); held < 24*3600*1000-60_000 {
		t.Fatalf("INFO idgen clock_step_held_ms %d, want about a day", held)
	}
	if err := c.Do(ctx, "DEBUG", "CLOCK-OFFSET", "0").Err(); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := c.Do(ctx, "GETID").Err(); err != nil {
			t.Fatalf("GETID once the clock is put right: %v", err)
		}
	}
	if got := processInfo(p, "idgen", "clock_steps_forward_held"); got != "1" {
		t.Errorf("INFO idgen clock_steps_forward_held %q, want 1", got)
	}
	if !await.Within(10*time.Second, func() bool { return p.Logged("clock stepped forward by more than max-lead-ms") }) {
		t.Errorf("the step was not logged:\n%s", strings.Join(p.Lines(), "\n"))
	}
}
