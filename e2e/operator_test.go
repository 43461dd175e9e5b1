package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/reservation"
)

// Operator mistakes, tried on the real binary (two servers on one dir:
// onedir_test.go): a start that fails beside a live server, state files deleted under
// a running server, odd epochs, a reservation far ahead of the clock.

// mgetid asks addr for n IDs with MGETID, in batches of at most 10000.
func mgetid(t *testing.T, addr string, n int) []int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	var ids []int64
	for len(ids) < n {
		batch, err := c.Do(context.Background(), "MGETID", min(n-len(ids), 10000)).Int64Slice()
		if err != nil {
			t.Fatalf("MGETID: %v", err)
		}
		ids = append(ids, batch...)
	}
	return ids
}

// checkAbove fails unless every id in ids is above floor and none repeats.
func checkAbove(t *testing.T, ids []int64, floor int64) {
	t.Helper()
	seen := map[int64]bool{}
	for _, id := range ids {
		if id <= floor || seen[id] {
			t.Fatalf("id %d repeated or not above %d, the largest ID of the server before", id, floor)
		}
		seen[id] = true
	}
}

// fileSnapshot is a file's inode and bytes.
type fileSnapshot struct {
	ino  uint64
	data []byte
}

func snapshot(t *testing.T, path string) fileSnapshot {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fileSnapshot{st.Sys().(*syscall.Stat_t).Ino, data}
}

func (a fileSnapshot) same(b fileSnapshot) bool { return a.ino == b.ino && bytes.Equal(a.data, b.data) }

// TestFailedStartWritesNothing: starts that fail for other reasons than
// the lock (port in use, a bind or metrics address that cannot be had)
// leave the state file byte for byte and inode for inode as it was, both
// beside a live server paused so that it cannot renew, and alone. The
// paused server, killed, then restarts above every ID it issued.
func TestFailedStartWritesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "idserver.state")
	a := start(t, nil, "--dir", dir)
	issued := mgetid(t, a.Addr, 200_000) // borrows about 400ms ahead
	_, port, _ := strings.Cut(a.Addr, ":")
	failures := [][]string{
		{"--port", port},
		{"--bind", "192.0.2.1", "--port", "6551"}, // TEST-NET-1: no interface here has it (and a port of its own: a socket passed would serve instead of the bind)
		{"--metrics-addr", "192.0.2.1:0"},
	}
	a.Pause(t)
	before := snapshot(t, path)
	for _, args := range failures {
		if out, code := runToExit(t, append([]string{"--dir", dir}, args...)...); code == 0 {
			t.Fatalf("start with %v beside a live server: exit 0, output %q", args, out)
		}
		if !snapshot(t, path).same(before) {
			t.Fatalf("start with %v beside a live server changed the state file", args)
		}
	}
	a.Kill9()
	b := start(t, nil, "--dir", dir)
	checkAbove(t, mgetid(t, b.Addr, 1000), slices.Max(issued))
	b.Stop()

	// Alone, with nothing else holding the lock.
	before = snapshot(t, path)
	blocker := start(t, nil, "--dir", t.TempDir())
	_, port, _ = strings.Cut(blocker.Addr, ":")
	for _, args := range append(failures[1:], []string{"--port", port}) {
		out, code := runToExit(t, append([]string{"--dir", dir}, args...)...)
		if code == 0 || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, "cannot") {
			t.Fatalf("start with %v: exit %d, output %q; want exit != 0 and one line saying why", args, code, out)
		}
		if !snapshot(t, path).same(before) {
			t.Fatalf("failed start with %v changed the state file", args)
		}
	}
}

// TestStateFileDeleted: a state file deleted under a running server is
// noticed at the next renewal, logged, and written again. Deleted and
// then killed before that renewal, the server restarts from the copy in
// the lock file; with the lock file deleted too, from max-lead-ms ahead
// of the clock. Every restart is above every ID issued before.
func TestStateFileDeleted(t *testing.T) {
	dir := t.TempDir()
	// Not a first start, which begins max-lead-ms ahead and so renews
	// only seconds later.
	path := writeState(t, dir, time.Now().UnixMilli()-idgen.DefaultEpoch.UnixMilli())
	a := start(t, nil, "--dir", dir, "--reserve-ms", "200")
	os.Remove(path)
	if !await.Within(time.Minute, func() bool {
		_, err := os.Stat(path)
		return err == nil && a.Logged("the state file vanished")
	}) {
		t.Fatalf("a minute after the state file was deleted, it is not back, or not logged; log:\n%s", strings.Join(a.Lines(), "\n"))
	}

	for _, remove := range [][]string{{path}, {path, path + ".lock"}} {
		issued := mgetid(t, a.Addr, 500_000) // borrows about 1 s ahead
		// Stopped first, so that no renewal writes the files again before
		// the kill: it dies before its next renewal.
		a.Pause(t)
		for _, f := range remove {
			os.Remove(f)
		}
		a.Kill9()
		a = start(t, nil, "--dir", dir, "--reserve-ms", "200")
		want := "resuming from the copy of the reservation in the lock file"
		if len(remove) == 2 {
			want = "no state file: a first start"
		}
		if !a.Logged(want) {
			t.Fatalf("after deleting %v: the log lacks %q:\n%s", remove, want, strings.Join(a.Lines(), "\n"))
		}
		checkAbove(t, mgetid(t, a.Addr, 1000), slices.Max(issued))
	}
}

