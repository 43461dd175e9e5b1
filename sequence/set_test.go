package sequence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testseed"
)

// TestSetsShareWrites: SETs issued together, a pipeline's (TrySet, one
// after another) or many clients' (Set, at once), are written in a few
// writes, not one each (each was its own write: redis-cli --pipe of
// 100,000 SETs took 84 s), and none is answered before its write.
func TestSetsShareWrites(t *testing.T) {
	const n = 1000
	t.Run("pipeline", func(t *testing.T) {
		b := newMem()
		gate := make(chan struct{})
		b.slow = gate // the first write waits: the others queue meanwhile
		tb := newTable(t, b, Options{}, nil)
		ps := make([]Pending, n)
		for i := range ps {
			var err error
			if ps[i], err = tb.TrySet(fmt.Appendf(nil, "k%d", i), int64(100+i), Always); err != nil {
				t.Fatal(err)
			}
		}
		for i, p := range ps {
			if p.setDone() {
				t.Fatalf("SET %d answered before its write", i)
			}
		}
		b.mu.Lock()
		b.slow = nil
		b.mu.Unlock()
		close(gate)
		for i, p := range ps {
			if err := awaitOne(tb, p); err != nil {
				t.Fatal(err)
			}
			b.mu.Lock()
			stored := b.marks[fmt.Sprint("k", i)]
			b.mu.Unlock()
			if stored != int64(100+i) {
				t.Fatalf("SET k%d answered with %d stored, want %d", i, stored, 100+i)
			}
			if v := incr(t, tb, fmt.Sprint("k", i), 1); v != int64(101+i) {
				t.Fatalf("INCR after SET k%d %d: %d", i, 100+i, v)
			}
		}
		if b.setWrites > 2 {
			t.Fatalf("%d SETs in %d writes, want at most 2", n, b.setWrites)
		}
		t.Logf("%d pipelined SETs in %d writes", n, b.setWrites)
	})
	t.Run("clients", func(t *testing.T) {
		b := newMem()
		gate := make(chan struct{})
		b.slow = gate
		tb := newTable(t, b, Options{}, nil)
		var opened sync.Once
		open := func() {
			opened.Do(func() {
				b.mu.Lock()
				b.slow = nil
				b.mu.Unlock()
				close(gate)
			})
		}
		defer open() // also on a failure: the table's Stop waits for the write the gate holds
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() { errs <- tb.Set(fmt.Sprint("k", i), 7, Always) })
		}
		await.True(t, time.Minute, "every SET in the write the gate holds, or queued behind it", func() bool {
			select {
			case err := <-errs:
				t.Fatalf("a SET answered before the write: %v", err)
			default:
			}
			tb.setMu.Lock()
			b.mu.Lock()
			queued := b.setsHeld
			if tb.round != nil {
				queued += len(tb.round.sets)
			}
			b.mu.Unlock()
			tb.setMu.Unlock()
			return queued >= n
		})
		open()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if b.setWrites > 2 {
			t.Fatalf("%d clients' SETs in %d writes, want at most 2", n, b.setWrites)
		}
	})
	t.Run("failing", func(t *testing.T) {
		b := newMem()
		b.fail = errors.New("no space left on device")
		tb := newTable(t, b, Options{}, nil)
		p, err := tb.TrySet([]byte("k"), 50, Always)
		if err != nil {
			t.Fatal(err)
		}
		if err := awaitOne(tb, p); err == nil || !errors.Is(err, b.fail) {
			t.Fatalf("SET whose write failed: %v", err)
		}
		if _, ok := get(t, tb, "k"); ok {
			t.Fatal("a key made by a SET that failed exists")
		}
		b.mu.Lock()
		b.fail = nil
		b.mu.Unlock()
		if err := tb.Set("k", 50, Always); err != nil {
			t.Fatal(err)
		}
		if v := incr(t, tb, "k", 1); v != 51 {
			t.Fatalf("INCR after SET k 50: %d", v)
		}
	})
}

