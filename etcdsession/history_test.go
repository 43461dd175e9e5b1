package etcdsession

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

func header(cluster uint64, rev int64, term uint64) *etcdserverpb.ResponseHeader {
	return &etcdserverpb.ResponseHeader{ClusterId: cluster, Revision: rev, RaftTerm: term}
}

// TestHistory: etcd answering with another cluster id, or a revision or
// raft term below what a server saw (kept in its file across restarts),
// is refused with the file to remove; once it is removed, etcd as it is
// now is accepted.
func TestHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idserver.state.etcd")
	h := NewHistory(path)
	if err := h.Check(header(7, 100, 2)); err != nil || !h.Fresh() {
		t.Fatalf("first sight of etcd: %v, fresh %v; want fresh", err, h.Fresh())
	}
	h.Trust()                    // its first claim
	h.Record(header(7, 5000, 3)) // a save, later
	if err := h.Check(header(7, 5001, 3)); err != nil {
		t.Fatalf("etcd further on: %v", err)
	}

	restarted := NewHistory(path) // a new process reads the file
	for _, tt := range []struct {
		hdr  *etcdserverpb.ResponseHeader
		want string
	}{
		{header(7, 4000, 3), "revision is 4000, below 5001"},
		{header(8, 9000, 3), "cluster id is 8, not 7"},
		{header(7, 6000, 1), "raft term is 1, below 3"},
	} {
		err := restarted.Check(tt.hdr)
		if !errors.Is(err, ErrWentBack) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "remove "+path) {
			t.Errorf("etcd at %v: %v; want ErrWentBack saying %q and the file to remove", tt.hdr, err, tt.want)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if restarted.Fresh() {
		t.Fatal("a restart that found the file is fresh")
	}
	if err := restarted.Check(header(8, 10, 1)); err != nil || !restarted.Fresh() {
		t.Fatalf("after the operator removed the file: %v, fresh %v; want fresh", err, restarted.Fresh())
	}
	if err := restarted.Check(header(8, 9, 1)); !errors.Is(err, ErrWentBack) {
		t.Fatalf("the accepted etcd going back again: %v", err)
	}
}

// TestHistoryFileGuard: the file keeps the guard key's id and value
// across restarts, and a file written before guards (no guard field) is
// read, with no guard yet.
func TestHistoryFileGuard(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idserver.state.etcd")
	h := NewHistory(path)
	g, err := h.Guarded()
	if err != nil || g.ID == 0 || g.Value != 0 {
		t.Fatalf("a new server's guard: %+v, %v; want an id drawn, no value", g, err)
	}
	h.SetGuard(Guard{ID: g.ID, Value: 41})
	if err := h.Check(header(7, 100, 2)); err != nil { // writes the file
		t.Fatal(err)
	}
	if got, err := NewHistory(path).Guarded(); err != nil || got != (Guard{ID: g.ID, Value: 41}) {
		t.Fatalf("after a restart: %+v, %v; want %+v", got, err, Guard{ID: g.ID, Value: 41})
	}
	if err := os.WriteFile(path, []byte("etcd cluster_id 7 revision 100 raft_term 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := NewHistory(path)
	if got, err := old.Guarded(); err != nil || got.ID == 0 || got.Value != 0 {
		t.Fatalf("a file of before guards: %+v, %v; want a new id, no value", got, err)
	}
	if err := old.Check(header(7, 99, 2)); !errors.Is(err, ErrWentBack) {
		t.Fatalf("its revision not read: %v", err)
	}
}

// TestConfirmedStaysConfirmed: a request sent before an operator
// confirmed a restore, answered by the restored etcd after it, does not
// read as etcd going back again (it was compared with what was seen
// before the restore: a SET refused right after the confirmation).
func TestConfirmedStaysConfirmed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idserver.state.etcd")
	h := NewHistory(path)
	if err := h.Observe(h.At(), header(7, 1250, 2)); err != nil {
		t.Fatal(err)
	}
	if err := h.Observe(h.At(), header(7, 1200, 2)); !errors.Is(err, ErrWentBack) { // restored
		t.Fatalf("etcd restored: %v", err)
	}
	inFlight := h.At() // sent while refused, answered after the confirmation
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	for _, rev := range []int64{1238, 1240} { // the first finds the confirmation
		if err := h.Observe(h.At(), header(7, rev, 2)); err != nil {
			t.Fatalf("after the confirmation: %v", err)
		}
	}
	if err := h.Observe(inFlight, header(7, 1236, 2)); err != nil {
		t.Fatalf("a request sent before the confirmation, answered after it: %v", err)
	}
	if err := h.Observe(h.At(), header(7, 1237, 2)); !errors.Is(err, ErrWentBack) {
		t.Fatalf("etcd going back after the confirmation: %v", err)
	}
}

// TestConfirmationSeenByCheckFirst: one removal of the file confirms a
// restore for the claims (Check) and the sequences (Observe) alike,
// whichever finds it first. A claim finding it first wrote the file
// again at once, and the sequences, refused since a response of the
// restored etcd, went on refusing until the file was removed a second
// time.
func TestConfirmationSeenByCheckFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idserver.state.etcd")
	h := NewHistory(path)
	if err := h.Check(header(7, 291, 2)); err != nil {
		t.Fatal(err)
	}
	if err := h.Observe(h.At(), header(7, 153, 2)); !errors.Is(err, ErrWentBack) { // restored
		t.Fatalf("etcd restored: %v", err)
	}
	if err := os.Remove(path); err != nil { // the operator's confirmation
		t.Fatal(err)
	}
	if err := h.Check(header(7, 160, 2)); err != nil { // a claim, first
		t.Fatalf("a claim after the confirmation: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the claim did not write the file again: %v", err)
	}
	if err := h.Observe(h.At(), header(7, 161, 2)); err != nil {
		t.Fatalf("the sequences after the confirmation a claim found first: %v", err)
	}
}

// TestConfirmationNotUndoneByRecord: a save's Record after the operator
// removed the file does not write it again before the sequences saw the
// removal: it wrote the file back within a second, and the sequences,
// refused since a response of the restored etcd, kept refusing until a
// second removal.
func TestConfirmationNotUndoneByRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idserver.state.etcd")
	h := NewHistory(path)
	if err := h.Check(header(7, 158, 2)); err != nil {
		t.Fatal(err)
	}
	if err := h.Observe(h.At(), header(7, 157, 2)); !errors.Is(err, ErrWentBack) { // restored
		t.Fatalf("etcd restored: %v", err)
	}
	if err := os.Remove(path); err != nil { // the operator's confirmation
		t.Fatal(err)
	}
	h.Record(header(7, 159, 2)) // a save, first
	if err := h.Observe(h.At(), header(7, 160, 2)); err != nil {
		t.Fatalf("the sequences after the confirmation and a save: %v", err)
	}
}
