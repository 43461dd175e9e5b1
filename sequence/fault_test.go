package sequence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idserver/idserver/internal/testseed"
)

// TestFaultsNeverRepeat tests the rule of reply.go by class: runs of a
// Table over the File whose writes fail at points chosen at random (the
// take, a key's first write, a SET, a fold's transactions and rename,
// the directory's sync; before the write lands, as ENOSPC, or after, as
// an EIO that reports a write that landed; or a write that stalls),
// under one-shot, pipelined (Prepare, then TryIncr and Await, some
// cut short), transactional (IncrAll) and SET clients of new and old
// keys; each run ends in a kill -9 at a random point (nothing written
// after it lands, nothing released) or now and then a graceful stop,
// and the next restarts from the file. Oracles: no value of a key is
// received twice, in any run; after a restart every key a client
// received a value of (or SET) exists, at or above it, and its next INCR
// is above it; every key the table counted before the stop exists after
// it; no key exists that no client ran a command of (a key only prepared
// never does); and every request returned (a wait is bounded). Runs:
// SEQ_FAULT_RUNS (10 by default, about 10 s; the long-running form:
// hundreds).
func TestFaultsNeverRepeat(t *testing.T) {
	seed := testseed.Get(t)
	runs := 10
	if n, err := strconv.Atoi(os.Getenv("SEQ_FAULT_RUNS")); err == nil {
		runs = n
	}
	path := filepath.Join(t.TempDir(), "idserver.seq")
	o := &oracle{received: map[string]map[int64]bool{}, top: map[string]int64{}, ran: map[string]bool{}}
	for run := range runs {
		rnd := rand.New(rand.NewPCG(seed, uint64(run)))
		f, known, _, err := OpenFile(path)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		f.foldMin, f.foldPerKey = 1+rnd.IntN(4<<10), 1+rnd.IntN(16) // folds often
		d := &disk{rnd: rand.New(rand.NewPCG(seed, uint64(run)+1<<32))}
		f.fault = d.fault // set before the File is shared; no fault until d runs
		tb := New(Options{SegmentTime: time.Duration(5+rnd.IntN(50)) * time.Millisecond, Wait: 300 * time.Millisecond}, f, known)
		o.restarted(t, run, tb)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for c := range 4 {
			crnd := rand.New(rand.NewPCG(seed, uint64(run)<<8|uint64(c)+1<<40))
			wg.Go(func() { o.client(tb, c, run, crnd, stop) })
		}
		wg.Go(func() { d.run(stop) })
		time.Sleep(time.Duration(20+rnd.IntN(300)) * time.Millisecond) // a while under load: the stop comes at no set point
		counted, _ := tb.Keys(0, 1<<30, nil)
		graceful := rnd.IntN(5) == 0
		if graceful {
			close(stop)
			if !waitTimeout(&wg, time.Minute) {
				t.Fatalf("run %d: a request still waits a minute after the load stopped", run)
			}
			d.calm() // a stop on a disk that fails, but does not stall
			tb.Stop(context.Background())
		} else {
			d.kill()
			crash(tb)
			close(stop)
			if !waitTimeout(&wg, time.Minute) {
				t.Fatalf("run %d: a request still waits a minute after the kill", run)
			}
		}
		f.Close()
		o.mu.Lock()
		o.counted = counted
		twice := o.twice
		o.mu.Unlock()
		if len(twice) > 0 {
			t.Fatalf("run %d: values received twice: %v", run, twice[:min(len(twice), 10)])
		}
		t.Logf("run %d: graceful %v, %d folds, faults %v", run, graceful, f.Folds(), d.counts)
	}
	f, known, _, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tb := New(Options{}, f, known)
	o.restarted(t, runs, tb)
	tb.Stop(context.Background())
	f.Close()
	t.Logf("%d runs: %d keys given values, %d values received, %d errors by kind %v", runs, len(o.top), o.values, o.errs, o.kinds)
}

// crash stops tb as a kill -9 does: its writer ends, nothing is released,
// and every request waiting ends.
func crash(tb *Table) {
	tb.stopped.Store(true)
	close(tb.stop)
	<-tb.done
}

// oracle is what the clients of TestFaultsNeverRepeat were given.
type oracle struct {
	mu       sync.Mutex
	received map[string]map[int64]bool // per key, every value received
	top      map[string]int64          // per key, the most received or SET
	ran      map[string]bool           // keys some client ran a command of
	counted  []string                  // the keys the table counted before the last stop
	twice    []string                  // values received twice
	values   int
	errs     int
	kinds    map[string]int
}

// set records that a SET of key to v was acknowledged.
func (o *oracle) set(key string, v int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.top[key] = max(o.top[key], v)
}

// running records that a client runs a command of keys.
func (o *oracle) running(keys ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, k := range keys {
		o.ran[k] = true
	}
}

