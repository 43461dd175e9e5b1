package sequence

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idserver/idserver/internal/testseed"
)

// TestHandOver: a slot's keys go from one Table to another as a graceful
// hand-over moves them: SlotMarks gives each existing key of the slot at
// its exact last value (none of another slot, none only prepared), once,
// in pages each within its budget but for its last key;
// LoadSlot over a File makes each present at that value, durably (a
// restart from the file has it), its next INCR one more; a key the new
// Table held lower is raised, one it held higher keeps its own; and
// CountSlot and KeysInSlot read the slot. Seeded: the keys and values.
func TestHandOver(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	old := newTable(t, newMem(), Options{}, nil)
	want := map[string]int64{}
	for i := range 1 + rng.IntN(200) {
		k := slotKey("h", i)
		want[k] = incr(t, old, k, int64(1+rng.IntN(1000)))
	}
	incr(t, old, slotKey("other", 0), 1)
	old.Prepare([]byte(slotKey("h", -1)), 1) // only prepared: not a key
	waitIdle(t, old, slotKey("h", -1))
	slot := slotOf(slotKey("h", 0))
	var marks []Mark
	budget := 1 + rng.IntN(2000)
	for from, pages := 0, 0; ; pages++ {
		page, next, used := old.SlotMarks(slot, from, budget)
		if overBudget := len(page) > 1 && used-pageBytes(page[len(page)-1]) >= budget; overBudget || len(page) == 0 && next != 0 {
			t.Fatalf("page %d from %d (budget %d): %d marks, %d bytes, next %d", pages, from, budget, len(page), used, next)
		}
		marks = append(marks, page...)
		if next == 0 {
			break
		}
		from = next
	}
	got := map[string]int64{}
	for _, m := range marks {
		if !m.Born {
			t.Fatalf("%s: not born", m.Key)
		}
		if _, twice := got[m.Key]; twice {
			t.Fatalf("%s given twice", m.Key)
		}
		got[m.Key] = m.Value
	}
	if !mapsEqual(got, want) {
		t.Fatalf("SlotMarks gave %d keys, %v...; want %d", len(got), marks[:min(len(marks), 3)], len(want))
	}

	path := filepath.Join(t.TempDir(), "idserver.seq")
	f, _, _, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tb := New(Options{}, f, nil)
	lower, higher := slotKey("h", 0), slotKey("h", 1)
	incr(t, tb, lower, 1)
	keep := incr(t, tb, higher, want[higher]+10)
	if err := tb.LoadSlot(context.Background(), marks); err != nil {
		t.Fatal(err)
	}
	want[higher] = keep
	for k, v := range want {
		if got, ok := get(t, tb, k); !ok || got != v {
			t.Fatalf("%s after LoadSlot: %d %v; want %d", k, got, ok, v)
		}
	}
	if n, keys := tb.CountSlot(slot), tb.KeysInSlot(slot, 1000); n != len(want) || len(keys) != n {
		t.Fatalf("CountSlot %d, KeysInSlot %d keys; want %d", n, len(keys), len(want))
	}
	if keys := tb.KeysInSlot(slot, 3); len(keys) != min(3, len(want)) {
		t.Fatalf("KeysInSlot of 3: %d keys", len(keys))
	}
	crash(tb) // nothing released: what LoadSlot stored must be durable already
	f.Close()
	f, known, _, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stored := map[string]int64{}
	for _, m := range known {
		stored[m.Key] = m.Value
	}
	for k, v := range want {
		if stored[k] < v {
			t.Fatalf("%s: the file holds %d after a crash; LoadSlot loaded %d", k, stored[k], v)
		}
	}
	tb = newTable(t, f, Options{}, known)
	for k := range want {
		if got := incr(t, tb, k, 1); got <= want[k] {
			t.Fatalf("%s: INCR after the restart gave %d; loaded at %d", k, got, want[k])
		}
	}
}

// mapsEqual reports whether a and b hold the same pairs.
func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestLoadSlotNextIncr: a key loaded at v gives v + 1 next, at once
// after one take.
func TestLoadSlotNextIncr(t *testing.T) {
	tb := newTable(t, newMem(), Options{}, nil)
	if err := tb.LoadSlot(context.Background(), []Mark{{Key: "a", Value: 41, Born: true}}); err != nil {
		t.Fatal(err)
	}
	if v := incr(t, tb, "a", 1); v != 42 {
		t.Fatalf("INCR of a key loaded at 41: %d", v)
	}
	if tb.Len() != 1 {
		t.Fatalf("DBSIZE %d", tb.Len())
	}
}

