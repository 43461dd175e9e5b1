// Package idgen generates unique, time-ordered 63-bit IDs for sharded
// databases. It is pure: no I/O, no logging, and the clock is injected.
//
// An ID is a positive int64 (bit 63 is always 0):
//
//	62 ................... 21 | 20 ........ | ............ | ........ 0
//	  42-bit milliseconds    |  server-id   |    shard     |   random
//	  since the epoch        |  (id-range)  | (shard-range)|(random-range)
//
// id-range + shard-range + random-range = 21; the default is 2 / 9 / 10 with
// the epoch 2015-01-01 00:00 UTC+8, which lasts until the year 2154.
//
// A Generator's state is one counter u = ms<<S | shard (S = shard-range).
// Every ID consumes one unit: u_next = max(u_last+1, now_ms<<S). When a
// millisecond's 2^S shard slots are used up, u carries into the next
// millisecond ("borrowing ahead"); when the clock steps backwards, u simply
// continues. IDs of one Generator therefore never repeat and always increase,
// whatever the clock does. How far the time field may run ahead of the clock
// (the lead) is bounded by Settings.MaxLead; a forward step of the clock
// larger than that is followed only once it has held for StepConfirm.
//
// No ID's time field reaches the ceiling (Settings.Ceiling, then Raise):
// the reservation its owner stored durably (package reservation, or
// cluster in etcd), kept above Reach; a call that would pass it waits, and
// Demand tells the owner to hurry. So a restart that starts at the stored
// reservation continues above every ID issued before.
//
// The random field is taken in turn from a permutation of 0..2^R-1 shuffled
// with a cryptographic seed, so every 2^R consecutive IDs use each value
// exactly once: id mod 2^k (k <= R) is exactly even, and id mod N near-even,
// whatever the traffic pattern.
package idgen

