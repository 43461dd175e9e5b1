package resplimit

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tidwall/redcon"

	"github.com/idserver/idserver/internal/replyerr"
)

var (
	testLimits = Limits{MaxBulkLen: 100, MaxMultibulkLen: 8}
	roomy      = Limits{MaxBulkLen: 1 << 20, MaxMultibulkLen: 1 << 20}
)

// scanChunks feeds in to a fresh scanner in chunks of the given sizes
// (cycled) and returns the total valid length and the error.
func scanChunks(lim Limits, in []byte, sizes ...int) (int, *replyerr.Error) {
	s := NewScanner(lim)
	total := 0
	for k := 0; total < len(in); k++ {
		n := min(max(sizes[k%len(sizes)], 1), len(in)-total)
		valid, err := s.Scan(in[total : total+n])
		total += valid
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// pipeline mixes multibulk and inline commands, empty bulks, a bulk that
// holds CRLFs and, with bulk100, one at MaxBulkLen.
const pipeline = "*1\r\n$5\r\nGETID\r\n*2\r\n$6\r\nMGETID\r\n$3\r\n100\r\nPING\r\n" +
	"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n" + "ECHO a b c\n" + "\r\n" + "ECHO 'x y' \"z\"\r\n" +
	"*3\r\n$1\r\na\r\n$4\r\n\r\n\r\n\r\n$100\r\n"

var bulk100 = strings.Repeat("z", 100) + "\r\n"

func TestScannerAcceptsValid(t *testing.T) {
	tests := []string{
		"*1\r\n$4\r\nPING\r\n",
		"PING\r\n",
		"PING\n",
		"\n",
		"*1\r\n$0\r\n\r\n",
		"*8\r\n" + strings.Repeat("$1\r\nx\r\n", 8),
		"*0\r\n*-1\r\n*-99999999999999999\r\n", // empty commands, which Redis skips
		"*1\r\n$100\r\n" + bulk100,
		strings.Repeat("x", 99) + "\r\n", // MaxBulkLen bytes counting the '\r'
		"a b c d e f g h\r\n",            // MaxMultibulkLen tokens
		pipeline + bulk100,
	}
	for _, in := range tests {
		if n, err := scanChunks(testLimits, []byte(in), len(in)); err != nil || n != len(in) {
			t.Errorf("%q: valid %d of %d, %v", in, n, len(in), err)
		}
	}
}

// TestScannerChunking feeds a stream of many commands in every chunking
// that matters: whole, a byte at a time, cut at every point, and random.
func TestScannerChunking(t *testing.T) {
	in := []byte(strings.Repeat(pipeline+bulk100, 3))
	for _, sizes := range [][]int{{len(in)}, {1}, {2}, {3, 7}, {13, 1, 5}} {
		if n, err := scanChunks(testLimits, in, sizes...); err != nil || n != len(in) {
			t.Fatalf("chunks %v: valid %d of %d, %v", sizes, n, len(in), err)
		}
	}
	for cut := 1; cut < len(in); cut++ {
		if n, err := scanChunks(testLimits, in, cut, len(in)); err != nil || n != len(in) {
			t.Fatalf("cut at %d: valid %d of %d, %v", cut, n, len(in), err)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		sizes := []int{r.IntN(40) + 1, r.IntN(40) + 1, r.IntN(40) + 1}
		if n, err := scanChunks(testLimits, in, sizes...); err != nil || n != len(in) {
			t.Fatalf("chunks %v: valid %d of %d, %v", sizes, n, len(in), err)
		}
	}
}

func TestScannerViolations(t *testing.T) {
	const (
		multibulk = "ERR Protocol error: invalid multibulk length"
		bulk      = "ERR Protocol error: invalid bulk length"
		inline    = "ERR Protocol error: too big inline request"
	)
	ok := "*1\r\n$4\r\nPING\r\n" // a valid command first: its bytes stay valid
	huge := Limits{MaxBulkLen: math.MaxInt, MaxMultibulkLen: math.MaxInt}
	tests := []struct {
		name    string
		lim     Limits
		in      string
		wantErr string
		at      int // offset of the offending byte
	}{
		{"count too large", testLimits, ok + "*2147483647\r\n", multibulk, len(ok) + 2},
		{"count one over", testLimits, ok + "*9\r\n", multibulk, len(ok) + 1},
		{"count minus alone", testLimits, "*-\r\n", multibulk, 2},
		{"count minus twice", testLimits, "*--1\r\n", multibulk, 2},
		{"count minus after a digit", testLimits, "*1-\r\n", multibulk, 2},
		{"count signed", testLimits, "*+1\r\n", multibulk, 1},
		{"count empty", testLimits, "*\r\n", multibulk, 1},
		{"count not a number", testLimits, "*1x\r\n", multibulk, 2},
		{"count bare LF", testLimits, "*1\n", multibulk, 2},
		{"count CR CR", testLimits, "*1\r\r", multibulk, 3},
		{"count endless digits", huge, "*" + strings.Repeat("1", 30), multibulk, 19},
		{"count leading zero", testLimits, "*08\r\n", multibulk, 2},
		{"count zero twice", testLimits, "*00\r\n", multibulk, 2},
		{"count minus zero", testLimits, "*-0\r\n", multibulk, 2},
		{"bulk too long", testLimits, "*1\r\n$1000000000\r\n", bulk, 8},
		{"bulk one over", testLimits, "*1\r\n$101\r\n", bulk, 7},
		{"bulk length past any int64", huge, "*1\r\n$9999999999999999999\r\n", bulk, 22},
		{"bulk length not a number", testLimits, "*1\r\n$x\r\n", bulk, 5},
		{"bulk length signed", testLimits, "*1\r\n$+4\r\nPING\r\n", bulk, 5},
		{"bulk length negative", testLimits, "*1\r\n$-1\r\n", bulk, 5},
		{"bulk length bare LF", testLimits, "*1\r\n$4\nPING\r\n", bulk, 6},
		{"bulk length past the limit", huge, "*1\r\n$11111111111111111111\r\n", bulk, 23},
		{"bulk length leading zero", testLimits, "*1\r\n$04\r\nPING\r\n", bulk, 6},
		{"missing $", testLimits, "*1\r\n:4\r\n", "ERR Protocol error: expected '$', got ':'", 4},
		{"missing $, unprintable", testLimits, "*2\r\n$4\r\nPING\r\n\n", "ERR Protocol error: expected '$', got '?'", 14},
		{"bulk longer than declared", testLimits, "*1\r\n$4\r\nPINGG\r\n", bulk, 12},
		{"bulk without CRLF", testLimits, "*1\r\n$4\r\nPING\rX", bulk, 13},
		{"bulk with bare LF", testLimits, "*1\r\n$4\r\nPING\n", bulk, 12},
		{"inline too long", testLimits, strings.Repeat("a", 101), inline, 100},
		{"inline too long with CR", testLimits, strings.Repeat("a", 100) + "\r\n", inline, 100},
		{"inline too many tokens", testLimits, ok + "a b c d e f g h i\r\n", inline, len(ok) + 15},
		{"inline spaces count", testLimits, "PING" + strings.Repeat(" ", 8), inline, 11},
		{"inline quotes count", testLimits, `SET k "" "" "" ""`, inline, 11},
		{"zero limits refuse multibulk", Limits{}, "*1\r\n", multibulk, 1},
		{"zero limits refuse inline", Limits{}, "PING\r\n", inline, 0},
	}
	for _, tt := range tests {
		for _, sizes := range [][]int{{len(tt.in)}, {1}, {3}} {
			n, err := scanChunks(tt.lim, []byte(tt.in), sizes...)
			if err == nil || err.Error() != tt.wantErr || n != tt.at || err.Code != replyerr.ERR {
				t.Errorf("%s: %q in chunks %v: valid %d, %v; want %d, %q", tt.name, tt.in, sizes, n, err, tt.at, tt.wantErr)
			}
		}
	}
}

// FuzzScanner checks that the scanner never panics, that chunking never
// changes its verdict, that whatever it accepts up to a command boundary
// redcon parses without a protocol error, and that it accepts any commands
// encoded the way client libraries send them.
func FuzzScanner(f *testing.F) {
	f.Add([]byte(pipeline+bulk100), uint8(3), uint16(100), uint8(8))
	f.Add([]byte("*2147483647\r\n$"), uint8(1), uint16(100), uint8(8))
	f.Add([]byte("*1\r\n$4\r\nPING\r\n*1\r\n$1000\r\n"), uint8(5), uint16(100), uint8(8))
	f.Add([]byte("ECHO \"a b\" 'c'\r\nPING\n"), uint8(2), uint16(100), uint8(8))
	f.Add([]byte("*1\r\n$4\r\nPING\r\nx\r\n*2\r\n$0\r\n\r\n$1\r\nx\r\n"), uint8(0), uint16(4), uint8(2))
	f.Add([]byte("*1\r\n$-1\r\n*0\r\n*1\r\n$4\nPING\r\n"), uint8(4), uint16(100), uint8(8))
	f.Add([]byte("      a\r\n"), uint8(1), uint16(1000), uint8(255))
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8, maxBulk uint16, maxMulti uint8) {
		lim := Limits{MaxBulkLen: int(maxBulk), MaxMultibulkLen: int(maxMulti)}
		whole, werr := scanChunks(lim, in, len(in))
		size := int(chunk%16) + 1
		split, serr := scanChunks(lim, in, size, size+3)
		if whole != split || (werr == nil) != (serr == nil) || werr != nil && werr.Error() != serr.Error() {
			t.Fatalf("whole: %d %v; in chunks of %d, %d: %d %v", whole, werr, size, size+3, split, serr)
		}
		if werr != nil && werr.Code != replyerr.ERR {
			t.Fatalf("error %v is not an ERR reply", werr)
		}
		// Differential: every complete array command the scanner accepted
		// must parse in redcon, but for empty ones (*0, *-1), which the
		// server skips itself. (The server splits inline lines itself.)
		s, boundary, starts := NewScanner(lim), 0, []int{0}
		for i := range whole {
			s.Scan(in[i : i+1])
			if s.st == stStart {
				boundary = i + 1
				starts = append(starts, boundary)
			}
		}
		// Partial agrees, however the bytes came.
		if whole-boundary != s.Partial() {
			t.Fatalf("byte by byte: Partial %d, want %d", s.Partial(), whole-boundary)
		}
		w := NewScanner(lim)
		if n, _ := w.Scan(in); n != whole || w.Partial() != whole-boundary {
			t.Fatalf("whole: valid %d, Partial %d; want %d, %d", n, w.Partial(), whole, whole-boundary)
		}
		for k := 1; k < len(starts); k++ {
			cmd := in[starts[k-1]:starts[k]]
			if n, empty := EmptyCommand(cmd); cmd[0] != '*' || empty && n == len(cmd) {
				continue
			}
			if _, err := redcon.NewReader(bytes.NewReader(cmd)).ReadCommand(); err != nil {
				t.Fatalf("scanner accepted %q, redcon says %v", cmd, err)
			}
		}
		// And what a client library would send is always accepted: the
		// input read as commands split at 0xff, arguments at 0xfe.
		var enc []byte
		for cmd := range bytes.SplitSeq(in, []byte{0xff}) {
			args := bytes.Split(cmd, []byte{0xfe})
			enc = fmt.Appendf(enc, "*%d\r\n", len(args))
			for _, a := range args {
				enc = fmt.Appendf(enc, "$%d\r\n%s\r\n", len(a), a)
			}
		}
		if n, err := scanChunks(roomy, enc, size); err != nil || n != len(enc) {
			t.Fatalf("client encoding %q: valid %d of %d, %v", enc, n, len(enc), err)
		}
	})
}

// TestPartial: Partial counts the bytes of an unfinished command at the
// end of what was scanned, across chunks, and is zero after a whole one.
func TestPartial(t *testing.T) {
	s := NewScanner(testLimits)
	for _, step := range []struct {
		in      string
		partial int
	}{
		{"*1\r\n$4", 6},
		{"\r\nPI", 10},
		{"NG\r\n", 0},
		{"PING\r\n*1\r\n$4\r\nPING\r\nGET", 3},
		{"ID", 5},
		{"\r\n", 0},
		{"", 0},
	} {
		n, err := s.Scan([]byte(step.in))
		if n != len(step.in) || err != nil || s.Partial() != step.partial {
			t.Fatalf("after %q: valid %d, %v, Partial %d; want all valid, Partial %d", step.in, n, err, s.Partial(), step.partial)
		}
	}
	// At a violation, Partial counts the valid bytes before it.
	n, err := s.Scan([]byte("*1\r\n$x"))
	if n != 5 || err == nil || s.Partial() != 5 {
		t.Fatalf("violation: valid %d, %v, Partial %d; want 5, an error, 5", n, err, s.Partial())
	}
}

func BenchmarkScan(b *testing.B) {
	in := []byte(strings.Repeat("*1\r\n$5\r\nGETID\r\n", 16))
	s := NewScanner(Limits{MaxBulkLen: 64 << 10, MaxMultibulkLen: 1024})
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Scan(in); err != nil {
			b.Fatal(err)
		}
	}
}

