package conns

import (
	"bytes"
	"errors"

	"github.com/tidwall/redcon"

	"github.com/idserver/idserver/internal/redisargs"
	"github.com/idserver/idserver/resplimit"
)

// Splitter splits commands off a buffer whose framing resplimit has
// checked, as Redis reads them: RESP arrays with redcon's parser, inline
// commands as Redis splits them. Its scratch buffers are reused: the
// arguments it returns are valid until the next call.
type Splitter struct {
	args   [][]byte // the parser's scratch
	inline []byte   // the unescaped bytes of an inline command's arguments
}

// errUnbalancedQuotes is Redis's reply to an inline line it cannot split;
// the connection is closed after it.
var errUnbalancedQuotes = errors.New("ERR Protocol error: unbalanced quotes in request")

// Next splits the first command off buf, which holds whole commands: an
// empty array (*0, *-1) or blank line gives no arguments, as Redis skips
// them. An error is the reply to send before closing the connection.
func (p *Splitter) Next(buf []byte) (args [][]byte, rest []byte, err error) {
	if n, ok := resplimit.EmptyCommand(buf); ok {
		return nil, buf[n:], nil
	}
	if buf[0] != '*' {
		rest, err := p.splitInline(buf)
		return p.args, rest, err
	}
	complete, args, _, rest, err := redcon.ReadNextCommand(buf, p.args[:0])
	p.args = args
	switch {
	case err != nil:
		return nil, nil, errors.New("ERR " + err.Error())
	case !complete: // the scanner saw the end of a command here
		return nil, nil, errors.New("ERR Protocol error: incomplete command")
	}
	return args, rest, nil
}

// splitInline splits the inline command line that ends at buf's first
// '\n' into p.args, in p.inline, and returns what follows it.
func (p *Splitter) splitInline(buf []byte) (rest []byte, err error) {
	end := bytes.IndexByte(buf, '\n')
	p.args, p.inline, err = redisargs.Split(bytes.TrimSuffix(buf[:end], []byte{'\r'}), p.inline, p.args[:0])
	if cap(p.inline) > keepBuf {
		p.inline = nil // args keep it while they are used
	}
	if err != nil {
		return nil, errUnbalancedQuotes
	}
	return buf[end+1:], nil
}
