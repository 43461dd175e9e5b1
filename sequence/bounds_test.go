package sequence

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idserver/idserver/internal/await"
)

// longKey is the i-th key of these tests, of 512 bytes (seq-max-key-bytes'
// default): the bounds at their longest.
func longKey(i int) string {
	k := fmt.Sprintf("key:%06d:", i)
	return k + strings.Repeat("x", 512-len(k))
}

// fill writes a segment of each of n long keys, in writes of 1,000, and
// returns their marks.
func fill(t *testing.T, f *File, n int, marks []Mark) []Mark {
	t.Helper()
	if marks == nil {
		marks = make([]Mark, n)
	}
	for from := 0; from < n; from += 1000 {
		var ts []Take
		for i := from; i < min(from+1000, n); i++ {
			ts = append(ts, Take{Key: longKey(i), After: marks[i].Reserved, N: 4, Issued: marks[i].Reserved, Born: true})
		}
		f.Take(context.Background(), ts)
		for j, tk := range ts {
			if tk.Err != nil {
				t.Fatal(tk.Err)
			}
			marks[from+j] = Mark{Key: tk.Key, Value: tk.Last, Reserved: tk.Last, Born: true}
		}
	}
	return marks
}

// TestFoldKeepsTheFileSmall: folding the same keys again and again leaves
// the file the size of one fold's marks (it doubled when a fold rewrote
// the marks in place: their old pages were free only after it), within
// FileMultiple of the live data, and no file of a fold beside it.
func TestFoldKeepsTheFileSmall(t *testing.T) {
	const n = 4000
	dir := t.TempDir()
	path := filepath.Join(dir, "idserver.seq")
	f, _, _ := reopen(t, path)
	var marks []Mark
	var sizes []int64
	for range 4 {
		marks = fill(t, f, n, marks)
		if err := <-f.Fold(func() []Mark { return append([]Mark(nil), marks...) }); err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, info.Size())
	}
	f.Close()
	live := int64(n * (512 + 16))
	for _, size := range sizes[1:] {
		if size > sizes[0]+sizes[0]/10 || float64(size) > FileMultiple*float64(live) {
			t.Fatalf("sizes after each fold %v; live data %d: the file grows", sizes, live)
		}
	}
	if des, _ := os.ReadDir(dir); len(des) != 1 {
		t.Fatalf("%d files in dir after the folds, want 1", len(des))
	}
	_, back, r := reopen(t, path)
	if len(back) != n || back[longKey(7)] != marks[7].Value || r.Clean {
		t.Fatalf("after the folds: %d keys, %s at %d (want %d), %+v", len(back), longKey(7)[:11], back[longKey(7)], marks[7].Value, r)
	}
}