// TestEpochAtTheClock: with the epoch at the current time, a layout with
// neither server-id nor random bits, and the clock 5 s behind the epoch,
// every ID is still positive.
func TestEpochAtTheClock(t *testing.T) {
	p := start(t, nil, "--epoch", strconv.FormatInt(time.Now().UnixMilli(), 10),
		"--id-range", "0", "--shard-range", "21", "--random-range", "0",
		"--enable-debug-command", "yes", "--debug-clock-offset-ms", "-5000")
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	if id, err := c.Do(context.Background(), "GETID").Int64(); err != nil || id <= 0 {
		t.Fatalf("GETID = %d, %v; want a positive ID", id, err)
	}
	checkAbove(t, mgetid(t, p.Addr, 1000), 0)
}

// writeState writes a state file for the default identity with T = reserved.
func writeState(t *testing.T, dir string, reserved int64) string {
	t.Helper()
	s := reservation.State{Layout: idgen.DefaultLayout, Epoch: idgen.DefaultEpoch.UnixMilli(), Reserved: reserved}
	path := filepath.Join(dir, "idserver.state")
	if err := os.WriteFile(path, s.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReservationAtTheEnd: a reservation at the end of the time field
// stops the start with one line naming the date, and leaves the file.
func TestReservationAtTheEnd(t *testing.T) {
	dir := t.TempDir()
	path := writeState(t, dir, 1<<idgen.TimeBits)
	before := snapshot(t, path)
	out, code := runToExit(t, "--dir", dir)
	end := idgen.End(idgen.DefaultEpoch).UTC().Format(time.RFC3339)
	if code != 1 || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, "time field is used up") || !strings.Contains(out, end) {
		t.Fatalf("exit %d, output %q; want exit 1 and one line saying the time field is used up at %s", code, out, end)
	}
	if !snapshot(t, path).same(before) {
		t.Fatal("the refused start changed the state file")
	}
}

// TestReservationFarAhead: a restart whose reservation is a day ahead of
// the clock (the clock was set back while the server was down) says so at
// warning level, with the time IDs are available in full; it serves
// max-lead-ms of shard slots, then refuses with the real time to wait.
func TestReservationFarAhead(t *testing.T) {
	dir := t.TempDir()
	const day = 24 * 3600 * 1000
	reserved := time.Now().UnixMilli() - idgen.DefaultEpoch.UnixMilli() + day
	writeState(t, dir, reserved)
	p := start(t, nil, "--dir", dir)
	at := time.UnixMilli(idgen.DefaultEpoch.UnixMilli() + reserved).UTC().Format(time.RFC3339)
	var warning string
	for _, l := range p.Lines() {
		if strings.Contains(l, `"level":"warn"`) && strings.Contains(l, "ahead of the clock") {
			warning = l
		}
	}
	budget := (5000 + 1) << 9 // max-lead-ms and the reservation's own millisecond, at 2^9 IDs per ms
	for _, want := range []string{"until the clock reaches it at " + at, "at most " + strconv.Itoa(budget) + " IDs", "-BUSY"} {
		if !strings.Contains(warning, want) {
			t.Fatalf("start-up warning %q lacks %q; log:\n%s", warning, want, strings.Join(p.Lines(), "\n"))
		}
	}
	checkAbove(t, mgetid(t, p.Addr, budget), 0)
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	err := c.Do(context.Background(), "GETID").Err()
	var retry int64
	if err != nil {
		m := regexp.MustCompile(`^BUSY .*retry in (\d+)ms$`).FindStringSubmatch(err.Error())
		if m != nil {
			retry, _ = strconv.ParseInt(m[1], 10, 64)
		}
	}
	if retry < day-60_000 || retry > day {
		t.Fatalf("GETID past the budget: %v; want -BUSY with a retry of about a day", err)
	}
	// The IDs past the reservation's millisecond ran ahead of the clock
	// because the start was a day ahead, and the warning says that.
	const why = "started from a reservation"
	if !await.Within(10*time.Second, func() bool { return p.Logged(why) }) {
		t.Fatalf("no warning that IDs ran ahead because of the start %q; log:\n%s", why, strings.Join(p.Lines(), "\n"))
	}
}
