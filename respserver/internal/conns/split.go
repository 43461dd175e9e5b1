package conns

import (
	"bytes"

	"github.com/tidwall/redcon"

	"github.com/idserver/idserver/internal/redisargs"
	"github.com/idserver/idserver/internal/replyerr"
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

// The framing errors the parser finds, after resplimit: Redis's reply to
// an inline line it cannot split, and to a command the parser refuses or
// finds cut short (neither should come past resplimit). The connection is
// closed after each.
var (
	errUnbalancedQuotes = replyerr.New(replyerr.ERR, "Protocol error: unbalanced quotes in request")
	errIncomplete       = replyerr.New(replyerr.ERR, "Protocol error: incomplete command")
)

// Next splits the first command off buf, which holds whole commands: an
// empty array (*0, *-1) or blank line gives no arguments, as Redis skips
// them. An error is the reply to send before closing the connection.
func (p *Splitter) Next(buf []byte) (args [][]byte, rest []byte, err *replyerr.Error) {
	if n, ok := resplimit.EmptyCommand(buf); ok {
		return nil, buf[n:], nil
	}
	if buf[0] != '*' {
		rest, err := p.splitInline(buf)
		return p.args, rest, err
	}
	complete, args, _, rest, perr := redcon.ReadNextCommand(buf, p.args[:0])
	p.args = args
	switch {
	case perr != nil: // redcon's errors are worded as Redis's, without the code
		return nil, nil, replyerr.New(replyerr.ERR, perr.Error())
	case !complete: // the scanner saw the end of a command here
		return nil, nil, errIncomplete
	}
	return args, rest, nil
}

// splitInline splits the inline command line that ends at buf's first
// '\n' into p.args, in p.inline, and returns what follows it.
func (p *Splitter) splitInline(buf []byte) (rest []byte, err *replyerr.Error) {
	end := bytes.IndexByte(buf, '\n')
	var serr error
	p.args, p.inline, serr = redisargs.Split(bytes.TrimSuffix(buf[:end], []byte{'\r'}), p.inline, p.args[:0])
	if cap(p.inline) > keepBuf {
		p.inline = nil // args keep it while they are used
	}
	if serr != nil {
		return nil, errUnbalancedQuotes
	}
	return buf[end+1:], nil
}
