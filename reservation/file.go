package reservation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FileStore keeps the State in one file, replaced atomically.
type FileStore struct {
	Path string
}

// Load reads the state file. found is false, with no error, when there is
// no file: a first start.
func (f FileStore) Load() (s State, found bool, err error) {
	data, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("read state file %s: %w", f.Path, err)
	}
	s, err = Unmarshal(data)
	if err != nil {
		return State{}, false, fmt.Errorf("state file %s: %w", f.Path, err)
	}
	return s, true, nil
}

// Resume returns the reservation a generator with identity's server-id,
// layout and epoch must start from: 0 on a first start (no file), else the
// stored T. A file it cannot read, or one written for another identity, is
// an error naming the file; the file is left as it is.
func (f FileStore) Resume(identity State) (int64, error) {
	s, found, err := f.Load()
	if err != nil || !found {
		return 0, err
	}
	if err := s.Check(identity); err != nil {
		return 0, fmt.Errorf("state file %s: %w", f.Path, err)
	}
	return s.Reserved, nil
}

// Save writes s durably: a temporary file in the same directory, fsync,
// rename over the state file, fsync of the directory. A crash at any point
// leaves either the old state or the new one, never a mix. (Written here
// rather than taken from a library: the directory fsync is the part that
// matters and the common helpers leave it out.)
func (f FileStore) Save(s State) error {
	dir := filepath.Dir(f.Path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.Path)+".tmp*")
	if err != nil {
		return fmt.Errorf("save state file %s: %w", f.Path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename this finds nothing
	_, err = tmp.Write(s.Marshal())
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.Path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("save state file %s: %w", f.Path, err)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