// TestPipelinedSetsNeverGoBack: generated runs over the File of
// pipelines mixing SET (queued with TrySet, awaited together as a
// connection's batch) and INCR, cut short by crashes (the writer stopped,
// nothing released, SETs possibly still queued) and graceful stops. The
// oracle: per key, a value handed out is above every value handed out or
// SET acknowledged before it, in any run; a SET acknowledged is at or
// above every value handed out before it; and a restart keeps each key
// at or above both.
func TestPipelinedSetsNeverGoBack(t *testing.T) {
	seed := testseed.Get(t)
	rnd := rand.New(rand.NewPCG(seed, 11))
	path := filepath.Join(t.TempDir(), "idserver.seq")
	top := map[string]int64{}    // per key: the most handed out or SET acknowledged
	handed := map[string]int64{} // the most handed out
	crashes, acked := 0, 0
	for run := range 40 {
		f, known, _, err := OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		fz := &freezable{File: f}
		tb := New(Options{}, fz, known)
		for k, v := range top {
			if got, ok := get(t, tb, k); !ok || got < v {
				t.Fatalf("run %d: %s restarts at %d (exists: %v), below %d handed out or SET", run, k, got, ok, v)
			}
		}
		type set struct {
			key string
			v   int64
			p   Pending
		}
		var pending []set
		ack := func(key string, v int64) {
			if v < handed[key] {
				t.Fatalf("run %d: SET %s %d acknowledged below %d handed out", run, key, v, handed[key])
			}
			top[key] = max(top[key], v)
			acked++
		}
		// settle is the batch's replies going out: each SET's result.
		settle := func() {
			ps, errs := make([]Pending, len(pending)), make([]error, len(pending))
			for i, s := range pending {
				ps[i] = s.p
			}
			tb.Await(ps, errs)
			for i, s := range pending {
				if errs[i] == nil { // else an error: nothing promised
					ack(s.key, s.v)
				}
			}
			pending = pending[:0]
		}
		crash := rnd.IntN(2) == 0
		for range rnd.IntN(300) {
			key := fmt.Sprint("k", rnd.IntN(8))
			if rnd.IntN(3) == 0 {
				v := top[key] + int64(rnd.IntN(40)) - 5
				p, err := tb.TrySet([]byte(key), v, Always)
				switch {
				case errors.Is(err, ErrWouldWait): // a take or SET of the key under way: set waits for it
					settle()
					if err = tb.Set(key, v, Always); err == nil {
						ack(key, v)
					}
				case err == nil:
					pending = append(pending, set{key, v, p})
				}
				continue
			}
			v, p, err := tb.TryIncr([]byte(key), 1)
			if errors.Is(err, ErrWouldWait) {
				settle() // as a connection runs a waiting INCR after the batch's hold
				v, err = tb.Incr(key, 1)
			}
			if err == nil {
				err = awaitOne(tb, p)
			}
			if err != nil {
				t.Fatalf("run %d: INCR %s: %v", run, key, err)
			}
			if v <= top[key] {
				t.Fatalf("run %d: INCR %s got %d, not above %d handed out or SET before", run, key, v, top[key])
			}
			top[key], handed[key] = v, v
			if rnd.IntN(10) == 0 {
				settle()
			}
		}
		if crash { // kill -9, with SETs queued: what was not written is lost
			crashes++
			// Some SETs under way in a write the crash cuts short, more
			// queued behind it: the writer is held in the write it is in
			// (or the next) until the crash.
			entered := fz.hold()
			burst := func() (queued bool) {
				for range 1 + rnd.IntN(4) {
					key := fmt.Sprint("k", rnd.IntN(8))
					v := top[key] + 1000 + int64(rnd.IntN(1000)) // above its reservation
					if p, err := tb.TrySet([]byte(key), v, Always); err == nil {
						pending = append(pending, set{key, v, p})
						queued = true
					}
				}
				return queued
			}
			if burst() {
				<-entered
			}
			burst()
			fz.freeze()
			tb.stopped.Store(true)
			close(tb.stop)
			fz.release()
			<-tb.done
			settle() // their replies never went out
		} else {
			settle()
			if err := tb.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	t.Logf("40 runs, %d crashes, %d SETs acknowledged", crashes, acked)
}

// freezable is a File that a crash freezes: the writes that come after
// it fail, as those a kill -9 cut short never land. Held, its next write
// waits until it is released.
type freezable struct {
	*File
	mu      sync.Mutex
	frozen  bool
	held    chan struct{} // closed by release
	entered chan struct{} // closed when a write waits for it
}

var errKilled = errors.New("killed before the write")

// hold has the next write wait for release, and returns a channel closed
// when it does.
func (f *freezable) hold() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held, f.entered = make(chan struct{}), make(chan struct{})
	return f.entered
}

func (f *freezable) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held != nil {
		close(f.held)
		f.held = nil
	}
}

