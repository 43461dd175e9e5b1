package reservation

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/internal/atomicfile"
)

// FileStore keeps the State in one file, replaced atomically, for one
// process at a time: it holds an exclusive lock on a lock file beside the
// state file (path + ".lock") from OpenFile to Close. The lock file names
// the process that holds it and repeats the last reservation saved, so a
// state file deleted under a running server loses nothing.
type FileStore struct {
	path string
	lock *lockFile
	log  zerolog.Logger

	found bool // the state file existed when last read, or was saved since
}

// OpenFile takes the lock on the state file at path and returns a store
// for it. It fails when another process holds the lock, with an error
// naming the lock file and that process's pid. It writes nothing to the
// state file.
func OpenFile(path string, log zerolog.Logger) (*FileStore, error) {
	lf, err := lock(path+".lock", false)
	if errors.Is(err, ErrLocked) {
		return nil, fmt.Errorf("state file %s is %w (two servers on one state file would issue the same IDs)", path, err)
	}
	if err != nil {
		return nil, err
	}
	return &FileStore{path: path, lock: lf, log: log}, nil
}

// ClaimPath is where a server in cluster mode keeps a local copy of the
// reservation of the server-id it holds, beside its state file at
// statePath: statePath.l<I>-<S>-<R>-e<epoch>.id<N>, from identity's
// layout, epoch and server-id, so that each id, under each layout and
// epoch, has a file of its own.
func ClaimPath(statePath string, identity State) string {
	l := identity.Layout
	return fmt.Sprintf("%s.l%d-%d-%d-e%d.id%d", statePath, l.IDBits, l.ShardBits, l.RandomBits, identity.Epoch, identity.ServerID)
}

// Path returns the state file's path.
func (f *FileStore) Path() string { return f.path }

// Close releases the lock. The store must not be used after.
func (f *FileStore) Close() error { return f.lock.close() }

// ReadFile reads the state file at path, without taking its lock. found is
// false, with no error, when there is no file.
func ReadFile(path string) (s State, found bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("read state file %s: %w", path, err)
	}
	s, err = Unmarshal(data)
	if err != nil {
		return State{}, false, fmt.Errorf("state file %s: %w", path, err)
	}
	return s, true, nil
}

// Resumed tells where a start resumes from.
type Resumed struct {
	Reserved int64  // T of the earlier run: no ID of it reached this time field
	From     string // the file T was read from; "" when there was none
}

// Resume returns the reservation a generator with identity's server-id,
// layout and epoch must start from: the larger of the state file's T and
// the copy in the lock file (the state file may have been deleted, or
// restored from an old backup). A file it cannot read, or one written for
// another identity, is an error naming the file; files are left as they
// are. A copy in the lock file that cannot be read (it is written without
// fsync) is an error only when the state file is missing.
func (f *FileStore) Resume(identity State) (Resumed, error) {
	s, found, err := ReadFile(f.path)
	rec, hasRec, recErr := f.lock.copy()
	if err == nil && !found {
		err = recErr // only the copy is left: it must be readable
	}
	if err != nil {
		return Resumed{}, err
	}
	f.found = found
	var r Resumed
	for _, c := range []struct {
		s     State
		found bool
		file  string
	}{{s, found, f.path}, {rec, hasRec, f.lock.path}} {
		if !c.found {
			continue
		}
		if err := c.s.Check(identity); err != nil {
			return Resumed{}, fmt.Errorf("%s: %w", c.file, err)
		}
		if r.From == "" || c.s.Reserved > r.Reserved {
			r = Resumed{Reserved: c.s.Reserved, From: c.file}
		}
	}
	return r, nil
}

// Floor is the time field (ms since the epoch) a generator must start at,
// now being its clock: T, or on a first start maxLead ahead of now. A
// state file and its lock file deleted under a running server that then
// died leave no T, and that server may have issued IDs up to maxLead ahead
// of its clock.
func (r Resumed) Floor(now int64, maxLead time.Duration) int64 {
	if r.From == "" {
		return max(now, 0) + maxLead.Milliseconds()
	}
	return r.Reserved
}

// Save writes s durably (atomicfile.Write: a temporary file, fsync,
// rename over the state file, fsync of the directory): a crash at any
// point leaves either the old state or the new one, never a mix. The lock
// file then gets a copy of s.
//
// A state file that vanished since it was last read or written is logged
// and written again. So is a lock file that vanished; if another process
// has taken a lock file in its place, Save fails, before and after the
// write, so the caller never counts on a T the other process may not
// have seen.
//
// It does not heed ctx: a local write is short, and finishing it is
// always safe.
func (f *FileStore) Save(_ context.Context, s State) error {
	if err := f.lock.keep(f.log); err != nil {
		return fmt.Errorf("state file %s: %w; renewals stop", f.path, err)
	}
	if _, err := os.Lstat(f.path); f.found && errors.Is(err, fs.ErrNotExist) {
		f.log.Warn().Str("state_file", f.path).
			Msg("the state file vanished while the server ran; writing it again (the lock file keeps a copy of the reservation)")
	}
	if err := atomicfile.Write(f.path, s.Marshal()); err != nil {
		return fmt.Errorf("save state file %s: %w", f.path, err)
	}
	f.found = true
	if err := f.lock.keep(f.log); err != nil {
		return fmt.Errorf("state file %s: %w; renewals stop", f.path, err)
	}
	return f.lock.record(s)
}
