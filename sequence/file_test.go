package sequence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idserver/idserver/internal/testseed"
)

// reopen reads the file at path as a restart does, and returns the marks
// by key.
func reopen(t testing.TB, path string) (*File, map[string]int64, Restart) {
	t.Helper()
	f, marks, r, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]int64{}
	for _, m := range marks {
		byKey[m.Key] = m.Value
	}
	return f, byKey, r
}

// TestFileRestarts: nothing is written until the first write; marks come
// back at a restart, the last write of a key winning; after a crash the
// restart says how many values it may skip, after a graceful stop none.
func TestFileRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idserver.seq")
	f, marks, r := reopen(t, path)
	if len(marks) != 0 || !r.Clean {
		t.Fatalf("a missing file: %v %+v", marks, r)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("opening created the file")
	}
	ts := []Take{{Key: "a", After: 0, N: 10, Issued: 0, Born: true}, {Key: "b", After: 5, N: 5, Issued: 3, Born: true},
		{Key: "prepared", N: 4}}
	f.Take(context.Background(), ts)
	if ts[0].Err != nil || ts[0].First != 1 || ts[0].Last != 10 || ts[1].First != 6 || ts[1].Last != 10 {
		t.Fatalf("takes: %+v", ts)
	}
	ss := []Setting{{Key: "c", Value: 42}}
	if f.Set(context.Background(), ss); ss[0].Err != nil {
		t.Fatal(ss[0].Err)
	}
	ts = []Take{{Key: "a", After: 10, N: 100, Issued: 7, Born: true}, {Key: "prepared2", N: 4}}
	f.Take(context.Background(), ts)
	f.Close()

	// A key only prepared for a pipeline (not born) is forgotten: no
	// value of it was given to a client.
	f, marks, r = reopen(t, path)
	if len(marks) != 3 || marks["a"] != 110 || marks["b"] != 10 || marks["c"] != 42 || r.Clean || r.Skipped != 103+7 || r.Keys != 3 {
		t.Fatalf("after a crash: %v %+v; want a 110, b 10, c 42, skipped 110", marks, r)
	}
	err := f.Release(context.Background(), []Mark{{Key: "a", Value: 9, Born: true}, {Key: "b", Value: 4, Born: true}, {Key: "prepared3", Value: 0}})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, marks, r = reopen(t, path)
	if len(marks) != 3 || marks["a"] != 9 || marks["b"] != 4 || marks["c"] != 42 || !r.Clean || r.Skipped != 0 {
		t.Fatalf("after a graceful stop: %v %+v", marks, r)
	}
}

// TestFileFolds: a fold writes the marks it is given in place of what
// was stored, keys of any length (bbolt holds none empty or over
// MaxKeySize as keys); a restart reads them, and then the writes after
// the fold, the last of a key winning; a key the fold left out is gone.
func TestFileFolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idserver.seq")
	f, _, _ := reopen(t, path)
	f.foldMin = 1000
	want := map[string]int64{}
	for round := range 20 {
		var ts []Take
		for k := range 50 {
			key := fmt.Sprintf("key:%04d", (round*37+k)%300)
			ts = append(ts, Take{Key: key, After: want[key], N: int64(1 + k%7)})
		}
		f.Take(context.Background(), ts)
		for _, tk := range ts {
			if tk.Err != nil {
				t.Fatal(tk.Err)
			}
			want[tk.Key] = tk.Last
		}
	}
	if !f.FoldDue(0) || f.FoldDue(1000) {
		t.Fatalf("a log of 1,000 records: due %v for no keys, %v for 1,000 keys", f.FoldDue(0), f.FoldDue(1000))
	}
	// Keys bbolt cannot hold as keys: empty, and longer than its limit.
	want[""], want[strings.Repeat("x", bolt.MaxKeySize+1)] = 7, 8
	var snapshot []Mark
	for k, v := range want {
		if k != "key:0000" {
			snapshot = append(snapshot, Mark{Key: k, Value: v - 1, Reserved: v + 5})
		}
	}
	if err := <-f.Fold(func() []Mark { return snapshot }); err != nil {
		t.Fatal(err)
	}
	if f.FoldDue(0) {
		t.Fatal("due again right after a fold")
	}
	ts := []Take{{Key: "key:0001", After: want["key:0001"] + 5, N: 3, Issued: want["key:0001"] + 5}}
	f.Take(context.Background(), ts)
	f.Close()
	_, marks, r := reopen(t, path)
	if skipped := int64(6*(len(snapshot)-1) + 3); len(marks) != len(want)-1 || r.Skipped != skipped {
		t.Fatalf("%d keys back, want %d; skipped %d, want %d", len(marks), len(want)-1, r.Skipped, skipped)
	}
	for _, m := range snapshot {
		w := m.Reserved
		if m.Key == "key:0001" { // its take after the fold: 3 more
			w += 3
		}
		if marks[m.Key] != w {
			t.Fatalf("%s: %d back, want %d", m.Key, marks[m.Key], w)
		}
	}
}

