package reservation

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// ErrLocked is wrapped by the error OpenFile returns when another process
// holds the state file's lock.
var ErrLocked = errors.New("in use by another process")

// lockFile is a lock file, held with flock(2) for the life of the
// process: the lock of a directory (DirLock), or beside a state file. It
// holds "pid N" and, beside a state file, a copy of the last reservation
// saved. The copy is written without fsync: it guards against a deleted
// state file, not against a power cut.
type lockFile struct {
	path    string
	f       *os.File
	last    []byte // the copy of the reservation it holds, nil if none
	created bool   // this process made the file
}

// lock takes the lock file at path. It keeps what an earlier process
// left in it (see copy) until the next record. It names this process in
// a file it made at once, and in one that was there only if nameNow:
// otherwise at the first record, so that a start that fails before then
// leaves the file as it was.
func lock(path string, nameNow bool) (*lockFile, error) {
	f, created, err := tryLock(path)
	if err != nil {
		return nil, err
	}
	l := &lockFile{path: path, f: f, created: created}
	data, err := io.ReadAll(f)
	if err != nil {
		l.close()
		return nil, fmt.Errorf("read lock file %s: %w", path, err)
	}
	if _, body, ok := bytes.Cut(data, []byte("\n")); ok && len(body) > 0 {
		l.last = body
	}
	if created || nameNow {
		if err := l.write(); err != nil {
			l.close()
			return nil, err
		}
	}
	return l, nil
}

// copy returns the reservation the lock file holds: found is false when
// there is none, and err says why the one there cannot be read.
func (l *lockFile) copy() (s State, found bool, err error) {
	if len(l.last) == 0 {
		return State{}, false, nil
	}
	if s, err = Unmarshal(l.last); err != nil {
		return State{}, false, fmt.Errorf("lock file %s: its copy of the reservation: %w", l.path, err)
	}
	return s, true, nil
}

// held is the error of a lock file that another process holds.
type held struct {
	path, pid string
}

func (e *held) Error() string {
	return fmt.Sprintf("%v: pid %s holds its lock file %s", ErrLocked, e.pid, e.path)
}

func (e *held) Unwrap() error { return ErrLocked }

// tryLock opens (or creates) the lock file at path and locks it, without
// waiting; created says it made the file. Locked, the file must still be
// the one at path: a process that removes its lock file (see close) does
// so while holding it, and one that opened the file before that must not
// then take a lock nobody else can see.
func tryLock(path string) (f *os.File, created bool, err error) {
	for range 100 {
		if f, created, err = openLock(path); err != nil {
			return nil, false, err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := holder(f)
			f.Close()
			return nil, false, &held{path: path, pid: pid}
		}
		if err != nil {
			f.Close()
			return nil, false, fmt.Errorf("lock %s: %w", path, err)
		}
		st, serr := os.Stat(path)
		mine, ferr := f.Stat()
		if serr == nil && ferr == nil && os.SameFile(st, mine) {
			return f, created, nil
		}
		f.Close() // removed or replaced meanwhile: try the one there now
	}
	return nil, false, fmt.Errorf("lock %s: it keeps being removed or replaced", path)
}

// openLock opens the lock file at path, or creates it: created says
// which, so that a start that fails can remove only what it made.
func openLock(path string) (*os.File, bool, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if !errors.Is(err, fs.ErrNotExist) {
			if err != nil {
				return nil, false, fmt.Errorf("open lock file: %w", err)
			}
			return f, false, nil
		}
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			if err != nil {
				return nil, false, fmt.Errorf("open lock file: %w", err)
			}
			return f, true, nil
		}
	}
}

// holder returns the pid a lock file names, or "(unknown)" while its
// holder has not yet written it.
func holder(f *os.File) string {
	var buf [32]byte
	n, _ := f.ReadAt(buf[:], 0)
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	if pid, ok := bytes.CutPrefix(line, []byte("pid ")); ok {
		if _, err := strconv.Atoi(string(pid)); err == nil {
			return string(pid)
		}
	}
	return "(unknown)"
}