// TestUnauthenticated: a client that has not authenticated is held to
// Redis's limits for one, refused with its errors as soon as a length
// passes them, and scanned one command at a time, so that what follows
// its AUTH is scanned with the limits AUTH lifts.
func TestUnauthenticated(t *testing.T) {
	for _, tt := range []struct {
		in      string
		at      int
		wantErr string
	}{
		{"*11\r\n", 2, "ERR Protocol error: unauthenticated multibulk length"},
		{"*1\r\n$16385\r\n", 9, "ERR Protocol error: unauthenticated bulk length"},
		{"*1\r\n$100000000\r\n", 10, "ERR Protocol error: unauthenticated bulk length"},
		{"*2000\r\n", 2, "ERR Protocol error: unauthenticated multibulk length"},
	} {
		s := NewScanner(Limits{MaxBulkLen: 1 << 20, MaxMultibulkLen: 1024})
		s.Unauthenticated(true)
		n, err := s.Scan([]byte(tt.in))
		if err == nil || err.Error() != tt.wantErr || n != tt.at {
			t.Errorf("%q: valid %d, %v; want %d, %q", tt.in, n, err, tt.at, tt.wantErr)
		}
	}
	s := NewScanner(Limits{MaxBulkLen: 1 << 20, MaxMultibulkLen: 1024})
	s.Unauthenticated(true)
	auth := "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"
	big := "*11\r\n" + strings.Repeat("$1\r\nx\r\n", 11)
	in := []byte("*10\r\n" + strings.Repeat("$1\r\nx\r\n", 10) + "PING\r\n" + auth + big)
	for _, want := range []int{5 + 70, 6, len(auth)} {
		n, err := s.Scan(in)
		if n != want || err != nil || s.Partial() != 0 {
			t.Fatalf("stopped at %d, %v, Partial %d; want one command, %d bytes", n, err, s.Partial(), want)
		}
		in = in[n:]
	}
	s.Unauthenticated(false)
	if n, err := s.Scan(in); n != len(big) || err != nil {
		t.Fatalf("after AUTH: valid %d, %v; want all %d", n, err, len(big))
	}
}
