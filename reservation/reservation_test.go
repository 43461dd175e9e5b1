package reservation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/idgen/idgentest"
	"github.com/idserver/idserver/internal/await"
)

// memStore is a Store in memory whose writes can be held or failed; Load
// gives what it holds, as a start would read it.
type memStore struct {
	mu    sync.Mutex
	state State
	found bool
	saved atomic.Int64  // the largest Reserved ever saved
	hold  chan struct{} // when set, Save waits until it is closed
	fail  atomic.Bool
}

func (m *memStore) Load() (State, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state, m.found, nil
}

func (m *memStore) Save(ctx context.Context, s State) error {
	m.mu.Lock()
	hold := m.hold
	m.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if m.fail.Load() {
		return errors.New("disk full")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state, m.found = s, true
	if s.Reserved > m.saved.Load() {
		m.saved.Store(s.Reserved)
	}
	return nil
}

// holdSaves makes every Save wait until the returned function is called.
func (m *memStore) holdSaves() (release func()) {
	hold := make(chan struct{})
	m.mu.Lock()
	m.hold = hold
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		m.hold = nil
		m.mu.Unlock()
		close(hold)
	}
}

func (m *memStore) reserved() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state.Reserved
}

var base = State{ServerID: 1, Layout: idgen.DefaultLayout, Epoch: idgen.DefaultEpoch.UnixMilli()}

// open starts a generator and keeper from what store holds, as main does.
func open(t *testing.T, store *memStore, st idgen.Settings, reserve time.Duration) (*idgen.Generator, *Keeper) {
	t.Helper()
	prev, found, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	if found {
		st.Floor = prev.Reserved
	}
	st.Ceiling = max(st.Floor, 1)
	st.ServerID = base.ServerID
	g, err := idgen.New(st)
	if err != nil {
		t.Fatal(err)
	}
	k, err := Start(g, store, base, reserve, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return g, k
}

// issue makes calls NextN(50) calls from each of 4 goroutines and checks
// every ID against the reservation stored when it was returned. Refused
// calls count, and are not retried.
func issue(t *testing.T, g *idgen.Generator, store *memStore, calls int) (ids []int64, refused int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			var mine []int64
			var no int
			buf := make([]int64, 50)
			for range calls {
				err := g.NextN(buf)
				if errors.Is(err, idgen.ErrNotReserved) || errors.Is(err, idgen.ErrLeadExceeded) {
					no++
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				saved := store.saved.Load()
				for _, id := range buf {
					if ms := id >> idgen.Bits; ms >= saved {
						t.Errorf("id %d has time field %d, not below the stored reservation %d", id, ms, saved)
						return
					}
				}
				mine = append(mine, buf...)
			}
			mu.Lock()
			defer mu.Unlock()
			ids = append(ids, mine...)
			refused += no
		})
	}
	wg.Wait()
	return ids, refused
}

func maxOf(ids []int64) int64 {
	m := int64(-1)
	for _, id := range ids {
		m = max(m, id)
	}
	return m
}

// TestSteadyStateRenewsAhead: 100,000 IDs, about 200 ms of the default
// layout's shard slots, through a 100 ms reservation: the keeper renews
// ahead of them, and no request is refused.
func TestSteadyStateRenewsAhead(t *testing.T) {
	store := &memStore{}
	g, k := open(t, store, idgen.Settings{MaxWait: time.Minute}, 100*time.Millisecond)
	ids, refused := issue(t, g, store, 500)
	if len(ids) != 100_000 || refused != 0 {
		t.Fatalf("%d ids, %d refused with a fast store", len(ids), refused)
	}
	if s := k.Stats(); s.Saves < 2 || s.Failures != 0 {
		t.Fatalf("keeper stats %+v after 200ms of IDs with a 100ms reservation", s)
	}
	if err := k.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Next(); !errors.Is(err, idgen.ErrStopped) {
		t.Fatalf("Next after Close: %v", err)
	}
	if last := maxOf(ids); store.reserved() != last>>idgen.Bits+1 {
		t.Fatalf("final reservation %d, want the last id's ms + 1 = %d", store.reserved(), last>>idgen.Bits+1)
	}
}