// write replaces the lock file's contents: this process's pid, then the
// copy of the reservation.
func (l *lockFile) write() error {
	data := append([]byte("pid "+strconv.Itoa(os.Getpid())+"\n"), l.last...)
	_, err := l.f.WriteAt(data, 0)
	if err == nil {
		err = l.f.Truncate(int64(len(data)))
	}
	if err != nil {
		return fmt.Errorf("write lock file %s: %w", l.path, err)
	}
	return nil
}

// record keeps a copy of s in the lock file.
func (l *lockFile) record(s State) error {
	l.last = s.Marshal()
	return l.write()
}

// keep makes sure this process still holds the lock file at its path.
// When the file was removed or replaced, it takes a new one in its place,
// unless another process already has: then it fails.
func (l *lockFile) keep(log zerolog.Logger) error {
	st, err := os.Stat(l.path)
	mine, ferr := l.f.Stat()
	switch {
	case err == nil && ferr == nil && os.SameFile(st, mine):
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("check lock file %s: %w", l.path, err)
	}
	f, _, err := tryLock(l.path)
	if err != nil {
		return fmt.Errorf("the lock file was removed or replaced under this server, and is now %w", err)
	}
	l.f.Close()
	l.f = f
	log.Warn().Str("lock_file", l.path).Msg("the lock file vanished or was replaced while the server ran; took it again")
	return l.write()
}

// close lets the lock go. A lock file this process made and never kept a
// reservation in holds nothing of use: it is removed, so that a start
// that fails leaves dir as it was.
func (l *lockFile) close() error { return l.release(l.created && l.last == nil) }

// release lets the lock go, removing the file first if remove is set and
// the file at its path is still this one: while it is held, so that no
// other process takes a lock on a file about to vanish (see tryLock).
func (l *lockFile) release(remove bool) error {
	if remove {
		st, err := os.Stat(l.path)
		if mine, ferr := l.f.Stat(); err == nil && ferr == nil && os.SameFile(st, mine) {
			os.Remove(l.path)
		}
	}
	return l.f.Close()
}

// DirLockFile is the lock file a server holds in its dir.
const DirLockFile = "idserver.lock"

// DirLock is a server's exclusive hold on its directory, from before it
// reads, claims or writes anything until it has stopped: one process per
// directory, in every mode, since everything a server keeps in dir (state
// files, sequences, node id, its history of etcd) is its alone.
type DirLock struct {
	l    *lockFile
	stop chan struct{} // ends keep
	done chan struct{} // closed when keep returns
}

// dirLockCheck is how often a DirLock makes sure its file is still the
// one at its path, as PostgreSQL checks its postmaster.pid: a lock file
// removed by hand is taken again within it, so a second server started
// on the directory after that is refused all the same, unless it starts
// within that second.
const dirLockCheck = time.Second

// LockDir takes dir's lock file, DirLockFile, which names this process,
// and keeps it until Release. When another process holds it, the error
// is one line naming dir and that process's pid. A lock file left by a
// process that died does not refuse: flock(2) locks end with their
// process.
func LockDir(dir string, log zerolog.Logger) (*DirLock, error) {
	l, err := lock(filepath.Join(dir, DirLockFile), true)
	var h *held
	if errors.As(err, &h) {
		return nil, fmt.Errorf("dir %s is in use by another idserver (pid %s); each server needs a directory of its own", dir, h.pid)
	}
	if err != nil {
		return nil, fmt.Errorf("dir %s: %w", dir, err)
	}
	d := &DirLock{l: l, stop: make(chan struct{}), done: make(chan struct{})}
	go d.keep(log.With().Str("dir", dir).Logger())
	return d, nil
}

// keep takes the lock file again whenever it was removed or replaced,
// until Release. If another process took it first, it says so once:
// two servers share the directory, and an operator must stop one.
func (d *DirLock) keep(log zerolog.Logger) {
	defer close(d.done)
	tick := time.NewTicker(dirLockCheck)
	defer tick.Stop()
	var failing bool
	for {
		select {
		case <-d.stop:
			return
		case <-tick.C:
		}
		err := d.l.keep(log)
		if err != nil && !failing {
			log.Error().Err(err).Msg("another process took this server's directory: stop one of the two")
		}
		failing = err != nil
	}
}

// Release removes the lock file and lets the directory go: the last thing
// a server does, after every write. A lock file remains only after a
// process died.
func (d *DirLock) Release() error {
	close(d.stop)
	<-d.done
	return d.l.release(true)
}
