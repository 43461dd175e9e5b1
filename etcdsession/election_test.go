package etcdsession

import (
	"context"
	"testing"
	"time"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testetcd"
)

// TestLeaseSurvivesElection: the leader of a 3-member etcd killed, the
// next write succeeds within a few seconds (the time is logged: the
// measure etcd-lease-ttl's default is chosen from), and a lease of the
// default TTL kept through it is not lost.
func TestLeaseSurvivesElection(t *testing.T) {
	members := testetcd.StartCluster(t, 3)
	var leader *testetcd.Server
	cli := members[0].Client()
	defer cli.Close()
	ctx := context.Background()
	for _, m := range members {
		st, err := cli.Status(ctx, "http://"+m.Endpoint)
		if err == nil && st.Leader == st.Header.MemberId {
			leader = m
		}
	}
	if leader == nil {
		t.Fatal("no etcd member leads")
	}
	var others []string
	for _, m := range members {
		if m != leader {
			others = append(others, m.Endpoint)
		}
	}
	cli.SetEndpoints(others...)
	l, err := Grant(ctx, cli, 5*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	go l.Keep(ctx)
	awaitRenewed(t, l)
	killed := time.Now()
	leader.Kill()
	if !await.Within(20*time.Second, func() bool {
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err = cli.Put(wctx, "election", killed.String())
		cancel()
		return err == nil
	}) {
		t.Fatalf("no write succeeded for 20 s after the leader was killed: %v", err)
	}
	t.Logf("writes succeed again %v after the etcd leader was killed", time.Since(killed).Round(time.Millisecond))
	// A TTL passes (the thing under test): a lease not renewed through
	// the election would be lost by then.
	if await.Within(5*time.Second, func() bool {
		select {
		case <-l.Lost():
			return true
		default:
			return false
		}
	}) {
		t.Fatalf("a lease of 5 s lost through an election: %s", l.Why())
	}
}
