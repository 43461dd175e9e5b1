// Package resplimit enforces RESP framing limits on a connection before the
// bytes reach redcon's parser.
//
// redcon v1.6.4 walks a declared array count every time more bytes arrive
// (`*2147483647\r\n` then slow bytes costs seconds of CPU per byte), buffers
// a declared bulk or an unterminated inline line of any size, re-parses an
// unfinished command from its first byte on every read, and allocates the
// rest of an inline line at every space in it. A connection wrapped here is
// scanned as it is read: the first byte that breaks a limit or the grammar
// ends it with a Redis-worded error reply, after the complete commands before
// it have been answered. Valid traffic passes through unchanged.
package resplimit

import (
	"errors"
	"math"
	"net"
	"time"
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

// ErrLimit is wrapped by every error this package returns from Read; the
// error's text is the reply the client was sent.
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

// scanner follows the RESP request framing across arbitrary chunk
// boundaries. It accepts what redcon accepts, less signed lengths, within
// the limits, and reports the first byte that breaks a limit or the grammar.
// Inline quoting is left to redcon, which refuses bad quotes cheaply.
type scanner struct {
	lim    Limits
	budget int // inline allocation budget, from lim
	st     state
	num    int // the count or length being read
	digits int
	args   int    // bulks left in the current command
	remain int    // bulk bytes left
	ends   uint64 // commands completed so far, for Conn.Read

	lineLen int // inline: bytes so far
	delims  int // inline: spaces and quotes so far
	cost    int // inline: what redcon will allocate for the line so far
}

func newScanner(lim Limits) scanner {
	// Negative limits behave as zero. Clamping at maxLimit keeps the
	// digit arithmetic in scan free of overflow; no limit needs more.
	lim.MaxBulkLen = min(max(lim.MaxBulkLen, 0), maxLimit)
	lim.MaxMultibulkLen = min(max(lim.MaxMultibulkLen, 0), maxLimit)
	budget := maxInlineBudget
	if lim.MaxBulkLen < maxInlineBudget/inlineBudgetFactor {
		budget = max(lim.MaxBulkLen*inlineBudgetFactor, inlineBudgetFloor)
	}
	return scanner{lim: lim, budget: budget}
}

// scan consumes p and returns how many bytes of it are valid. err is nil
// when all of p is valid; otherwise p[valid] is the offending byte and the
// scanner must not be used again.
func (s *scanner) scan(p []byte) (valid int, err error) {
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
				return i, bad
			}
			// Refuse as soon as the number is too big, not at its end:
			// the digits could go on for ever.
			s.num = s.num*10 + int(b-'0')
			s.digits++
			if s.num > limit {
				return i, bad
			}
		case stCountLF:
			if b != '\n' || s.num < 1 {
				return i, errMultibulk
			}
			s.args, s.st = s.num, stDollar
		case stDollar:
			if b != '$' {
				return i, violation("ERR Protocol error: expected '$', got '" + printable(b) + "'")
			}
			s.st, s.num, s.digits = stLen, 0, 0
		case stLenLF:
			if b != '\n' {
				return i, errBulk
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
				return i, errBulk
			}
			s.st = stDataLF
		case stDataLF:
			if b != '\n' {
				return i, errBulk
			}
			if s.args--; s.args == 0 {
				s.st = stStart
				s.ends++
			} else {
				s.st = stDollar
			}
		case stInline:
			if b == '\n' {
				s.st = stStart
				s.ends++
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
				return i, errInline
			}
		}
		i++
	}
	return i, nil
}

// printable keeps an error reply on one line whatever byte came.
func printable(b byte) string {
	if b < ' ' || b > '~' {
		return "?"
	}
	return string(rune(b))
}

// Conn wraps c so its reads are checked against lim. Its Read, like any
// stream's, is for one goroutine at a time; everything else passes through.
func Conn(c net.Conn, lim Limits) net.Conn {
	return &conn{Conn: c, sc: newScanner(lim)}
}

type conn struct {
	net.Conn
	sc       scanner
	pending  error // a violation not yet reported
	reported bool
}

// Read hands on only valid bytes.
//
// Rather than return whatever has arrived, it keeps reading into p until p
// holds the end of a command or is full: redcon re-parses an unfinished
// command from its first byte after every read, so a client sending a
// command a byte at a time would otherwise cost time quadratic in the
// command's length. Nothing is delayed that redcon could act on; but a read
// deadline (redcon's idle close) now has to cover a whole command, not
// just its next byte.
//
// At a violation it first returns the valid prefix, so redcon answers the
// complete commands in it (its loop flushes the replies before it reads
// again); the next Read sends the error reply and fails, and redcon closes
// the connection.
func (c *conn) Read(p []byte) (int, error) {
	if c.pending != nil {
		return 0, c.fail()
	}
	ends, n := c.sc.ends, 0
	for {
		m, err := c.Conn.Read(p[n:])
		valid, verr := c.sc.scan(p[n : n+m])
		n += valid
		if verr != nil {
			c.pending = verr
			if n > 0 {
				return n, nil
			}
			return 0, c.fail()
		}
		if err != nil || n == len(p) || c.sc.ends != ends {
			return n, err
		}
	}
}

func (c *conn) fail() error {
	if !c.reported {
		c.reported = true
		// A client that sends junk may not read either: do not let it
		// hold this goroutine. The connection is closed next anyway.
		c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		c.Conn.Write([]byte("-" + c.pending.Error() + "\r\n"))
	}
	return c.pending
}

// CloseRead shuts the reading side of the connection, so a server can stop
// taking requests and still write the replies it owes.
func (c *conn) CloseRead() error {
	if cr, ok := c.Conn.(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return c.Conn.SetReadDeadline(time.Now())
}

// Listener wraps ln so every accepted connection is checked against lim.
func Listener(ln net.Listener, lim Limits) net.Listener {
	return &listener{Listener: ln, lim: lim}
}

type listener struct {
	net.Listener
	lim Limits
}

// Accept wraps the next connection.
func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Conn(c, l.lim), nil
}
