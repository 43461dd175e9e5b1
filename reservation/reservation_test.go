package reservation

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/idgen"
)

// memStore is a Store in memory whose writes can be slowed or failed.
type memStore struct {
	mu    sync.Mutex
	state State
	found bool
	saved atomic.Int64 // the largest Reserved ever saved
	delay atomic.Int64 // ns each Save takes
	fail  atomic.Bool
	saves atomic.Int64
}

func (m *memStore) Load() (State, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state, m.found, nil
}

func (m *memStore) Save(s State) error {
	time.Sleep(time.Duration(m.delay.Load()))
	if m.fail.Load() {
		return errors.New("disk full")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state, m.found = s, true
	m.saves.Add(1)
	if s.Reserved > m.saved.Load() {
		m.saved.Store(s.Reserved)
	}
	return nil
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

// issue calls Next from several goroutines for d and checks every ID
// against the reservation stored when it was returned.
func issue(t *testing.T, g *idgen.Generator, store *memStore, d time.Duration) (ids []int64, refused int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for range 4 {
		wg.Go(func() {
			var mine []int64
			var no int
			buf := make([]int64, 50)
			for time.Now().Before(deadline) {
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

func TestSteadyStateRenewsAhead(t *testing.T) {
	store := &memStore{}
	g, k := open(t, store, idgen.Settings{}, 100*time.Millisecond)
	ids, refused := issue(t, g, store, 400*time.Millisecond)
	if len(ids) == 0 || refused != 0 {
		t.Fatalf("%d ids, %d refused with a fast store", len(ids), refused)
	}
	if s := k.Stats(); s.Saves < 3 || s.Failures != 0 {
		t.Fatalf("keeper stats %+v after 400ms with a 100ms reservation", s)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Next(); !errors.Is(err, idgen.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if last := maxOf(ids); store.state.Reserved != last>>idgen.Bits+1 {
		t.Fatalf("final reservation %d, want the last id's ms + 1 = %d", store.state.Reserved, last>>idgen.Bits+1)
	}
}

// TestSlowStore: when writes take longer than max-wait, requests that
// reach T wait, then get ErrNotReserved; none is issued past T.
func TestSlowStore(t *testing.T) {
	store := &memStore{}
	g, k := open(t, store, idgen.Settings{MaxWait: 20 * time.Millisecond, MaxLead: time.Hour}, 10*time.Millisecond)
	defer k.Close()
	store.delay.Store(int64(150 * time.Millisecond))
	// Borrowing ahead fast runs into T long before a slow write lands.
	ids, refused := issue(t, g, store, 500*time.Millisecond)
	if refused == 0 || len(ids) == 0 {
		t.Fatalf("%d ids, %d refused: want both with a store slower than max-wait", len(ids), refused)
	}
	if s := g.Stats(); s.Unreserved == 0 {
		t.Fatalf("generator stats %+v: no ErrNotReserved counted", s)
	}
}

// TestFailingStore: when writes fail, requests past T are refused until a
// write succeeds again, and then they go on.
func TestFailingStore(t *testing.T) {
	store := &memStore{}
	g, k := open(t, store, idgen.Settings{MaxWait: 10 * time.Millisecond, MaxLead: time.Hour}, 10*time.Millisecond)
	defer k.Close()
	store.fail.Store(true)
	_, refused := issue(t, g, store, 200*time.Millisecond)
	if refused == 0 || k.Stats().Failures == 0 {
		t.Fatalf("%d refused, keeper %+v: want refusals and failures while the store fails", refused, k.Stats())
	}
	store.fail.Store(false)
	time.Sleep(50 * time.Millisecond)
	if _, err := g.Next(); err != nil {
		t.Fatalf("Next after the store recovered: %v", err)
	}
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
		ids, refused := issue(t, g, store, 100*time.Millisecond)
		if len(ids) == 0 || refused != 0 {
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
			k.Close()
		} else {
			// A crash: the keeper's last write stands.
			k.stopOnce.Do(func() { close(k.stop) })
			<-k.done
		}
	}
}

func TestFileStore(t *testing.T) {
	dir := t.TempDir()
	f := FileStore{Path: filepath.Join(dir, "idserver.state")}
	if _, found, err := f.Load(); found || err != nil {
		t.Fatalf("Load without a file: found %v, %v", found, err)
	}
	want := base
	want.Reserved = 375310358272
	if err := f.Save(want); err != nil {
		t.Fatal(err)
	}
	want.Reserved++
	if err := f.Save(want); err != nil {
		t.Fatal(err)
	}
	got, found, err := f.Load()
	if err != nil || !found || got != want {
		t.Fatalf("Load = %+v, %v, %v; want %+v", got, found, err, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d files in the directory, want only the state file", len(entries))
	}
	if err := (FileStore{Path: filepath.Join(dir, "no", "such", "dir", "s")}).Save(want); err == nil {
		t.Fatal("Save into a missing directory succeeded")
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
	if _, _, err := (FileStore{Path: dir}).Load(); err == nil {
		t.Error("Load of a directory succeeded")
	}
	other := good
	other.ServerID = 2
	f := FileStore{Path: filepath.Join(dir, "s")}
	if err := f.Save(other); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Resume(good); err == nil || !strings.Contains(err.Error(), "written for server-id 2") || !strings.Contains(err.Error(), f.Path) {
		t.Errorf("Resume from another server-id's file: %v", err)
	}
	if at, err := f.Resume(other); err != nil || at != other.Reserved {
		t.Errorf("Resume = %d, %v; want %d", at, err, other.Reserved)
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
	g, k := open(t, store, idgen.Settings{MaxLead: time.Hour}, 100*time.Millisecond)
	defer k.Close()
	// The clock runs on with no IDs issued: the ceiling follows the clock,
	// well past the next ID's time.
	time.Sleep(300 * time.Millisecond)
	if err := k.renew(); err != nil {
		t.Fatal(err)
	}
	ceiling := g.Stats().Ceiling
	g.SetClockOffset(-time.Minute)
	if err := k.renew(); err != nil {
		t.Fatal(err)
	}
	if got := store.state.Reserved; got < ceiling {
		t.Fatalf("stored T %d below the ceiling %d in force", got, ceiling)
	}
}
