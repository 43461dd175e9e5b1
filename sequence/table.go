// Package sequence keeps dense per-key counters, Redis's INCR and INCRBY,
// whose values never repeat through crashes and power loss, served at
// in-memory speed.
//
// Why no value repeats. Each key has a segment (issued, limit] of values
// it may hand out, and every value up to limit was reserved durably by
// the Backend before the segment was given out: Take returns only once
// the reservation is stored. A restart resumes each key at its stored
// mark, which is at or above every value handed out, and a Take is always
// above everything taken before (its After, and the backend's own mark).
// Per key, the values a Table hands out strictly increase: it issues in
// order under the key's shard lock, and never below issued.
//
// Why INCR does not wait for the disk. A key's next segment is asked for
// in the background once less than half of the current one is left (and
// the background writes the reservations of many keys in one write), so
// a key waits only for its very first value and when it outruns its
// segment. A segment holds about SegmentTime of the key's traffic, so a
// busy key is written a few times a minute however fast it goes, a slow
// one holds a few values, and a crash skips at most one segment of each.
//
// SET moves a key up to a value, never down (BelowError); its reply goes
// once the value is durable, many SETs to a write (set.go). No reply
// leaves before what makes its values unique is durable (reply.go). For
// a Redis Cluster node the Table also serves hash slots: CloseSlot and
// OpenSlot while a slot changes owner, SlotMarks and LoadSlot to hand its
// keys over, DropSlot to forget them (package seqslots drives them). The
// Backend is a File (bbolt, in dir), under seqslots.Gate in cluster mode.
package sequence

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/internal/ratelog"
	"github.com/idserver/idserver/slots"
)

// Take asks a Backend for a segment of a key's values.
type Take struct {
	Key    string // the key whose values are reserved
	After  int64  // every value of the segment is above this
	N      int64  // how many values
	Issued int64  // the key's last value handed out: a crash may skip those above it
	// Born: the key exists (a value was handed out or set, or a request
	// waits for one), so the Backend records it as existing; a key only
	// prepared for a pipeline is not born, and a restart forgets it. Set
	// by the Backend to whether the key exists durably once taken.
	Born bool
	// Set by the Backend: the segment is First .. Last (N values), or
	// Err says why it could not be taken.
	First, Last int64
	Err         error
}

// Mark is a key's reservation: no value above Value was handed out.
type Mark struct {
	Key   string // the key reserved
	Value int64
	// Reserved is, at a graceful stop (Release), the end of the key's
	// segments then: what this server reserved, Value and above unused.
	Reserved int64
	// Born: the key exists. At a graceful stop a key that is not was only
	// prepared for a pipeline, and no value of it was handed out: the
	// Backend forgets it.
	Born bool
}

// Backend keeps every key's reservation durably: the server's File (over
// etcd, behind package seqslots' Gate).
//
// The keys a Backend is given (Take.Key, Setting.Key, Mark.Key) are the
// Table's own bytes, which a dropped key's entry gives to another key
// (DropSlot): a Backend that keeps a key after the call (a map's key)
// keeps a copy (strings.Clone).
type Backend interface {
	// Take reserves a segment for every t in ts, durably before it
	// returns: t.N values above t.After, and above every value it ever
	// gave for t.Key (to any server sharing it), fewer if they would
	// pass the largest int64 (the Table asks for none past it). It sets
	// t.First and t.Last, or t.Err (ErrOverflow if none is left).
	Take(ctx context.Context, ts []Take)
	// Set stores, durably before it returns, each s of ss's Value as
	// its key's reservation if it is at least every value ever given for
	// the key; with IfNew, only if the key has none; with IfOld, only if
	// it has one. Where it did not, it sets s.Err (a *BelowError with the
	// key's reservation, ErrExists, ErrMissing, or the store's failure).
	// The Table gives it the SETs queued together (many keys, each at
	// most once), so that they share one write.
	Set(ctx context.Context, ss []Setting)
	// Release stores marks at a graceful stop, each the last value its
	// key handed out: the values reserved above it were not, and a
	// restart need not skip them.
	Release(ctx context.Context, marks []Mark) error
}

// A Folder is a Backend that appends its writes to a log, folded now and
// then into one mark per key (the File). The Table's writer folds it,
// from the Table's own marks, so that a fold reads none of the log.
type Folder interface {
	// FoldDue reports whether the log has outgrown what keys keys hold.
	FoldDue(keys int) bool
	// Fold stores the marks snapshot returns in place of everything
	// stored, and sends the result on the channel it returns; it may go
	// on after it returned. snapshot runs before it returns, under the
	// Folder's lock: no write comes between.
	Fold(snapshot func() []Mark) <-chan error
}

