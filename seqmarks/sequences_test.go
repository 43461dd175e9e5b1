package seqmarks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/etcdsession"
	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/sequence"
)

// newFollowing is the sequences backend of a server that follows the
// marks under /test/seq/ in e, with a table of no keys (it has no copy
// of any).
func newFollowing(t *testing.T, e *testetcd.Server) *Sequences {
	t.Helper()
	s, _ := newFollowingTable(t, e, nil)
	return s
}

// newFollowingTable is newFollowing with the table it serves.
func newFollowingTable(t *testing.T, e *testetcd.Server, h history) (*Sequences, *sequence.Table) {
	t.Helper()
	s := New(Config{Session: connected(t, e), Prefix: "/test/", Log: zerolog.Nop()})
	if h != nil {
		s.hist = h
	}
	tb := sequence.New(sequence.Options{}, s, nil)
	s.Follow(tb)
	t.Cleanup(func() { tb.Stop(context.Background()); s.Stop() })
	// Following from here on: a delete before it is one no watch brings
	// (the promise is for deletes while a server follows), and a test
	// that deleted a key before the watch began, under load, saw the key
	// made anew below the deleted mark.
	await.True(t, 30*time.Second, "the watch of the marks begun", func() bool { ok, _ := s.deletes.upTo(1); return ok })
	return s, tb
}

// awaitMark waits until etcd holds a mark of key at or above mark:
// written back. (A minute: TestGoneBackFoundWithoutTakes took 38 s, over
// the 30 s it had, twice in the suite beside two CPU hogs and another
// suite's cluster tests, at a load average of 17; 10 s alone.) (Above: the server may have taken its next segment
// since mark was read, under load; the test then waited for exactly
// mark in vain.)
func awaitMark(t *testing.T, cli *clientv3.Client, key string, mark int64) {
	t.Helper()
	await.True(t, time.Minute, key+"'s mark written back", func() bool {
		resp, err := cli.Get(context.Background(), key)
		if err != nil || len(resp.Kvs) != 1 {
			return false
		}
		v, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
		return err == nil && v >= mark
	})
}

// TestGoneBackFoundWithoutTakes: a server that takes nothing (it serves
// a segment in hand) still finds etcd restored from an older snapshot,
// and writes its mark back above the restored one by itself, before an
// operator confirms: found only by a take, another server, confirmed
// first, took the key from the restored mark, below values this one had
// handed out (TestClusterSequencesEtcdLosesData, one run in several).
func TestGoneBackFoundWithoutTakes(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	s, tb := newFollowingTable(t, e, nil)
	backup := e.Backup()
	if _, err := tb.Incr("k", 1); err != nil {
		t.Fatal(err)
	}
	mark, _ := tb.Reserved("k")
	e.Restore(backup)
	awaitMark(t, cli, s.prefix+"k", mark)
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
	s := newFollowing(t, e)
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

// TestSetsTogether: the SETs a table writes together are each checked
// against etcd on its own (one refused does not refuse the others), and
// those etcd took are in this server's copy, in one write.
func TestSetsTogether(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	path := t.TempDir() + "/idserver.seq.cluster"
	local, _, _, err := sequence.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Session: connected(t, e), Prefix: "/test/", Local: local, Log: zerolog.Nop()})
	for _, k := range []string{"below", "exists"} {
		if _, err := cli.Put(ctx, s.prefix+k, "50"); err != nil {
			t.Fatal(err)
		}
	}
	ss := []sequence.Setting{
		{Key: "new", Value: 10},
		{Key: "below", Value: 40},
		{Key: "exists", Value: 60, Mode: sequence.IfNew},
		{Key: "missing", Value: 5, Mode: sequence.IfOld},
		{Key: "fresh", Value: 7, Mode: sequence.IfNew},
	}
	const many = 2*txnKeys + 1 // a pipeline's SETs of new keys: a transaction a batch, not one a key
	for i := range many {
		ss = append(ss, sequence.Setting{Key: fmt.Sprintf("m%d", i), Value: int64(i + 1)})
	}
	s.Set(ctx, ss)
	revs := map[int64]bool{}
	for _, x := range ss[5:] {
		resp, err := cli.Get(ctx, s.prefix+x.Key)
		if x.Err != nil || err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != strconv.FormatInt(x.Value, 10) {
			t.Fatalf("SET %s %d: %v; etcd holds %v, %v", x.Key, x.Value, x.Err, resp, err)
		}
		revs[resp.Kvs[0].ModRevision] = true
	}
	oneRevisionABatch(t, fmt.Sprintf("%d SETs", many), len(ss), revs)
	var below *sequence.BelowError
	switch {
	case ss[0].Err != nil, ss[4].Err != nil:
		t.Fatalf("SETs etcd should take: %v, %v", ss[0].Err, ss[4].Err)
	case !errors.As(ss[1].Err, &below) || below.At != 50:
		t.Fatalf("SET below etcd's mark 50: %v", ss[1].Err)
	case !errors.Is(ss[2].Err, sequence.ErrExists), !errors.Is(ss[3].Err, sequence.ErrMissing):
		t.Fatalf("SET NX of a key in etcd, XX of one not: %v, %v", ss[2].Err, ss[3].Err)
	}
	for k, want := range map[string]string{"new": "10", "below": "50", "exists": "50", "fresh": "7"} {
		resp, err := cli.Get(ctx, s.prefix+k)
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want {
			t.Fatalf("etcd's %s: %v %v, want %s", k, resp, err, want)
		}
	}
	local.Close()
	_, known, _, err := sequence.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, mk := range known {
		got[mk.Key] = mk.Value
	}
	if len(got) != 2+many || got["new"] != 10 || got["fresh"] != 7 {
		t.Fatalf("this server's copy: %v, want new 10 and fresh 7", got)
	}
}