import (
	crand "crypto/rand"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Bits is the width of everything below the time field.
const Bits = 21

// TimeBits is the width of the time field.
const TimeBits = 63 - Bits

// DefaultEpoch is 2015-01-01 00:00 UTC+8, the epoch of the Redis-based
// generator idserver replaces, so a site that switches keeps increasing IDs.
var DefaultEpoch = time.UnixMilli(1420041600000)

// DefaultLayout is the layout of the Redis-based generator idserver replaces.
var DefaultLayout = Layout{IDBits: 2, ShardBits: 9, RandomBits: 10}

// Defaults for the zero fields of Settings.
const (
	DefaultMaxLead = 5 * time.Second
	DefaultMaxWait = 100 * time.Millisecond
)

// ErrOverflow is wrapped by the errors of a generator whose 42-bit time
// field is used up: the clock or the reservation is at or past End.
var ErrOverflow = errors.New("the 42-bit time field is used up")

// ErrNotReserved is returned when IDs would pass the ceiling (the durable
// reservation) and no larger one arrived within MaxWait. It is wrapped
// with the cause once a write of the reservation failed (SetReserveFailure).
var ErrNotReserved = errors.New("IDs ahead are not yet reserved durably")

// reserveError is ErrNotReserved with why the latest write failed.
type reserveError struct{ why string }

func (e *reserveError) Error() string {
	return ErrNotReserved.Error() + ": the last write failed: " + e.why
}

func (e *reserveError) Is(target error) bool { return target == ErrNotReserved }

// ErrWouldWait is returned by TryNext and TryNextN when the call would
// have to wait, for the clock or for a larger Ceiling. Nothing was issued
// or counted: the same call to Next or NextN, on a goroutine that may
// block, waits and succeeds or fails as usual.
var ErrWouldWait = errors.New("the call would wait")

// ErrStopped is returned after Stop.
var ErrStopped = errors.New("generator stopped")

// ErrLeadExceeded is wrapped by every *LeadError.
var ErrLeadExceeded = errors.New("lead bound exceeded")

// LeadError is returned when issuing the requested IDs would put their time
// field more than MaxLead ahead of the clock, and waiting up to MaxWait did
// not help.
type LeadError struct {
	Lead       time.Duration // the lead the request would have needed
	Max        time.Duration // Settings.MaxLead
	RetryAfter time.Duration // when the clock will have caught up enough
}

// Error says how far ahead the request would have gone and when to retry.
func (e *LeadError) Error() string {
	b, _ := e.AppendText(nil)
	return string(b)
}

// AppendText appends Error's text to b, without allocating: a client
// flooding the lead bound is refused once per request, and formatting
// each refusal (fmt) was a sixth of what such a flood made the server
// allocate.
func (e *LeadError) AppendText(b []byte) ([]byte, error) {
	b = strconv.AppendInt(append(b, "lead "...), e.Lead.Milliseconds(), 10)
	b = strconv.AppendInt(append(b, "ms would exceed max-lead-ms "...), e.Max.Milliseconds(), 10)
	b = append(b, " (the clock is behind IDs already issued: borrowing ahead or a backward clock step); retry in "...)
	b = strconv.AppendInt(b, max(e.RetryAfter.Milliseconds(), 1), 10)
	return append(b, "ms"...), nil
}

// Unwrap makes errors.Is(err, ErrLeadExceeded) true.
func (e *LeadError) Unwrap() error { return ErrLeadExceeded }

// Layout is the split of the 21 low bits between server-id, shard and random.
type Layout struct {
	IDBits     int // id-range: width of the server-id field
	ShardBits  int // shard-range: width of the shard (sequence) field, >= 1
	RandomBits int // random-range: width of the random field
}

// Validate reports whether the widths add up to 21 and are each in range.
func (l Layout) Validate() error {
	switch {
	case l.IDBits < 0 || l.IDBits > Bits-1:
		return fmt.Errorf("id-range %d out of range 0..%d", l.IDBits, Bits-1)
	case l.ShardBits < 1 || l.ShardBits > Bits:
		return fmt.Errorf("shard-range %d out of range 1..%d", l.ShardBits, Bits)
	case l.RandomBits < 0 || l.RandomBits > Bits-1:
		return fmt.Errorf("random-range %d out of range 0..%d", l.RandomBits, Bits-1)
	case l.IDBits+l.ShardBits+l.RandomBits != Bits:
		return fmt.Errorf("id-range %d + shard-range %d + random-range %d = %d, must be %d",
			l.IDBits, l.ShardBits, l.RandomBits, l.IDBits+l.ShardBits+l.RandomBits, Bits)
	}
	return nil
}

// MaxServerID is the largest server-id the layout can hold.
func (l Layout) MaxServerID() int64 { return 1<<l.IDBits - 1 }

// Clock is where a Generator reads the time and waits at the lead bound.
// Tests set one to move time by hand.
type Clock interface {
	Now() time.Time        // the time now
	Sleep(d time.Duration) // waits d: at the lead bound, for the clock to catch up
}

// Settings configures a Generator. Zero fields mean the documented defaults.
type Settings struct {
	Layout   Layout    // zero means DefaultLayout
	Epoch    time.Time // zero means DefaultEpoch
	ServerID int64     // 0 .. Layout.MaxServerID()
	// MaxLead bounds how far an ID's time field may run ahead of the clock.
	// Zero means DefaultMaxLead.
	MaxLead time.Duration
	// MaxWait is how long a request may wait for the clock when it would
	// exceed MaxLead, or for a larger Ceiling. Zero means DefaultMaxWait;
	// negative means never wait.
	MaxWait time.Duration
	// Floor is a time field (ms since the epoch) no ID may have less than:
	// the reservation of an earlier run. Until the clock passes it, the
	// lead is counted from Floor, so a restart is not refused for it.
	Floor int64
	// Ceiling, when positive, is a time field no ID may reach until Raise
	// moves it up: the reservation that is durably on disk.
	Ceiling int64
	// ClockOffset shifts the clock (see SetClockOffset).
	ClockOffset time.Duration
	// Clock is the time source; nil means the system clock.
	Clock Clock
}

// Parts are the fields of an ID.
type Parts struct {
	Time     time.Time // the time field as wall-clock time (millisecond precision)
	ServerID int64     // the server-id field
	Shard    int64     // the shard field: the ID's place in its millisecond
	Random   int64     // the random field
}

// Stats is a snapshot of a Generator's counters.
type Stats struct {
	Issued      uint64        // IDs issued since New
	Lead        time.Duration // how far the last issued ID's time is ahead of the clock now (0 if not)
	MaxLeadSeen time.Duration // the largest lead any issued ID had
	Borrowed    uint64        // calls that issued IDs ahead of the clock
	ClockSteps  uint64        // times the clock was seen to step backwards
	LastStep    time.Duration // size of the latest backward step
	// ForwardSteps counts the forward steps of more than MaxLead the
	// generator held back (see StepConfirm); LastForwardStep is the size
	// of the latest, and StepHeld how far the clock is ahead of the time
	// the generator goes by now (0: it follows the clock).
	ForwardSteps    uint64
	LastForwardStep time.Duration
	StepHeld        time.Duration
	Refused         uint64        // calls refused with a *LeadError
	Waits           uint64        // calls that waited for the clock
	Ceiling         int64         // the reserved time field, ms since the epoch; 0: none
	Unreserved      uint64        // calls refused with ErrNotReserved
	BehindFloor     time.Duration // how far the clock still is behind Settings.Floor (0 once past it)
}

// Generator issues IDs. It is safe for concurrent use.
type Generator struct {
	layout     Layout
	epochMs    int64
	serverBits int64 // server-id, already shifted into place
	maxLeadMs  int64
	maxWaitMs  int64 // < 0: never wait
	shardMask  int64
	maxUnit    int64 // the last unit whose time field fits in 42 bits
	randMask   uint64
	table      []uint32 // permutation of 0..2^R-1, read-only after New

	read   func() time.Time // the clock
	sleep  func(time.Duration)
	offset atomic.Int64 // ms added to the clock (SetClockOffset)
	floor  int64        // Settings.Floor

	mu      sync.Mutex
	last    int64         // u of the last issued ID; -1 before the first
	lastNow int64         // the clock reading of the last call, to see steps back
	steps   steps         // how the clock is followed
	next    uint64        // index into table of the next ID
	ceiling int64         // no time field may reach it; math.MaxInt64: none
	raised  chan struct{} // closed and replaced when ceiling rises
	demand  chan struct{} // signalled when a call waits for the ceiling
	stopped bool
	stats   Stats
	failed  string // why the latest write of the reservation failed; "": it did not
}

// New returns a Generator for st, starting at the later of the clock and
// st.Floor. It fails when that is at or past the end of the time field.
func New(st Settings) (*Generator, error) {
	read, sleep := time.Now, time.Sleep
	if st.Clock != nil {
		read, sleep = st.Clock.Now, st.Clock.Sleep
	}
	if st.Layout == (Layout{}) {
		st.Layout = DefaultLayout
	}
	if err := st.Layout.Validate(); err != nil {
		return nil, err
	}
	if st.ServerID < 0 || st.ServerID > st.Layout.MaxServerID() {
		return nil, fmt.Errorf("server-id %d out of range 0..%d (id-range %d)",
			st.ServerID, st.Layout.MaxServerID(), st.Layout.IDBits)
	}
	if st.Epoch.IsZero() {
		st.Epoch = DefaultEpoch
	}
	if st.MaxLead == 0 {
		st.MaxLead = DefaultMaxLead
	}
	if st.MaxLead < time.Millisecond {
		return nil, fmt.Errorf("max lead %v must be at least 1ms", st.MaxLead)
	}
	if st.MaxWait == 0 {
		st.MaxWait = DefaultMaxWait
	}
	l := st.Layout
	g := &Generator{
		layout:     l,
		epochMs:    st.Epoch.UnixMilli(),
		serverBits: st.ServerID << (l.ShardBits + l.RandomBits),
		maxLeadMs:  st.MaxLead.Milliseconds(),
		maxWaitMs:  st.MaxWait.Milliseconds(),
		shardMask:  1<<l.ShardBits - 1,
		maxUnit:    int64(uint64(1)<<(TimeBits+l.ShardBits) - 1),
		randMask:   1<<l.RandomBits - 1,
		table:      shuffledTable(l.RandomBits),
		read:       read,
		sleep:      sleep,
	}
	if st.MaxWait < 0 {
		g.maxWaitMs = -1
	}
	g.offset.Store(st.ClockOffset.Milliseconds())
	g.floor = max(st.Floor, 0)
	g.ceiling = math.MaxInt64
	if st.Ceiling > 0 {
		g.ceiling = st.Ceiling
	}
	g.raised = make(chan struct{})
	g.demand = make(chan struct{}, 1)
	t := read()
	g.steps = steps{last: g.wall(t), anchor: g.wall(t), at: t}
	now := g.now()
	switch {
	case g.floor >= 1<<TimeBits:
		return nil, fmt.Errorf("%w: the reservation of an earlier run is at its end (%s): this layout and epoch can make no more IDs",
			ErrOverflow, g.End().UTC().Format(time.RFC3339))
	case now >= 1<<TimeBits:
		return nil, fmt.Errorf("%w: the clock is past its end (%s): the epoch is too old, or the clock too far ahead",
			ErrOverflow, g.End().UTC().Format(time.RFC3339))
	}
	g.lastNow = now
	// Unit 0 would be ID 0 (time 0, shard 0, random 0 when the table starts
	// there) if the clock were at or before the epoch: IDs start at unit 1.
	g.last = max(max(now, g.floor)<<l.ShardBits-1, 0)
	return g, nil
}

// shuffledTable returns a permutation of 0..2^bits-1 shuffled with a seed
// from crypto/rand, so the order of the random field differs at every start.
func shuffledTable(bits int) []uint32 {
	var seed [32]byte
	crand.Read(seed[:]) // never fails on Linux; see crypto/rand.Read
	r := rand.New(rand.NewChaCha8(seed))
	t := make([]uint32, 1<<bits)
	for i := range t {
		t[i] = uint32(i)
	}
	r.Shuffle(len(t), func(i, j int) { t[i], t[j] = t[j], t[i] })
	return t
}

// now is the time the generator goes by, in ms since the epoch: the
// clock, but for a large forward step not yet confirmed (see steps). It
// costs one clock reading. g.mu is held (or g is not yet shared).
func (g *Generator) now() int64 {
	t := g.read()
	return g.steps.follow(g.wall(t), t, g.maxLeadMs, &g.stats)
}

// wall is clock reading t, shifted by the offset, in ms since the epoch.
func (g *Generator) wall(t time.Time) int64 { return t.UnixMilli() + g.offset.Load() - g.epochMs }

// Now returns the time the generator goes by, in ms since its epoch.
func (g *Generator) Now() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now()
}

