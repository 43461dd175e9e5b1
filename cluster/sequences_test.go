package cluster

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/sequence"
)

// newFollowing is the sequences backend of a server that follows the
// marks under /test/seq/ in e (cli is its member's client), with a table of no keys (it has no copy of
// any).
func newFollowing(t *testing.T, e *testetcd.Server, cli *clientv3.Client) *Sequences {
	t.Helper()
	m := &Member{cfg: Config{Prefix: "/test/", Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second}, cli: cli, hist: &history{}, log: zerolog.Nop()}
	s := m.Sequences(nil)
	tb := sequence.New(sequence.Options{}, s, nil)
	s.Follow(tb)
	t.Cleanup(func() { tb.Stop(context.Background()); s.Stop() })
	return s
}

// TestMadeAnewAboveADelete: a server with no copy of a key takes it right
// after a delete took its mark (100, handed out by other servers), in a
// race with its own watch bringing that delete and putting it back: its
// segment is above 100 every time, whichever wins (the delete seen first,
// the mark put back first, or the key made anew first and taken again
// once the watch brought the delete).
func TestMadeAnewAboveADelete(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	s := newFollowing(t, e, cli)
	for i := range 50 {
		key := fmt.Sprintf("k%d", i)
		if _, err := cli.Put(ctx, s.prefix+key, "100"); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Delete(ctx, s.prefix+key); err != nil {
			t.Fatal(err)
		}
		ts := []sequence.Take{{Key: key, N: 4, Born: true}}
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s.Take(tctx, ts)
		cancel()
		if ts[0].Err != nil || ts[0].First <= 100 {
			t.Fatalf("%s, deleted at 100 and taken anew: %d..%d, %v; want above 100", key, ts[0].First, ts[0].Last, ts[0].Err)
		}
		resp, err := cli.Get(ctx, s.prefix+key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatal(resp, err)
		}
		if mark, _ := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64); mark < ts[0].Last {
			t.Fatalf("%s: etcd's mark %d, below the segment taken %d..%d", key, mark, ts[0].First, ts[0].Last)
		}
	}
}
