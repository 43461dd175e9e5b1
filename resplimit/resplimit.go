// Package resplimit checks RESP request framing against size limits before
// a parser sees it, so that hostile input costs little CPU and memory.
//
// redcon v1.6.4's parser walks a declared array count every time more
// bytes arrive (`*2147483647\r\n` then slow bytes costs seconds of CPU per
// byte), buffers a declared bulk or an unterminated inline line of any
// size, re-parses an unfinished command from its first byte on every call,
// and allocates the rest of an inline line at every space in it. A Scanner
// reads the stream as it arrives: the first byte that breaks a limit or the
// grammar is reported with a Redis-worded error reply, and Partial tells
// how much of what came is an unfinished command, so the parser only ever
// sees whole ones.
package resplimit

import (
	"errors"
	"math"
)

// Limits bounds what one command may declare. A field of zero or less
// refuses every command that needs one; respserver fills in its defaults
// before it gets here.
//
// An inline line is also refused, as too big, once redcon's parser would
// allocate more than 16 × MaxBulkLen bytes for it (at least 1 MiB): it
// allocates the rest of the line again at every space and quote.
type Limits struct {
	// MaxBulkLen is the largest bulk string, and the longest inline command
	// line (counting a '\r' before its '\n'), in bytes.
	MaxBulkLen int
	// MaxMultibulkLen is the most elements in one command array, and the
	// most tokens on an inline line. Inline tokens are counted
	// conservatively: every space and quote may start one, because each
	// costs redcon's inline parser an allocation.
	MaxMultibulkLen int
}

// ErrLimit is wrapped by every error Scan returns; the error's text is the
// error reply to send the client, as Redis words it.
var ErrLimit = errors.New("resplimit: framing limit")

// violation is a framing error; its text is the error reply, as Redis words it.
type violation string

func (v violation) Error() string { return string(v) }
func (v violation) Unwrap() error { return ErrLimit }

const (
	errMultibulk = violation("ERR Protocol error: invalid multibulk length")
	errBulk      = violation("ERR Protocol error: invalid bulk length")
	errInline    = violation("ERR Protocol error: too big inline request")
)

// maxLimit is the largest limit that matters: a number up to it, times
// ten plus a digit, still fits in an int.
const maxLimit = (math.MaxInt - 9) / 10

// maxDigits bounds a length line: 19 digits hold any int64, and leading
// zeros (which redcon accepts) must not make the line endless.
const maxDigits = 19

// The inline budget bounds what redcon's inline parser may allocate for one
// line, as a multiple of MaxBulkLen with a floor. It allocates the rest of
// the line at each space or quote, so a 64 KiB line of spaces costs it
// 2 GiB and about 0.7 s; 1024 spaces before 63 KiB still cost 64 MiB and
// 18 ms. Sixteen lines' worth (1 MiB, ~0.3 ms, at the 64 KiB default) keeps
// the worst line near the cost of a plain long one (0.3 ms); telnet-style
// commands come nowhere near it.
const (
	inlineBudgetFactor = 16
	inlineBudgetFloor  = 1 << 20
	maxInlineBudget    = 1 << 61 // keeps the running cost from overflowing
)

type state uint8

const (
	stStart   state = iota // at a command boundary
	stCount                // digits after '*'
	stCountLF              // '\n' after the count
	stDollar               // '$' of the next bulk
	stLen                  // digits after '$'
	stLenLF                // '\n' after the length
	stData                 // bulk bytes
	stDataCR               // '\r' after the bulk
	stDataLF               // '\n' after the bulk
	stInline               // an inline command, up to '\n'
)

// Scanner follows the RESP request framing of one connection across
// arbitrary chunk boundaries. It accepts what redcon accepts, less signed
// lengths and empty arrays, within the limits, and reports the first byte
// that breaks a limit or the grammar. Inline quoting is left to redcon,
// which refuses bad quotes cheaply. The zero Scanner refuses everything;
// use NewScanner.
type Scanner struct {
	lim     Limits
	budget  int // inline allocation budget, from lim
	st      state
	num     int // the count or length being read
	digits  int
	args    int // bulks left in the current command
	remain  int // bulk bytes left
	partial int // bytes scanned since the last command end

	lineLen int // inline: bytes so far
	delims  int // inline: spaces and quotes so far
	cost    int // inline: what redcon will allocate for the line so far
}

