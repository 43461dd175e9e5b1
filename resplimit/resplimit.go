// Package resplimit checks RESP request framing against size limits before
// a parser sees it, so that hostile input costs little CPU and memory.
//
// redcon v1.6.4's parser walks a declared array count every time more
// bytes arrive (`*2147483647\r\n` then slow bytes costs seconds of CPU per
// byte), buffers a declared bulk or an unterminated inline line of any
// size, and re-parses an unfinished command from its first byte on every
// call. A Scanner reads the stream as it arrives: the first byte that
// breaks a limit or the grammar is reported with a Redis-worded error
// reply, and Partial tells how much of what came is an unfinished
// command, so the parser only ever sees whole ones.
package resplimit

import (
	"bytes"
	"math"

	"github.com/idserver/idserver/internal/replyerr"
)

// Limits bounds what one command may declare. A field of zero or less
// refuses every command that needs one; respserver fills in its defaults
// before it gets here.
type Limits struct {
	// MaxBulkLen is the largest bulk string, and the longest inline command
	// line (counting a '\r' before its '\n'), in bytes.
	MaxBulkLen int
	// MaxMultibulkLen is the most elements in one command array, and the
	// most tokens on an inline line. Inline tokens are counted
	// conservatively: every space and quote may start one.
	MaxMultibulkLen int
}

// The framing errors, each the error reply Redis sends before it closes
// the connection.
var (
	errMultibulk = replyerr.New(replyerr.ERR, "Protocol error: invalid multibulk length")
	errBulk      = replyerr.New(replyerr.ERR, "Protocol error: invalid bulk length")
	errInline    = replyerr.New(replyerr.ERR, "Protocol error: too big inline request")

	errUnauthMultibulk = replyerr.New(replyerr.ERR, "Protocol error: unauthenticated multibulk length")
	errUnauthBulk      = replyerr.New(replyerr.ERR, "Protocol error: unauthenticated bulk length")
)

// Redis's limits for a client that has not authenticated (networking.c,
// processMultibulkBuffer): before AUTH, nobody can have the server hold
// more than a few small arguments.
const (
	unauthMultibulkLen = 10
	unauthBulkLen      = 16384
)

// maxLimit is the largest limit that matters: a number up to it, times
// ten plus a digit, still fits in an int.
const maxLimit = (math.MaxInt - 9) / 10

// maxDigits bounds a length line: 19 digits hold any int64.
const maxDigits = 19

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
// arbitrary chunk boundaries. It accepts what Redis accepts (no signed
// lengths, no leading zeros), within the limits, and reports the first byte that breaks a
// limit or the grammar. An empty or negative array count (*0, *-1) is a
// command of its own with no arguments, which Redis skips. Inline quoting is left to redcon,
// which refuses bad quotes cheaply. The zero Scanner refuses everything;
// use NewScanner.
type Scanner struct {
	lim     Limits
	st      state
	num     int // the count or length being read
	digits  int
	neg     bool // the count has a '-': the command is empty, as Redis skips it
	args    int  // bulks left in the current command
	remain  int  // bulk bytes left
	partial int  // bytes scanned since the last command end

	unauth  bool // the client has not authenticated: see Unauthenticated
	lineLen int  // inline: bytes so far
	delims  int  // inline: spaces and quotes so far
}

// NewScanner returns a Scanner at the start of a stream, checking lim.
func NewScanner(lim Limits) Scanner {
	// Negative limits behave as zero. Clamping at maxLimit keeps the
	// digit arithmetic in scan free of overflow; no limit needs more.
	lim.MaxBulkLen = min(max(lim.MaxBulkLen, 0), maxLimit)
	lim.MaxMultibulkLen = min(max(lim.MaxMultibulkLen, 0), maxLimit)
	return Scanner{lim: lim}
}

// Scan consumes the next bytes of the stream and returns how many of them
// are valid. err is nil when all of p is; otherwise p[valid] is the first
// offending byte, err is the error reply to send before closing, and the
// Scanner must not be used again. It allocates nothing.
func (s *Scanner) Scan(p []byte) (valid int, err *replyerr.Error) {
	valid, end, err := s.scan(p)
	if end >= 0 {
		s.partial = valid - end
	} else {
		s.partial += valid
	}
	return valid, err
}