// TestFoldsKeepMarks: a Table over a File that folds after every write,
// under INCR, INCRBY and SET of random keys from four clients: an image
// of the file taken at any moment (what a kill -9 leaves: every commit
// durable) holds every key at or above each value handed out or SET
// before it, and no key that a pipeline only prepared and never gave a
// value of (its client closed first). A fold must see every segment
// written and every SET being written; a key's first value is given only
// once its existence is durable.
func TestFoldsKeepMarks(t *testing.T) {
	seed := testseed.Get(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "idserver.seq")
	f, _, _ := reopen(t, path)
	f.foldMin, f.foldPerKey = 1, 1
	tb := New(Options{SegmentTime: 5 * time.Millisecond}, f, nil)
	var mu sync.Mutex
	seen := map[string]int64{} // per key, the most handed out or SET
	given := func(key string, v int64) {
		mu.Lock()
		seen[key] = max(seen[key], v)
		mu.Unlock()
	}
	wg := traffic(t, tb, seed, 60, 2000, given)
	ghosts := pipelines(t, tb, wg, seed, 300, given)
	images := 0
	for done := false; !done; images++ {
		done = waitTimeout(wg, time.Millisecond)
		mu.Lock()
		before := maps.Clone(seen)
		mu.Unlock()
		image := filepath.Join(dir, fmt.Sprintf("image%d", images))
		f.mu.Lock()
		data, err := os.ReadFile(path)
		f.mu.Unlock()
		if err == nil {
			err = os.WriteFile(image, data, 0o600)
		}
		if errors.Is(err, os.ErrNotExist) {
			continue // nothing written yet
		}
		if err != nil {
			t.Fatal(err)
		}
		img, marks, _ := reopen(t, image)
		img.Close()
		for key, v := range before {
			if marks[key] < v {
				t.Fatalf("image %d: %s stored at %d, below %d handed out or SET before it", images, key, marks[key], v)
			}
		}
		for key := range marks {
			if ghosts.has(key) {
				t.Fatalf("image %d: %s, only prepared for a pipeline and never given a value, exists", images, key)
			}
		}
		os.Remove(image)
	}
	if f.Folds() < 10 {
		t.Fatalf("%d folds in %d images: the test did not exercise them", f.Folds(), images)
	}
	t.Logf("%d images, %d folds", images, f.Folds())
	tb.Stop(context.Background())
	f.Close()
}

// ghostSet is the keys a pipeline prepared and never gave a value of.
type ghostSet struct {
	mu   sync.Mutex
	keys map[string]bool
}

func (g *ghostSet) add(key string) {
	g.mu.Lock()
	g.keys[key] = true
	g.mu.Unlock()
}

func (g *ghostSet) has(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.keys[key]
}

// pipelines runs a client as the server runs a pipeline of INCRs of new
// keys: it prepares them all, then INCRs them in order (a reply waits for
// Await where TryIncr's Pending is not Ready, and only then is a value
// given: given), or, a client that closes before its replies,
// INCRs none of the rest: those are ghosts, which must never exist.
func pipelines(t *testing.T, tb *Table, wg *sync.WaitGroup, seed uint64, rounds int, given func(key string, v int64)) *ghostSet {
	ghosts := &ghostSet{keys: map[string]bool{}}
	rnd := rand.New(rand.NewPCG(seed, 99))
	wg.Go(func() {
		for r := range rounds {
			keys := make([]string, 1+rnd.IntN(20))
			for i := range keys {
				keys[i] = fmt.Sprintf("p%d-%d", r, i)
				tb.Prepare([]byte(keys[i]), 1)
			}
			closes := rnd.IntN(4) == 0
			for i, key := range keys {
				if closes && i > 0 {
					ghosts.add(key)
					continue
				}
				v, p, err := tb.TryIncr([]byte(key), 1)
				switch {
				case errors.Is(err, ErrWouldWait):
					v, err = tb.Incr(key, 1)
				case err == nil:
					err = awaitOne(tb, p)
				}
				if err != nil {
					t.Error(err)
					return
				}
				given(key, v)
			}
		}
	})
	return ghosts
}

