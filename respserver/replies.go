package respserver

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/replyerr"
	"github.com/idserver/idserver/sequence"
)

// Replies whose wording clients and users know from Redis.
var (
	errNotInteger = replyerr.New(replyerr.ERR, "value is not an integer or out of range")
	errNoAuth     = replyerr.New(replyerr.NOAUTH, "Authentication required.")
	errWrongPass  = replyerr.New(replyerr.WRONGPASS, "invalid username-password pair or user is disabled.")
	errNoPassword = replyerr.New(replyerr.ERR, "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	errSyntax     = replyerr.New(replyerr.ERR, "syntax error")
	errOverflow   = replyerr.New(replyerr.ERR, "increment or decrement would overflow")

	errShuttingDown = replyerr.New(replyerr.ERR, "server is shutting down")
)

func errArity(name string) error {
	return replyerr.Errorf("wrong number of arguments for '%s' command", name)
}

func errSubcommand(sub []byte, cmd string) error {
	return replyerr.Errorf("unknown subcommand '%s'. Try %s HELP.", cString(sub, 128), strings.ToUpper(cmd))
}

// errSubcommandSyntax is Redis's reply to an unknown subcommand, or one
// with the wrong number of arguments, of a command that checks its
// subcommands itself (DEBUG).
func errSubcommandSyntax(args [][]byte) error {
	return replyerr.Errorf("unknown subcommand or wrong number of arguments for '%s'. Try %s HELP.", cString(args[1], 128), bytes.ToUpper(args[0]))
}

// errUnknown words the reply as Redis 7 does, quoting what the client
// sent as Redis cuts it: the name at 128 bytes, then the arguments while
// they take fewer than 128 bytes, the last cut to end there. A hint, if
// any, follows in parentheses.
func errUnknown(args [][]byte, hint string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "unknown command '%s', with args beginning with: ", cString(args[0], 128))
	begun := b.Len()
	for _, a := range args[1:] {
		n := b.Len() - begun
		if n >= 128 {
			break
		}
		fmt.Fprintf(&b, "'%s' ", cString(a, 128-n))
	}
	if hint != "" {
		fmt.Fprintf(&b, "(%s)", hint)
	}
	return replyerr.New(replyerr.ERR, b.String())
}

// cString is b as C's printf prints it with "%.*s" and precision n, as
// Redis quotes what a client sent: at most n bytes (Go's precision
// counts runes), up to a NUL byte.
func cString(b []byte, n int) []byte {
	b = b[:min(len(b), n)]
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return b
}

// reply is the error reply for err, which a command returned: the one
// place the errors of other packages (idgen, sequence, cluster) get their
// Redis code and wording; respserver's own are replies already. An error
// no case knows is an ERR with its text: every package's errors are
// worded for the person reading the reply (they name a key, a bound, a
// configuration key).
func reply(err error) *replyerr.Error {
	var re *replyerr.Error
	var le *idgen.LeadError
	switch {
	case errors.As(err, &re):
		return re
	case errors.As(err, &le):
		return replyerr.New(replyerr.BUSY, le.Error())
	case errors.Is(err, idgen.ErrNotReserved):
		msg := err.Error()
		if err == idgen.ErrNotReserved { // no write failed yet: it is slow
			msg += " (the write to the state file, or to etcd in cluster mode, is slow or failing)"
		}
		return replyerr.New(replyerr.BUSY, msg+"; retry shortly")
	case errors.Is(err, sequence.ErrNotServed): // a Redis Cluster's slot moved while the key's take ran
		return errTryAgain
	case errors.Is(err, sequence.ErrOverflow): // before ErrNotReserved: a failed take may wrap it
		return errOverflow
	case errors.Is(err, sequence.ErrNotReserved):
		return replyerr.New(replyerr.BUSY, err.Error()+"; retry shortly")
	case errors.Is(err, idgen.ErrStopped), errors.Is(err, sequence.ErrStopped):
		return errShuttingDown
	}
	return replyerr.New(replyerr.ERR, err.Error())
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

// parseInt parses a decimal int64 as Redis's string2ll does: optional
// minus, digits, nothing else, and only as the integer is written (no
// leading zero, no "-0"), so that SET never takes "007" for 7, as a
// sequence's value could not be read back as it was set. It does not
// allocate, unlike strconv on a []byte.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 || b[0] == '0' && (len(b) > 1 || neg) {
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