// TestSlowStore: while a write hangs, requests that reach T wait max-wait,
// then get ErrNotReserved; none is issued past T. Once the write lands,
// requests go on.
func TestSlowStore(t *testing.T) {
	store := &memStore{}
	g, k := open(t, store, idgen.Settings{MaxWait: 20 * time.Millisecond, MaxLead: time.Hour}, 10*time.Millisecond)
	defer k.Close(context.Background())
	release := store.holdSaves()
	// 8,000 IDs need 16ms of shard slots, past the 10ms reserved.
	ids, refused := issue(t, g, store, 40)
	if refused == 0 || len(ids) == 0 {
		t.Fatalf("%d ids, %d refused: want both while the store hangs", len(ids), refused)
	}
	if s := g.Stats(); s.Unreserved == 0 {
		t.Fatalf("generator stats %+v: no ErrNotReserved counted", s)
	}
	release()
	nextOnceRenewed(t, g)
}

// nextOnceRenewed checks that Next succeeds once the keeper has caught up:
// it retries ErrNotReserved, and fails on any other error.
func nextOnceRenewed(t *testing.T, g *idgen.Generator) {
	t.Helper()
	var err error
	await.True(t, time.Minute, "Next succeeds after the store recovered", func() bool {
		_, err = g.Next()
		if err != nil && !errors.Is(err, idgen.ErrNotReserved) {
			t.Fatalf("Next after the store recovered: %v", err)
		}
		return err == nil
	})
}

