package resplimit

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"
)

var testLimits = Limits{MaxBulkLen: 100, MaxMultibulkLen: 8}

// scanChunks feeds in to a fresh scanner in chunks of the given sizes
// (cycled) and returns the total valid length and the error.
func scanChunks(in []byte, sizes ...int) (int, error) {
	s := scanner{lim: testLimits}
	total := 0
	for k := 0; total < len(in); k++ {
		n := min(sizes[k%len(sizes)], len(in)-total)
		valid, err := s.scan(in[total : total+n])
		total += valid
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

const pipeline = "*1\r\n$5\r\nGETID\r\n*2\r\n$6\r\nMGETID\r\n$3\r\n100\r\nPING\r\n" +
	"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n" + "ECHO a b c\n" + "*3\r\n$1\r\na\r\n$4\r\n\r\n\r\n\r\n$100\r\n"

var bulk100 = strings.Repeat("z", 100) + "\r\n"

func TestScannerAcceptsValidStreams(t *testing.T) {
	in := []byte(pipeline + bulk100)
	for _, sizes := range [][]int{{len(in)}, {1}, {2}, {3, 7}, {13, 1, 5}} {
		if n, err := scanChunks(in, sizes...); err != nil || n != len(in) {
			t.Fatalf("chunks %v: valid %d of %d, %v", sizes, n, len(in), err)
		}
	}
	// Every split point into two chunks.
	for cut := 0; cut <= len(in); cut++ {
		if n, err := scanChunks(in, cut+1, len(in)); err != nil || n != len(in) {
			t.Fatalf("split at %d: valid %d of %d, %v", cut, n, len(in), err)
		}
	}
}

func TestScannerViolations(t *testing.T) {
	ok := "*1\r\n$4\r\nPING\r\n" // a valid command first: its bytes stay valid
	tests := []struct {
		in      string
		wantErr string
		at      int // offset of the offending byte
	}{
		{ok + "*2147483647\r\n", "ERR Protocol error: invalid multibulk length", len(ok) + 2},
		{ok + "*9\r\n", "ERR Protocol error: invalid multibulk length", len(ok) + 1},
		{"*0\r\n", "ERR Protocol error: invalid multibulk length", 3},
		{"*-1\r\n", "ERR Protocol error: invalid multibulk length", 1},
		{"*\r\n", "ERR Protocol error: invalid multibulk length", 1},
		{"*1\n", "ERR Protocol error: invalid multibulk length", 2},
		{"*1\r\r", "ERR Protocol error: invalid multibulk length", 3},
		{"*1\r\n$1000000000\r\n", "ERR Protocol error: invalid bulk length", 8},
		{"*1\r\n$101\r\n", "ERR Protocol error: invalid bulk length", 7},
		{"*1\r\n$x\r\n", "ERR Protocol error: invalid bulk length", 5},
		{"*1\r\n$+4\r\nPING\r\n", "ERR Protocol error: invalid bulk length", 5},
		{"*1\r\n$00000000000000000001\r\n", "ERR Protocol error: invalid bulk length", 24},
		{"*1\r\n:4\r\n", "ERR Protocol error: expected '$', got ':'", 4},
		{"*2\r\n$4\r\nPING\r\n\n", "ERR Protocol error: expected '$', got '?'", 14},
		{"*1\r\n$4\r\nPINGG\r\n", "ERR Protocol error: invalid bulk length", 12},
		{"*1\r\n$4\r\nPING\rX", "ERR Protocol error: invalid bulk length", 13},
		{strings.Repeat("a", 101), "ERR Protocol error: too big inline request", 100},
		{ok + "a b c d e f g h i\r\n", "ERR Protocol error: too big inline request", len(ok) + 16},
	}
	for _, tt := range tests {
		for _, sizes := range [][]int{{len(tt.in)}, {1}, {3}} {
			n, err := scanChunks([]byte(tt.in), sizes...)
			if err == nil || err.Error() != tt.wantErr || n != tt.at || !errors.Is(err, ErrLimit) {
				t.Errorf("%q in chunks %v: valid %d, %v; want %d, %q", tt.in, sizes, n, err, tt.at, tt.wantErr)
			}
		}
	}
}

// FuzzScanner checks that chunking never changes the verdict, and that what
// the scanner accepts redcon parses without a protocol error.
func FuzzScanner(f *testing.F) {
	f.Add([]byte(pipeline+bulk100), uint8(3))
	f.Add([]byte("*2147483647\r\n$"), uint8(1))
	f.Add([]byte("*1\r\n$4\r\nPING\r\n*1\r\n$1000\r\n"), uint8(5))
	f.Add([]byte("ECHO \"a b\" 'c'\r\nPING\n"), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		whole, werr := scanChunks(in, len(in)+1)
		split, serr := scanChunks(in, int(chunk%16)+1)
		if whole != split || (werr == nil) != (serr == nil) || werr != nil && werr.Error() != serr.Error() {
			t.Fatalf("whole: %d %v; in chunks of %d: %d %v", whole, werr, chunk%16+1, split, serr)
		}
		// Differential: every complete command the scanner accepted must
		// parse in redcon exactly as framed.
		var s scanner
		s.lim = testLimits
		if _, err := s.scan(in[:whole]); err != nil || s.st != stStart {
			return // not at a command boundary: nothing complete to compare
		}
		rd := redcon.NewReader(bytes.NewReader(in[:whole]))
		for {
			_, err := rd.ReadCommand()
			if err == io.EOF {
				break
			}
			if err != nil && !strings.Contains(err.Error(), "unbalanced quotes") {
				// Quotes are redcon's own inline syntax; the scanner
				// leaves them to it.
				t.Fatalf("scanner accepted %q, redcon says %v", in[:whole], err)
			}
			if err != nil {
				break
			}
		}
	})
}

// TestConnReportsAfterValidPrefix drives the wrapper over a pipe: the valid
// prefix is handed on first, then the error reply is written and Read fails.
func TestConnReportsAfterValidPrefix(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	c := Conn(server, testLimits)
	replies := make(chan string, 1)
	go func() {
		client.Write([]byte("*1\r\n$4\r\nPING\r\n*99\r\n"))
		b, _ := io.ReadAll(client)
		replies <- string(b)
	}()
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "*1\r\n$4\r\nPING\r\n*" {
		t.Fatalf("first Read: %q, %v", buf[:n], err)
	}
	if _, err := c.Read(buf); !errors.Is(err, ErrLimit) {
		t.Fatalf("second Read: %v, want ErrLimit", err)
	}
	c.Close()
	select {
	case got := <-replies:
		if got != "-ERR Protocol error: invalid multibulk length\r\n" {
			t.Fatalf("client got %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no reply")
	}
}

func TestScannerRandomSplits(t *testing.T) {
	in := []byte(strings.Repeat(pipeline+bulk100, 20))
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		sizes := []int{r.IntN(40) + 1, r.IntN(40) + 1, r.IntN(40) + 1}
		if n, err := scanChunks(in, sizes...); err != nil || n != len(in) {
			t.Fatalf("chunks %v: valid %d of %d, %v", sizes, n, len(in), err)
		}
	}
}

func BenchmarkScan(b *testing.B) {
	in := []byte(strings.Repeat("*1\r\n$5\r\nGETID\r\n", 16))
	s := scanner{lim: Limits{MaxBulkLen: 64 << 10, MaxMultibulkLen: 1024}}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.scan(in); err != nil {
			b.Fatal(err)
		}
	}
}
