package seqslots

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/sequence"
	"github.com/idserver/idserver/slots"
)

// Table is what the engine needs of the sequences' table
// (sequence.Table): a slot's keys closed to INCR and SET while the slot
// is not served, dropped, dumped and loaded.
type Table interface {
	CloseSlot(slot int)
	LetGoSlot(slot int)
	OpenSlot(slot int)
	DropSlot(slot int) int
	SlotMarks(slot, from, budget int) (marks []sequence.Mark, next, used int)
	LoadSlot(ctx context.Context, marks []sequence.Mark) error
}

// Store is what the engine needs of the local File beside the values:
// the generation at which it holds each slot's keys.
type Store interface {
	SlotGens() map[int]int64
	SetSlotGens(ctx context.Context, gens map[int]int64) error
	SlotTakes() map[int][]byte
	SetSlotTakes(takes map[int][]byte) error
}

// A Puller fetches from owner, a live server that let slots go, the
// exact last value of each key of each slot it can hand over, and the
// generation at which it held them (Engine.Handover on the owner).
type Puller func(ctx context.Context, owner int64, slots []int) ([]sequence.Handed, error)

// An Asker asks every other live server what it saw of the records of
// slots (Known.Seen on each), within ctx, and returns each answer (a
// record by slot, as Seen gives it); a server that does not answer is
// left out.
type Asker func(ctx context.Context, slots []int) []map[int]string

// pull pulls list from owner into out.
func (e *Engine) pull(ctx context.Context, owner int64, list []int, out map[int]sequence.Handed) error {
	pctx, cancel := context.WithTimeout(ctx, pullWait)
	defer cancel()
	askAgainUntil := time.Now().Add(askWait) // a take's writes last well under it
	for {
		handed, err := e.cfg.Pull(pctx, owner, list)
		if err != nil {
			return err
		}
		var again []int
		for _, h := range handed {
			switch {
			case h.Gen > 0:
				out[h.Slot] = h
			case h.Gen == sequence.GenTaking:
				again = append(again, h.Slot)
			}
		}
		if len(again) == 0 {
			return nil
		}
		// The old owner's own take of them is not recorded yet: it
		// answers once it is (within its take, under a second).
		list = again
		if time.Now().After(askAgainUntil) || !sleep(pctx, 20*time.Millisecond) {
			return fmt.Errorf("%d slots still being taken by their old owner after %v", len(again), askWait)
		}
	}
}

// pullWait bounds a pull from one old owner that answers (the Puller
// gives up within a second on one that does not): past it, its slots are
// taken as after a crash. A slot of 100,000 keys of 512 bytes is 51 MB,
// in pages (e2e TestBoundsHandover).
const pullWait = 8 * time.Second

// askWait bounds the ask of what the other servers saw of the records.
const askWait = time.Second

// EngineConfig configures an Engine.
type EngineConfig struct {
	Store Store  // the generations of the slots' keys held here
	Pull  Puller // brings a slot's keys from its old owner
	Ask   Asker  // what the other servers saw of the records
	// Wait bounds a take of the slots that become this server's, and a
	// pull from their old owner.
	Wait time.Duration
	Log  zerolog.Logger // the server's logger
}

// Engine moves the slots' keys in and out of this server's table as the
// assignment gives slots to it and takes them away (docs/cluster.md, How
// a slot changes owner): it takes each slot that becomes its in etcd
// (Slots.Take) the one way its store allows, and opens it to INCR only
// then; it closes a slot that moves away at once, and keeps its keys a
// while for the new owner to pull.
type Engine struct {
	cfg   EngineConfig
	table Table
	gate  *Gate // its slots are those the engine takes and lets go

	mu       sync.Mutex
	served   []bool            // what the assignment gives this server
	released map[int]time.Time // slots let go whose keys are kept for a pull
	unpulled map[int]bool      // slots this run let go whose keys no new owner pulled yet
	taking   map[int]bool      // slots this server's take is writing (setTaking)
	jobs     chan []int        // slots to take, one batch at a time
	// old is the previous version's marks by slot, once read (oldRead),
	// less those taken over: the run goroutine's.
	old     map[int][]sequence.Mark
	oldRead bool
	stop    chan struct{}
	done    chan struct{}
}