// SetMode is when Set applies.
type SetMode int

// The modes of Set.
const (
	Always SetMode = iota // whenever the value does not go back
	IfNew                 // only if the key has no value (SET ... NX)
	IfOld                 // only if the key has one (SET ... XX)
)

// Errors of a Table.
var (
	// ErrWouldWait is returned by TryIncr when the key's segment lacks
	// the values: Incr, which may block, then waits for the next one.
	ErrWouldWait = errors.New("the call would wait")
	// ErrNotReserved is returned when values were not reserved durably
	// in time; it is wrapped with the backend's error when a write failed.
	ErrNotReserved = errors.New("sequence values ahead are not yet reserved durably")
	// ErrOverflow is an increment past the largest 64-bit integer.
	ErrOverflow = errors.New("increment or decrement would overflow")
	// ErrStopped is returned after Stop.
	ErrStopped = errors.New("sequences stopped")
	// ErrExists is Set's answer under IfNew to a key that exists, and
	// ErrMissing under IfOld to one that does not.
	ErrExists  = errors.New("the key exists")
	ErrMissing = errors.New("no such key")
)

// BelowError is Set's answer to a value below what the key handed out.
type BelowError struct {
	Key string // the key SET
	At  int64  // the key's value
}

// Error says the key's value, and that sequences only go up.
func (e *BelowError) Error() string {
	return fmt.Sprintf("sequences only go up: %q is at %d (idserver never reuses a number)", e.Key, e.At)
}

// LimitError is the refusal of a new key past a bound.
type LimitError struct {
	Key  string // the new key refused
	What string // which bound
}

// Error names the key (shortened) and the bound it passed.
func (e *LimitError) Error() string {
	return fmt.Sprintf("sequence %q refused: %s", clip(e.Key), e.What)
}

// clip shortens a key for an error message.
func clip(key string) string {
	if len(key) > 64 {
		return key[:64] + "..."
	}
	return key
}

// Options configures a Table. Zero fields mean the documented defaults.
type Options struct {
	MaxKeys     int           // most keys (seq-max-keys); zero means 1000000
	MaxKeyBytes int           // longest key (seq-max-key-bytes); zero means 512
	SegmentTime time.Duration // how much of a key's traffic a segment holds; zero means 3 s
	MaxSegment  int64         // the largest segment (but for one INCRBY); zero means 1000000
	// Wait bounds how long Incr waits for a segment; zero means 5 s.
	Wait time.Duration
	// KeepSlot, if set, says which hash slots' keys New keeps of those
	// it is given: at a restart of a Redis Cluster node, not those of
	// slots whose generation in the File is no longer etcd's (another
	// server served them since). Asked as each key is loaded, its slot
	// computed once (filtered before, a million keys of 512 bytes took
	// 0.5 s more of the start).
	KeepSlot func(slot int) bool
	Log      zerolog.Logger // the server's logger

	now func() time.Time // tests move it
}

// Table is the sequences of one server, and their segments.
type Table struct {
	opts    Options
	backend Backend
	seed    maphash.Seed
	alloc   entries
	shards  [1 << shardBits]shard

	closedSlots [slots.N]atomic.Bool // CloseSlot's
	openMu      sync.Mutex
	opened      [slots.N]chan struct{} // closed by OpenSlot and LetGoSlot: a closed slot's waits end; nil: none begin

	bySlotMu sync.RWMutex
	bySlot   [slots.N][]*entry // every key, in its hash slot's list, in the order it came: SCAN's cursor is a place in them
	made     int               // the keys in bySlot, and those LoadSlot is making
	limbo    limbo             // the entries of dropped keys, until they may be made others'
	// foldBegan is when the fold under way took its snapshot (unix ns),
	// 0 if none: an entry dropped after it is in no snapshot (limbo).
	foldBegan atomic.Int64
	bytes     atomic.Int64
	longest   atomic.Int64 // the longest key's length
	keys      atomic.Int64 // keys that exist for GET, DBSIZE and SCAN: durable ones

	queueMu sync.Mutex
	queue   []*entry // keys whose next segment is asked for
	setMu   sync.Mutex
	round   *setRound     // the SETs the writer's next write stores; nil if none
	setWake chan struct{} // a SET is queued
	wake    chan struct{} // a take is queued
	urgent  chan struct{} // and a request waits for it
	stop    chan struct{}
	done    chan struct{}
	stopped atomic.Bool

	takes, taken, failures, waits atomic.Uint64
	lastTake                      atomic.Int64 // unix ms of the last successful Take
	lastErr                       atomic.Pointer[string]
	failing                       atomic.Pointer[error] // the last write's error; nil once one succeeded
	writing                       atomic.Int64          // unix ns when the write under way began; 0: none
	failLog                       ratelog.ByText        // run's own
	foldLogMu                     sync.Mutex
	foldLog                       ratelog.ByText // under foldLogMu: the folds' ends log
}

