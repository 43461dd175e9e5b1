package respserver

import (
	"bytes"
	"errors"

	"github.com/idserver/idserver/internal/redisargs"
)

// errUnbalancedQuotes is Redis's reply to an inline line it cannot split;
// the connection is closed after it.
var errUnbalancedQuotes = errors.New("ERR Protocol error: unbalanced quotes in request")

// splitInline splits the inline command line that ends at buf's first
// '\n' into c.args, in c.inline, and returns what follows it.
func (c *client) splitInline(buf []byte) (rest []byte, err error) {
	end := bytes.IndexByte(buf, '\n')
	c.args, c.inline, err = redisargs.Split(bytes.TrimSuffix(buf[:end], []byte{'\r'}), c.inline, c.args[:0])
	if cap(c.inline) > keepBuf {
		c.inline = nil // args keep it while they are used
	}
	if err != nil {
		return nil, errUnbalancedQuotes
	}
	return buf[end+1:], nil
}
