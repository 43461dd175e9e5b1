package cluster

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A lease is an etcd lease that this process keeps alive itself, in the
// spirit of etcd's concurrency.Session, but knowing how long the lease
// surely has: it renews it with one request at a time (KeepAliveOnce),
// each a third of the TTL after the last that etcd granted, and counts
// each renewal's deadline from when its request was sent (etcd counts the
// TTL from when it got it, later). A keep-alive stream (clientv3's
// KeepAlive, which a Session uses) hides when it stalls on a member that
// froze, and its replies do not say when their request went; a request of
// its own may reach another member.
type lease struct {
	cli     *clientv3.Client
	id      clientv3.LeaseID
	ttl     time.Duration // as granted first
	timeout time.Duration // of one renewal

	mu       sync.Mutex
	deadline time.Time // when etcd may expire it unless renewed
	lost     chan struct{}
	why      string // why it is lost, once lost is closed
}

// grant takes a lease of ttl from etcd.
func grant(ctx context.Context, cli *clientv3.Client, ttl, timeout time.Duration) (*lease, error) {
	sent := time.Now()
	resp, err := cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return nil, err
	}
	l := &lease{cli: cli, id: resp.ID, ttl: time.Duration(resp.TTL) * time.Second, timeout: timeout, lost: make(chan struct{})}
	l.deadline = sent.Add(l.ttl)
	return l, nil
}

// keep renews l until ctx ends or l is lost: etcd says it expired or was
// revoked, its deadline passed without a renewal, or revoke or end was
// called.
func (l *lease) keep(ctx context.Context) {
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		left := l.left()
		if left <= 0 {
			l.end("no lease renewal from etcd for " + l.ttl.String() + " (etcd unreachable?)")
			return
		}
		next := left - 2*l.ttl/3 // a third of the TTL after the last renewal
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
func (l *lease) renew(ctx context.Context, left time.Duration) time.Duration {
	sent := time.Now()
	rctx, cancel := context.WithTimeout(ctx, min(l.timeout, left))
	resp, err := l.cli.KeepAliveOnce(rctx, l.id)
	cancel()
	switch {
	case ctx.Err() != nil:
		return -1
	case errors.Is(err, rpctypes.ErrLeaseNotFound), err == nil && resp.TTL <= 0:
		l.end("the etcd lease expired or was revoked")
		return -1
	case err != nil:
		return min(left, l.ttl/20) // another try, perhaps through another member
	}
	l.mu.Lock()
	l.deadline = sent.Add(time.Duration(resp.TTL) * time.Second)
	l.mu.Unlock()
	return 0
}

// end marks l lost, for the reason why.
func (l *lease) end(why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.lost:
	default:
		l.why = why
		close(l.lost)
	}
}

// left is how long l has unless renewed.
func (l *lease) left() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Until(l.deadline)
}

// reason is why l was lost.
func (l *lease) reason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.why
}

// revoke gives l up, so that what it binds frees at once; it reports
// whether etcd has it no more.
func (l *lease) revoke() bool {
	l.end("revoked")
	return revokeID(l.cli, l.id)
}

// revokeID revokes the lease id, and reports whether etcd has it no more.
func revokeID(cli *clientv3.Client, id clientv3.LeaseID) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := cli.Revoke(ctx, id)
	return err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound)
}