// TestGuardFindsRestore: etcd restored from a snapshot older than this
// server's last write of its guard key is found by that key, even when
// etcd's revision says nothing (other servers' writes to the restored
// etcd moved it past what this server saw: here, what it saw is
// forgotten while etcd is down), and the server writes its mark back.
func TestGuardFindsRestore(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	blinded := &blindHistory{History: etcdsession.NewHistory("")}
	s, tb := newFollowingTable(t, e, blinded)
	guardAt := func() int64 {
		g, _ := s.hist.Guarded()
		resp, err := cli.Get(ctx, s.guardKey(g))
		if err != nil || len(resp.Kvs) == 0 {
			return 0
		}
		v, _ := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
		return v
	}
	await.True(t, 10*time.Second, "the guard key written", func() bool { return guardAt() > 0 })
	backup := e.Backup()
	atBackup := guardAt()
	if _, err := tb.Incr("k", 1); err != nil {
		t.Fatal(err)
	}
	reserved, _ := tb.Reserved("k")
	await.True(t, 10*time.Second, "the guard key written after the backup", func() bool { return guardAt() > atBackup })
	e.Kill()
	blinded.blind.Store(true) // blind the revision's guard
	e.Restore(backup)
	awaitMark(t, cli, s.prefix+"k", reserved)
	_, err := s.hist.Guarded() // its error, once etcd went back
	if err == nil || !strings.Contains(err.Error(), "a key this server alone writes") {
		t.Errorf("takes refused for %v, want the guard's words", err)
	}
}