func (f *freezable) freeze() {
	f.mu.Lock()
	f.frozen = true
	f.mu.Unlock()
}

// wait waits while f is held, and reports whether it is frozen.
func (f *freezable) wait() bool {
	f.mu.Lock()
	held, entered := f.held, f.entered
	if entered != nil {
		close(entered)
		f.entered = nil
	}
	f.mu.Unlock()
	if held != nil {
		<-held
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen
}

func (f *freezable) Take(ctx context.Context, ts []Take) {
	if f.wait() {
		for i := range ts {
			ts[i].Err = errKilled
		}
		return
	}
	f.File.Take(ctx, ts)
}

func (f *freezable) Set(ctx context.Context, ss []Setting) {
	if f.wait() {
		for i := range ss {
			ss[i].Err = errKilled
		}
		return
	}
	f.File.Set(ctx, ss)
}

// failedBackend is a memBackend whose takes of the key "failed" fail
// until it is SET.
type failedBackend struct {
	*memBackend
	cleared atomic.Bool
}

func (b *failedBackend) Take(ctx context.Context, ts []Take) {
	b.memBackend.Take(ctx, ts)
	for i := range ts {
		if ts[i].Key == "failed" && !b.cleared.Load() {
			ts[i].Err = errKilled
		}
	}
}

func (b *failedBackend) Set(ctx context.Context, ss []Setting) {
	b.memBackend.Set(ctx, ss)
	b.cleared.Store(true)
}

// TestSetBehindFailedTake: a SET of a key whose take is under way waits
// for the take to end, and is then written, however the take ended.
func TestSetBehindFailedTake(t *testing.T) {
	b := &failedBackend{memBackend: newMem()}
	gate := make(chan struct{})
	b.slow = gate
	tb := newTable(t, b, Options{}, nil)
	incrErr := make(chan error, 1)
	go func() { _, err := tb.Incr("failed", 1); incrErr <- err }()
	waitTaking(t, tb, "failed")
	_, on, err := tb.trySet([]byte("failed"), 100, Always)
	if !errors.Is(err, ErrWouldWait) {
		t.Fatalf("SET while the key's take is under way: %v, want ErrWouldWait", err)
	}
	b.mu.Lock()
	b.slow = nil
	b.mu.Unlock()
	close(gate)
	if err := <-incrErr; !errors.Is(err, errKilled) {
		t.Fatalf("INCR of a key whose take failed: %v", err)
	}
	d := tb.deadline()
	defer d.stop()
	if err := tb.waitForStore(&d, on, sets); err != nil {
		t.Fatalf("a SET waiting behind the take: %v, want to go on", err)
	}
	if err := tb.Set("failed", 100, Always); err != nil {
		t.Fatal(err)
	}
	if v := incr(t, tb, "failed", 1); v != 101 {
		t.Fatalf("INCR after SET failed 100: %d", v)
	}
}

// waitTaking waits until key's take is under way.
func waitTaking(t *testing.T, tb *Table, key string) {
	t.Helper()
	await.True(t, time.Minute, key+"'s take under way", func() bool {
		sh, h := tb.shardOf(key)
		sh.mu.Lock()
		defer sh.mu.Unlock()
		e := find(&sh.index, h, key)
		return e != nil && e.taking
	})
}
