package seqslots

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/etcdsession"
	"github.com/idserver/idserver/slots"
)

// txnOps is the most records one transaction writes: etcd refuses a
// transaction of more than --max-txn-ops (128 by default) comparisons or
// operations.
const txnOps = 128

// swapsAtOnce is how many of a take's transactions are in flight at
// once: etcd commits those that come together in one write to its disk
// (a take of every slot, 128 transactions one after another, took 0.65 s
// of a restart).
const swapsAtOnce = 16

// Steps bounds how far ahead of use a slot's ceiling is raised. A step
// doubles when the ceiling it made lasted under Fast, and halves when it
// lasted over Slow (as Leaf's segments do), so that a slot is written
// about once per Fast to Slow whatever its rate, and a crash take-over
// skips at most about two steps of its keys.
type Steps struct {
	Min, Max   int64         // the smallest and largest step, in values
	Fast, Slow time.Duration // how long a ceiling lasted: under Fast, the step doubles; over Slow, it halves
}

// DefaultSteps are the steps on the defaults.
var DefaultSteps = Steps{Min: 1000, Max: 1 << 24, Fast: time.Minute, Slow: 10 * time.Minute}

// ErrNotOwner is wrapped by the errors of a slot this server does not
// own (any more): another server took it, or it was never taken.
var ErrNotOwner = errors.New("this server does not own the slot")

// Slots is one server's view of the slot records in etcd: the slots it
// owns, their records as it last wrote them, and the raises it has been
// asked for. It writes only by compare-and-swap on those records.
type Slots struct {
	cli    *clientv3.Client
	root   string // etcd-prefix
	prefix string // <etcd-prefix>seqslot/
	owner  int64  // this server's server-id
	steps  Steps
	hist   *etcdsession.History
	known  *Known
	log    zerolog.Logger
	now    func() time.Time

	mu     sync.Mutex
	owned  *[slots.N]*owned // by slot; nil: not owned
	onLost func([]int)      // OnLost's
	due    chan struct{}    // wakes raise
}

// owned is a slot this server owns.
type owned struct {
	rec    Record
	rev    int64 // the record's mod revision, as this server wrote it
	step   int64
	since  time.Time // when the ceiling was last raised
	want   int64     // the highest value asked to be below the ceiling
	ahead  bool      // a raise is due before any value needs it
	wait   []waiter
	writes int // raises written, for tests and INFO
}

// A waiter waits for a ceiling above last.
type waiter struct {
	last int64
	done chan<- error
}

// Config is what Slots need.
type Config struct {
	Client *clientv3.Client // etcd's
	Prefix string           // etcd-prefix
	Owner  int64            // the server-id this server holds
	Steps  Steps            // DefaultSteps but in tests
	// Hist, if set, checks every response of etcd: once etcd went back
	// in time (restored from an older snapshot), no slot is taken nor
	// raised until an operator confirms, as for server-ids.
	Hist *etcdsession.History
	// Known, if set, is what this server saw of the records: a record
	// read below it (etcd lost data) is taken from it.
	Known *Known
	Log   zerolog.Logger // the server's logger
}

// New returns the slots of cfg.Owner.
func New(cfg Config) *Slots {
	return &Slots{cli: cfg.Client, root: cfg.Prefix, prefix: cfg.Prefix + "seqslot/", owner: cfg.Owner, steps: cfg.Steps,
		hist: cfg.Hist, known: cfg.Known, log: cfg.Log, now: time.Now,
		owned: new([slots.N]*owned), due: make(chan struct{}, 1)}
}