// failKeys is memBackend whose Set fails for the keys in fail.
type failKeys struct {
	*memBackend
	fail map[string]bool
}

var errDisk = errors.New("injected: disk error")

func (f *failKeys) Set(ctx context.Context, ss []Setting) {
	var pass []Setting
	var at []int
	for i, s := range ss {
		if f.fail[s.Key] {
			ss[i].Err = errDisk
			continue
		}
		pass, at = append(pass, s), append(at, i)
	}
	f.memBackend.Set(ctx, pass)
	for j, i := range at {
		ss[i].Err = pass[j].Err
	}
}

// TestLoadSlotRefuses: LoadSlot refuses the lot, storing nothing, for a
// key past seq-max-key-bytes or keys past seq-max-keys; a key whose store
// fails is not loaded, and named in the error, the others are.
func TestLoadSlotRefuses(t *testing.T) {
	m := &failKeys{newMem(), map[string]bool{"bad": true}}
	tb := newTable(t, m, Options{MaxKeys: 3, MaxKeyBytes: 8}, nil)
	incr(t, tb, "x", 1)
	marks := []Mark{{Key: "a", Value: 5, Born: true}, {Key: "b", Value: 6, Born: true}, {Key: "c", Value: 7, Born: true}}
	if err := tb.LoadSlot(context.Background(), marks); !errors.As(err, new(*LimitError)) || !strings.Contains(err.Error(), "seq-max-keys") {
		t.Fatalf("3 new keys beside 1 with seq-max-keys 3: %v; want a LimitError", err)
	}
	long := []Mark{{Key: "a", Value: 5, Born: true}, {Key: "123456789", Value: 1, Born: true}}
	if err := tb.LoadSlot(context.Background(), long); !errors.As(err, new(*LimitError)) {
		t.Fatalf("a key of 9 bytes with seq-max-key-bytes 8: %v; want a LimitError", err)
	}
	m.mu.Lock()
	_, stored := m.marks["a"]
	m.mu.Unlock()
	if _, ok := get(t, tb, "a"); ok || stored || tb.Len() != 1 {
		t.Fatalf("a refused load left a: present %v, stored %v, DBSIZE %d", ok, stored, tb.Len())
	}
	err := tb.LoadSlot(context.Background(), []Mark{{Key: "a", Value: 5, Born: true}, {Key: "bad", Value: 6, Born: true}})
	if !errors.Is(err, errDisk) || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("a load whose store fails for one key: %v; want the disk's error naming it", err)
	}
	if v, ok := get(t, tb, "a"); !ok || v != 5 {
		t.Fatalf("a, stored: %d %v", v, ok)
	}
	if _, ok := get(t, tb, "bad"); ok {
		t.Fatal("a key whose store failed was loaded")
	}
	if err := tb.LoadSlot(context.Background(), []Mark{{Key: "y", Value: 1, Born: true}}); err != nil {
		t.Fatalf("a third key, seq-max-keys 3, after the failed one: %v", err)
	}
}

// TestKeepSlot: New keeps the keys of the slots Options.KeepSlot says,
// and only those.
func TestKeepSlot(t *testing.T) {
	marks := []Mark{{Key: slotKey("a", 1), Value: 1}, {Key: slotKey("b", 1), Value: 2}, {Key: slotKey("a", 2), Value: 3}, {Key: slotKey("c", 1), Value: 4}}
	keep := slotOf(slotKey("a", 0))
	tb := newTable(t, newMem(), Options{KeepSlot: func(slot int) bool { return slot == keep }}, marks)
	for _, m := range marks {
		if _, ok := get(t, tb, m.Key); ok != (slotOf(m.Key) == keep) {
			t.Errorf("%s: present %v, its slot kept %v", m.Key, ok, slotOf(m.Key) == keep)
		}
	}
	if tb.Len() != 2 {
		t.Errorf("DBSIZE %d, want the 2 keys kept", tb.Len())
	}
}
