// Package redisargs splits a line into arguments as Redis does, for an
// inline command and for a line of redis.conf alike: both go through
// Redis's sdssplitargs.
package redisargs

import "errors"

// ErrUnbalancedQuotes is Split's error: a quote left open, or a closing
// quote followed by something other than whitespace.
var ErrUnbalancedQuotes = errors.New("unbalanced quotes")

// Split splits a line into arguments as Redis's sdssplitargs does:
// arguments are separated by runs of space, tab, CR and LF (and may
// begin after VT and FF too, which inside one are its bytes); in
// double quotes \n \r \t \b \a, \xHH and \<any byte> are escapes, in
// single quotes only \'; a closing quote must be followed by whitespace or
// the end (or a NUL); a NUL ends the line, as it ends Redis's C string,
// and inside quotes leaves them unbalanced. The
// arguments are appended to args, as slices of buf, which gets their
// unescaped bytes and is grown once to fit the line: a line costs one
// pass, whatever its quotes and spaces.
//
// Written here rather than taken from redcon: its inline reader splits on
// spaces only, knows no \xHH, \a or \b, and allocates the rest of the
// line again at every space. No library ports sdssplitargs.
func Split(line, buf []byte, args [][]byte) ([][]byte, []byte, error) {
	buf = buf[:0]
	if cap(buf) < len(line) {
		buf = make([]byte, 0, len(line)) // unescaping never lengthens: no reallocation below
	}
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) || line[i] == 0 {
			return args, buf, nil
		}
		start := len(buf)
		var err error
		if buf, i, err = splitArg(line, i, buf); err != nil {
			return args, buf, err
		}
		args = append(args, buf[start:len(buf):len(buf)])
	}
}

// splitArg appends the unescaped argument that starts at line[i] to buf
// and returns the index just past it.
func splitArg(line []byte, i int, buf []byte) ([]byte, int, error) {
	var quote byte // '"' or '\'' while in quotes
	for ; i < len(line); i++ {
		c := line[i]
		switch {
		case quote == 0 && (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0):
			return buf, i, nil
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case c == 0: // in quotes: the end of Redis's C string
			return buf, i, ErrUnbalancedQuotes
		case c == quote:
			if i+1 < len(line) && !isSpace(line[i+1]) && line[i+1] != 0 {
				return buf, i, ErrUnbalancedQuotes
			}
			return buf, i + 1, nil
		case quote == '"' && c == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
			buf = append(buf, unhex(line[i+2])<<4|unhex(line[i+3]))
			i += 3
		case quote == '"' && c == '\\' && i+1 < len(line):
			i++
			buf = append(buf, unescape(line[i]))
		case quote == '\'' && c == '\\' && i+1 < len(line) && line[i+1] == '\'':
			i++
			buf = append(buf, '\'')
		default:
			buf = append(buf, c)
		}
	}
	if quote != 0 {
		return buf, i, ErrUnbalancedQuotes
	}
	return buf, i, nil
}

// isSpace is C's isspace in the "C" locale, as sdssplitargs uses it.
func isSpace(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// unescape is the byte a backslash escape in double quotes stands for.
func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}