// Unauthenticated holds a client that has not authenticated, while on, to
// Redis's limits for one: at most 10 elements in a command and bulks of
// at most 16 KiB, refused with Redis's "unauthenticated" errors as soon
// as their length is read. Scan then stops after each command (valid is
// less than len(p), with no error): that command, its AUTH, must run
// before what follows is scanned, which may then be bigger.
func (s *Scanner) Unauthenticated(on bool) { s.unauth = on }

// Partial returns how many of the valid bytes scanned so far, at their
// end, belong to a command not yet complete.
func (s *Scanner) Partial() int { return s.partial }

// scan is Scan without the bookkeeping: end is the index just past the
// last command that ended in p, or -1.
func (s *Scanner) scan(p []byte) (valid, end int, err *replyerr.Error) {
	end = -1
	i := 0
	for i < len(p) {
		b := p[i]
		switch s.st {
		case stStart:
			if b == '*' {
				s.st, s.num, s.digits, s.neg = stCount, 0, 0, false
				break
			}
			s.st, s.lineLen, s.delims = stInline, 0, 0
			continue // the byte belongs to the inline line
		case stCount, stLen:
			bad, limit, next := errMultibulk, s.lim.MaxMultibulkLen, stCountLF
			if s.unauth && limit > unauthMultibulkLen {
				bad, limit = errUnauthMultibulk, unauthMultibulkLen
			}
			if s.st == stLen {
				bad, limit, next = errBulk, s.lim.MaxBulkLen, stLenLF
				if s.unauth && limit > unauthBulkLen {
					bad, limit = errUnauthBulk, unauthBulkLen
				}
			}
			if b == '\r' && s.digits > 0 {
				s.st = next
				break
			}
			if b == '-' && s.st == stCount && s.digits == 0 && !s.neg {
				s.neg = true
				break
			}
			// As Redis's string2ll: no leading zeros, no "-0".
			leadingZero := s.digits == 1 && s.num == 0 && !s.neg || s.digits == 0 && s.neg && b == '0'
			if b < '0' || b > '9' || s.digits == maxDigits || leadingZero {
				return i, end, bad
			}
			// Refuse as soon as the number is too big, not at its end:
			// the digits could go on for ever.
			s.digits++
			if s.neg {
				break // any negative count is an empty command: its size does not matter
			}
			s.num = s.num*10 + int(b-'0')
			if s.num > limit {
				return i, end, bad
			}
		case stCountLF:
			if b != '\n' {
				return i, end, errMultibulk
			}
			if s.neg || s.num == 0 { // *0 and *-1: no command, as Redis reads them
				s.st = stStart
				end = i + 1
				if s.unauth {
					return end, end, nil
				}
				break
			}
			s.args, s.st = s.num, stDollar
		case stDollar:
			if b != '$' {
				return i, end, replyerr.New(replyerr.ERR, "Protocol error: expected '$', got '"+printable(b)+"'")
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
				if s.unauth {
					return end, end, nil
				}
			} else {
				s.st = stDollar
			}
		case stInline:
			if b == '\n' {
				s.st = stStart
				end = i + 1
				if s.unauth {
					return end, end, nil
				}
				break
			}
			s.lineLen++
			if b == ' ' || b == '"' || b == '\'' {
				s.delims++
			}
			if s.lineLen > s.lim.MaxBulkLen || s.delims >= s.lim.MaxMultibulkLen {
				return i, end, errInline
			}
		}
		i++
	}
	return i, end, nil
}

// EmptyCommand reports whether buf, at a command boundary of a stream the
// Scanner accepted, starts with an empty or negative array count (*0,
// *-1), which Redis skips without a reply, and if so how many bytes that
// line takes. (redcon's parser refuses those.)
func EmptyCommand(buf []byte) (n int, ok bool) {
	if len(buf) < 2 || buf[0] != '*' {
		return 0, false
	}
	end := bytes.IndexByte(buf, '\n')
	if end < 0 {
		return 0, false
	}
	count := bytes.TrimRight(buf[1:end], "\r")
	if len(count) == 0 || count[0] != '-' && len(bytes.TrimLeft(count, "0")) > 0 {
		return 0, false
	}
	return end + 1, true
}

// printable keeps an error reply on one line whatever byte came.
func printable(b byte) string {
	if b < ' ' || b > '~' {
		return "?"
	}
	return string(rune(b))
}
