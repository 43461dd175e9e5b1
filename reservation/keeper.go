package reservation

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/ratelog"
)

// Store holds the State durably.
type Store interface {
	// Save stores s durably before it returns. It may give up when ctx
	// ends; s is then a floor that may or may not be stored.
	Save(ctx context.Context, s State) error
}

// Keeper renews a generator's reservation in the background.
type Keeper struct {
	gen     *idgen.Generator
	store   Store
	base    State // identity written with every reservation
	reserve int64 // ms of reservation kept ahead
	log     zerolog.Logger

	saves    atomic.Uint64
	failures atomic.Uint64
	lastSave atomic.Int64 // duration of the last successful Save, ns

	ctx  context.Context // of the renewals: Close ends it, so it never waits behind one
	stop context.CancelFunc
	done chan struct{}

	failLog ratelog.ByText // run's own
}

// Stats are a Keeper's counters.
type Stats struct {
	Saves    uint64        // reservations written
	Failures uint64        // failed writes
	LastSave time.Duration // how long the last successful write took
}

// Start writes a first reservation of reserve ahead of gen.Reach() and
// keeps renewing it until Close. base gives the identity stored with it.
// It fails, and gen may issue nothing, when that first write fails: a
// server that cannot persist must not start.
func Start(gen *idgen.Generator, store Store, base State, reserve time.Duration, log zerolog.Logger) (*Keeper, error) {
	k := &Keeper{
		gen:     gen,
		store:   store,
		base:    base,
		reserve: max(reserve.Milliseconds(), 1),
		log:     log,
		done:    make(chan struct{}),
	}
	k.ctx, k.stop = context.WithCancel(context.Background())
	if err := k.renew(); err != nil {
		k.stop()
		return nil, err
	}
	go k.run()
	return k, nil
}

// needed reports whether the reservation should be renewed now: when less
// than half of it is left ahead of what the generator may issue next, and
// it does not yet cover the whole time field.
func (k *Keeper) needed() bool {
	ceiling := k.gen.Stats().Ceiling
	return ceiling < endOfField && k.gen.Reach()+k.reserve/2 >= ceiling
}

// endOfField is the largest reservation worth storing: no time field
// reaches it. A larger one would stop the next start.
const endOfField = 1 << idgen.TimeBits

func (k *Keeper) renew() error {
	s := k.base
	// Never store less than the ceiling in force: IDs up to it may be out
	// already. (The clock can step back between needed and here.)
	s.Reserved = min(max(k.gen.Reach()+k.reserve, k.gen.Stats().Ceiling), endOfField)
	start := time.Now()
	if err := k.store.Save(k.ctx, s); err != nil {
		if k.ctx.Err() != nil {
			return err // Close cut it short: not a failure of the store
		}
		k.failures.Add(1)
		k.gen.SetReserveFailure(err.Error())
		return fmt.Errorf("reserve IDs up to %d: %w", s.Reserved, err)
	}
	k.gen.SetReserveFailure("")
	k.lastSave.Store(int64(time.Since(start)))
	k.saves.Add(1)
	k.gen.Raise(s.Reserved)
	return nil
}

// run renews on a tick of an eighth of the reservation, and at once when a
// request is waiting for it. A failing store is retried on every tick;
// each failure is logged with its error, at most once a ratelog.Every
// per distinct error.
func (k *Keeper) run() {
	defer close(k.done)
	t := time.NewTicker(min(max(time.Duration(k.reserve)*time.Millisecond/8, 5*time.Millisecond), 250*time.Millisecond))
	defer t.Stop()
	failed := 0 // writes failed in a row
	for {
		select {
		case <-k.ctx.Done():
			return
		case <-t.C:
		case <-k.gen.Demand():
		}
		if !k.needed() {
			continue
		}
		err := k.renew()
		switch {
		case err != nil && k.ctx.Err() == nil:
			failed++
			if ok, held := k.failLog.Allow(err.Error(), time.Now()); ok {
				k.log.Error().Err(err).Int("failed_in_a_row", failed).Int("same_error_not_logged", held).
					Msg("cannot renew the reservation; requests past it get -BUSY until a write succeeds")
			}
		case err == nil && failed > 0:
			k.log.Info().Int("failed_in_a_row", failed).Msg("reservation renewed again")
			failed = 0
		}
	}
}

// Close stops renewing, cutting short a renewal under way, stops the
// generator, and stores the exact point a restart must start from, giving
// up when ctx ends (the last reservation stored then stands: it is above
// every ID issued). After Close the generator issues nothing.
func (k *Keeper) Close(ctx context.Context) error {
	k.stop()
	<-k.done
	s := k.base
	s.Reserved = k.gen.Stop()
	if err := k.store.Save(ctx, s); err != nil {
		return fmt.Errorf("store the final reservation %d: %w", s.Reserved, err)
	}
	k.saves.Add(1)
	return nil
}

// Stats returns the keeper's counters.
func (k *Keeper) Stats() Stats {
	return Stats{Saves: k.saves.Load(), Failures: k.failures.Load(), LastSave: time.Duration(k.lastSave.Load())}
}