// SetClockOffset shifts the generator's clock by d (negative: back), as a
// clock step would; the generator treats it exactly as one. For tests of
// the whole server through its DEBUG command.
func (g *Generator) SetClockOffset(d time.Duration) { g.offset.Store(d.Milliseconds()) }

// ClockOffset returns the shift set by SetClockOffset.
func (g *Generator) ClockOffset() time.Duration {
	return time.Duration(g.offset.Load()) * time.Millisecond
}

// Reach returns how far the IDs need reserving: the larger of the clock and
// the time field of the next ID, in ms since the epoch. A reservation keeper
// keeps Ceiling comfortably above it.
func (g *Generator) Reach() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	// In uint64: after the very last unit, last+1 overflows an int64.
	return max(now, int64((uint64(g.last)+1)>>g.layout.ShardBits))
}

// Demand is signalled when a call waits for a larger Ceiling.
func (g *Generator) Demand() <-chan struct{} { return g.demand }

// Raise moves the ceiling up to t (ms since the epoch) once t is durably
// reserved, and wakes the calls waiting for it. A lower t is ignored.
func (g *Generator) Raise(t int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t <= g.ceiling || g.stopped {
		return
	}
	g.ceiling = t
	close(g.raised)
	g.raised = make(chan struct{})
}

// Stop stops the generator for good: later calls get ErrStopped. It
// returns the smallest time field (ms since the epoch) that no issued ID
// reached: what the final reservation stores, and a restart starts from.
func (g *Generator) Stop() (resumeAt int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	return (g.last >> g.layout.ShardBits) + 1
}