// TestWritesBounded: Release and the writer cut what they write into
// writes of maxWrite bytes at most, whatever the number of keys (one
// write of every key held each key twice more in memory); the last of
// Release's says the stop was graceful, and a restart resumes every key
// with its last value.
func TestWritesBounded(t *testing.T) {
	perWrite := maxWrite / stopRecordMax
	n := 2*perWrite + 100
	path := filepath.Join(t.TempDir(), "idserver.seq")
	f, _, _ := reopen(t, path)
	released := make([]Mark, n)
	for from := 0; from < n; from += 10000 {
		var ts []Take
		for i := from; i < min(from+10000, n); i++ {
			ts = append(ts, Take{Key: fmt.Sprint("k", i), N: 10, Born: true})
		}
		f.Take(context.Background(), ts)
		for j, tk := range ts {
			if tk.Err != nil {
				t.Fatal(tk.Err)
			}
			released[from+j] = Mark{Key: tk.Key, Value: int64((from + j) % 10), Reserved: tk.Last, Born: true}
		}
	}
	before := int(f.entry) // entries count from 1
	if err := f.Release(context.Background(), released); err != nil {
		t.Fatal(err)
	}
	f.Close()
	entries := logEntries(t, path)[before:]
	if len(entries) != 3 || slices.Max(entries) > maxWrite {
		t.Fatalf("Release of %d keys: log entries of %v bytes; want 3 of %d at most", n, entries, maxWrite)
	}
	_, known, r, err := OpenFile(path)
	if err != nil || len(known) != n || !r.Clean {
		t.Fatalf("after the Release: %d keys, %+v, %v", len(known), r, err)
	}
	for _, m := range known {
		if i, _ := strconv.Atoi(m.Key[1:]); m.Value != int64(i%10) || m.Reserved != 10 {
			t.Fatalf("after the Release: %+v; want %s at %d with 10 reserved", m, m.Key, i%10)
		}
	}

	marks := make([]Mark, 3*maxWrite/512+100)
	for i := range marks {
		marks[i] = Mark{Key: longKey(i), Value: int64(i), Born: true}
	}
	n = len(marks)
	// The writer: every key asks at once, as after a restart.
	m := &batchBackend{memBackend: newMem()}
	tb := New(Options{}, m, marks)
	defer tb.Stop(context.Background())
	var wg sync.WaitGroup
	for i := range n {
		tb.Prepare([]byte(longKey(i)), 1)
	}
	for i := range 8 {
		wg.Go(func() {
			if _, err := tb.Incr(longKey(n-1-i), 1); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// The other keys are taken in the background; the check below says
	// how many were, if not all.
	await.Within(time.Minute, func() bool { return m.keys() >= n })
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.taken < n || m.most > maxWrite+512 {
		t.Fatalf("%d of %d keys taken, %d key bytes at most in one write; want all, at most %d", m.taken, n, m.most, maxWrite+512)
	}
}

// batchBackend is a memBackend that counts the keys of its writes.
type batchBackend struct {
	*memBackend
	taken, most int
}

func (b *batchBackend) Take(ctx context.Context, ts []Take) {
	size := 0
	for _, t := range ts {
		size += len(t.Key)
	}
	b.memBackend.Take(ctx, ts)
	b.mu.Lock()
	b.taken += len(ts)
	b.most = max(b.most, size)
	b.mu.Unlock()
}

func (b *batchBackend) keys() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.taken
}

// logEntries is the size of each entry of the log of the file at path
// (the sum of its pieces).
func logEntries(t *testing.T, path string) []int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var sizes []int
	db.View(func(tx *bolt.Tx) error {
		last := uint64(0)
		return tx.Bucket(logBucket).ForEach(func(k, v []byte) error {
			if n := binary.BigEndian.Uint64(k); n != last || len(sizes) == 0 {
				sizes, last = append(sizes, 0), n
			}
			sizes[len(sizes)-1] += len(v)
			return nil
		})
	})
	return sizes
}

// TestOpenFileMemory: a restart reads the file a page at a time: what it
// allocates is about the keys and their marks (twice at most, with the
// buffers of its pages), not the file (it read the
// file whole, then bbolt mapped it, then a map held every key again).
func TestOpenFileMemory(t *testing.T) {
	const n = 20000
	path := filepath.Join(t.TempDir(), "idserver.seq")
	f, _, _ := reopen(t, path)
	marks := fill(t, f, n, nil)
	if err := <-f.Fold(func() []Mark { return append([]Mark(nil), marks...) }); err != nil {
		t.Fatal(err)
	}
	marks = fill(t, f, n, marks) // and a log of every key again
	f.Close()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f, back, err := openMarks(path)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	keys := int64(n * (512 + 48)) // each key's bytes and its Mark
	if alloc := int64(after.TotalAlloc - before.TotalAlloc); alloc > 2*keys || len(back) != n {
		t.Fatalf("OpenFile of %d keys of 512 bytes (a file of %d MB): %d keys, %d MB allocated; want under %d MB",
			n, info.Size()>>20, len(back), alloc>>20, 2*keys>>20)
	}
	if back[n-1].Value != marks[n-1].Value && back[0].Value != marks[0].Value {
		t.Fatal("the marks did not come back")
	}
}

// openMarks is OpenFile, its marks in key order.
func openMarks(path string) (*File, []Mark, error) {
	f, marks, _, err := OpenFile(path)
	return f, marks, err
}
