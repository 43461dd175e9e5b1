package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: Write makes a file, replaces it whole, and leaves no
// temporary file behind, nor after a failure.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, data := range []string{"first\n", "second, longer\n", ""} {
		if err := Write(path, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != data {
			t.Fatalf("after Write(%q): %q, %v", data, got, err)
		}
	}
	if err := Write(filepath.Join(dir, "no such dir", "f"), []byte("x")); err == nil {
		t.Error("Write into a missing directory: no error")
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(dir, "d"), []byte("x")); err == nil {
		t.Error("Write over a directory: no error")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "f" && e.Name() != "d" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
