package etcdsession

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/idserver/idserver/internal/atomicfile"
)

// History is what this server has seen of etcd: its cluster id and the
// highest revision and raft term, kept in a file in dir so that a restart
// remembers them. etcd restored from an older snapshot answers with a
// lower revision (and, restored as a new cluster, another cluster id):
// the reservations in it may be below IDs already issued, by servers
// that do not run any more. So a server that sees etcd go back claims
// nothing until an operator confirms by removing the file, which should
// be done once etcd holds what it should (see docs/cluster.md, "After
// restoring etcd from a snapshot").
type History struct {
	path string // "": kept in memory only

	mu     sync.Mutex
	loaded bool
	// fresh: no history of etcd was found (a new server, or one whose
	// operator removed the file), until this server's first claim.
	fresh      bool
	seen       mark
	written    mark
	guard      Guard     // this server's guard key, as last written
	wroteGuard Guard     // as in the file
	wroteAt    time.Time // of the last write
	recordedAt time.Time // of the last write record made
	back       error     // etcd went back, as Observe or GuardBehind found: until confirmed
	confirmed  uint64    // how many times an operator confirmed (Observe)
}

// NewHistory is the history kept in the file at path ("": in memory
// only), read at its first use.
func NewHistory(path string) *History { return &History{path: path} }

// A Guard is a key this server alone writes in etcd, one more each time
// it checks where etcd stands (its id drawn when the history file is
// made). The revision is a guard, not a proof: the writes other servers
// make to a restored etcd move its revision past what a server saw, and
// it finds nothing. Its own key cannot move so: etcd restored from a
// snapshot taken after its first write and before its last holds a
// value below the last, and the server sees that at its next write,
// whatever the others wrote. (A key missing, deleted by hand or from a
// snapshot older than the server, is made again: the revision judges.)
type Guard struct {
	ID    uint64 // names the key (hex); drawn at random, once
	Value int64  // the last value written (at least: the file may lag)
}

// mark is where etcd stood in one response.
type mark struct {
	ClusterID uint64
	Revision  int64
	Term      uint64
}

func markOf(h *etcdserverpb.ResponseHeader) mark {
	return mark{ClusterID: h.GetClusterId(), Revision: h.GetRevision(), Term: h.GetRaftTerm()}
}

// ErrWentBack is the error of Check, Observe, Guarded and GuardBehind
// when etcd is behind what was seen.
var ErrWentBack = errors.New("etcd went back in time")

// Check compares a response of etcd with what was seen before, from the
// file if it was not read yet (or was removed since: the operator's
// confirmation), and records it if etcd did not go back.
func (h *History) Check(hdr *etcdserverpb.ResponseHeader) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.reload(); err != nil {
		return err
	}
	now := markOf(hdr)
	if err := compare(h.seen, now, h.wentBack); err != nil {
		return err
	}
	h.raise(now)
	return h.write()
}

// Observe is Check for the responses of the sequences' requests (many a
// second, many at once): it reads the file only the first time, and, once
// etcd went back, until the operator confirms by removing it; it writes
// the file at most once a second (as Record). Requests at once complete
// in any order, so a response is compared with what was seen before its
// request was sent (floor: At), not with what came since.
//
// A request sent before an operator's confirmation is not compared: what
// it would be compared with was seen before the restore, and its answer,
// from the restored etcd, read as etcd going back again (a SET refused
// right after the confirmation, once, beside a follower's retries).
func (h *History) Observe(sent SentAt, hdr *etcdserverpb.ResponseHeader) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.back != nil {
		if _, err := os.Stat(h.path); h.path == "" || err == nil {
			return h.back // not confirmed yet
		}
		h.back = nil
		h.loaded = false // reload: the file removed is the confirmation
		h.confirmed++
	}
	if sent.confirmed != h.confirmed {
		return nil
	}
	if !h.loaded {
		if err := h.reload(); err != nil {
			return err
		}
		sent.seen = h.seen
	}
	now := markOf(hdr)
	if err := compare(sent.seen, now, h.wentBack); err != nil {
		h.back = err
		return err
	}
	h.raise(now)
	if time.Since(h.wroteAt) >= time.Second {
		return h.write()
	}
	return nil
}

// SentAt is where etcd stood as far as this server had seen when a
// request was sent, and how many confirmations came before it.
type SentAt struct {
	seen      mark
	confirmed uint64
}

// At is where etcd stands as far as this server has seen, for Observe:
// taken as a request is sent.
func (h *History) At() SentAt {
	h.mu.Lock()
	defer h.mu.Unlock()
	return SentAt{h.seen, h.confirmed}
}

// compare fails, with wentBack's error, if etcd at now is behind seen.
func compare(seen, now mark, wentBack func(string) error) error {
	if seen == (mark{}) {
		return nil
	}
	switch {
	case now.ClusterID != seen.ClusterID:
		return wentBack(fmt.Sprintf("its cluster id is %x, not %x as before (restored from a snapshot, or another etcd?)", now.ClusterID, seen.ClusterID))
	case now.Revision < seen.Revision:
		return wentBack(fmt.Sprintf("its revision is %d, below %d seen before (restored from an older snapshot?)", now.Revision, seen.Revision))
	case now.Term < seen.Term:
		return wentBack(fmt.Sprintf("its raft term is %d, below %d seen before", now.Term, seen.Term))
	}
	return nil
}