// shardBits is how many of a key's hash bits choose its shard.
const shardBits = 6

type shard struct {
	mu sync.Mutex
	index
	// issued counts the values handed out of the shard's keys, under mu:
	// on the lock's cache line, without an atomic add, INCR pays nothing
	// for it; Stats takes each lock to read it.
	issued uint64
	_      [16]byte // a shard's lock on a cache line of its own
}

// entry is one key. Its fields are under its shard's lock.
//
// An INCR reads only the entry's first 64 bytes, a cache line (entries
// are 128 bytes, from slabs aligned to 64): with 100,000 random keys
// nearly every INCR misses the caches for its entry, and a key of up to
// 16 bytes is compared there too. The rest is for the writer, SCAN and
// the rare request that waits.
type entry struct {
	issued int64   // the last value handed out (the stored mark, before any)
	limit  int64   // values (issued, limit] may be handed out
	next   segment // taken, not contiguous with limit: begun when limit is reached
	below  int64   // the next segment is asked for when fewer values are left (relow)
	klen   uint8   // len(key), at most 255: a longer key is compared as e.key
	taking bool    // a take (or a Set) is queued or under way
	// born: a value of the key was handed out (its reply may wait for
	// its existence to be durable: reply.go), or set, or stored. A key
	// made only to Prepare its segment (a pipelined INCR that has not
	// run) is not born: its take records it as not existing. GET,
	// EXISTS, DBSIZE and SCAN see durable keys only.
	born  bool
	shard uint8 // its shard, in Table.shards
	bits  uint8 // durable, demanded, setting, dropped, closed
	// gen counts the keys the entry was made for: a Pending or a wait
	// that names it for a key dropped since does not touch the next.
	gen   uint16
	short [16]byte // the key, if it is 16 bytes or shorter (key points here)

	key     string
	seg     int64 // the size of the segment last asked for
	asked   int64 // issued when it was asked for
	askedAt int64 // unix ns then
	want    int64 // values a waiting request needs at once
	wait    *wait // nil but while a request waits, or after a take failed
	setTo   int64 // the most a Set stored, or may have
}

// An entry's bits.
const (
	// durable: the backend holds the key as born, so a restart brings it
	// back. A key born from a segment prepared for a pipeline is not,
	// until a write records it: until then, a reply with its value waits
	// (a Pending: reply.go), so that no client holds a value of a key a
	// crash would forget. Once durable, always.
	durable uint8 = 1 << iota
	// demanded: a request waits for the key's values (not only a
	// Prepare), so its take records the key as born.
	demanded
	// setting: a SET of the key is queued or being written: a SETNX
	// behind it sees the key as existing (TrySet).
	setting
	// dropped: the key's hash slot was dropped (DropSlot): the entry is
	// out of the index and its slot's list, and what still names it (a
	// take or SET in the writer's hands, a Pending, a wait) hands out
	// and stores nothing for it.
	dropped
)

func (e *entry) has(b uint8) bool { return e.bits&b != 0 }

type segment struct{ first, last int64 }

// entries allocates a table's index slots and entries, each entry with
// its key's bytes in the same place: a lookup compares the key where the
// INCR then counts, rather than following a pointer to a second place in
// memory (with 100,000 random keys, that second cache miss was a tenth of
// INCR's CPU). The bytes are written again only when the entry of a
// dropped key is made another's, once none of its key's strings is in
// use (limbo), as unsafe.String asks. Each size is a multiple of 64, so that every entry begins a cache line.
type entries struct {
	slots slab[slot]  // the shards' index slots
	k16   slab[entry] // in short
	k64   slab[withKey[[64]byte]]
	k128  slab[withKey[[128]byte]]
	long  slab[entry]
}

type withKey[B any] struct {
	e entry
	b B
}

// The classes of entries, by the length of their key.
const (
	class16 = iota
	class64
	class128
	classLong
	classes
)