// Layout returns the generator's layout.
func (g *Generator) Layout() Layout { return g.layout }

// Epoch returns the generator's epoch.
func (g *Generator) Epoch() time.Time { return time.UnixMilli(g.epochMs) }

// End returns the first millisecond the time field cannot hold: the
// generator issues no ID from then on.
func (g *Generator) End() time.Time { return End(g.Epoch()) }

// End returns the first millisecond the time field of IDs with this epoch
// cannot hold.
func End(epoch time.Time) time.Time { return time.UnixMilli(epoch.UnixMilli() + 1<<TimeBits) }

// ServerID returns the generator's server-id.
func (g *Generator) ServerID() int64 {
	return g.serverBits >> (g.layout.ShardBits + g.layout.RandomBits)
}

// Next returns one new ID. At the lead bound or the ceiling it waits up
// to MaxWait.
func (g *Generator) Next() (int64, error) { return g.one(true) }

// TryNext is Next that never waits: where Next would, it returns
// ErrWouldWait. An event loop calls it, and Next elsewhere only then.
func (g *Generator) TryNext() (int64, error) { return g.one(false) }

func (g *Generator) one(mayWait bool) (int64, error) {
	u, k, err := g.reserve(1, mayWait)
	if err != nil {
		return 0, err
	}
	return g.compose(u, k), nil
}

