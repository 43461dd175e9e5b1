package sequence

import (
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// unmapResident drops the pages of db's mapping of its file from the
// process's resident set; the file and the kernel's cache of it are
// untouched (the mapping is shared and read-only: a later read faults
// the page back in from the cache). bbolt reads a page through its
// mapping, and it stays resident until the mapping goes: an append to
// the log reads the last leaf, and every leaf of the log is the last in
// its turn, so the server's RSS grew by what the log held, and a graceful
// stop's writes by what they wrote (477 MB over its heap at a million
// keys of 512 bytes).
func unmapResident(db *bolt.DB) {
	var size int64
	if db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil }) != nil || size == 0 {
		return
	}
	unix.Syscall(unix.SYS_MADVISE, db.Info().Data, uintptr(size), unix.MADV_DONTNEED)
}
