// Package replyerr is the one type of a Redis error reply: its code (the
// word clients switch on: ERR, BUSY, NOAUTH, ...) and its message, and
// the one place the reply's bytes are made from them. The framing
// (resplimit), the connection layer and the command handlers all build
// their error replies here, so that no package spells a code into a
// string and none parses a reply's text back to find its code.
package replyerr

import (
	"encoding"
	"fmt"
)

// Code is an error reply's code. The set is closed: the codes idserver
// replies with, each one Redis or Redis Cluster replies with too.
type Code uint8

// The codes.
const (
	ERR         Code = iota // any error without a code of its own
	BUSY                    // retry shortly: IDs or values are not reserved in time
	NOAUTH                  // authentication required
	WRONGPASS               // a wrong password, or user
	NOPROTO                 // HELLO of a protocol version not spoken
	EXECABORT               // EXEC of a transaction discarded
	CLUSTERDOWN             // standing by in cluster mode (no server-id held), or a slot no node owns
	DENIED                  // protected mode
	MOVED                   // Redis Cluster: the key's slot is another node's
	TRYAGAIN                // Redis Cluster: the key's slot is moving
	CROSSSLOT               // Redis Cluster: keys of several slots in one command

	NCodes = iota // how many codes there are, for a count of each
)

var codes = [...]string{
	ERR: "ERR", BUSY: "BUSY", NOAUTH: "NOAUTH", WRONGPASS: "WRONGPASS", NOPROTO: "NOPROTO",
	EXECABORT: "EXECABORT", CLUSTERDOWN: "CLUSTERDOWN", DENIED: "DENIED",
	MOVED: "MOVED", TRYAGAIN: "TRYAGAIN", CROSSSLOT: "CROSSSLOT",
}

// String is the code as the reply spells it: "ERR", "BUSY".
func (c Code) String() string { return codes[c] }

// Error is an error reply: "-" Code " " Msg "\r\n" on the wire.
type Error struct {
	Code Code
	Msg  string
}

// New is the error reply code msg.
func New(code Code, msg string) *Error { return &Error{code, msg} }

// Newf is the error reply code with the message format makes of args.
func Newf(code Code, format string, args ...any) *Error {
	return &Error{code, fmt.Sprintf(format, args...)}
}

// Errorf is the ERR reply with the message format makes of args.
func Errorf(format string, args ...any) *Error { return Newf(ERR, format, args...) }

// Error is the reply's text, its code first, as clients show it.
func (e *Error) Error() string { return e.Code.String() + " " + e.Msg }

// Append appends the reply to b. A CR or LF in Msg (a message may quote
// what a client sent) would end the reply early and break the framing:
// each becomes a space.
func (e *Error) Append(b []byte) []byte {
	b = append(b, '-')
	b = append(b, codes[e.Code]...)
	b = append(b, ' ')
	start := len(b)
	return end(append(b, e.Msg...), start)
}

// AppendText appends the reply of code with t's text to b, as Append
// does an Error's, without making one: for a refusal a flood may bring
// once per request (the ID lead bound's).
func AppendText(b []byte, code Code, t encoding.TextAppender) []byte {
	b = append(append(append(b, '-'), codes[code]...), ' ')
	start := len(b)
	b, _ = t.AppendText(b)
	return end(b, start)
}

// end ends a reply whose text is b[start:]: each CR or LF in it becomes
// a space (see Append), then the CRLF.
func end(b []byte, start int) []byte {
	for i := start; i < len(b); i++ {
		if b[i] == '\r' || b[i] == '\n' {
			b[i] = ' '
		}
	}
	return append(b, '\r', '\n')
}

// Reply is the reply as a string, for what is sent before a connection
// is served (maxclients, protected mode).
func (e *Error) Reply() string { return string(e.Append(nil)) }