// classOf is the class of an entry for a key of n bytes.
func classOf(n int) int {
	switch {
	case n <= len(entry{}.short):
		return class16
	case n <= 64:
		return class64
	case n <= 128:
		return class128
	}
	return classLong
}

func newEntry[K string | []byte](a *entries, key K) *entry {
	var e *entry
	switch classOf(len(key)) {
	case class16:
		e = a.k16.new()
	case class64:
		e = &a.k64.new().e
	case class128:
		e = &a.k128.new().e
	default:
		e = a.long.new()
	}
	setKey(e, key)
	return e
}

// setKey gives e, zero but for gen, of key's class, its key: in the entry,
// or beside it (e is the first field of a withKey).
func setKey[K string | []byte](e *entry, key K) {
	switch n := len(key); classOf(n) {
	case class16:
		e.key = keyIn(e.short[:n], key)
	case class64:
		e.key = keyIn((*withKey[[64]byte])(unsafe.Pointer(e)).b[:n], key)
	case class128:
		e.key = keyIn((*withKey[[128]byte])(unsafe.Pointer(e)).b[:n], key)
	default:
		e.key = string(key)
	}
	e.klen = uint8(min(len(key), math.MaxUint8))
}

// keyIn copies key into b, as long, and returns b as a string.
func keyIn[K string | []byte](b []byte, key K) string {
	copy(b, key)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// A Resumer is a Backend that can resume keys with the values they had
// in hand at a graceful stop (the File: Restart.Clean): before any is
// handed out, MarkDirty records that a run is on, so that a crash after
// it resumes each key above what it had reserved, not at its last value.
type Resumer interface {
	MarkDirty() error
}

// New returns a Table over backend with the keys known stored, each
// resuming above its last value (Mark.Value), and starts its background
// writer. A key known with values reserved above it (Mark.Reserved: a
// graceful stop's) resumes with them in hand, writing nothing, if backend
// is a Resumer whose MarkDirty succeeds; otherwise it takes them again
// (they were never handed out).
func New(opts Options, backend Backend, known []Mark) *Table {
	if opts.MaxKeys == 0 {
		opts.MaxKeys = 1000000
	}
	if opts.MaxKeyBytes == 0 {
		opts.MaxKeyBytes = 512
	}
	if opts.SegmentTime == 0 {
		opts.SegmentTime = 3 * time.Second
	}
	if opts.MaxSegment == 0 {
		opts.MaxSegment = 1000000
	}
	if opts.Wait == 0 {
		opts.Wait = 5 * time.Second
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	t := &Table{opts: opts, backend: backend, seed: maphash.MakeSeed(),
		wake: make(chan struct{}, 1), urgent: make(chan struct{}, 1), setWake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	resume := t.resumes(known)
	for i := range t.shards { // a few more than its share: none grows as they load
		t.shards[i].fit(len(known)/len(t.shards)*9/8+8, &t.alloc.slots)
	}
	for _, m := range known {
		slot := slotOf(m.Key)
		if opts.KeepSlot != nil && !opts.KeepSlot(slot) {
			continue
		}
		_, h := t.shardOf(m.Key)
		e := insert(t, h, m.Key, slot, false)
		e.issued, e.limit, e.born = m.Value, m.Value, true
		t.settle(e)
		if resume {
			e.limit = max(m.Value, m.Reserved)
		}
	}
	go t.run()
	return t
}

// resumes reports whether the keys known resume with the values they had
// reserved in hand: if some had, once the backend recorded that a run is
// on (Resumer).
func (t *Table) resumes(known []Mark) bool {
	if !slices.ContainsFunc(known, func(m Mark) bool { return m.Reserved > m.Value }) {
		return false
	}
	r, ok := t.backend.(Resumer)
	if !ok {
		return false
	}
	if err := r.MarkDirty(); err != nil {
		t.opts.Log.Warn().Err(err).Msg("sequences: cannot record that a run is on; each key takes its values anew rather than resuming with those it had in hand")
		return false
	}
	return true
}

// shardOf returns key's shard and its hash.
func (t *Table) shardOf(key string) (*shard, uint64) {
	h := maphash.String(t.seed, key)
	return &t.shards[shardIndex(h)], h
}

// shardIndex is the shard of a key whose hash is h: its low bits (the
// index probes from the bits above them).
func shardIndex(h uint64) uint8 { return uint8(h % (1 << shardBits)) }

// shardOfEntry is e's shard, without hashing its key again.
func (t *Table) shardOfEntry(e *entry) *shard { return &t.shards[e.shard] }

// EntryBytes is what a key costs in memory beside its name, about: its
// entry (128 bytes, a name of up to 16 bytes inside it; longer ones round
// up to 64 or 128 bytes more), its index slots (16 bytes each, the index
// between three eighths and three quarters full, and the slots it
// outgrew, as many again at most) and its place in SCAN's order.
const EntryBytes = 224

// KeyBytes is what a key of up to maxKeyBytes costs in memory, at most:
// its bytes and EntryBytes. The server's memory limit allows it for each
// of seq-max-keys keys (conf.Config.Memory).
func KeyBytes(maxKeyBytes int) int64 { return int64(maxKeyBytes) + EntryBytes }

// remember adds a new key to its slot's list, and counts it unless it
// was counted before (reserved: LoadSlot).
func (t *Table) remember(e *entry, s int, reserved bool) {
	t.bySlotMu.Lock()
	t.bySlot[s] = append(t.bySlot[s], e)
	if !reserved {
		t.made++
	}
	t.bySlotMu.Unlock()
	t.bytes.Add(int64(len(e.key) + EntryBytes))
	for n := int64(len(e.key)); ; {
		if old := t.longest.Load(); old >= n || t.longest.CompareAndSwap(old, n) {
			break
		}
	}
}

// settle records that the backend holds e as born: a restart brings it
// back, and it exists for GET, DBSIZE and SCAN. Its shard is locked (or
// not yet shared).
func (t *Table) settle(e *entry) {
	if !e.has(durable) {
		e.bits |= durable
		t.keys.Add(1)
	}
}

// LongestKey is the length of the longest key: a pattern that needs more
// matches none.
func (t *Table) LongestKey() int { return int(t.longest.Load()) }

// TryIncr hands out n values of key and returns the last, without
// waiting: where the key's segment lacks them, it asks for the next and
// returns ErrWouldWait (nothing handed out). The reply may go at once if
// the Pending is Ready; otherwise only once Await says so (the key's
// existence is not durable yet: reply.go).
func (t *Table) TryIncr(key []byte, n int64) (int64, Pending, error) {
	v, p, _, err := t.tryIncr(key, n)
	return v, p, err
}

// waitOn is a request's wait for the take or SET of e under way; gen is
// e's then (a dropped key's entry may be made another key's).
type waitOn struct {
	e   *entry
	w   *wait
	gen uint16
}

// waitOn is a request's wait for the end of e's take or SET under way.
// e's shard is locked.
func (e *entry) waitOn() waitOn { return waitOn{e, e.waiting(), e.gen} }

// tryIncr is TryIncr that also returns, with ErrWouldWait, the wait for
// the take it needs.
func (t *Table) tryIncr(key []byte, n int64) (int64, Pending, waitOn, error) {
	if t.stopped.Load() {
		return 0, Pending{}, waitOn{}, ErrStopped
	}
	sh, h := t.shardOfBytes(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, err := t.find(sh, h, key)
	if err != nil {
		return 0, Pending{}, waitOn{}, err
	}
	if e.issued > math.MaxInt64-n {
		return 0, Pending{}, waitOn{}, ErrOverflow
	}
	if e.available(n) {
		e.issued += n
		sh.issued += uint64(n)
		e.born = true
		if !e.taking && (e.low() || !e.mayReply()) {
			t.ask(e) // a key not durable: its take records it as born
		}
		if !e.mayReply() {
			return e.issued, Pending{e: e, gen: e.gen}, waitOn{}, nil
		}
		return e.issued, Pending{}, waitOn{}, nil
	}
	if e.end() == math.MaxInt64 { // no take could add them: see low
		return 0, Pending{}, waitOn{}, ErrOverflow
	}
	if err := t.down(takes); err != nil {
		// No wait while the store is down (reply.go): the error at once,
		// on the caller's goroutine. The key is asked for all the same,
		// not demanded: the writer tries again with it once it has
		// backed off.
		if !e.taking {
			t.ask(e)
		}
		t.hurry()
		return 0, Pending{}, waitOn{}, err
	}
	e.demand(n)
	if !e.taking {
		t.ask(e)
	}
	t.hurry()
	return 0, Pending{}, e.waitOn(), ErrWouldWait
}

// shardOfBytes is shardOf for a key as bytes, without copying it.
func (t *Table) shardOfBytes(key []byte) (*shard, uint64) {
	h := maphash.Bytes(t.seed, key)
	return &t.shards[shardIndex(h)], h
}

// find returns key's entry in sh (locked), creating it if it is new.
func (t *Table) find(sh *shard, h uint64, key []byte) (*entry, error) {
	if e := find(&sh.index, h, key); e != nil {
		if e.has(closed) {
			return nil, ErrNotServed
		}
		return e, nil
	}
	return create(t, h, key)
}

// create adds key, new, whose hash is h, to its shard (locked), within
// the bounds.
func create[K string | []byte](t *Table, h uint64, key K) (*entry, error) {
	switch {
	case len(key) > t.opts.MaxKeyBytes:
		return nil, &LimitError{Key: string(key), What: fmt.Sprintf("the key is %d bytes, longer than seq-max-key-bytes %d", len(key), t.opts.MaxKeyBytes)}
	case t.entries() >= t.opts.MaxKeys:
		return nil, &LimitError{Key: string(key), What: fmt.Sprintf("there are seq-max-keys %d sequences already (existing keys keep working)", t.opts.MaxKeys)}
	}
	slot := slotOf(key)
	if t.closedSlots[slot].Load() {
		return nil, ErrNotServed
	}
	return insert(t, h, key, slot, false), nil
}

// insert adds key, new, whose hash is h, to its shard (locked, or not
// yet shared) and to SCAN's order, without the bounds: create checks
// them, the keys a restart loads came within them, and LoadSlot counted
// its keys before (reserved).
func insert[K string | []byte](t *Table, h uint64, key K, slot int, reserved bool) *entry {
	e := t.reuse(classOf(len(key)))
	if e != nil {
		setKey(e, key)
	} else {
		e = newEntry(&t.alloc, key)
	}
	e.seg, e.shard = 1, shardIndex(h)
	if t.closedSlots[slot].Load() { // loaded into a slot not served yet
		e.bits |= closed
	}
	e.relow()
	t.shards[e.shard].add(h, e, &t.alloc.slots)
	t.remember(e, slot, reserved)
	return e
}

// available makes n values ready in e's segment if it can, beginning the
// next segment when the current one lacks them (the rest of the current
// one is then skipped: only in cluster mode are segments apart).
func (e *entry) available(n int64) bool {
	if e.limit-e.issued >= n {
		return true
	}
	if e.next.last-e.next.first+1 >= n && e.next.first > e.issued {
		e.issued, e.limit, e.next = e.next.first-1, e.next.last, segment{}
		return true
	}
	return false
}

// end is the last value reserved for e: no segment it holds goes past.
func (e *entry) end() int64 { return max(e.limit, e.next.last) }

// left is how many values e has in hand, reserved and not handed out.
func (e *entry) left() int64 {
	left := e.limit - e.issued
	if e.next.first != 0 {
		left += e.next.last - e.next.first + 1
	}
	return left
}

// low reports whether e's next segment should be asked for. A key
// reserved up to the largest value has none: a request that lacks values
// then fails with ErrOverflow (in cluster mode, where a segment may begin
// above the one before, even one within the largest value less issued).
func (e *entry) low() bool { return e.left() < e.below && e.end() < math.MaxInt64 }

// relow sets when e's next segment is asked for: when less than half of
// the last one's size is left, or less than a waiting request needs.
// (One field, so that an INCR reads it on the entry's first cache line.)
func (e *entry) relow() { e.below = max((e.seg+1)/2, e.want) }

// need records that n values of e are needed at once: by a pipelined
// request (Prepare), or by one that waits (demand).
func (e *entry) need(n int64) {
	e.want = max(e.want, n)
	e.relow()
}

// demand records that a request waits for n values of e: its take
// records e as born.
func (e *entry) demand(n int64) {
	e.need(n)
	e.bits |= demanded
}

// took ends e's take, which failed if err is not nil: its waiting
// requests go on, and see err. A key whose take failed is not born but
// if durable: the replies of its values waited for the take, and fail
// with it (reply.go). e's shard is locked.
func (t *Table) took(e *entry, err error) {
	e.taking = false
	e.ended(err)
	if err != nil {
		t.unborn(e)
	}
	if e.has(dropped) { // nothing names it any more
		t.limbo.add(e, t.opts.now().UnixNano())
	}
}

// Prepare asks for key's next segment if it lacks n values, without
// handing any out or waiting: for a request that will come (a pipeline's
// INCRs behind one that waits), so that one write serves them all. A key
// it cannot create is left to its request to refuse.
func (t *Table) Prepare(key []byte, n int64) {
	if t.stopped.Load() {
		return
	}
	sh, h := t.shardOfBytes(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, err := t.find(sh, h, key)
	if err != nil {
		return
	}
	if e.limit-e.issued < n || e.low() {
		e.need(n)
		if !e.taking {
			t.ask(e)
		}
		t.hurry()
	}
}

// Incr is TryIncr that waits, up to Options.Wait, for the values to be
// reserved and, for a key whose first values they are, for its
// existence to be durable: its reply may go once it returned them. It
// fails with ErrNotReserved, wrapped with the backend's error if its
// write failed.
func (t *Table) Incr(key string, n int64) (int64, error) {
	d := t.deadline()
	defer d.stop()
	t.waits.Add(1)
	for {
		v, p, on, err := t.tryIncr([]byte(key), n)
		if err == nil {
			if err := t.await(&d, p); err != nil {
				return 0, err
			}
			return v, nil
		}
		if errors.Is(err, ErrNotServed) && t.awaitOpen(&d, key) {
			continue
		}
		if !errors.Is(err, ErrWouldWait) {
			return v, err
		}
		if err := t.waitForStore(&d, on, takes); err != nil {
			return 0, err
		}
	}
}

// Want is one key's part of IncrAll: N values of Key, the last of which
// IncrAll sets in Last.
type Want struct {
	Key  string
	N    int64
	Last int64
}

// TryIncrAll hands out the values of every w in ws in one step (no other
// request's values of their keys come between), each key at most once in
// ws; or none of them, with ErrWouldWait (asking for the segments that
// lack them, and the writes that make the keys whose existence is not
// durable: their values are not handed out before) or the first error of
// a key. Its reply may go at once.
func (t *Table) TryIncrAll(ws []Want) error {
	_, err := t.tryIncrAll(ws)
	return err
}

func (t *Table) tryIncrAll(ws []Want) ([]waitOn, error) {
	if t.stopped.Load() {
		return nil, ErrStopped
	}
	var locked [len(t.shards)]bool
	hs := make([]uint64, len(ws))
	for i, w := range ws {
		hs[i] = maphash.String(t.seed, w.Key)
		locked[shardIndex(hs[i])] = true
	}
	for i := range t.shards { // in order: two IncrAll never wait for each other
		if locked[i] {
			t.shards[i].mu.Lock()
			defer t.shards[i].mu.Unlock()
		}
	}
	es := make([]*entry, len(ws))
	var waits []waitOn
	for i, w := range ws {
		e := find(&t.shards[shardIndex(hs[i])].index, hs[i], w.Key)
		if e != nil && e.has(closed) {
			return nil, ErrNotServed
		}
		if e == nil {
			var err error
			if e, err = create(t, hs[i], w.Key); err != nil {
				return nil, err
			}
		}
		if e.issued > math.MaxInt64-w.N {
			return nil, ErrOverflow
		}
		es[i] = e
		if avail := e.available(w.N); !avail || !e.mayReply() {
			if !avail && e.end() == math.MaxInt64 {
				return nil, ErrOverflow
			}
			e.demand(w.N) // its take records it as born
			if !e.taking {
				t.ask(e)
			}
			t.hurry()
			waits = append(waits, e.waitOn())
		}
	}
	if len(waits) > 0 {
		return waits, ErrWouldWait
	}
	for i, e := range es {
		e.issued += ws[i].N
		t.shardOfEntry(e).issued += uint64(ws[i].N)
		ws[i].Last = e.issued
		if !e.taking && e.low() {
			t.ask(e)
		}
	}
	return nil, nil
}

// IncrAll is TryIncrAll that waits, as Incr does.
func (t *Table) IncrAll(ws []Want) error {
	d := t.deadline()
	defer d.stop()
	t.waits.Add(1)
	for {
		waits, err := t.tryIncrAll(ws)
		if !errors.Is(err, ErrWouldWait) {
			return err
		}
		for _, on := range waits {
			if err := t.waitForStore(&d, on, takes); err != nil {
				return err
			}
		}
	}
}

// TryGet returns key's value: the last handed out (after a restart, its
// stored mark), and whether key exists; or ErrNotServed while key's hash
// slot is closed (CloseSlot): a slot being taken may not hold its keys
// yet, nor their values as its last owner handed them out, and a read
// must never go back from a value a client has seen.
func (t *Table) TryGet(key string) (int64, bool, error) {
	sh, h := t.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch e := find(&sh.index, h, key); {
	case e == nil && t.closedSlots[slotOf(key)].Load(), e != nil && e.has(closed):
		return 0, false, ErrNotServed
	case e != nil && e.mayReply():
		return e.issued, true, nil
	}
	return 0, false, nil
}

// Get is TryGet that waits, up to Options.Wait, for key's slot to open
// (as Incr does): ErrNotServed if it did not.
func (t *Table) Get(key string) (int64, bool, error) {
	d := t.deadline()
	defer d.stop()
	for {
		v, ok, err := t.TryGet(key)
		if !errors.Is(err, ErrNotServed) || !t.awaitOpen(&d, key) {
			return v, ok, err
		}
	}
}

// Reserved is the end of what key has reserved on this server (its
// segments in hand; after a restart, its stored mark), and whether this
// server knows key.
func (t *Table) Reserved(key string) (int64, bool) {
	sh, h := t.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := find(&sh.index, h, key); e != nil {
		return e.end(), true
	}
	return 0, false
}

// Len is the number of keys: those whose existence is durable.
func (t *Table) Len() int { return int(t.keys.Load()) }

// entries is the number of keys made, born or not: what they cost in
// memory, bounded by MaxKeys.
func (t *Table) entries() int {
	t.bySlotMu.RLock()
	defer t.bySlotMu.RUnlock()
	return t.made
}

// Keys returns up to count keys from cursor on, slot by slot, each
// slot's in the order they came, and the cursor to go on from: 0 after
// the last. It examines count keys, returning those that exist
// (durable). A cursor is a place, slot << 32 | index in the slot's list:
// it holds no state, and stays valid for ever (a key present from the
// first call to the last is returned).
func (t *Table) Keys(cursor uint64, count int, keys []string) ([]string, uint64) {
	examined := make([]*entry, 0, min(count, 1024))
	slot, i := int(cursor>>32), int(cursor&math.MaxUint32)
	t.bySlotMu.RLock()
	for ; slot < slots.N && len(examined) < count; slot, i = slot+1, 0 {
		list := t.bySlot[slot]
		n := min(len(list)-i, count-len(examined))
		if n > 0 {
			examined = append(examined, list[i:i+n]...)
			if i += n; i < len(list) {
				break
			}
		}
	}
	t.bySlotMu.RUnlock()
	next := uint64(0)
	if slot < slots.N {
		next = uint64(slot)<<32 | uint64(i)
	}
	for _, e := range examined {
		sh := t.shardOfEntry(e)
		sh.mu.Lock()
		if e.mayReply() {
			keys = append(keys, e.key)
		}
		sh.mu.Unlock()
	}
	return keys, next
}

// Stop ends the background writes and hands nothing out any more, then
// releases the values reserved but not handed out (Backend.Release), so
// that a restart continues each key from its last value. It gives up
// releasing when ctx ends: the reservations stand, and a restart skips
// them.
func (t *Table) Stop(ctx context.Context) error {
	if t.stopped.Swap(true) {
		return nil
	}
	close(t.stop)
	<-t.done
	var marks []Mark
	t.each(func(e *entry) {
		if e.limit > e.issued || e.next.first != 0 {
			marks = append(marks, Mark{Key: e.key, Value: e.issued, Reserved: e.end(), Born: e.mayReply()})
		}
	})
	if len(marks) == 0 {
		return nil
	}
	return t.backend.Release(ctx, marks)
}

// each calls f for every entry, under its shard's lock.
func (t *Table) each(f func(e *entry)) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		sh.each(f)
		sh.mu.Unlock()
	}
}

// Stats are a Table's figures.
type Stats struct {
	Keys      int    // keys that exist (Len)
	Bytes     int64  // what the keys cost in memory, about
	Takes     uint64 // writes of reservations and SETs (each of many keys)
	Taken     uint64 // values reserved
	Issued    uint64 // values handed out (INCRBY n: n)
	Failures  uint64 // keys whose take failed
	Waits     uint64 // requests that waited for a take
	LastTake  int64  // unix ms of the last successful write; 0: none
	LastError string // of the last failed take; "" if none
}

// Stats returns t's figures.
func (t *Table) Stats() Stats {
	s := Stats{Keys: t.Len(), Bytes: t.bytes.Load(), Takes: t.takes.Load(), Taken: t.taken.Load(),
		Failures: t.failures.Load(), Waits: t.waits.Load(), LastTake: t.lastTake.Load()}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		s.Issued += sh.issued
		sh.mu.Unlock()
	}
	if p := t.lastErr.Load(); p != nil {
		s.LastError = *p
	}
	return s
}
