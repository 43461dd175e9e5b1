package etcdsession

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A Lease is an etcd lease that this process keeps alive itself, in the
// spirit of etcd's concurrency.Session, but knowing how long the lease
// surely has: it renews it with one request at a time (KeepAliveOnce),
// each a third of its Horizon after the last that etcd granted, and
// counts each renewal's deadline from when its request was sent (etcd
// counts the TTL from when it got it, later). A keep-alive stream
// (clientv3's KeepAlive, which etcd's concurrency.Session uses) hides
// when it stalls on a member that froze, and its replies do not say when
// their request went; a request of its own may reach another member.
//
// The serving horizon, for what must have one holder at a time in real
// time (a hash slot): the holder acts on the lease only while
// HorizonLeft is positive, that is until Horizon after the request of
// its last successful renewal was sent, and whoever takes over from it
// waits Horizon after it first saw the lease gone from etcd (expired or
// revoked by hand: it cannot tell which). That renewal reached etcd
// while etcd had the lease (etcd renews no lease it has not), so the
// lease went after it was sent: the holder has stopped by the time the
// other starts. The horizon is at most the TTL, so a dead holder's
// place is taken a TTL plus the horizon after its last renewal, not two
// TTLs; renewed every third of it, a holder that reaches etcd never sees
// it lapse.
//
// What a lease fences (a server-id's claim, a hash slot) is safe on one
// timing assumption, stated here once: this process's clock runs no
// slower than etcd's, nor than the other servers', over a TTL, by more
// than the margin its users keep back from Left and HorizonLeft.
type Lease struct {
	cli     *clientv3.Client
	id      clientv3.LeaseID
	ttl     time.Duration // as granted first
	horizon time.Duration // Horizon, or the TTL if shorter
	timeout time.Duration // of one renewal

	// horizonEnd is when the request of its last renewal (or its grant)
	// was sent, plus horizon, in nanoseconds of the monotonic clock
	// since clockBase: HorizonLeft reads it on every request of a
	// slot owner's, without the lock.
	horizonEnd atomic.Int64

	mu       sync.Mutex
	deadline time.Time // when etcd may expire it unless renewed
	lost     chan struct{}
	why      string // why it is lost, once lost is closed
}

// Grant takes a lease of ttl from etcd; each renewal of it (Keep) waits
// at most timeout.
func Grant(ctx context.Context, cli *clientv3.Client, ttl, timeout time.Duration) (*Lease, error) {
	sent := time.Now()
	resp, err := cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return nil, err
	}
	l := &Lease{cli: cli, id: resp.ID, ttl: time.Duration(resp.TTL) * time.Second, timeout: timeout, lost: make(chan struct{})}
	l.horizon = min(Horizon, l.ttl)
	l.deadline = sent.Add(l.ttl)
	l.horizonEnd.Store(int64(sent.Add(l.horizon).Sub(clockBase)))
	return l, nil
}

// Horizon is the serving horizon (see Lease): a holder acts on its lease
// until Horizon after its last renewal was sent (or its TTL, if
// shorter), and whoever takes its place waits Horizon after it saw the
// lease gone. It is one constant, not each lease's own, so that no
// server's wait depends on its config agreeing with the others'. 2 s:
// three renewals in it, one every 667 ms, each given a third of it; on
// etcd-lease-ttl's 5 s default, a failover of about 7 s.
const Horizon = 2 * time.Second

// Keep renews l until ctx ends or l is lost: etcd says it expired or was
// revoked, its deadline passed without a renewal, or Revoke or End was
// called.
func (l *Lease) Keep(ctx context.Context) {
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		left := l.Left()
		if left <= 0 {
			l.End("no lease renewal from etcd for " + l.ttl.String() + " (etcd unreachable?)")
			return
		}
		next := l.HorizonLeft() - 2*l.horizon/3 // a third of the horizon after the last renewal
		if next <= 0 {
			next = l.renew(ctx, left)
		}
		if next < 0 {
			return
		}
		wait.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-l.lost: // revoked
			return
		case <-wait.C:
		}
	}
}

// renew renews l once, and says how long to wait before the next look;
// negative if l is lost or ctx ended.
func (l *Lease) renew(ctx context.Context, left time.Duration) time.Duration {
	sent := time.Now()
	rctx, cancel := context.WithTimeout(ctx, min(l.timeout, left, l.horizon/3))
	resp, err := l.cli.KeepAliveOnce(rctx, l.id)
	cancel()
	switch {
	case ctx.Err() != nil:
		return -1
	case errors.Is(err, rpctypes.ErrLeaseNotFound), err == nil && resp.TTL <= 0:
		l.End("the etcd lease expired or was revoked")
		return -1
	case err != nil:
		return min(left, l.ttl/20) // another try, perhaps through another member
	}
	l.mu.Lock()
	l.deadline = sent.Add(time.Duration(resp.TTL) * time.Second)
	l.horizonEnd.Store(int64(sent.Add(l.horizon).Sub(clockBase)))
	l.mu.Unlock()
	return 0
}

// End marks l lost, for the reason why, without telling etcd, which
// expires it a TTL after its last renewal: what a process that stops
// renewing it does.
func (l *Lease) End(why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.lost:
	default:
		l.why = why
		close(l.lost)
	}
}

// Left is how long l has unless renewed, by this process's own deadline
// (see Lease).
func (l *Lease) Left() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Until(l.deadline)
}

// HorizonLeft is how long l's holder may still act on it where one
// holder at a time matters in real time: until Horizon (or the TTL, if
// shorter) after the request of its last successful renewal was sent
// (see Lease).
func (l *Lease) HorizonLeft() time.Duration {
	return time.Duration(l.horizonEnd.Load()) - time.Since(clockBase)
}

// clockBase is where horizonEnd's clock starts: its readings are
// monotonic, so that a step of the wall clock moves no horizon.
var clockBase = time.Now()

// Why is why l was lost, once Lost is closed.
func (l *Lease) Why() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.why
}

// Revoke gives l up, so that what it binds frees at once; it reports
// whether etcd has it no more.
func (l *Lease) Revoke() bool {
	l.End("revoked")
	return revokeID(l.cli, l.id)
}

// revokeID revokes the lease id, and reports whether etcd has it no more.
func revokeID(cli *clientv3.Client, id clientv3.LeaseID) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := cli.Revoke(ctx, id)
	return err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound)
}

// ID is l's id in etcd.
func (l *Lease) ID() clientv3.LeaseID { return l.id }

// TTL is l's time to live, as etcd granted it first.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Timeout bounds one renewal of l: requests made under it wait as long.
func (l *Lease) Timeout() time.Duration { return l.timeout }

// Lost is closed once l is lost (see Keep); Why says why.
func (l *Lease) Lost() <-chan struct{} { return l.lost }