// NextN fills dst with len(dst) new IDs, consecutive units reserved in one
// step, in increasing order. It allocates nothing. At the lead bound or
// the ceiling it waits up to MaxWait.
func (g *Generator) NextN(dst []int64) error { return g.nextN(dst, true) }

// TryNextN is NextN that never waits: where NextN would, it returns
// ErrWouldWait and dst is unchanged.
func (g *Generator) TryNextN(dst []int64) error { return g.nextN(dst, false) }

func (g *Generator) nextN(dst []int64, mayWait bool) error {
	if len(dst) == 0 {
		return nil
	}
	u, k, err := g.reserve(int64(len(dst)), mayWait)
	if err != nil {
		return err
	}
	for i := range dst {
		dst[i] = g.compose(u+int64(i), k+uint64(i))
	}
	return nil
}

func (g *Generator) compose(u int64, k uint64) int64 {
	return (u>>g.layout.ShardBits)<<Bits | g.serverBits |
		(u&g.shardMask)<<g.layout.RandomBits | int64(g.table[k&g.randMask])
}

// reserve takes n consecutive units and as many table slots. It returns the
// first unit and the first table index. Unless mayWait, it returns
// ErrWouldWait where it would wait.
func (g *Generator) reserve(n int64, mayWait bool) (int64, uint64, error) {
	// A batch starts where the clock is, at best, so one that alone spans
	// more than the bound can never be issued: no wait would help.
	if span := (n - 1) >> g.layout.ShardBits; span > g.maxLeadMs {
		return 0, 0, fmt.Errorf("%w: %d IDs take %dms of shard slots, more than max-lead-ms %d allows; ask for fewer",
			ErrLeadExceeded, n, span+1, g.maxLeadMs)
	}
	var waited int64 // ms, of max-wait
	for {
		g.mu.Lock()
		if g.stopped {
			g.mu.Unlock()
			return 0, 0, ErrStopped
		}
		// Read the clock under the lock: readings taken outside it can
		// arrive out of order and would look like backward steps.
		now := g.now()
		if now < g.lastNow {
			g.stats.ClockSteps++
			g.stats.LastStep = time.Duration(g.lastNow-now) * time.Millisecond
		}
		g.lastNow = now
		first, endMs, lead, err := g.place(now, n)
		if err != nil {
			g.mu.Unlock()
			return 0, 0, err
		}
		if lead > g.maxLeadMs {
			// The clock must reach endMs - maxLead: the floor does not
			// move, so behind it the wait is longer than the excess lead.
			wait := endMs - g.maxLeadMs - now
			if g.maxWaitMs < 0 || waited+wait > g.maxWaitMs {
				g.stats.Refused++
				g.mu.Unlock()
				return 0, 0, g.leadError(lead, wait)
			}
			if !mayWait {
				g.mu.Unlock()
				return 0, 0, ErrWouldWait
			}
			if waited == 0 {
				g.stats.Waits++
			}
			g.mu.Unlock()
			g.sleep(time.Duration(wait) * time.Millisecond)
			waited += wait
			continue
		}
		if endMs >= g.ceiling {
			raised := g.raised
			select {
			case g.demand <- struct{}{}:
			default: // already signalled
			}
			g.mu.Unlock()
			if !mayWait && g.maxWaitMs >= 0 {
				return 0, 0, ErrWouldWait
			}
			if !g.waitRaise(raised, &waited) {
				g.mu.Lock()
				g.stats.Unreserved++
				err := g.notReserved()
				g.mu.Unlock()
				return 0, 0, err
			}
			continue
		}
		g.last = first + n - 1
		k := g.next
		g.next += uint64(n)
		g.stats.Issued += uint64(n)
		if lead > 0 {
			g.stats.Borrowed++
			if d := time.Duration(lead) * time.Millisecond; d > g.stats.MaxLeadSeen {
				g.stats.MaxLeadSeen = d
			}
		}
		g.mu.Unlock()
		return first, k, nil
	}
}