// releaseKeep is how long the keys of a slot that moved away are kept
// for the new owner to pull them.
const releaseKeep = 30 * time.Second

// NewEngine returns the engine of table; every slot is closed until the
// assignment gives it to this server and it is taken. The slots whose
// keys the store holds are kept for a pull, as if just let go.
func NewEngine(cfg EngineConfig, table Table, gate *Gate) *Engine {
	e := &Engine{cfg: cfg, table: table, gate: gate, served: make([]bool, slots.N), released: map[int]time.Time{}, unpulled: map[int]bool{}, taking: map[int]bool{},
		jobs: make(chan []int, 64), stop: make(chan struct{}), done: make(chan struct{})}
	for s := range slots.N {
		table.CloseSlot(s)
	}
	for s, gen := range cfg.Store.SlotGens() {
		if gen > 0 {
			e.released[s] = time.Now()
		}
	}
	go e.run()
	return e
}

// Serve is given the slots the assignment gives this server (nil: none),
// each time that changes. A slot that moves away is closed before Serve
// returns: no value of it is handed out after, here.
func (e *Engine) Serve(now []bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var gained []int
	var gens map[int]int64 // read once a slot is let go
	for s := range slots.N {
		on := now != nil && now[s]
		switch {
		case on && !e.served[s]:
			e.table.CloseSlot(s) // its requests wait for its take (if it moved away before)
			gained = append(gained, s)
		case !on && e.served[s]:
			e.table.LetGoSlot(s)
			e.gate.drop(s)
			e.released[s] = time.Now()
			if gens == nil {
				gens = e.cfg.Store.SlotGens()
			}
			// Only a slot this server holds keys of is pulled: one it was
			// given and let go before it took it, none (a graceful stop
			// waited 3 s so for the 8,192 slots a joiner took at once).
			if gens[s] > 0 {
				e.unpulled[s] = true
			}
		case on:
			delete(e.unpulled, s)
		}
		e.served[s] = on
	}
	if len(gained) > 0 {
		select {
		case e.jobs <- gained:
		default: // full: the next tick takes whatever is served and closed
		}
	}
}

// Attach makes s, the slot records of the server-id this server holds
// now, those it takes slots in.
func (e *Engine) Attach(s *Slots) {
	s.OnLost(e.lost)
	e.gate.Use(s)
}

// lost closes at once the slots this server found another took (or
// their records gone): no value of them goes out from a segment in hand
// meanwhile, and the served ones are taken again (from the records as
// they are) at the next look.
func (e *Engine) lost(list []int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range list {
		e.table.CloseSlot(s)
	}
}

// Detach closes every slot: the server holds no server-id any more.
func (e *Engine) Detach() {
	e.Serve(nil)
	e.gate.Use(nil)
}

// Handover answers a pull of slots, a page of at most about budget
// bytes: for each slot of list in turn that this server no longer serves
// and holds, its keys' exact values from place from in the first slot's
// keys (the places after in the others'), and the generation at which it
// held them; Gen 0 for the others, sequence.GenTaking for those its own
// take is writing (ask again: setTaking). It stops at a slot whose keys pass
// the budget (its Next says where its next page starts) or once the
// budget is spent: the slots left out are asked for again
// (seqpull.Gather).
func (e *Engine) Handover(from int, list []int, budget int) []sequence.Handed {
	e.mu.Lock()
	defer e.mu.Unlock()
	gens := e.cfg.Store.SlotGens()
	var out []sequence.Handed
	for _, s := range list {
		h := sequence.Handed{Slot: s}
		if e.taking[s] {
			h.Gen = sequence.GenTaking
		} else if _, ok := e.released[s]; ok && !e.served[s] && gens[s] > 0 {
			var used int
			h.Gen = gens[s]
			h.Marks, h.Next, used = e.table.SlotMarks(s, from, budget)
			budget -= used
			if h.Next == 0 {
				delete(e.unpulled, s)
			}
		}
		out = append(out, h)
		if h.Next > 0 || budget <= 0 {
			break
		}
		from = 0 // the next slot's keys from their first
	}
	return out
}

