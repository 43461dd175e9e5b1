package sequence

import "golang.org/x/sys/unix"

// hugePages asks the kernel to back b with huge pages, now: a hint, whose
// failure (an older kernel, transparent huge pages off) costs only speed.
func hugePages(b []byte) {
	if unix.Madvise(b, unix.MADV_HUGEPAGE) == nil {
		unix.Madvise(b, unix.MADV_COLLAPSE)
	}
}