// failed counts a request's error, by kind.
func (o *oracle) failed(err error) {
	kind := "other"
	switch {
	case errors.Is(err, ErrStopped):
		kind = "stopped"
	case errors.Is(err, ErrNotReserved):
		kind = "not reserved"
	case errors.Is(err, ErrExists), errors.Is(err, ErrMissing), errors.As(err, new(*BelowError)):
		kind = "not applied"
	default:
		kind = err.Error()
	}
	o.mu.Lock()
	if o.kinds == nil {
		o.kinds = map[string]int{}
	}
	o.errs++
	o.kinds[kind]++
	o.mu.Unlock()
	time.Sleep(time.Millisecond) // as a client does before it tries again
}

// restarted checks tb, restarted from the file, against what the clients
// were given, and takes the next value of every key: above the most
// given.
func (o *oracle) restarted(t *testing.T, run int, tb *Table) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for key, top := range o.top {
		if v, ok := get(t, tb, key); !ok || v < top {
			t.Fatalf("run %d: %s restarts at %d (exists: %v), below %d given", run, key, v, ok, top)
		}
	}
	for _, key := range o.counted {
		if _, ok := get(t, tb, key); !ok {
			t.Fatalf("run %d: %s, counted before the stop, is gone", run, key)
		}
	}
	keys, _ := tb.Keys(0, 1<<30, nil)
	for _, key := range keys {
		if !o.ran[key] {
			t.Fatalf("run %d: %s exists, and no client ran a command of it (only prepared?)", run, key)
		}
	}
	ws := make([]Want, 0, len(o.top))
	for key := range o.top {
		ws = append(ws, Want{Key: key, N: 1})
	}
	if err := tb.IncrAll(ws); err != nil { // in one write
		t.Fatalf("run %d: the next INCR of every key after the restart: %v", run, err)
	}
	for _, w := range ws {
		key, v, top := w.Key, w.Last, o.top[w.Key]
		if v <= top {
			t.Fatalf("run %d: the next INCR of %s after the restart: %d, not above %d given", run, key, v, top)
		}
		if o.received[key] == nil {
			o.received[key] = map[int64]bool{}
		}
		if o.received[key][v] {
			t.Fatalf("run %d: %s: %d received twice", run, key, v)
		}
		o.received[key][v] = true
		o.top[key] = v
	}
}

// client runs requests of one kind (by c) on tb until stop.
func (o *oracle) client(tb *Table, c, run int, rnd *rand.Rand, stop <-chan struct{}) {
	key := func() string {
		if rnd.IntN(3) == 0 {
			return "old" + strconv.Itoa(rnd.IntN(8))
		}
		return fmt.Sprintf("new%d-%d", run, rnd.IntN(300))
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		switch c {
		case 0: // one-shot
			k, n := key(), int64(1+rnd.IntN(3))
			o.running(k)
			if v, err := tb.Incr(k, n); err == nil {
				o.gotValues(k, v-n+1, v)
			} else {
				o.failed(err)
			}
		case 1: // a pipeline, prepared ahead, perhaps cut short
			o.pipeline(tb, key, rnd)
		case 2: // a transaction
			ws := []Want{{Key: key(), N: 1}, {Key: key(), N: int64(1 + rnd.IntN(2))}}
			if ws[0].Key == ws[1].Key {
				ws = ws[:1]
			}
			for _, w := range ws {
				o.running(w.Key)
			}
			if err := tb.IncrAll(ws); err == nil {
				for _, w := range ws {
					o.gotValues(w.Key, w.Last-w.N+1, w.Last)
				}
			} else {
				o.failed(err)
			}
		case 3: // SET, SETNX
			o.setter(tb, key, rnd)
		}
	}
}

// pipeline runs a pipeline of INCRs as a connection does: the keys
// prepared, then each INCR in turn, the replies that wait for a key's
// existence held and awaited together; a quarter of them cut short after
// the first (their client closed: the rest never run).
func (o *oracle) pipeline(tb *Table, key func() string, rnd *rand.Rand) {
	type held struct {
		key  string
		v, n int64
	}
	keys := make([]string, 1+rnd.IntN(30))
	for i := range keys {
		keys[i] = key()
		tb.Prepare([]byte(keys[i]), 1)
	}
	if rnd.IntN(4) == 0 {
		keys = keys[:1]
	}
	var hs []held
	var ps []Pending
	settle := func() {
		errs := make([]error, len(ps))
		tb.Await(ps, errs)
		for i, h := range hs {
			if errs[i] == nil {
				o.gotValues(h.key, h.v-h.n+1, h.v)
			} else {
				o.failed(errs[i])
			}
		}
		hs, ps = hs[:0], ps[:0]
	}
	for _, k := range keys {
		o.running(k)
		v, p, err := tb.TryIncr([]byte(k), 1)
		switch {
		case errors.Is(err, ErrWouldWait):
			settle() // the batch's replies go before a command that waits
			if v, err = tb.Incr(k, 1); err == nil {
				o.gotValues(k, v, v)
			} else {
				o.failed(err)
			}
		case err != nil:
			o.failed(err)
		case p.Ready():
			o.gotValues(k, v, v)
		default:
			hs, ps = append(hs, held{k, v, 1}), append(ps, p)
		}
	}
	settle()
}