// place finds where n IDs would go with the clock at now: their first
// unit, the time field of the last, and that field's lead over the clock.
// It fails where they would pass the end of the time field. g.mu is held.
func (g *Generator) place(now, n int64) (first, endMs, lead int64, err error) {
	// The unit before the batch: the last issued, or the one before the
	// clock's first. Checked before any +1: at shard-range 21 the last
	// unit is the largest int64, and last+1 would wrap round to repeat
	// IDs (and so would now<<21 past the end).
	prev := max(g.last, max(now, 0)<<g.layout.ShardBits-1)
	if now >= 1<<TimeBits || prev > g.maxUnit-n {
		return 0, 0, 0, g.overflow(n)
	}
	first = prev + 1
	endMs = (first + n - 1) >> g.layout.ShardBits
	// Until the clock passes the floor, count the lead from the floor:
	// the jump a restart makes to its reservation is not borrowing.
	return first, endMs, endMs - max(now, g.floor), nil
}

// Ready reports whether a call for one ID would be answered now without
// waiting: nil, or the error it would get (ErrStopped, the end of the time
// field, a *LeadError, ErrNotReserved). It issues and counts nothing.
// Readiness probes ask it.
func (g *Generator) Ready() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return ErrStopped
	}
	now := g.now()
	_, endMs, lead, err := g.place(now, 1)
	switch {
	case err != nil:
		return err
	case lead > g.maxLeadMs:
		return g.leadError(lead, endMs-g.maxLeadMs-now)
	case endMs >= g.ceiling:
		return g.notReserved()
	}
	return nil
}

// notReserved is ErrNotReserved, with why the last write failed if it
// did. g.mu is held.
func (g *Generator) notReserved() error {
	if g.failed == "" {
		return ErrNotReserved
	}
	return &reserveError{g.failed}
}

// ReserveFailure is why the latest write of the reservation failed; "":
// it did not.
func (g *Generator) ReserveFailure() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failed
}

// SetReserveFailure records why the latest write of the reservation
// failed, or "" once one succeeded: refusals for want of a reservation
// name the cause (a full disk, etcd's NOSPACE alarm).
func (g *Generator) SetReserveFailure(why string) {
	g.mu.Lock()
	g.failed = why
	g.mu.Unlock()
}

// leadError is the error for a call whose IDs would lead the clock by
// lead ms, which could be issued after waiting wait ms.
func (g *Generator) leadError(lead, wait int64) *LeadError {
	return &LeadError{
		Lead:       time.Duration(lead) * time.Millisecond,
		Max:        time.Duration(g.maxLeadMs) * time.Millisecond,
		RetryAfter: time.Duration(wait) * time.Millisecond,
	}
}