// TestTakeAllFallsBack: refills of many keys, and keys made here, go in
// transactions of txnKeys; a transaction in which one mark moved
// (another server took that key) or a key exists (another server made
// it) goes again as one, compared with the marks it read: every key gets
// a segment right above etcd's mark, etcd's mark is its end, and the
// keys of a batch share one revision (taken key by key, as before, each
// had its own: a restarted server's 100,000 keys made 576 INCRs a
// second). A key etcd lost in a batch is flagged on its own.
func TestTakeAllFallsBack(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	s := newFollowing(t, e)
	const keys = 3*txnKeys + 7
	moved := map[int]bool{5: true, txnKeys + 1: true, keys - 1: true}
	const lost = 2*txnKeys + 3
	ts := make([]sequence.Take, 2*keys)
	for i := range keys {
		mark := "10"
		switch {
		case moved[i]:
			mark = "50"
		case i == lost:
			mark = "3"
		}
		ts[i] = sequence.Take{Key: fmt.Sprintf("k%d", i), After: 10, N: 5, Born: true}
		if _, err := cli.Put(ctx, s.prefix+ts[i].Key, mark); err != nil {
			t.Fatal(err)
		}
		ts[keys+i] = sequence.Take{Key: fmt.Sprintf("new%d", i), N: 5, Born: true}
		if moved[i] {
			if _, err := cli.Put(ctx, s.prefix+ts[keys+i].Key, "50"); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Take(ctx, ts)
	revs := map[bool]map[int64]bool{false: {}, true: {}} // made here or not: the revisions of its marks
	for i, tk := range ts {
		want := int64(11)
		switch {
		case i == lost:
			if !errors.As(tk.Err, new(*sequence.LostError)) {
				t.Fatalf("%s, its mark below what this server took: %v, want it lost", tk.Key, tk.Err)
			}
			continue
		case moved[i%keys]:
			want = 51
		case i >= keys:
			want = 1
		}
		if tk.Err != nil || tk.First != want || tk.Last != want+4 {
			t.Fatalf("%s: %d..%d, %v; want %d..%d", tk.Key, tk.First, tk.Last, tk.Err, want, want+4)
		}
		resp, err := cli.Get(ctx, s.prefix+tk.Key)
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != strconv.FormatInt(tk.Last, 10) {
			t.Fatalf("%s: etcd holds %v, %v; want %d", tk.Key, resp.Kvs, err, tk.Last)
		}
		revs[i >= keys][resp.Kvs[0].ModRevision] = true
	}
	for made, rs := range revs {
		oneRevisionABatch(t, fmt.Sprintf("made here %v: %d keys", made, keys), keys, rs)
	}
}

// TestReleaseTogether: a graceful stop gives back many keys' marks in
// transactions of txnKeys, each mark still as this server wrote it
// lowered to the last value handed out, and one another server moved
// since left as it is, without breaking its batch into single keys.
func TestReleaseTogether(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	s := newFollowing(t, e)
	const keys = 2*txnKeys + 9
	moved := map[int]bool{3: true, txnKeys + 7: true}
	marks := make([]sequence.Mark, keys)
	for i := range marks {
		marks[i] = sequence.Mark{Key: fmt.Sprintf("k%d", i), Value: 12, Reserved: 20, Born: true}
		mark := "20"
		if moved[i] {
			mark = "30"
		}
		if _, err := cli.Put(ctx, s.prefix+marks[i].Key, mark); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Release(ctx, marks); err != nil {
		t.Fatal(err)
	}
	revs := map[int64]bool{}
	for i, m := range marks {
		want := "12"
		if moved[i] {
			want = "30"
		}
		resp, err := cli.Get(ctx, s.prefix+m.Key)
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want {
			t.Fatalf("%s: etcd holds %v, %v; want %s", m.Key, resp.Kvs, err, want)
		}
		if !moved[i] {
			revs[resp.Kvs[0].ModRevision] = true
		}
	}
	oneRevisionABatch(t, fmt.Sprintf("%d marks given back", keys), keys, revs)
}

// oneRevisionABatch fails t if the n keys written (what) took more
// revisions, revs, than the transactions of txnKeys they fill: each
// batch one, not one a key.
func oneRevisionABatch(t *testing.T, what string, n int, revs map[int64]bool) {
	t.Helper()
	if batches := (n + txnKeys - 1) / txnKeys; len(revs) > batches {
		t.Errorf("%s: written at %d revisions, want one a batch, %d", what, len(revs), batches)
	}
}

// TestTakeBeforeWatchBegins: a key made before this server's watch of
// the marks has begun (a first INCR right after a start, the watch's
// client still dialling under load) is served once the watch begins: the
// watch, begun after the key's write, never brings that write's event,
// and the take waited for it until it failed (the suite, beside two CPU
// hogs: "the watch of the marks did not bring this server's own write").
func TestTakeBeforeWatchBegins(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	sess := connected(t, e)
	s := New(Config{Session: sess, Prefix: "/test/", Log: zerolog.Nop()})
	begin := make(chan struct{})
	s.dial = func() (*clientv3.Client, error) { <-begin; return sess.Dial() }
	tb := sequence.New(sequence.Options{Wait: 20 * time.Second}, s, nil)
	s.Follow(tb)
	t.Cleanup(func() { close(begin); tb.Stop(context.Background()); s.Stop() })
	done := make(chan error, 1)
	go func() { _, err := tb.Incr("k", 1); done <- err }()
	await.True(t, 30*time.Second, "the key made in etcd", func() bool {
		resp, err := cli.Get(context.Background(), s.prefix+"k")
		return err == nil && len(resp.Kvs) == 1
	})
	begin <- struct{}{} // the watch begins after the key's write: its event never comes
	if err := <-done; err != nil {
		t.Fatalf("INCR of a key made before the watch began: %v", err)
	}
}

// TestBeginsWhereOthersStand: a server that begins following after a
// delete, while another server that follows has yet to put the deleted
// mark back (it says it stands before the delete: a revision, or "0",
// beginning), makes the key above the deleted mark (100): its watch
// begins where that server stands and brings the delete. A watch begun
// where etcd stood made the key anew from 1, below values handed out.
func TestBeginsWhereOthersStand(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	const prefix = "/test/seq/"
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		key := fmt.Sprintf("k%d", i)
		put, err := cli.Put(ctx, prefix+key, "100")
		if err != nil {
			t.Fatal(err)
		}
		stands := strconv.FormatInt(put.Header.Revision, 10)
		if i%2 == 1 {
			stands = "0" // beginning: it handles every event from its key's on
		}
		if _, err := cli.Put(ctx, "/test/seq.followed/slow", stands, clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Delete(ctx, prefix+key); err != nil {
			t.Fatal(err)
		}
		s := newFollowing(t, e)
		ts := []sequence.Take{{Key: key, N: 4, Born: true}}
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s.Take(tctx, ts)
		cancel()
		if ts[0].Err != nil || ts[0].First <= 100 {
			t.Fatalf("%s, deleted at 100 before this server began, another standing before the delete (%s): taken %d..%d, %v; want above 100",
				key, stands, ts[0].First, ts[0].Last, ts[0].Err)
		}
		s.Stop()
	}
}

// TestFollowsPastCompaction: a server that says it stands at a revision
// etcd has compacted since (say it froze) does not keep a server that
// begins from following: its watch begins at the compaction, and takes
// go on.
func TestFollowsPastCompaction(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	ctx := context.Background()
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/test/seq.followed/frozen", "1", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	put, err := cli.Put(ctx, "/test/seq/k", "100")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, put.Header.Revision); err != nil {
		t.Fatal(err)
	}
	s := newFollowing(t, e)
	ts := []sequence.Take{{Key: "k", N: 4, After: 100}}
	s.Take(ctx, ts)
	if ts[0].Err != nil || ts[0].First != 101 {
		t.Fatalf("k after a compaction: %d..%d, %v; want 101..", ts[0].First, ts[0].Last, ts[0].Err)
	}
}

// blindHistory is a History whose comparison of revisions, once blind,
// sees nothing: what the server saw of etcd is forgotten (the writes
// other servers make to a restored etcd move its revision past it).
type blindHistory struct {
	*etcdsession.History
	blind atomic.Bool
}

// At is where etcd stood, or, once blind, nothing to compare with.
func (h *blindHistory) At() etcdsession.SentAt {
	if h.blind.Load() {
		return etcdsession.SentAt{}
	}
	return h.History.At()
}

// connected is a session of e, connected, closed at the test's end.
func connected(t *testing.T, e *testetcd.Server) *etcdsession.Session {
	t.Helper()
	s := etcdsession.New(etcdsession.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second}, "")
	if err := s.Connect(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