// settleFor bounds how long a slot let go is answered -TRYAGAIN while
// its new owner has not pulled its keys (Settling).
const settleFor = time.Second

// Settling reports whether slot, let go by this server under settleFor
// ago, has not been pulled by its new owner yet.
func (e *Engine) Settling(slot int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.unpulled[slot] && time.Since(e.released[slot]) < settleFor
}

// AwaitHandedOver returns once the new owners of the slots this server
// let go pulled their keys, or ctx ends: at a graceful stop, so that
// they continue each key exactly.
func (e *Engine) AwaitHandedOver(ctx context.Context) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	gens := e.cfg.Store.SlotGens()
	for {
		n := e.awaiting(gens)
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			e.cfg.Log.Info().Int("slots", n).Msg("sequences: slots not pulled by their new owners in time; their keys continue above their ceilings")
			return
		case <-tick.C:
		}
	}
}

// awaiting returns how many slots let go are still to be pulled by their
// new owners. One that its new owner took without a pull (it failed, or
// came after the owner's pull deadline), as the records this server
// follows show (a generation above the one gens says it holds), is no
// longer: its keys continue above its ceiling there.
func (e *Engine) awaiting(gens map[int]int64) int {
	cur := e.gate.cur.Load()
	e.mu.Lock()
	defer e.mu.Unlock()
	if cur != nil {
		for s := range e.unpulled {
			if cur.known.get(s).Gen > gens[s] {
				delete(e.unpulled, s)
			}
		}
	}
	return len(e.unpulled)
}

// Stop ends the engine's work.
func (e *Engine) Stop() {
	select {
	case <-e.stop:
	default:
		close(e.stop)
	}
	<-e.done
}

// run takes the slots that become this server's, one batch at a time,
// and drops the keys of slots let go long enough ago.
func (e *Engine) run() {
	defer close(e.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	pending := map[int]bool{}
	for {
		select {
		case <-e.stop:
			return
		case batch := <-e.jobs:
			for _, s := range batch {
				pending[s] = true
			}
		case <-tick.C:
			e.expire()
			for _, s := range e.unowned() {
				pending[s] = true
			}
		}
		if len(pending) == 0 {
			continue
		}
		left := e.takeServed(slices.Sorted(maps.Keys(pending)))
		clear(pending)
		for _, s := range left {
			pending[s] = true
		}
	}
}

// unowned closes, and returns, the slots served whose record another
// write changed under this server (another server took it, or the
// record was deleted): they are taken again, from the record as it is.
func (e *Engine) unowned() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []int
	for s, on := range e.served {
		if _, owned := e.gate.owned(s); on && !owned {
			e.table.CloseSlot(s)
			out = append(out, s)
		}
	}
	return out
}

// expire drops the keys of the slots let go over releaseKeep ago.
func (e *Engine) expire() {
	e.mu.Lock()
	var gone []int
	for s, at := range e.released {
		if time.Since(at) > releaseKeep && !e.served[s] {
			gone = append(gone, s)
			delete(e.released, s)
		}
	}
	e.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	gens := map[int]int64{}
	for _, s := range gone {
		e.table.DropSlot(s)
		gens[s] = 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.Wait)
	defer cancel()
	if err := e.cfg.Store.SetSlotGens(ctx, gens); err != nil {
		// Its keys are dropped from the table; the file's say it holds
		// them at a generation no other server can have... but a take
		// of the slot again finds the generation moved on, or, if it
		// did not, finds the keys in the file at their marks.
		e.cfg.Log.Warn().Err(err).Msg("sequences: could not record slots let go")
	}
}