// overflow is the error for n IDs that would pass the end of the time field.
func (g *Generator) overflow(n int64) error {
	return fmt.Errorf("%w: %d more IDs would run past its end (%s)", ErrOverflow, n, g.End().UTC().Format(time.RFC3339))
}

// waitRaise waits for raised to close, within what is left of max-wait.
func (g *Generator) waitRaise(raised <-chan struct{}, waited *int64) bool {
	left := g.maxWaitMs - *waited
	if g.maxWaitMs < 0 || left <= 0 {
		return false
	}
	start := time.Now()
	t := time.NewTimer(time.Duration(left) * time.Millisecond)
	defer t.Stop()
	select {
	case <-raised:
		*waited += max(time.Since(start).Milliseconds(), 1)
		return true
	case <-t.C:
		return false
	}
}

// Stats returns a snapshot of the generator's counters.
func (g *Generator) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now() // first: it may count a forward step in g.stats
	s := g.stats
	if lead := g.last>>g.layout.ShardBits - now; lead > 0 {
		s.Lead = time.Duration(lead) * time.Millisecond
	}
	if behind := g.floor - now; behind > 0 {
		s.BehindFloor = time.Duration(behind) * time.Millisecond
	}
	if g.ceiling != math.MaxInt64 {
		s.Ceiling = g.ceiling
	}
	s.StepHeld = time.Duration(g.steps.ahead) * time.Millisecond
	return s
}

// Decode splits id into its fields under the generator's layout and epoch.
func (g *Generator) Decode(id int64) (Parts, error) {
	return Decode(id, g.layout, g.Epoch())
}

// Decode splits id into its fields under layout l and epoch.
func Decode(id int64, l Layout, epoch time.Time) (Parts, error) {
	if id < 0 {
		return Parts{}, fmt.Errorf("id %d is negative", id)
	}
	if err := l.Validate(); err != nil {
		return Parts{}, err
	}
	return Parts{
		Time:     time.UnixMilli(epoch.UnixMilli() + id>>Bits),
		ServerID: id >> (l.ShardBits + l.RandomBits) & (1<<l.IDBits - 1),
		Shard:    id >> l.RandomBits & (1<<l.ShardBits - 1),
		Random:   id & (1<<l.RandomBits - 1),
	}, nil
}

// Range returns the smallest and the largest ID that any generator of
// this layout and epoch can issue with a time field from first to last,
// both inclusive, for queries such as WHERE id BETWEEN lo AND hi.
func (g *Generator) Range(first, last time.Time) (lo, hi int64, err error) {
	return Range(g.layout, g.Epoch(), first, last)
}

// Range returns the smallest and the largest ID that any generator of
// layout l and epoch can issue with a time field from first to last, both
// inclusive. The first millisecond of the epoch has no ID with shard 0:
// the counter starts at unit 1, so that no ID is 0.
func Range(l Layout, epoch, first, last time.Time) (lo, hi int64, err error) {
	if err := l.Validate(); err != nil {
		return 0, 0, err
	}
	from, to := first.UnixMilli()-epoch.UnixMilli(), last.UnixMilli()-epoch.UnixMilli()
	switch {
	case from > to:
		return 0, 0, fmt.Errorf("the window starts after it ends (%d > %d)", first.UnixMilli(), last.UnixMilli())
	case from < 0 || to >= 1<<TimeBits:
		return 0, 0, fmt.Errorf("%w: a window must lie within %d..%d (%s .. %s)", ErrOutsideTimeField,
			epoch.UnixMilli(), End(epoch).UnixMilli()-1, epoch.UTC().Format(time.RFC3339), End(epoch).Add(-time.Millisecond).UTC().Format(time.RFC3339Nano))
	}
	lo, hi = from<<Bits, to<<Bits|(1<<Bits-1)
	if lo == 0 {
		lo = 1 << l.RandomBits // unit 1: shard 1, server-id 0, random 0
	}
	return lo, hi, nil
}

// ErrOutsideTimeField is wrapped by the error of Range for a window
// before the epoch or past the end of the time field.
var ErrOutsideTimeField = errors.New("outside the time field")