// waitTimeout waits for wg up to d, and reports whether it is done.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestFileRefused: a file that is not idserver's sequences, or is cut
// short, stops the start with an error naming it, and is left as it is.
func TestFileRefused(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.seq")
	f, _, _ := reopen(t, good)
	f.Take(context.Background(), []Take{{Key: "k", N: 100}})
	f.Close()
	goodBytes, _ := os.ReadFile(good)

	foreign := filepath.Join(dir, "foreign.db")
	db, err := bolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err })
	db.Close()
	foreignBytes, _ := os.ReadFile(foreign)

	cases := map[string][]byte{
		"text":      []byte("id-generator server-id 0\n"),
		"empty":     {},
		"cut short": goodBytes[:len(goodBytes)/3],
		"foreign":   foreignBytes,
		"zeroed":    make([]byte, len(goodBytes)),
	}
	for name, content := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, _, err := OpenFile(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "left as it is") {
			t.Errorf("%s: %v", name, err)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, content) {
			t.Errorf("%s: the file changed", name)
		}
	}
}

// TestTableOverFile: a Table on a File, crashed (no Stop) under load and
// restarted, continues every key above everything it handed out.
func TestTableOverFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idserver.seq")
	last := map[string]int64{}
	for run := range 5 {
		f, marks, _, err := OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		tb := New(Options{}, f, marks)
		for i := range 3000 {
			key := fmt.Sprintf("k%d", i%30)
			v, err := tb.Incr(key, int64(1+i%3))
			if err != nil {
				t.Fatal(err)
			}
			if v <= last[key] {
				t.Fatalf("run %d: %s got %d, not above %d", run, key, v, last[key])
			}
			last[key] = v
		}
		if run%2 == 0 { // a crash
			tb.stopped.Store(true)
			close(tb.stop)
			<-tb.done
		} else if err := tb.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// FuzzDecodeEntry: a log entry of any bytes is decoded or refused, never
// a panic.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(appendRecord(appendRecord(nil, "orders", record{100, 90, true, false}), "k", record{1, 0, false, true}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		var ks keyed
		if ks.decodeEntry(b, true, true) == nil {
			var again []byte
			for i, m := range ks.marks {
				again = appendRecord(again, m.Key, record{m.Value, ks.issued[i], m.Born, ks.exact[i]})
			}
			if new(keyed).decodeEntry(again, true, true) != nil {
				t.Fatal("a decoded entry does not decode again")
			}
		}
	})
}

// FuzzOpenFile: a sequence file of any bytes is read or refused with an
// error, never a crash nor a walk without end; one it reads, bbolt opens
// for writing.
func FuzzOpenFile(f *testing.F) {
	path := filepath.Join(f.TempDir(), "seed.seq")
	file, _, _, err := OpenFile(path)
	if err != nil {
		f.Fatal(err)
	}
	file.Take(context.Background(), []Take{{Key: "orders", N: 100}, {Key: "invoices", After: 7, N: 3}})
	file.Close()
	seed, _ := os.ReadFile(path)
	f.Add(seed)
	path = filepath.Join(f.TempDir(), "fuzz.seq") // one file, rewritten: a directory for each input cost most of the time
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if file, _, _, err := OpenFile(path); err == nil {
			file.Close()
		}
	})
}

// BenchmarkFileTake: what a key's write costs the writer, in writes of
// 1,000 of 100,000 keys (folds apart: BenchmarkFold).
func BenchmarkFileTake(b *testing.B) {
	f, _, _ := reopen(b, filepath.Join(b.TempDir(), "idserver.seq"))
	defer f.Close()
	keys := make([]string, 100000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key:%012d", i)
	}
	marks := make([]int64, len(keys))
	r := rand.New(rand.NewPCG(1, 2))
	ts, which := make([]Take, 1000), make([]int, 1000)
	b.ReportAllocs()
	for b.Loop() {
		for i := range ts {
			which[i] = r.IntN(len(keys))
			ts[i] = Take{Key: keys[which[i]], After: marks[which[i]], N: 8}
		}
		f.Take(context.Background(), ts)
		for i, tk := range ts {
			if tk.Err != nil {
				b.Fatal(tk.Err)
			}
			marks[which[i]] = tk.Last
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ts)), "ns/key")
}