// txn commits a transaction of ops, if cmps hold, and checks where etcd
// stands in its response.
func (s *Slots) txn(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	var sent etcdsession.SentAt
	if s.hist != nil {
		sent = s.hist.At()
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	if s.hist != nil {
		if err := s.hist.Observe(sent, resp.Header); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// keep records recs, written at rev, as seen, and writes them to the
// file now (Known.Keep): before a value below them goes out.
func (s *Slots) keep(slots []int, recs []Record, rev int64) error {
	if s.known == nil {
		return nil
	}
	for i, slot := range slots {
		s.known.see(slot, recs[i], rev)
	}
	return s.known.Keep(slots)
}

// seen records a record this server wrote at revision rev.
func (s *Slots) seen(slot int, r Record, rev int64) {
	if s.known != nil {
		s.known.see(slot, r, rev)
	}
}

func (s *Slots) key(slot int) string { return s.prefix + strconv.Itoa(slot) }

// Read returns the records of slots, and the mod revision of each (0:
// none yet).
func (s *Slots) Read(ctx context.Context, slots []int) ([]Record, []int64, error) {
	recs, revs, _, err := s.read(ctx, slots)
	return recs, revs, err
}

// read is Read that also returns, for each slot, the revision of etcd
// its record was read at.
func (s *Slots) read(ctx context.Context, slots []int) (recs []Record, revs, at []int64, err error) {
	recs, revs, at = make([]Record, len(slots)), make([]int64, len(slots)), make([]int64, len(slots))
	if len(slots) > txnOps {
		// Many: every record in one read, not a transaction of txnOps
		// reads after another (a take of every slot read 16,384 records
		// in 128 of them, 0.28 s of a restart).
		resp, err := s.txn(ctx, nil, []clientv3.Op{clientv3.OpGet(s.prefix, clientv3.WithPrefix())})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("read slot records: %w", err)
		}
		bySlot := map[int]*mvccpb.KeyValue{}
		for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
			if slot, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), s.prefix)); err == nil {
				bySlot[slot] = kv
			}
		}
		for i, slot := range slots {
			if err := fill(&recs[i], &revs[i], bySlot[slot]); err != nil {
				return nil, nil, nil, err
			}
			at[i] = resp.Header.Revision
		}
		return recs, revs, at, nil
	}
	ops := make([]clientv3.Op, len(slots))
	for i, slot := range slots {
		ops[i] = clientv3.OpGet(s.key(slot))
	}
	resp, err := s.txn(ctx, nil, ops)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read slot records: %w", err)
	}
	for i, r := range resp.Responses {
		var kv *mvccpb.KeyValue
		if kvs := r.GetResponseRange().Kvs; len(kvs) > 0 {
			kv = kvs[0]
		}
		if err := fill(&recs[i], &revs[i], kv); err != nil {
			return nil, nil, nil, err
		}
		at[i] = resp.Header.Revision
	}
	return recs, revs, at, nil
}

// fill sets rec and rev from kv, a slot's record as read (nil: none, its
// owner -1 and its revision 0).
func fill(rec *Record, rev *int64, kv *mvccpb.KeyValue) error {
	if kv == nil {
		*rec = Record{Owner: -1}
		return nil
	}
	r, err := unmarshal(kv.Value)
	if err != nil {
		return err
	}
	*rec, *rev = r, kv.ModRevision
	return nil
}

