// Package resplimit enforces RESP framing limits on a connection before the
// bytes reach redcon's parser.
//
// redcon v1.6.4 walks a declared array count every time more bytes arrive
// (`*2147483647\r\n` then slow bytes costs seconds of CPU per byte), buffers
// a declared bulk or an unterminated inline line of any size, and allocates
// per token of an inline line. A connection wrapped here is scanned as it is
// read: the first byte that breaks a limit or the grammar ends it with a
// Redis-worded error reply, after the complete commands before it have been
// answered. Valid traffic passes through untouched.
package resplimit

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Limits bounds what one command may declare.
type Limits struct {
	// MaxBulkLen is the largest bulk string, and the longest inline command
	// line, in bytes.
	MaxBulkLen int
	// MaxMultibulkLen is the most elements in one command array, and the
	// most tokens on an inline line.
	MaxMultibulkLen int
}

// ErrLimit is wrapped by every error this package returns from Read.
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

// scanner follows the RESP request framing across arbitrary chunk
// boundaries. It accepts a subset of what redcon accepts (digits without
// sign, CRLF everywhere redcon wants it) and reports the first byte that
// breaks a limit or the grammar.
type scanner struct {
	lim     Limits
	st      state
	num     int // the count or length being read
	digits  int
	args    int // bulks left in the current command
	remain  int // bulk bytes left
	lineLen int // inline: bytes so far
	tokens  int // inline: tokens so far
	inToken bool
}

// scan consumes p and returns how many bytes of it are valid. err is nil
// when all of p is valid; otherwise p[valid] is the offending byte.
func (s *scanner) scan(p []byte) (valid int, err error) {
	i := 0
	for i < len(p) {
		b := p[i]
		switch s.st {
		case stStart:
			if b == '*' {
				s.st, s.num, s.digits = stCount, 0, 0
				i++
				continue
			}
			s.st, s.lineLen, s.tokens, s.inToken = stInline, 0, 0, false
			continue // the byte belongs to the inline line
		case stCount, stLen:
			bad := errMultibulk
			limit := s.lim.MaxMultibulkLen
			if s.st == stLen {
				bad, limit = errBulk, s.lim.MaxBulkLen
			}
			if b == '\r' && s.digits > 0 {
				s.st++ // to the matching LF state
				i++
				continue
			}
			if b < '0' || b > '9' || s.digits == maxDigits {
				return i, bad
			}
			s.num = s.num*10 + int(b-'0')
			s.digits++
			// Refuse as soon as the number is too big, not at its end:
			// the digits could go on for ever.
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
			} else {
				s.st = stDollar
			}
		case stInline:
			if b == '\n' {
				s.st = stStart
				break
			}
			if s.lineLen++; s.lineLen > s.lim.MaxBulkLen {
				return i, errInline
			}
			if b == ' ' {
				s.inToken = false
			} else if !s.inToken {
				s.inToken = true
				if s.tokens++; s.tokens > s.lim.MaxMultibulkLen {
					return i, errInline
				}
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

// Conn wraps c so its reads are checked against lim.
func Conn(c net.Conn, lim Limits) net.Conn {
	return &conn{Conn: c, sc: scanner{lim: lim}}
}

type conn struct {
	net.Conn
	sc      scanner
	pending error // a violation not yet reported
	once    sync.Once
}

// Read hands on only the valid bytes. At a violation it first returns the
// valid prefix, so redcon answers the complete commands in it (its loop
// flushes replies before it reads again); the next Read sends the error
// reply and fails, and redcon closes the connection.
func (c *conn) Read(p []byte) (int, error) {
	if c.pending != nil {
		return 0, c.fail()
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		valid, verr := c.sc.scan(p[:n])
		if verr != nil {
			c.pending = verr
			if valid > 0 {
				return valid, nil
			}
			return 0, c.fail()
		}
	}
	return n, err
}

func (c *conn) fail() error {
	c.once.Do(func() {
		// A client that sends junk may not read either: do not let it
		// hold this goroutine.
		c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		c.Conn.Write([]byte("-" + c.pending.Error() + "\r\n"))
	})
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
