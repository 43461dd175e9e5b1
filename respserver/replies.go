package respserver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/idserver/idserver/idgen"
)

// Replies whose wording clients and users know from Redis.
var (
	errNotInteger = errors.New("ERR value is not an integer or out of range")
	errNoAuth     = errors.New("NOAUTH Authentication required.")
	errWrongPass  = errors.New("WRONGPASS invalid username-password pair or user is disabled.")
	errNoPassword = errors.New("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	errSyntax     = errors.New("ERR syntax error")
)

func errArity(name string) error {
	return fmt.Errorf("ERR wrong number of arguments for '%s' command", name)
}

func errSubcommand(sub []byte, cmd string) error {
	return fmt.Errorf("ERR unknown subcommand '%.128s'. Try %s HELP.", sub, strings.ToUpper(cmd))
}

// errUnknown words the reply as Redis 7 does, quoting what the client sent.
func errUnknown(args [][]byte) error {
	var b strings.Builder
	fmt.Fprintf(&b, "ERR unknown command '%.128s', with args beginning with: ", args[0])
	for _, a := range args[1:] {
		if b.Len() > 256 {
			break
		}
		fmt.Fprintf(&b, "'%.128s' ", a)
	}
	return errors.New(b.String())
}

// replyText turns an error into the text of an error reply: a Redis error
// code first, and no CR or LF, which would break the framing.
func replyText(err error) string {
	var le *idgen.LeadError
	var msg string
	switch {
	case errors.As(err, &le):
		msg = "BUSY " + le.Error()
	case errors.Is(err, idgen.ErrNotReserved):
		msg = "BUSY " + strings.TrimPrefix(err.Error(), "idgen: ")
	case errors.Is(err, idgen.ErrClosed):
		msg = "ERR server is shutting down"
	default:
		msg = strings.TrimPrefix(err.Error(), "idgen: ")
		if i := strings.IndexByte(msg, ' '); i <= 0 || strings.ToUpper(msg[:i]) != msg[:i] {
			msg = "ERR " + msg
		}
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, msg)
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