// takeServed takes those of slots still served, and returns those it
// could not take yet (tried again at the next tick).
func (e *Engine) takeServed(list []int) (left []int) {
	e.mu.Lock()
	list = slices.DeleteFunc(list, func(s int) bool { return !e.served[s] })
	e.mu.Unlock()
	if len(list) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.Wait)
	defer cancel()
	if err := e.take(ctx, list); err != nil {
		e.cfg.Log.Warn().Err(err).Int("slots", len(list)).Msg("sequences: slots not taken yet; trying again")
		return list
	}
	return nil
}

// take takes slots in etcd, each the one way this server's store allows,
// brings their keys into the table as that way says, records the
// generation at which the store holds them, and opens them.
func (e *Engine) take(ctx context.Context, list []int) error {
	cur := e.gate.cur.Load()
	if cur == nil {
		return errors.New("this server holds no server-id")
	}
	if n, err := cur.oldServers(ctx); err != nil {
		return err
	} else if n > 0 {
		return fmt.Errorf("%d server(s) of the previous version (per-key marks in etcd) run on this etcd prefix: stop every one; sequences are served once none runs (docs/cluster.md, Upgrading from per-key marks)", n)
	}
	gens := e.cfg.Store.SlotGens()
	recs, _, err := cur.Read(ctx, list)
	if err != nil {
		return err
	}
	e.askOthers(ctx, cur, list)
	// Whom to pull from, and how to take, is decided on the highest
	// record seen of each slot; the take writes only if it is still that
	// (decidedOn, below).
	decidedOn := map[int]int64{}
	for i, slot := range list {
		recs[i] = higher(recs[i], cur.known.get(slot))
		decidedOn[slot] = recs[i].Gen
	}
	e.ownTakes(gens, list, recs)
	pulled := e.pullAll(ctx, cur.owner, list, recs, gens)
	imported, err := e.imports(ctx, cur, list, recs)
	if err != nil {
		return err
	}
	for slot, marks := range imported {
		pulled[slot] = sequence.Handed{Slot: slot, Marks: marks} // Gen 0: taken as handed over if still never taken
	}
	decided := map[int]How{}
	// From the write of the records to that of the generations, not
	// before: a take waits for its pulls, and two servers each pulling
	// from the other while marked would wait each other out.
	e.setTaking(list, true)
	defer e.setTaking(list, false)
	taken, err := cur.Take(ctx, list, func(slot int, prev Record) (How, int64, bool) {
		how, ceil := Crashed, int64(0)
		switch p, ok := pulled[slot]; {
		case gens[slot] > 0 && gens[slot] == prev.Gen:
			how = Current
		case ok && p.Gen == prev.Gen:
			// Handed over by a live owner, or the previous version's
			// marks: the ceiling at once above each (were the load to
			// fail, a take as after a crash then floors every key
			// above them).
			how = HandedOver
			for _, m := range p.Marks {
				ceil = max(ceil, m.Value+1)
			}
		}
		if how == Crashed && prev.Gen != decidedOn[slot] {
			// Another server took the slot since the pull was decided (a
			// joiner read no record, pulled nothing, and took the slot as
			// after a crash from the record the first owner had just
			// written: its keys at 1001): looked at again (unowned), not
			// taken so.
			return how, 0, false
		}
		decided[slot] = how
		return how, ceil, e.serves(slot)
	}, e.intend)
	if err != nil {
		return fmt.Errorf("take slots: %w", err)
	}
	if err := e.flagImported(ctx, cur, imported, taken); err != nil {
		return err
	}
	newGens := map[int]int64{}
	for slot, rec := range taken {
		if err := e.bring(ctx, slot, decided[slot], pulled[slot].Marks); err != nil {
			// Not one key of it is to be trusted: taken again as after a
			// crash, its keys above its ceiling.
			e.cfg.Log.Error().Err(err).Int("slot", slot).Msg("sequences: the keys handed over could not be stored; the slot is taken as after a crash")
			again, err := cur.Take(ctx, []int{slot}, func(int, Record) (How, int64, bool) { return Crashed, 0, e.serves(slot) }, nil)
			if err != nil {
				return fmt.Errorf("take slot %d again: %w", slot, err)
			}
			e.table.DropSlot(slot)
			rec = again[slot]
			taken[slot] = rec
		}
		newGens[slot] = rec.Gen
	}
	if err := e.cfg.Store.SetSlotGens(ctx, newGens); err != nil {
		return fmt.Errorf("record the slots taken: %w", err)
	}
	e.open(slices.Collect(maps.Keys(taken)))
	var n [3]int
	for slot := range taken {
		n[decided[slot]]++
	}
	e.cfg.Log.Info().Int("current", n[Current]).Int("handed_over", n[HandedOver]).Int("crashed", n[Crashed]).
		Msg("sequences: slots taken: those handed over or current continue each key exactly, the others above their ceilings")
	return nil
}

