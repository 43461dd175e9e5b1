package etcdsession

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testetcd"
)

// TestLease: a lease kept alive lives for over a TTL, its time left
// never above the TTL etcd granted, counted from each renewal's request,
// and its serving horizon never lapses (renewed every third of it, where
// a third of the TTL let it lapse); it is lost, with the reason, when
// etcd revokes it, and when etcd stops answering (frozen), once its TTL
// has passed with no renewal, not before, its horizon lapsed by then;
// revoke frees it at once.
func TestLease(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ttl = 6 * time.Second // three horizons: renewed every third of the TTL, the horizon would lapse

	l, err := Grant(ctx, cli, ttl, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	go l.Keep(ctx)
	// A TTL and a horizon pass (the thing under test: the lease outlives
	// them), its bounds checked at every poll.
	var broken string
	if await.Within(ttl+Horizon, func() bool {
		if left := l.Left(); left <= 0 || left > ttl {
			broken = fmt.Sprintf("time left %v, want within (0, %v]", left, ttl)
		} else if h := l.HorizonLeft(); h <= Horizon/3 || h > Horizon {
			broken = fmt.Sprintf("serving horizon left %v, want within (%v, %v]: renewed every third of it", h, Horizon/3, Horizon)
		}
		return broken != ""
	}) {
		t.Fatal(broken)
	}
	select {
	case <-l.Lost():
		t.Fatalf("lost a lease kept alive: %s", l.Why())
	default:
	}
	if _, err := cli.Revoke(ctx, l.ID()); err != nil { // as an operator, or etcd, would
		t.Fatal(err)
	}
	awaitLost(t, l, "expired or was revoked", 2*ttl)

	l, err = Grant(ctx, cli, ttl, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	go l.Keep(ctx)
	awaitRenewed(t, l)
	frozen := time.Now()
	deadline := frozen.Add(l.Left())
	e.Freeze()
	awaitLost(t, l, "no lease renewal", 3*ttl)
	if h := l.HorizonLeft(); h > -(ttl - Horizon) {
		t.Fatalf("serving horizon left %v when the lease was lost, want the horizon lapsed a TTL less the horizon before", h)
	}
	if time.Now().Before(deadline) {
		t.Fatalf("lost %v after etcd froze, before the deadline its last renewal gave (%v)", time.Since(frozen), deadline.Sub(frozen))
	}
	e.Kill()
	e.Resume()

	l, err = Grant(ctx, cli, ttl, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Revoke() {
		t.Fatal("revoke: etcd still has the lease")
	}
	awaitLost(t, l, "revoked", time.Second)
	if r, err := cli.TimeToLive(ctx, l.ID()); err != nil || r.TTL > 0 {
		t.Fatalf("a revoked lease: TTL %v, %v", r, err)
	}
}

// awaitRenewed waits until l has been renewed since the call: its
// serving horizon moved on (a renewal moves it on by a third of the
// horizon or more).
func awaitRenewed(t *testing.T, l *Lease) {
	t.Helper()
	end := time.Now().Add(l.HorizonLeft())
	await.True(t, time.Minute, "the lease renewed", func() bool {
		return time.Now().Add(l.HorizonLeft()).Sub(end) > Horizon/6
	})
}

// awaitLost waits up to within for l to be lost, for a reason that says
// why.
func awaitLost(t *testing.T, l *Lease, why string, within time.Duration) {
	t.Helper()
	select {
	case <-l.Lost():
		if !strings.Contains(l.Why(), why) {
			t.Fatalf("lost because %q, want %q", l.Why(), why)
		}
	case <-time.After(within):
		t.Fatalf("not lost within %v (%s)", within, why)
	}
}