// Take makes this server the owner of slots, each the way how(slot,
// record) says from the record read, with its ceiling at least what how
// says (keys brought in with values up to it), or not at all if how says
// no (the slot is no longer this server's to take): it returns the
// records it wrote. A slot whose record changed between the read and the write is
// read again, until ctx ends.
//
// Each record it writes bears a token of the write (Record.Take), and
// before it writes those of the slots taken Current, intend, if not nil,
// must have stored them durably: were the take to end before the store
// recorded the slots' new generation (a full disk, a kill), the store
// still knows the records as its own, and its keys as exact (the slot
// was served by no one at that generation: not by this server, which
// had not opened it, nor by another, whose take would have written one
// more). If intend fails, nothing is written.
func (s *Slots) Take(ctx context.Context, slots []int, how func(slot int, prev Record) (h How, ceil int64, ok bool), intend func(map[int]Record) error) (map[int]Record, error) {
	taken := map[int]Record{}
	left := slices.Clone(slots)
	for len(left) > 0 {
		token := rand.Uint64() | 1 // never 0: no token
		recs, revs, at, err := s.read(ctx, left)
		if err != nil {
			return taken, err
		}
		var todo []int
		var todoRevs []int64
		var nexts []Record
		intents := map[int]Record{} // the slots taken Current
		for i, slot := range left {
			prev, lost := s.known.lift(slot, recs[i], at[i])
			if lost {
				s.log.Warn().Int("slot", slot).Str("etcd", recs[i].marshal()).Str("seen", prev.marshal()).
					Msg("etcd lost data: a slot's record is below what this server saw of it; taken from what it saw")
			}
			if h, ceil, ok := how(slot, prev); ok {
				// A step of room at once: a slot's first values (all of
				// a new cluster's) need no raise of their own.
				r := raised(next(prev, s.owner, h), max(prev.Ceil, ceil)-1, s.steps.Min)
				r.Take = token
				todo, todoRevs, nexts = append(todo, slot), append(todoRevs, revs[i]), append(nexts, r)
				if h == Current {
					intents[slot] = r
				}
			}
		}
		if len(intents) > 0 && intend != nil {
			if err := intend(intents); err != nil {
				return taken, fmt.Errorf("store the records about to be written: %w", err)
			}
		}
		var again []int // under s.mu, as taken
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(swapsAtOnce)
		for from := 0; from < len(todo); from += txnOps {
			to := min(from+txnOps, len(todo))
			g.Go(func() error {
				resp, err := s.swap(gctx, todo[from:to], todoRevs[from:to], nexts[from:to])
				if err != nil {
					return err
				}
				s.mu.Lock()
				defer s.mu.Unlock()
				if !resp.Succeeded {
					again = append(again, todo[from:to]...)
					return nil
				}
				for i, slot := range todo[from:to] {
					rec := nexts[from+i]
					s.seen(slot, rec, resp.Header.Revision)
					taken[slot] = rec
					s.owned[slot] = &owned{rec: rec, rev: resp.Header.Revision, step: s.steps.Min, since: s.now()}
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return taken, err
		}
		left = again
	}
	if s.known != nil {
		if err := s.known.Keep(slices.Collect(maps.Keys(taken))); err != nil {
			return taken, fmt.Errorf("keep the slots taken in the sequences file: %w", err)
		}
	}
	return taken, nil
}

// swap writes recs in place of the records of slots at revs, all or none.
func (s *Slots) swap(ctx context.Context, slots []int, revs []int64, recs []Record) (*clientv3.TxnResponse, error) {
	cmps := make([]clientv3.Cmp, len(slots))
	puts := make([]clientv3.Op, len(slots))
	for i, slot := range slots {
		cmps[i] = clientv3.Compare(clientv3.ModRevision(s.key(slot)), "=", revs[i])
		puts[i] = clientv3.OpPut(s.key(slot), recs[i].marshal())
	}
	resp, err := s.txn(ctx, cmps, puts)
	if err != nil {
		return nil, fmt.Errorf("write slot records: %w", err)
	}
	return resp, nil
}

// Owned returns the record of slot as this server last wrote it, and
// whether it owns the slot.
func (s *Slots) Owned(slot int) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.owned[slot]
	if o == nil {
		return Record{}, false
	}
	return o.rec, true
}

// ownedEach is Owned of each slot of list, under one lock: recs[i] and
// ok[i] are list[i]'s.
func (s *Slots) ownedEach(list []int) (recs []Record, ok []bool) {
	recs, ok = make([]Record, len(list)), make([]bool, len(list))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, slot := range list {
		if o := s.owned[slot]; o != nil {
			recs[i], ok[i] = o.rec, true
		}
	}
	return recs, ok
}

// Drop forgets slot: this server serves it no more.
func (s *Slots) Drop(slot int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.owned[slot]; o != nil {
		o.fail(fmt.Errorf("slot %d: %w: it moved", slot, ErrNotOwner))
		s.owned[slot] = nil
	}
}

// fail ends every wait of o with err.
func (o *owned) fail(err error) {
	for _, w := range o.wait {
		w.done <- err
	}
	o.wait = nil
}

// covered ends the waits the ceiling now covers, and reports whether
// any is left.
func (o *owned) covered() bool {
	o.wait = slices.DeleteFunc(o.wait, func(w waiter) bool {
		if w.last < o.rec.Ceil {
			w.done <- nil
			return true
		}
		return false
	})
	return len(o.wait) > 0
}

// Cover returns once the ceiling of slot stored in etcd is above last,
// raising it if needed; and has it raised ahead, in the background, once
// last passes half a step below it. It fails with ErrNotOwner once
// another server took the slot.
func (s *Slots) Cover(ctx context.Context, slot int, last int64) error {
	done, err := s.ask(slot, last)
	if done == nil {
		return err
	}
	return s.await(ctx, slot, last, done)
}

// ask is Cover's start: it returns nil and whether slot is owned when
// the stored ceiling is above last already, and otherwise the channel
// that says when it is, or why it cannot be.
func (s *Slots) ask(slot int, last int64) (<-chan error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.askLocked(slot, last)
}

// askEach is ask of each slot of need (its last value to cover), under
// one lock: the raises to wait for (await), and the slots it could not
// ask for, with why.
func (s *Slots) askEach(need map[int]int64) (waits map[int]<-chan error, failed map[int]error) {
	waits, failed = map[int]<-chan error{}, map[int]error{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for slot, last := range need {
		if done, err := s.askLocked(slot, last); done != nil {
			waits[slot] = done
		} else if err != nil {
			failed[slot] = err
		}
	}
	return waits, failed
}

// get is slot's state if this server owns it, under s.mu.
func (s *Slots) get(slot int) (*owned, bool) {
	o := s.owned[slot]
	return o, o != nil
}

// askLocked is ask, under s.mu.
func (s *Slots) askLocked(slot int, last int64) (<-chan error, error) {
	o, ok := s.get(slot)
	if !ok {
		return nil, fmt.Errorf("slot %d: %w", slot, ErrNotOwner)
	}
	if last < o.rec.Ceil {
		if last >= o.rec.Ceil-o.step/2 && !o.ahead {
			o.ahead = true
			s.wake()
		}
		return nil, nil
	}
	o.want = max(o.want, last)
	done := make(chan error, 1)
	o.wait = append(o.wait, waiter{last, done})
	s.wake()
	return done, nil
}

// await is Cover's end: it waits for done, or for ctx.
func (s *Slots) await(ctx context.Context, slot int, last int64, done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("slot %d: no ceiling above %d stored in time: %w", slot, last, ctx.Err())
	}
}

func (s *Slots) wake() {
	select {
	case s.due <- struct{}{}:
	default:
	}
}

// Run writes the raises asked for until ctx ends, txnOps slots to a
// transaction.
func (s *Slots) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.due:
		}
		for ctx.Err() == nil && s.raiseDue(ctx) {
		}
	}
}