// NewScanner returns a Scanner at the start of a stream, checking lim.
func NewScanner(lim Limits) Scanner {
	// Negative limits behave as zero. Clamping at maxLimit keeps the
	// digit arithmetic in scan free of overflow; no limit needs more.
	lim.MaxBulkLen = min(max(lim.MaxBulkLen, 0), maxLimit)
	lim.MaxMultibulkLen = min(max(lim.MaxMultibulkLen, 0), maxLimit)
	budget := maxInlineBudget
	if lim.MaxBulkLen < maxInlineBudget/inlineBudgetFactor {
		budget = max(lim.MaxBulkLen*inlineBudgetFactor, inlineBudgetFloor)
	}
	return Scanner{lim: lim, budget: budget}
}

// Scan consumes the next bytes of the stream and returns how many of them
// are valid. err is nil when all of p is; otherwise p[valid] is the first
// offending byte, err wraps ErrLimit, and the Scanner must not be used
// again. It allocates nothing.
func (s *Scanner) Scan(p []byte) (valid int, err error) {
	valid, end, err := s.scan(p)
	if end >= 0 {
		s.partial = valid - end
	} else {
		s.partial += valid
	}
	return valid, err
}

// Partial returns how many of the valid bytes scanned so far, at their
// end, belong to a command not yet complete.
func (s *Scanner) Partial() int { return s.partial }

// scan is Scan without the bookkeeping: end is the index just past the
// last command that ended in p, or -1.
func (s *Scanner) scan(p []byte) (valid, end int, err error) {
	end = -1
	i := 0
	for i < len(p) {
		b := p[i]
		switch s.st {
		case stStart:
			if b == '*' {
				s.st, s.num, s.digits = stCount, 0, 0
				break
			}
			s.st, s.lineLen, s.delims, s.cost = stInline, 0, 0, 0
			continue // the byte belongs to the inline line
		case stCount, stLen:
			bad, limit, next := errMultibulk, s.lim.MaxMultibulkLen, stCountLF
			if s.st == stLen {
				bad, limit, next = errBulk, s.lim.MaxBulkLen, stLenLF
			}
			if b == '\r' && s.digits > 0 {
				s.st = next
				break
			}
			if b < '0' || b > '9' || s.digits == maxDigits {
				return i, end, bad
			}
			// Refuse as soon as the number is too big, not at its end:
			// the digits could go on for ever.
			s.num = s.num*10 + int(b-'0')
			s.digits++
			if s.num > limit {
				return i, end, bad
			}
		case stCountLF:
			if b != '\n' || s.num < 1 {
				return i, end, errMultibulk
			}
			s.args, s.st = s.num, stDollar
		case stDollar:
			if b != '$' {
				return i, end, violation("ERR Protocol error: expected '$', got '" + printable(b) + "'")
			}
			s.st, s.num, s.digits = stLen, 0, 0
		case stLenLF:
			if b != '\n' {
				return i, end, errBulk
			}
			s.remain, s.st = s.num, stData
			if s.remain == 0 {
				s.st = stDataCR
			}
		case stData:
			n := min(s.remain, len(p)-i) // skip the data, not byte by byte
			i += n
			if s.remain -= n; s.remain == 0 {
				s.st = stDataCR
			}
			continue
		case stDataCR:
			if b != '\r' {
				return i, end, errBulk
			}
			s.st = stDataLF
		case stDataLF:
			if b != '\n' {
				return i, end, errBulk
			}
			if s.args--; s.args == 0 {
				s.st = stStart
				end = i + 1
			} else {
				s.st = stDollar
			}
		case stInline:
			if b == '\n' {
				s.st = stStart
				end = i + 1
				break
			}
			// redcon allocates the whole line, and the rest of it again
			// at each space or quote: each new byte lengthens every one
			// of those allocations so far.
			s.lineLen++
			s.cost += 1 + s.delims
			if b == ' ' || b == '"' || b == '\'' {
				s.delims++
			}
			if s.lineLen > s.lim.MaxBulkLen || s.delims >= s.lim.MaxMultibulkLen || s.cost > s.budget {
				return i, end, errInline
			}
		}
		i++
	}
	return i, end, nil
}

// printable keeps an error reply on one line whatever byte came.
func printable(b byte) string {
	if b < ' ' || b > '~' {
		return "?"
	}
	return string(rune(b))
}
