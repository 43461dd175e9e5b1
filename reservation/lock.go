package reservation

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"github.com/rs/zerolog"
)

// ErrLocked is wrapped by the error OpenFile returns when another process
// holds the state file's lock.
var ErrLocked = errors.New("in use by another process")

// lockFile is the lock file beside a state file, held with flock(2) for
// the life of the process. It holds "pid N" and a copy of the last
// reservation saved. The copy is written without fsync: it guards
// against a deleted state file, not against a power cut.
type lockFile struct {
	path string
	f    *os.File
	last []byte // the copy of the reservation it holds, nil if none
}

// lock takes the lock file at path. It keeps what an earlier process
// left in it (see copy) until the next record.
func lock(path string) (*lockFile, error) {
	f, err := tryLock(path)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read lock file %s: %w", path, err)
	}
	l := &lockFile{path: path, f: f}
	if _, body, ok := bytes.Cut(data, []byte("\n")); ok && len(body) > 0 {
		l.last = body
	}
	if err := l.write(); err != nil {
		f.Close()
		return nil, err
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

// tryLock opens (or creates) the lock file at path and locks it, without
// waiting.
func tryLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return f, nil
	}
	defer f.Close()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("%w: pid %s holds its lock file %s", ErrLocked, holder(f), path)
	}
	return nil, fmt.Errorf("lock %s: %w", path, err)
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
	f, err := tryLock(l.path)
	if err != nil {
		return fmt.Errorf("the lock file was removed or replaced under this server, and the state file is now %w; renewals stop", err)
	}
	l.f.Close()
	l.f = f
	log.Warn().Str("lock_file", l.path).Msg("the lock file vanished or was replaced while the server ran; took it again")
	return l.write()
}

func (l *lockFile) close() error { return l.f.Close() }
