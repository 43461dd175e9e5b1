package respserver

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/idserver/idserver/internal/replyerr"
	"github.com/idserver/idserver/publicid"
)

// publicIDCommands turn numbers into public strings and back (see
// package publicid). No keys and no tips: they compute from their
// arguments and the configuration the nodes share, so a cluster client
// may send them to any node.
var publicIDCommands = []*command{
	{name: "publicid", arity: -2, flags: []string{"readonly", "fast"}, run: cmdPublicID, besideDeferred: true, doc: doc{
		summary:    "Returns the public string of each number (0..2^64-1): a bulk string for one, an array for several. Plain Sqids without public-id-key, FF1-encrypted with it.",
		since:      idserverSince,
		group:      "idserver",
		complexity: "O(N) where N is the number of numbers",
		args:       []arg{{name: "n", typ: "integer", flags: multiple}},
	}},
	{name: "privateid", arity: -2, flags: []string{"readonly", "fast"}, run: cmdPrivateID, besideDeferred: true, doc: doc{
		summary:    "Returns the number of each public string: an integer (a bulk string of its digits from 2^63 on), or nil for a string no number encodes; an array for several.",
		since:      idserverSince,
		group:      "idserver",
		complexity: "O(N) where N is the number of strings",
		args:       []arg{{name: "s", typ: "string", flags: multiple}},
	}},
}

// defaultPublicID is the codec of a server given none: Sqids' defaults.
var defaultPublicID = func() *publicid.Codec {
	c, err := publicid.New(publicid.Settings{})
	if err != nil {
		panic(err)
	}
	return c
}()

// manyAtOnce checks that a PUBLICID or PRIVATEID (args) converts no
// more numbers or strings (what) than an MGETID makes IDs: its reply is
// as large.
func (s *Server) manyAtOnce(args [][]byte, what string) error {
	if n := len(args) - 1; n > s.opts.MGetIDMax {
		return replyerr.Errorf("%s takes at most %d %s at once (mgetid-max), not %d", bytes.ToUpper(args[0]), s.opts.MGetIDMax, what, n)
	}
	return nil
}

func cmdPublicID(s *Server, c *client, args [][]byte) error {
	if err := s.manyAtOnce(args, "numbers"); err != nil {
		return err
	}
	for _, a := range args[1:] { // all checked first: no reply half written
		if _, ok := parseUint(a); !ok {
			return errNotInteger
		}
	}
	start := len(c.Out)
	if len(args) > 2 {
		c.writeArray(len(args) - 1)
	}
	for _, a := range args[1:] {
		n, _ := parseUint(a)
		var buf [publicid.MaxLen]byte
		str, err := s.publicID.Append(buf[:0], n)
		if errors.Is(err, publicid.ErrBlocked) {
			c.Out = c.Out[:start]
			return replyerr.Errorf("every public string of %d spells a blocklisted word (public-id-alphabet too small)", n)
		}
		c.writeBulk(str)
	}
	return nil
}

func cmdPrivateID(s *Server, c *client, args [][]byte) error {
	if err := s.manyAtOnce(args, "strings"); err != nil {
		return err
	}
	if len(args) > 2 {
		c.writeArray(len(args) - 1)
	}
	for _, a := range args[1:] {
		n, ok := s.publicID.Decode(a)
		switch {
		case !ok:
			c.writeNull()
		case n > 1<<63-1:
			// A RESP integer is a signed 64-bit number: the top half
			// goes as its digits.
			var buf [20]byte
			c.writeBulk(strconv.AppendUint(buf[:0], n, 10))
		default:
			c.writeInt64(int64(n))
		}
	}
	return nil
}

// parseUint parses a decimal uint64 as parseInt does an int64: digits
// only, as the number is written (no sign, no leading zero).
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 || b[0] == '0' && len(b) > 1 {
		return 0, false
	}
	var n uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		d := uint64(ch - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}
