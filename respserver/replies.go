package respserver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/sequence"
)

// Replies whose wording clients and users know from Redis.
var (
	errNotInteger = errReply("ERR", "value is not an integer or out of range")
	errNoAuth     = errReply("NOAUTH", "Authentication required.")
	errWrongPass  = errReply("WRONGPASS", "invalid username-password pair or user is disabled.")
	errNoPassword = errReply("ERR", "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	errSyntax     = errReply("ERR", "syntax error")
)

func errArity(name string) error {
	return errReplyf("ERR", "wrong number of arguments for '%s' command", name)
}

func errSubcommand(sub []byte, cmd string) error {
	return errReplyf("ERR", "unknown subcommand '%.128s'. Try %s HELP.", sub, strings.ToUpper(cmd))
}

// errUnknown words the reply as Redis 7 does, quoting what the client sent.
func errUnknown(args [][]byte) error {
	var b strings.Builder
	fmt.Fprintf(&b, "unknown command '%.128s', with args beginning with: ", args[0])
	for _, a := range args[1:] {
		if b.Len() > 256 {
			break
		}
		fmt.Fprintf(&b, "'%.128s' ", a)
	}
	return errReply("ERR", b.String())
}

// replyError is an error reply of respserver's own: Redis's error code
// (ERR, NOAUTH, EXECABORT, ...) and the error, whose text is the rest of
// the reply, in Redis's words where Redis has the same reply.
type replyError struct {
	code string
	err  error
}

func (e *replyError) Error() string { return e.code + " " + e.err.Error() }
func (e *replyError) Unwrap() error { return e.err }

// errReply is the error reply code text.
func errReply(code, text string) error { return &replyError{code, errors.New(text)} }

// errReplyf is the error reply code and the text format makes of args
// (%w wraps, as in fmt.Errorf).
func errReplyf(code, format string, args ...any) error {
	return &replyError{code, fmt.Errorf(format, args...)}
}

// replyText turns an error into the text of an error reply: its Redis
// error code first, and no CR or LF, which would break the framing. The
// errors of respserver carry their code (replyError); the errors of other
// packages a command returns get theirs here, and any other is an ERR.
func replyText(err error) string {
	var re *replyError
	var le *idgen.LeadError
	var msg string
	switch {
	case errors.As(err, &re):
		msg = re.Error()
	case errors.As(err, &le):
		msg = "BUSY " + le.Error()
	case errors.Is(err, idgen.ErrNotReserved):
		msg = "BUSY " + err.Error()
		if err == idgen.ErrNotReserved { // no write failed yet: it is slow
			msg += " (the write to the state file, or to etcd in cluster mode, is slow or failing)"
		}
		msg += "; retry shortly"
	case errors.Is(err, sequence.ErrNotReserved):
		msg = "BUSY " + err.Error() + "; retry shortly"
	case errors.Is(err, idgen.ErrStopped), errors.Is(err, sequence.ErrStopped):
		msg = "ERR server is shutting down"
	default:
		msg = "ERR " + err.Error()
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, msg)
}

// keywordMax is longer than every keyword of every command (options,
// subcommands, INFO sections).
const keywordMax = 64

// keyword is arg lower-cased, to compare with a command's keywords: an
// argument longer than any keyword is none ("\x00", which matches none)
// at once, so what it costs does not grow with its length.
func keyword(arg []byte) string {
	if len(arg) > keywordMax {
		return "\x00"
	}
	return strings.ToLower(string(arg))
}

// parseInt parses a decimal int64 as Redis does: optional minus, digits,
// nothing else. It does not allocate, unlike strconv on a []byte.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + uint64(ch-'0')
	}
	switch {
	case !neg && n <= 1<<63-1:
		return int64(n), true
	case neg && n <= 1<<63:
		return int64(-n), true
	}
	return 0, false
}

// proto is the RESP version the client speaks.
func (c *client) proto() int {
	if c.resp3 {
		return 3
	}
	return 2
}

// writeMap writes the header of a map of n pairs: a map in RESP3, a flat
// array of 2n elements in RESP2, as Redis does.
func (c *client) writeMap(n int) {
	if !c.resp3 {
		c.writeArray(2 * n)
		return
	}
	c.Out = append(strconv.AppendInt(append(c.Out, '%'), int64(n), 10), '\r', '\n')
}