// BenchmarkFold: a fold of 100,000 keys, with the marks a Table hands it.
func BenchmarkFold(b *testing.B) {
	f, _, _ := reopen(b, filepath.Join(b.TempDir(), "idserver.seq"))
	defer f.Close()
	marks := make([]Mark, 100000)
	for i := range marks {
		marks[i] = Mark{Key: fmt.Sprintf("key:%012d", i), Value: int64(i), Reserved: int64(i + 10)}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(marks), func(i, j int) { marks[i], marks[j] = marks[j], marks[i] })
	b.ReportAllocs()
	for b.Loop() {
		if err := <-f.Fold(func() []Mark { return slices.Clone(marks) }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenFile: a restart's read of a file of 100,000 keys whose log
// is about to be folded (eight times what the marks take: 32 MB).
func BenchmarkOpenFile(b *testing.B) {
	path := filepath.Join(b.TempDir(), "idserver.seq")
	f, _, _ := reopen(b, path)
	keys := make([]string, 100000)
	marks := make([]Mark, len(keys))
	for i := range keys {
		keys[i] = fmt.Sprintf("key:%012d", i)
		marks[i] = Mark{Key: keys[i], Value: 1, Reserved: 10}
	}
	if err := <-f.Fold(func() []Mark { return marks }); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	last := make([]int64, len(keys))
	for !f.FoldDue(len(keys)) {
		ts := make([]Take, 5000)
		for i := range ts {
			k := r.IntN(len(keys))
			ts[i] = Take{Key: keys[k], After: max(last[k], 10), N: 8}
			last[k] = ts[i].After + 8
		}
		f.Take(context.Background(), ts)
	}
	size := f.logBytes
	f.Close()
	b.ReportAllocs()
	for b.Loop() {
		f, marks, _, err := OpenFile(path)
		if err != nil || len(marks) != len(keys) {
			b.Fatal(err, len(marks))
		}
		f.Close()
	}
	b.ReportMetric(float64(size)/1e6, "log-MB")
}

// TestCleanRestartResumes: after a graceful stop a key resumes with the
// values it had in hand: the next INCR hands out the very next value and
// writes nothing. A crash after that leaves a file that resumes the key
// above what it had in hand (the restart recorded that a run was on
// before handing any out), so no value the crashed run handed out comes
// again.
func TestCleanRestartResumes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idserver.seq")
	f, _, _ := reopen(t, path)
	ts := []Take{{Key: "a", N: 10, Born: true}}
	f.Take(context.Background(), ts)
	if err := f.Release(context.Background(), []Mark{{Key: "a", Value: 3, Reserved: 10, Born: true}}); err != nil {
		t.Fatal(err)
	}
	f.Close()

	f, known, r, err := OpenFile(path)
	if err != nil || !r.Clean || len(known) != 1 || known[0].Value != 3 || known[0].Reserved != 10 {
		t.Fatalf("after a graceful stop: %+v %+v, %v; want a at 3 with 10 reserved", known, r, err)
	}
	entries := f.entry
	tb := New(Options{}, f, known)
	for want := int64(4); want <= 10; want++ {
		if v, err := tryIncr(tb, []byte("a"), 1); err != nil || v != want {
			t.Fatalf("INCR after a clean restart: %d, %v; want %d without waiting", v, err, want)
		}
	}
	if f.entry != entries {
		t.Fatalf("resuming wrote %d log entries", f.entry-entries)
	}
	// A crash now: the file as it is, with no graceful stop.
	close(tb.stop)
	<-tb.done
	f.Close()
	_, marks, r := reopen(t, path)
	if r.Clean || marks["a"] < 10 {
		t.Fatalf("after a crash that followed a clean restart: a at %d, clean %v; want at least 10, not clean", marks["a"], r.Clean)
	}
}

// TestRestartsNeverRepeat: over generated runs (the seed logged), each
// INCRing keys a random number of times without waiting (so that some
// hand out exactly what they had in hand, some nothing, some ask for
// more) and ending by a graceful stop or a crash at random, no key's value
// is ever handed out twice: a clean restart resumes only what the last
// stop recorded (an earlier stop's record of a key that the run after it
// used up brought its values back: 4..10 again after two graceful
// restarts).
func TestRestartsNeverRepeat(t *testing.T) {
	seed := testseed.Get(t)
	rnd := rand.New(rand.NewPCG(seed, 7))
	path := filepath.Join(t.TempDir(), "idserver.seq")
	last := map[string]int64{}
	graceful := 0
	for run := range 60 {
		f, known, _, err := OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		tb := New(Options{}, f, known)
		for k := range 12 {
			key := fmt.Sprint("k", k)
			for range rnd.IntN(14) {
				v, err := tryIncr(tb, []byte(key), 1)
				if errors.Is(err, ErrWouldWait) {
					if rnd.IntN(2) == 0 {
						break
					}
					v, err = tb.Incr(key, 1)
				}
				if err != nil {
					t.Fatal(err)
				}
				if v <= last[key] {
					t.Fatalf("run %d: %s got %d, not above %d, handed out before", run, key, v, last[key])
				}
				last[key] = v
			}
		}
		if rnd.IntN(3) == 0 { // a crash
			tb.stopped.Store(true)
			close(tb.stop)
			<-tb.done
		} else if err := tb.Stop(context.Background()); err != nil {
			t.Fatal(err)
		} else {
			graceful++
		}
		f.Close()
	}
	t.Logf("60 runs, %d ended by a graceful stop", graceful)
}

// TestFoldLetsWritesGoOn: while a fold writes its new file, takes and
// SETs are written (at a million keys of 512 bytes a fold takes 4 s, and
// the writer waited for it: INCRs after a kill -9 got -BUSY); the file
// it leaves holds the fold's marks and every write made meanwhile, and
// a Release stops a fold under way, leaving the file as it was.
func TestFoldLetsWritesGoOn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idserver.seq")
	f, _, _ := reopen(t, path)
	ts := []Take{{Key: "a", N: 10, Born: true}, {Key: "b", N: 10, Born: true}}
	f.Take(context.Background(), ts)
	paused, resume := make(chan struct{}), make(chan struct{})
	f.foldStep = func(<-chan struct{}) {
		paused <- struct{}{}
		<-resume
	}
	done := f.Fold(func() []Mark {
		return []Mark{{Key: "a", Value: 0, Reserved: 10, Born: true}, {Key: "b", Value: 0, Reserved: 10, Born: true}}
	})
	<-paused
	wrote := make(chan error, 1)
	go func() {
		ts := []Take{{Key: "a", After: 10, N: 10, Issued: 10, Born: true}, {Key: "c", N: 5, Born: true}}
		f.Take(context.Background(), ts)
		err := errors.Join(ts[0].Err, ts[1].Err)
		if err == nil {
			ss := []Setting{{Key: "d", Value: 100}}
			f.Set(context.Background(), ss)
			err = ss[0].Err
		}
		// Entries of many pieces, more than a transaction of the fold's
		// carries.
		for from := 0; from < 4*foldTx/512 && err == nil; from += 1000 {
			var ts []Take
			for i := from; i < min(from+1000, 4*foldTx/512); i++ {
				ts = append(ts, Take{Key: longKey(i), N: 3, Born: true})
			}
			f.Take(context.Background(), ts)
			for _, tk := range ts {
				err = errors.Join(err, tk.Err)
			}
		}
		wrote <- err
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no write went on while a fold was under way")
	}
	close(resume)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.foldStep = nil
	f.Close()
	_, marks, _ := reopen(t, path)
	want := map[string]int64{"a": 20, "b": 10, "c": 5, "d": 100}
	for i := range 4 * foldTx / 512 {
		want[longKey(i)] = 3
	}
	if !maps.Equal(marks, want) {
		t.Fatalf("after a fold with writes during it: %d keys, %v for a; want %d keys, 20", len(marks), marks["a"], len(want))
	}
	if _, err := os.Stat(path + ".fold"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the fold's file is left beside: %v", err)
	}

	// A Release stops a fold under way; the file keeps every mark.
	f, _, _ = reopen(t, path)
	f.foldStep = func(stop <-chan struct{}) {
		paused <- struct{}{}
		<-stop
	}
	done = f.Fold(func() []Mark { return []Mark{{Key: "a", Value: 20, Reserved: 20, Born: true}} })
	<-paused
	if err := f.Release(context.Background(), []Mark{{Key: "c", Value: 2, Reserved: 5, Born: true}}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, errFoldStopped) {
		t.Fatalf("a fold under way at Release ended with %v; want it stopped", err)
	}
	f.Close()
	_, known, r, err := OpenFile(path)
	if err != nil || !r.Clean || len(known) != len(want) {
		t.Fatalf("after a Release that stopped a fold: %+v, %+v, %v", known, r, err)
	}
}