// Record notes a later response of etcd (a save), written to the file at
// most once a second: a revision a second old still catches a snapshot
// older than it.
func (h *History) Record(hdr *etcdserverpb.ResponseHeader) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now := markOf(hdr); now.ClusterID == h.seen.ClusterID {
		h.raise(now)
	}
	// Its own budget: the sequences' writes (Observe, each second) must
	// not keep a save's revision out of the file.
	if time.Since(h.recordedAt) >= time.Second {
		h.recordedAt = time.Now()
		// The file removed is the operator's confirmation (reload),
		// which writing it again must not undo before the sequences
		// (Observe) see it.
		if h.reload() == nil {
			h.write()
		}
	}
}

func (h *History) raise(m mark) {
	h.seen = mark{ClusterID: m.ClusterID, Revision: max(h.seen.Revision, m.Revision), Term: max(h.seen.Term, m.Term)}
}

func (h *History) wentBack(why string) error {
	confirm := "restart the server"
	if h.path != "" {
		confirm = "remove " + h.path
	}
	return fmt.Errorf("%w: %s; claiming no server-id and taking no sequence values until an operator confirms that etcd holds what it should: %s", ErrWentBack, why, confirm)
}

// reload reads the file on the first check, and forgets what was seen
// once the file is removed.
func (h *History) reload() error {
	if h.path == "" {
		h.loaded = true // nothing to read: what was seen is all there is
		return nil
	}
	data, err := os.ReadFile(h.path)
	if errors.Is(err, fs.ErrNotExist) {
		if !h.loaded || h.written != (mark{}) { // none yet, or removed since written: confirmed
			// The guard keeps its key (found at its next write as
			// etcd holds it), so that confirmations leave no keys behind.
			h.seen, h.written, h.guard.Value, h.fresh = mark{}, mark{}, 0, true
			// For Observe too: a Check that finds the confirmation
			// first writes the file again at once.
			if h.back != nil {
				h.back = nil
				h.confirmed++
			}
		}
		h.loaded = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("etcd history %s: %w", h.path, err)
	}
	if h.loaded {
		return nil
	}
	var m mark
	var g Guard
	if _, err := fmt.Sscanf(string(data), historyFormat, &m.ClusterID, &m.Revision, &m.Term, &g.ID, &g.Value); err != nil {
		g = Guard{} // a file written before guards: none yet
		if _, err := fmt.Sscanf(string(data), "etcd cluster_id %x revision %d raft_term %d\n", &m.ClusterID, &m.Revision, &m.Term); err != nil {
			return fmt.Errorf("etcd history %s: %q is not one: remove it to start afresh", h.path, data)
		}
	}
	h.seen, h.written, h.guard, h.loaded = m, m, g, true
	return nil
}

// historyFormat is the history file's one line.
const historyFormat = "etcd cluster_id %x revision %d raft_term %d guard %x %d\n"

// Fresh reports whether this server has no history of etcd: none was
// found (a new server, or one whose operator removed the file), and it
// has not trusted etcd since (Trust).
func (h *History) Fresh() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fresh
}

// Trust ends freshness: this server claimed an id from etcd as it is.
func (h *History) Trust() {
	h.mu.Lock()
	h.fresh = false
	h.mu.Unlock()
}

// write stores what was seen, if it changed.
func (h *History) write() error {
	if h.path == "" || h.seen == h.written && h.guard == h.wroteGuard {
		return nil
	}
	data := fmt.Appendf(nil, historyFormat, h.seen.ClusterID, h.seen.Revision, h.seen.Term, h.guard.ID, h.guard.Value)
	if err := atomicfile.Write(h.path, data); err != nil {
		return fmt.Errorf("etcd history %s: %w", h.path, err)
	}
	h.written, h.wroteGuard, h.wroteAt = h.seen, h.guard, time.Now()
	return nil
}

// Guarded is the guard to write next: its key's id (drawn now if none)
// and the value etcd should hold (0: none yet); with the error takes get,
// once etcd went back, until an operator confirms.
func (h *History) Guarded() (Guard, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.back != nil {
		return h.guard, h.back
	}
	if !h.loaded {
		if err := h.reload(); err != nil {
			return Guard{}, err
		}
	}
	for h.guard.ID == 0 {
		h.guard.ID = rand.Uint64()
	}
	return h.guard, nil
}

// SetGuard records that etcd holds g now (written, or found above
// what the file said).
func (h *History) SetGuard(g Guard) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if g.ID == h.guard.ID {
		h.guard = g
	}
}

// GuardBehind records that etcd holds less of the guard than was
// written, v: etcd went back. It returns the error takes get
// until an operator confirms.
func (h *History) GuardBehind(key string, g Guard, v int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.back == nil {
		h.back = h.wentBack(fmt.Sprintf("%s, a key this server alone writes, is at %d, below %d it wrote (restored from an older snapshot?)", key, v, g.Value))
	}
	return h.back
}
