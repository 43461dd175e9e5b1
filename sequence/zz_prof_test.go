package sequence

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

func TestZZProfLoad(t *testing.T) {
	if os.Getenv("ZZPROF") == "" {
		t.Skip()
	}
	path := filepath.Join("/tmp/zzprof", "idserver.seq")
	if _, err := os.Stat(path); err != nil {
		os.MkdirAll("/tmp/zzprof", 0o755)
		f, _, _, err := OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		marks := make([]Mark, 1000000)
		pad := strings.Repeat("x", 500)
		for i := range marks {
			marks[i] = Mark{Key: fmt.Sprintf("%s%012d", pad, i), Value: 3, Reserved: 40, Born: true}
		}
		if err := <-f.Fold(func() []Mark { return marks }); err != nil {
			t.Fatal(err)
		}
		if err := f.Release(context.Background(), marks); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if os.Getenv("ZZLIMIT") != "" {
		debug.SetMemoryLimit(957 << 20)
	}
	pf, _ := os.Create("/tmp/zzprof/cpu.out")
	pprof.StartCPUProfile(pf)
	begin := time.Now()
	f, marks, r, err := OpenFile(path)
	read := time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	tb := New(Options{KeepSlot: func(int) bool { return true }}, f, marks)
	t.Logf("read %v, New %v, %d keys, clean %v", read, time.Since(begin)-read, tb.Len(), r.Clean)
	pprof.StopCPUProfile()
}
