//go:build !linux

package sequence

// hugePages is a hint only Linux takes.
func hugePages(b []byte) {}
