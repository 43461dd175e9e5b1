package slotassign

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/etcdsession"
)

// Config configures a server's part in the assignment.
type Config struct {
	Prefix string // etcd-prefix, ending with "/"
	// TTL is etcd-lease-ttl: how long a range released at a graceful stop
	// waits for its node to come back, and how often a standby reads the
	// assignment again.
	TTL time.Duration
	// DialTimeout bounds a standby's read of the assignment.
	DialTimeout time.Duration
	Node        Node // what the server announces
	// Serve is given what the server serves each time that changes; nil
	// when it serves nothing.
	Serve func(*Serving)
	Log   zerolog.Logger // the server's logger
}

// A Participant is a server's part in the assignment: while it holds a
// server-id, its slot keeper (Keep); while it holds none, a view of the
// assignment in which it serves nothing (Observe).
type Participant struct {
	cfg Config

	mu      sync.Mutex  // keeping, and the standby's publishing (Observe)
	keeping *slotKeeper // the slot keeper that runs: it publishes what is served
}

// New returns the part in the assignment cfg describes.
func New(cfg Config) *Participant { return &Participant{cfg: cfg} }

// Keep runs the slot keeper of server-id id, held under lease l, until
// the function it returns is called: at a graceful stop (ctx ended) it
// hands the slots over first; after a loss it serves none at once.
func (p *Participant) Keep(ctx context.Context, cli *clientv3.Client, id int64, l *etcdsession.Lease) (stop func()) {
	kctx, cancel := context.WithCancel(ctx)
	k := &slotKeeper{cli: cli, k: slotKeys{prefix: p.cfg.Prefix}, id: id, l: l, self: p.cfg.Node,
		ttl: p.cfg.TTL, log: p.cfg.Log, publish: p.cfg.Serve,
		handing: make(chan chan struct{}), ended: make(chan struct{})}
	done := make(chan struct{})
	p.setKeeping(k)
	go func() {
		defer close(done)
		defer p.setKeeping(nil)
		k.run(kctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// setKeeping records the slot keeper that runs, nil when none does.
func (p *Participant) setKeeping(k *slotKeeper) {
	p.mu.Lock()
	p.keeping = k
	p.mu.Unlock()
}

// HandOver has this server hand its hash slots to the others now, while
// it still answers: at a graceful stop, its clients are then told -MOVED
// rather than find its port closed (go-redis reads the slots again only
// every minute, or on -MOVED). It returns once the slots are the others',
// or the hand-over's bound has passed, and reports whether it had any
// to hand (a standby has none).
func (p *Participant) HandOver() bool {
	p.mu.Lock()
	k := p.keeping
	p.mu.Unlock()
	if k != nil {
		k.handOver()
	}
	return k != nil
}

// Observe publishes, while no slot keeper runs (the server holds no
// server-id), the assignment as it stands with no slot served, every
// quarter of a TTL until ctx ends: a standby answers CLUSTER SLOTS as
// the others do, and sends every key to its owner. client is etcd's
// client, once connected.
func (p *Participant) Observe(ctx context.Context, client func() (*clientv3.Client, error)) {
	k := slotKeys{prefix: p.cfg.Prefix}
	tick := time.NewTicker(p.cfg.TTL / 4)
	defer tick.Stop()
	for {
		if cli, err := client(); err == nil {
			rctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
			v, err := readSlots(rctx, cli, k)
			cancel()
			p.mu.Lock()
			if err == nil && p.keeping == nil {
				p.cfg.Serve(&Serving{v: v, served: make([]bool, slotCount)})
			}
			p.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