// ownTakes counts, in gens, the slots of list whose record (recs) a take
// of this server wrote, as its store recorded before the write (intend),
// as held at the record's generation: the take ended before the store
// recorded that generation (a full disk, a kill), and no server served
// the slot since (its take would have written another), so the store's
// keys are exact. (Taken as after a crash instead, every key of the
// slot was dropped: a key a client had values of read as missing.)
func (e *Engine) ownTakes(gens map[int]int64, list []int, recs []Record) {
	takes := e.cfg.Store.SlotTakes()
	for i, slot := range list {
		b := takes[slot]
		if len(b) != 16 {
			continue
		}
		gen, token := int64(binary.BigEndian.Uint64(b)), binary.BigEndian.Uint64(b[8:])
		if token != 0 && token == recs[i].Take && gen == recs[i].Gen {
			gens[slot] = gen
		}
	}
}

// intend stores, before a take writes them, what ownTakes compares of
// the records of the slots it takes Current (Slots.Take): each one's Gen
// and Take, 16 bytes (16,384 of them at every restart, in one write).
func (e *Engine) intend(recs map[int]Record) error {
	takes := make(map[int][]byte, len(recs))
	for slot, r := range recs {
		takes[slot] = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(r.Gen)), r.Take)
	}
	return e.cfg.Store.SetSlotTakes(takes)
}

// setTaking records that this server's take of list is writing (on), or
// is over: a pull of one of them meanwhile is asked to come again
// (Handover), for the take has written the slot's record in etcd, naming
// this server its owner, before its file records the keys' generation
// (a joiner pulled then, was answered "none", and took the slot as after
// a crash: a new key's first INCR gave 1001).
func (e *Engine) setTaking(list []int, on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range list {
		if on {
			e.taking[s] = true
		} else {
			delete(e.taking, s)
		}
	}
}

// askOthers has cur take each slot of list from the highest record any
// other live server saw of it, beside etcd's and this server's own:
// etcd's may be below what was handed out (a record deleted by hand or
// with the prefix, etcd restored from an older snapshot, or put back by
// a server that saw less than another), and this server may have seen
// nothing of it (a new dir) or less (it was down). A server that saw it
// puts it back in etcd itself, but a take may come first: values of a
// key were handed out twice so under e2e
// TestClusterSequencesEtcdLosesData, from 2 after the prefix was deleted,
// and from a stale record another server had put back.
func (e *Engine) askOthers(ctx context.Context, cur *Slots, list []int) {
	if e.cfg.Ask == nil {
		return
	}
	asked := map[int]bool{}
	for _, slot := range list {
		asked[slot] = true
	}
	actx, cancel := context.WithTimeout(ctx, askWait)
	defer cancel()
	for _, answer := range e.cfg.Ask(actx, list) {
		for slot, text := range answer {
			rec, err := unmarshal([]byte(text))
			if err != nil || !asked[slot] {
				e.cfg.Log.Warn().Err(err).Int("slot", slot).Msg("sequences: a server's answer of what it saw of a slot is not one asked for; ignored")
				continue
			}
			cur.seen(slot, rec, 0)
		}
	}
}