// setter SETs a key above what was given of it, or SETNX a new one.
func (o *oracle) setter(tb *Table, key func() string, rnd *rand.Rand) {
	k := key()
	o.mu.Lock()
	v := o.top[k] + 1000 + int64(rnd.IntN(1000))
	o.mu.Unlock()
	mode := []SetMode{Always, IfNew}[rnd.IntN(2)]
	o.running(k)
	var err error
	if rnd.IntN(2) == 0 {
		err = tb.Set(k, v, mode)
	} else {
		var p Pending
		if p, err = tb.TrySet([]byte(k), v, mode); err == nil {
			err = awaitOne(tb, p)
		} else if errors.Is(err, ErrWouldWait) {
			err = tb.Set(k, v, mode)
		}
	}
	if err == nil {
		o.set(k, v)
	} else {
		o.failed(err)
	}
}

// gotValues records that a client received the values first .. last of
// key (and any it received before: the test fails).
func (o *oracle) gotValues(key string, first, last int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	vs := o.received[key]
	if vs == nil {
		vs = map[int64]bool{}
		o.received[key] = vs
	}
	for v := first; v <= last; v++ {
		if vs[v] {
			o.twice = append(o.twice, fmt.Sprintf("%s: %d", key, v))
		}
		vs[v] = true
		o.values++
	}
	o.top[key] = max(o.top[key], last)
}

// disk fails the File's writes as a failing disk does, at points and in
// ways chosen at random: a while of each, then another.
type disk struct {
	mu     sync.Mutex
	rnd    *rand.Rand
	mode   diskMode
	killed bool
	stall  chan struct{} // closed when the stall ends
	counts map[string]int
}

// diskMode is how the disk fails writes at a while: at which points, and
// how.
type diskMode struct {
	points []faultPoint
	err    error // nil: a stall
}

var (
	errEIO    = fmt.Errorf("injected: %w", syscall.EIO)
	errENOSPC = fmt.Errorf("injected: %w", syscall.ENOSPC)
	errKill   = errors.New("injected: killed before the write landed")
)

// fault is the File's fault hook.
func (d *disk) fault(at faultPoint) error {
	d.mu.Lock()
	if d.killed {
		d.mu.Unlock()
		return errKill
	}
	m, stall := d.mode, d.stall
	if !slices.Contains(m.points, at) {
		d.mu.Unlock()
		return nil
	}
	if d.counts == nil {
		d.counts = map[string]int{}
	}
	what := "stall"
	if m.err != nil {
		what = m.err.Error()
	}
	d.counts[fmt.Sprintf("%d:%s", at, what)]++
	d.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	<-stall
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.killed {
		return errKill
	}
	return nil
}

// run changes d's mode every few ms until stop.
func (d *disk) run(stop <-chan struct{}) {
	for {
		d.mu.Lock()
		if d.stall != nil {
			close(d.stall)
		}
		d.stall = make(chan struct{})
		d.mode = diskMode{}
		wait := time.Duration(1+d.rnd.IntN(20)) * time.Millisecond
		switch r := d.rnd.IntN(20); {
		case r < 8: // writes succeed
		case r < 11:
			d.mode = diskMode{points: []faultPoint{atWrite, atFoldTx, atRename, atDirSync}, err: errENOSPC}
		case r < 14:
			d.mode = diskMode{points: []faultPoint{atWritten, atDirSync}, err: errEIO}
		case r < 16: // only the directory's sync fails: the writes after a fold's rename with it
			d.mode = diskMode{points: []faultPoint{atDirSync}, err: errEIO}
			wait *= 10
		default: // a stall: long enough, now and then, to pass Options.Wait
			d.mode = diskMode{points: []faultPoint{atWrite, atRename}}
			wait *= 20
		}
		d.mu.Unlock()
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
	}
}

// calm ends the faults but ENOSPC: no write stalls.
func (d *disk) calm() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mode = diskMode{points: []faultPoint{atWrite}, err: errENOSPC}
	if d.rnd.IntN(2) == 0 {
		d.mode = diskMode{}
	}
	if d.stall != nil {
		close(d.stall)
		d.stall = nil
	}
}

// kill makes every write from now on fail before it lands, as after a
// kill -9, and ends a stall (the write it held fails).
func (d *disk) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.killed = true
	if d.stall != nil {
		close(d.stall)
		d.stall = nil
	}
}