// raiseDue writes one transaction of the raises due, and reports whether
// it wrote one.
func (s *Slots) raiseDue(ctx context.Context) bool {
	slots, revs, recs := s.dueRaises()
	if len(slots) == 0 {
		return false
	}
	resp, err := s.swap(ctx, slots, revs, recs)
	switch {
	case err != nil:
		s.failAll(slots, revs, err)
		return false // the next Cover wakes it again
	case resp.Succeeded:
		if err := s.keep(slots, recs, resp.Header.Revision); err != nil {
			// Not a value below these ceilings goes out: the next raise's
			// compare-and-swap, on the revision before this one, fails, and
			// the slots are taken again from etcd's records.
			s.failAll(slots, revs, fmt.Errorf("keep the slots' ceilings in the sequences file: %w", err))
			return false
		}
		s.raisedTo(slots, recs, resp.Header.Revision)
	default:
		s.lost(ctx, slots, revs)
	}
	return true
}

// dueRaises returns up to txnOps slots whose raise is due, with their
// revisions and the records to write, the step of each adapted to how
// long its last ceiling lasted.
func (s *Slots) dueRaises() (slots []int, revs []int64, recs []Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for slot, o := range s.owned { // in order of slots, as each raise's transaction
		if o == nil || len(o.wait) == 0 && !o.ahead {
			continue
		}
		o.step = s.steps.adapt(o.step, s.now().Sub(o.since))
		slots, revs = append(slots, slot), append(revs, o.rev)
		recs = append(recs, raised(o.rec, o.want, o.step))
		if len(slots) == txnOps {
			break
		}
	}
	return slots, revs, recs
}

// adapt returns the step after one whose ceiling lasted lasted.
func (st Steps) adapt(step int64, lasted time.Duration) int64 {
	switch {
	case lasted < st.Fast:
		step = min(2*step, st.Max)
	case lasted > st.Slow:
		step = max(step/2, st.Min)
	}
	return step
}

// raisedTo records that recs were written at rev (keep has seen and
// kept them), and wakes the waiters their ceilings cover.
func (s *Slots) raisedTo(slots []int, recs []Record, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, slot := range slots {
		o, ok := s.get(slot)
		if !ok {
			continue // dropped meanwhile
		}
		o.rec, o.rev, o.since, o.ahead = recs[i], rev, s.now(), false
		o.writes++
		if o.covered() {
			s.wake() // asked for more meanwhile
		}
	}
}

// failAll fails the waiters of slots: the write of their raise failed.
func (s *Slots) failAll(slots []int, revs []int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, slot := range slots {
		if o, ok := s.get(slot); ok && o.rev == revs[i] {
			o.fail(err)
			o.ahead = false
		}
	}
}

// lost reads again the records of slots, one of which changed under
// this server: those another server wrote are no longer this server's.
func (s *Slots) lost(ctx context.Context, slots []int, revs []int64) {
	_, now, err := s.Read(ctx, slots)
	if err != nil {
		s.failAll(slots, revs, err)
		return
	}
	var gone []int
	s.mu.Lock()
	for i, slot := range slots {
		if o, ok := s.get(slot); ok && now[i] != revs[i] {
			o.fail(fmt.Errorf("slot %d: %w: another server took it", slot, ErrNotOwner))
			s.owned[slot] = nil
			gone = append(gone, slot)
		}
	}
	lostFn := s.onLost
	s.mu.Unlock()
	if lostFn != nil && len(gone) > 0 {
		lostFn(gone)
	}
}

// OnLost has lost called with the slots this server finds it no longer
// owns (another server took them, or their records were deleted), once
// it stopped raising them.
func (s *Slots) OnLost(lost func(slots []int)) {
	s.mu.Lock()
	s.onLost = lost
	s.mu.Unlock()
}

// Writes returns how many raises of slot this server wrote.
func (s *Slots) Writes(slot int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.get(slot); ok {
		return o.writes
	}
	return 0
}