// bring puts slot's keys in the table as how says: kept (current),
// loaded from the old owner's (handed over), or none (crashed: each
// continues above the slot's floor).
func (e *Engine) bring(ctx context.Context, slot int, how How, marks []sequence.Mark) error {
	e.mu.Lock()
	delete(e.released, slot)
	e.mu.Unlock()
	if how == Current {
		return nil
	}
	e.table.DropSlot(slot)
	if how == HandedOver {
		return e.table.LoadSlot(ctx, marks)
	}
	return nil
}

// imports returns the previous version's marks of the slots of list that
// no server ever took (no record), read once per engine (the first start
// of this version on a cluster of the previous one takes every slot).
func (e *Engine) imports(ctx context.Context, cur *Slots, list []int, recs []Record) (map[int][]sequence.Mark, error) {
	out := map[int][]sequence.Mark{}
	for i, slot := range list {
		if recs[i].Gen != 0 {
			continue
		}
		if !e.oldRead {
			old, err := cur.readOldMarks(ctx)
			if err != nil {
				return nil, err
			}
			e.old, e.oldRead = old, true
		}
		if marks := e.old[slot]; len(marks) > 0 {
			out[slot] = marks
		}
	}
	return out, nil
}

// flagImported flags lost, in etcd, the previous version's marks of the
// slots taken with them, and forgets them.
func (e *Engine) flagImported(ctx context.Context, cur *Slots, imported map[int][]sequence.Mark, taken map[int]Record) error {
	var marks []sequence.Mark
	for slot := range taken {
		marks = append(marks, imported[slot]...)
	}
	if len(marks) == 0 {
		return nil
	}
	if err := cur.flagOldMarks(ctx, marks); err != nil {
		return err
	}
	for slot := range taken {
		delete(e.old, slot)
	}
	e.cfg.Log.Info().Int("keys", len(marks)).Msg("sequences: keys of the previous version (per-key marks in etcd) taken over, each above its mark; their marks are flagged lost for the previous version")
	return nil
}

// serves reports whether the assignment gives slot to this server now:
// a take of a slot that moved away meanwhile is not written (its new
// owner takes it).
func (e *Engine) serves(slot int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.served[slot]
}

// open opens the slots taken that are still served; the others are let
// go again.
func (e *Engine) open(taken []int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range taken {
		if e.served[s] {
			e.table.OpenSlot(s)
		} else {
			e.gate.drop(s)
			e.released[s] = time.Now()
		}
	}
}

// pullAll pulls, from each live server that owned some of list at
// their records' generation, those this server does not hold at it.
func (e *Engine) pullAll(ctx context.Context, self int64, list []int, recs []Record, gens map[int]int64) map[int]sequence.Handed {
	out := map[int]sequence.Handed{}
	if e.cfg.Pull == nil {
		return out
	}
	byOwner := map[int64][]int{}
	for i, slot := range list {
		r := recs[i]
		if r.Owner >= 0 && r.Owner != self && (gens[slot] == 0 || gens[slot] != r.Gen) {
			byOwner[r.Owner] = append(byOwner[r.Owner], slot)
		}
	}
	for owner, list := range byOwner {
		if err := e.pull(ctx, owner, list, out); err != nil {
			e.cfg.Log.Info().Err(err).Int("slots", len(list)).Int64("owner", owner).Msg("sequences: slots not handed over; their keys continue above their ceilings")
		}
	}
	return out
}