// TestCloseCutsARenewalShort: a write that hangs (etcd unreachable) does
// not hold Close up: the renewal under way and the final write both give
// up when their contexts end, and the generator stops at once.
func TestCloseCutsARenewalShort(t *testing.T) {
	store := &memStore{}
	g, k := open(t, store, idgen.Settings{MaxWait: time.Millisecond, MaxLead: time.Hour}, 10*time.Millisecond)
	reserved := store.reserved()
	defer store.holdSaves()()
	// Past the 10 ms reserved: the keeper's next write starts and hangs.
	issue(t, g, store, 40)
	if s := g.Stats(); s.Unreserved == 0 {
		t.Fatalf("generator stats %+v: want requests waiting for the hung write", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the final write gets no time either
	closed := make(chan error, 1)
	go func() { closed <- k.Close(ctx) }()
	select {
	case err := <-closed:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Close: %v, want the final write given up", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close waits behind a hung write")
	}
	if _, err := g.Next(); !errors.Is(err, idgen.ErrStopped) {
		t.Fatalf("Next after Close: %v", err)
	}
	if s := k.Stats(); s.Failures != 0 || store.reserved() != reserved {
		t.Fatalf("keeper %+v, stored %d (was %d): a write cut short by Close is neither a failure nor stored", s, store.reserved(), reserved)
	}
}

// TestFailingStore: when writes fail, requests past T are refused until a
// write succeeds again, and then they go on.
func TestFailingStore(t *testing.T) {
	store := &memStore{}
	g, k := open(t, store, idgen.Settings{MaxWait: 10 * time.Millisecond, MaxLead: time.Hour}, 10*time.Millisecond)
	defer k.Close(context.Background())
	store.fail.Store(true)
	_, refused := issue(t, g, store, 40)
	if refused == 0 || k.Stats().Failures == 0 {
		t.Fatalf("%d refused, keeper %+v: want refusals and failures while the store fails", refused, k.Stats())
	}
	store.fail.Store(false)
	nextOnceRenewed(t, g)
}

func TestStartFailsWithoutStore(t *testing.T) {
	store := &memStore{}
	store.fail.Store(true)
	g, err := idgen.New(idgen.Settings{Ceiling: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(g, store, base, time.Second, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Start with a failing store: %v", err)
	}
	if _, err := g.Next(); !errors.Is(err, idgen.ErrNotReserved) {
		t.Fatalf("Next without a reservation: %v, want ErrNotReserved", err)
	}
}

// TestRestarts crashes (no Close) and restarts again and again, borrowing
// ahead and with the clock set back while "down", and checks every run
// starts above every ID before it and is not refused for the jump.
func TestRestarts(t *testing.T) {
	store := &memStore{}
	var all []int64
	for run := range 8 {
		st := idgen.Settings{MaxLead: 2 * time.Second, ClockOffset: -time.Duration(run%3) * 5 * time.Second}
		g, k := open(t, store, st, 100*time.Millisecond)
		// 10,000 IDs: 20ms of shard slots, within the first reservation.
		ids, refused := issue(t, g, store, 50)
		if len(ids) != 10_000 || refused != 0 {
			t.Fatalf("run %d: %d ids, %d refused", run, len(ids), refused)
		}
		low := ids[0]
		for _, id := range ids {
			low = min(low, id)
		}
		if prev := maxOf(all); low <= prev {
			t.Fatalf("run %d (clock offset %v) issued %d, not above %d of an earlier run", run, st.ClockOffset, low, prev)
		}
		all = append(all, ids...)
		if run%2 == 0 {
			k.Close(context.Background())
		} else {
			// A crash: the keeper's last write stands.
			k.stop()
			<-k.done
		}
	}
}

// TestReservationStopsAtTheEnd: near the end of the time field the keeper
// stores the end itself, never more, so the next start is refused with a
// clear error rather than an overflowing counter.
func TestReservationStopsAtTheEnd(t *testing.T) {
	end := idgen.End(idgen.DefaultEpoch)
	clk := idgentest.NewClock(end.Add(-time.Second))
	store := &memStore{}
	g, k := open(t, store, idgen.Settings{Clock: clk}, 3*time.Second)
	if got := store.reserved(); got != 1<<idgen.TimeBits {
		t.Fatalf("stored T %d a second before the end, want the end %d", got, int64(1)<<idgen.TimeBits)
	}
	if _, err := g.Next(); err != nil {
		t.Fatal(err)
	}
	// A crash: the stored end stands, and a restart has nothing left.
	k.stop()
	<-k.done
	if _, err := idgen.New(idgen.Settings{Floor: store.reserved(), Clock: clk}); !errors.Is(err, idgen.ErrOverflow) {
		t.Fatalf("restart after a crash at the end: %v, want ErrOverflow", err)
	}
}

// openStore opens the FileStore on path, logging to a buffer.
func openStore(t *testing.T, path string) (*FileStore, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	f, err := OpenFile(path, zerolog.New(&log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, &log
}

func TestFileStore(t *testing.T) {
	dir := t.TempDir()
	f, _ := openStore(t, filepath.Join(dir, "idserver.state"))
	if r, err := f.Resume(base); r.From != "" || err != nil {
		t.Fatalf("Resume without a file: %+v, %v", r, err)
	}
	want := base
	want.Reserved = 375310358272
	if err := f.Save(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	want.Reserved++
	if err := f.Save(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	if r, err := f.Resume(base); err != nil || r.Reserved != want.Reserved || r.From != f.Path() {
		t.Fatalf("Resume = %+v, %v; want %d from the state file", r, err, want.Reserved)
	}
	if got, found, err := ReadFile(f.Path()); err != nil || !found || got != want {
		t.Fatalf("ReadFile = %+v, %v, %v; want %+v", got, found, err, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("%d files in the directory, want only the state file and its lock file", len(entries))
	}
	if _, err := OpenFile(filepath.Join(dir, "no", "such", "dir", "s"), zerolog.Nop()); err == nil {
		t.Fatal("OpenFile in a missing directory succeeded")
	}
}

// TestLockExclusive: while one store holds a state file, opening it again
// fails with an error naming the lock file and the holder's pid; once the
// first is closed, it succeeds.
func TestLockExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idserver.state")
	f, _ := openStore(t, path)
	_, err := OpenFile(path, zerolog.Nop())
	want := fmt.Sprintf("pid %d holds its lock file %s.lock", os.Getpid(), path)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), want) {
		t.Fatalf("second OpenFile: %v, want ErrLocked saying %q", err, want)
	}
	f.Close()
	g, err := OpenFile(path, zerolog.Nop())
	if err != nil {
		t.Fatalf("OpenFile after Close: %v", err)
	}
	g.Close()
}

// TestStateFileVanishes: a state file deleted under a running server is
// noticed and written again at the next save; if the server dies before
// that, the next start resumes from the copy in the lock file.
func TestStateFileVanishes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idserver.state")
	f, log := openStore(t, path)
	s := base
	s.Reserved = 1000
	if err := f.Save(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	s.Reserved = 2000
	if err := f.Save(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), `"level":"warn"`) || !strings.Contains(log.String(), "the state file vanished") {
		t.Fatalf("no warning for the vanished state file: %s", log)
	}
	if got, found, _ := ReadFile(path); !found || got.Reserved != 2000 {
		t.Fatalf("state file after the save: %+v, found %v", got, found)
	}

	// Deleted again, and the server dies before its next save.
	os.Remove(path)
	f.Close()
	g, _ := openStore(t, path)
	r, err := g.Resume(base)
	if err != nil || r.Reserved != 2000 || r.From != path+".lock" {
		t.Fatalf("Resume = %+v, %v; want 2000 from the lock file", r, err)
	}
	if floor := r.Floor(5000, time.Hour); floor != 2000 {
		t.Fatalf("Floor = %d, want the reservation 2000", floor)
	}
}

// TestLockFileVanishes: a lock file deleted under a running server is
// taken again at the next save; if another process has taken one in its
// place, saves fail, and that process resumes above everything the first
// one may issue.
func TestLockFileVanishes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idserver.state")
	a, log := openStore(t, path)
	s := base
	s.Reserved = 1000
	if err := a.Save(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	os.Remove(path + ".lock")
	s.Reserved = 2000
	if err := a.Save(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "the lock file vanished") {
		t.Fatalf("no warning for the vanished lock file: %s", log)
	}
	if _, err := OpenFile(path, zerolog.Nop()); !errors.Is(err, ErrLocked) {
		t.Fatalf("OpenFile while the lock was taken again: %v, want ErrLocked", err)
	}

	os.Remove(path + ".lock")
	b, _ := openStore(t, path)
	r, err := b.Resume(base)
	if err != nil || r.Reserved != 2000 {
		t.Fatalf("second process resumes from %+v, %v; want 2000", r, err)
	}
	s.Reserved = 3000
	if err := a.Save(context.Background(), s); !errors.Is(err, ErrLocked) {
		t.Fatalf("Save by the process that lost its lock: %v, want ErrLocked", err)
	}
}

// TestResumeTakesTheLarger: a state file restored from an old backup does
// not take a start below the copy in the lock file, and the reverse.
func TestResumeTakesTheLarger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idserver.state")
	f, _ := openStore(t, path)
	old, cur := base, base
	old.Reserved, cur.Reserved = 1000, 5000
	f.Save(context.Background(), cur)
	os.WriteFile(path, old.Marshal(), 0o644) // restored from a backup
	f.Close()
	g, _ := openStore(t, path)
	if r, err := g.Resume(base); err != nil || r.Reserved != 5000 {
		t.Fatalf("Resume = %+v, %v; want 5000 from the lock file", r, err)
	}
	cur.Reserved = 7000
	os.WriteFile(path, cur.Marshal(), 0o644)
	if r, err := g.Resume(base); err != nil || r.Reserved != 7000 || r.From != path {
		t.Fatalf("Resume = %+v, %v; want 7000 from the state file", r, err)
	}
}

// TestLockFileCopyUnreadable: a torn copy in the lock file (it is written
// without fsync) does not matter while the state file is there, and stops
// the start when it is the only reservation left.
func TestLockFileCopyUnreadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idserver.state")
	s := base
	s.Reserved = 4000
	if err := os.WriteFile(path+".lock", append([]byte("pid 1\n"), s.Marshal()[:20]...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, s.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, _ := openStore(t, path)
	if r, err := f.Resume(base); err != nil || r.Reserved != 4000 {
		t.Fatalf("Resume with a good state file: %+v, %v", r, err)
	}
	os.Remove(path)
	if _, err := f.Resume(base); err == nil || !strings.Contains(err.Error(), path+".lock") {
		t.Fatalf("Resume from a torn copy only: %v, want an error naming the lock file", err)
	}
	other := base
	other.ServerID = 3
	os.WriteFile(path, other.Marshal(), 0o644)
	if _, err := f.Resume(base); err == nil || !strings.Contains(err.Error(), "written for server-id 3") {
		t.Fatalf("Resume from another server's state file: %v", err)
	}
}

func TestFirstStartFloor(t *testing.T) {
	var first Resumed
	if got := first.Floor(10_000, 5*time.Second); got != 15_000 {
		t.Fatalf("first start at 10000 with max-lead 5s: floor %d, want 15000", got)
	}
	if got := first.Floor(-3000, 5*time.Second); got != 5000 {
		t.Fatalf("first start with the clock before the epoch: floor %d, want 5000", got)
	}
}

func TestCorruptFiles(t *testing.T) {
	good := base
	good.Reserved = 12345
	data := good.Marshal()
	flipped := append([]byte(nil), data...)
	flipped[len("idserver-state v1\nserver-id ")] = '7'
	tests := map[string][]byte{
		"empty":       {},
		"truncated":   data[:len(data)/2],
		"no newline":  data[:len(data)-1],
		"bit flip":    flipped,
		"other file":  []byte("hello\ncrc32c 00000000\n"),
		"new version": []byte(strings.Replace(string(data), "v1", "v2", 1)),
	}
	for name, bad := range tests {
		if _, err := Unmarshal(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	dir := t.TempDir()
	if _, _, err := ReadFile(dir); err == nil {
		t.Error("ReadFile of a directory succeeded")
	}
	other := good
	other.ServerID = 2
	path := filepath.Join(dir, "s")
	f, _ := openStore(t, path)
	if err := f.Save(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Resume(good); err == nil || !strings.Contains(err.Error(), "written for server-id 2") || !strings.Contains(err.Error(), path) {
		t.Errorf("Resume from another server-id's file: %v", err)
	}
	if r, err := f.Resume(other); err != nil || r.Reserved != other.Reserved || r.From != path {
		t.Errorf("Resume = %+v, %v; want %d from %s", r, err, other.Reserved, path)
	}
}

func FuzzUnmarshal(f *testing.F) {
	s := base
	s.Reserved = 99
	f.Add(s.Marshal())
	f.Add([]byte("idserver-state v1\ncrc32c 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Unmarshal(data)
		if err != nil {
			return
		}
		// What parses must survive a round trip.
		if back, err := Unmarshal(s.Marshal()); err != nil || back != s {
			t.Fatalf("round trip of %+v: %+v, %v", s, back, err)
		}
	})
}

// TestNeverStoresLessThanCeiling steps the clock far back between
// renewals: the stored T must never drop below what the generator may
// already have issued up to.
func TestNeverStoresLessThanCeiling(t *testing.T) {
	store := &memStore{}
	clk := idgentest.NewClock(time.Now())
	g, k := open(t, store, idgen.Settings{MaxLead: time.Hour, Clock: clk}, 100*time.Millisecond)
	defer k.Close(context.Background())
	// The clock runs on with no IDs issued: the ceiling follows the clock,
	// well past the next ID's time.
	clk.Advance(300 * time.Millisecond)
	if err := k.renew(); err != nil {
		t.Fatal(err)
	}
	ceiling := g.Stats().Ceiling
	clk.Advance(-time.Minute)
	if err := k.renew(); err != nil {
		t.Fatal(err)
	}
	if got := store.reserved(); got < ceiling {
		t.Fatalf("stored T %d below the ceiling %d in force", got, ceiling)
	}
}

// TestLockDir: a second LockDir on a held dir fails with one line naming
// the dir and the holder's pid; Release removes the lock file; a lock
// file left by a process that died (here: one nobody holds) does not
// refuse. A store that never saved removes the lock file it made.
func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, DirLockFile)
	if err := os.WriteFile(path, []byte("pid 999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := LockDir(dir, zerolog.Nop())
	if err != nil {
		t.Fatalf("LockDir over a lock file nobody holds: %v", err)
	}
	_, err = LockDir(dir, zerolog.Nop())
	want := fmt.Sprintf("dir %s is in use by another idserver (pid %d); each server needs a directory of its own", dir, os.Getpid())
	if err == nil || err.Error() != want {
		t.Fatalf("second LockDir: %v, want %q", err, want)
	}
	d.Release()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("%d files in the directory after Release, want none", len(entries))
	}
	f, err := OpenFile(filepath.Join(dir, "idserver.state"), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("%d files in the directory after a store that never saved closed, want none", len(entries))
	}
}

// TestLockDirRemovedByHand: a dir lock file removed, or replaced, under
// the server that holds it is taken again, so a second server started
// afterwards is refused as before.
func TestLockDirRemovedByHand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, DirLockFile)
	d, err := LockDir(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	for _, spoil := range []func() error{
		func() error { return os.Remove(path) },
		func() error { // replaced
			if err := os.WriteFile(path+".new", nil, 0o644); err != nil {
				return err
			}
			return os.Rename(path+".new", path)
		},
	} {
		if err := spoil(); err != nil {
			t.Fatal(err)
		}
		await.True(t, 30*time.Second, "the lock file taken again", func() bool {
			data, err := os.ReadFile(path)
			return err == nil && string(data) == fmt.Sprintf("pid %d\n", os.Getpid())
		})
		if _, err := LockDir(dir, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "is in use by another idserver") {
			t.Fatalf("second LockDir after the lock file was spoiled and taken again: %v", err)
		}
	}
}
