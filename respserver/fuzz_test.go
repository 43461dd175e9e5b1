package respserver

import (
	"bufio"
	"bytes"
	"io"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/resplimit"
	"github.com/idserver/idserver/respserver/internal/conns"
)

// fuzzLimits keep the fuzzer's inputs near the limits.
var fuzzLimits = resplimit.Limits{MaxBulkLen: 1024, MaxMultibulkLen: 16}

// FuzzConnection sends arbitrary bytes, cut into arbitrary chunks, through
// the server's own event handler: framing checks, parsing, dispatch and
// the replies, as a connection's event loop runs them. The server must
// not panic, must answer every whole command exactly once and in order,
// stop after QUIT, and after a framing error answer with that error and
// close.
func FuzzConnection(f *testing.F) {
	g, err := idgen.New(idgen.Settings{MaxLead: 24 * time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	s := New(Options{Generator: g, MGetIDMax: 100, ConnOptions: ConnOptions{Limits: fuzzLimits}, Config: [][2]string{{"port", "6551"}, {"maxclients", "10000"}}})
	var last int64 // every ID handed out is above the ones before
	f.Fuzz(func(t *testing.T, data []byte, cuts uint64) {
		want := expectedReplies(data)
		p := testPipe(s)
		defer p.Close() // its connection ends: a MONITOR it ran ends too
		r := rand.New(rand.NewPCG(cuts, 1))
		closed := false
		for rest := data; len(rest) > 0 && !closed; {
			n := 1 + r.IntN(len(rest))
			var chunk []byte
			chunk, rest = rest[:n], rest[n:]
			closed = p.Send(chunk)
		}
		br := bufio.NewReader(bytes.NewReader(p.Written()))
		for i, w := range want.replies {
			v, err := readReplyPastMonitor(br)
			if err != nil {
				t.Fatalf("%q: reply %d of %d: %v; out %q", data, i+1, len(want.replies), err, p.Written())
			}
			if err := w(v, &last); err != "" {
				t.Fatalf("%q: reply %d, %.100v: %s", data, i+1, v, err)
			}
		}
		if extra, err := readReplyPastMonitor(br); err != io.EOF {
			t.Fatalf("%q: replies beyond the %d expected: %v, %v", data, len(want.replies), extra, err)
		}
		if closed != want.close {
			t.Fatalf("%q: closed %v, want %v", data, closed, want.close)
		}
	})
}

// monitorLineRE matches a MONITOR line as readReply returns it.
var monitorLineRE = regexp.MustCompile(`^\d+\.\d{6} \[0 \S+\] "`)

// readReplyPastMonitor reads the next reply that is not a MONITOR line:
// a connection that ran MONITOR gets the lines of its own commands
// between its replies, as many as its loop wrote out by then.
func readReplyPastMonitor(r *bufio.Reader) (any, error) {
	for {
		v, err := readReply(r)
		if s, ok := v.(string); err != nil || !ok || !monitorLineRE.MatchString(s) {
			return v, err
		}
	}
}

// check checks one reply; it returns what is wrong, or "".
type check func(v any, last *int64) string

// expectation is what a connection that sent some bytes must get.
type expectation struct {
	replies []check
	close   bool
}

// expectedReplies works out, from the whole input at once, the replies
// its commands must get: the framing by a fresh scanner, the commands by
// the parser. The server sees the same bytes in chunks.
func expectedReplies(data []byte) expectation {
	sc := resplimit.NewScanner(fuzzLimits)
	valid, framing := sc.Scan(data)
	buf := data[:valid-sc.Partial()]
	var p conns.Splitter
	var e expectation
	inMulti, monitoring := false, false
	for len(buf) > 0 {
		args, rest, err := p.Next(buf)
		if err != nil {
			return expectation{append(e.replies, isError(err.Error())), true}
		}
		buf = rest
		if len(args) == 0 {
			continue // an empty line gets no reply
		}
		name := strings.ToLower(string(args[0]))
		reset := name == "reset" && len(args) == 1 // with arguments, an arity error that resets nothing
		switch {
		case name == "quit":
			e.replies = append(e.replies, equals("OK"))
			e.close = true
			return e
		case inMulti:
			e.replies = append(e.replies, expectInMulti(name))
			inMulti = name != "exec" && name != "discard" && !reset
		case name == "monitor" && len(args) == 1 && monitoring:
			continue // a second MONITOR gets no reply, as in Redis
		default:
			monitoring = monitoring && !reset || name == "monitor" && len(args) == 1
			e.replies = append(e.replies, expectFor(args))
			inMulti = name == "multi" && len(args) == 1
		}
	}
	if framing != nil {
		e.replies = append(e.replies, isError(framing.Error()))
		e.close = true
	}
	return e
}

// expectFor is the check for a reply to args: exact for commands whose
// reply follows from the command, IDs above all earlier ones, and any
// well-formed reply for the rest.
func expectFor(args [][]byte) check {
	name := strings.ToLower(string(args[0]))
	switch {
	case name == "ping" && len(args) == 1:
		return equals("PONG")
	case name == "ping" && len(args) == 2, name == "echo" && len(args) == 2:
		return equals(string(args[1]))
	case name == "quit":
		return equals("OK")
	case name == "getid" && len(args) == 1:
		return func(v any, last *int64) string {
			id, ok := v.(int64)
			if s, isStr := v.(string); isStr { // after CLIENT SETINFO LIB-NAME ioredis
				id, ok = parseInt([]byte(s))
			}
			return above(id, ok, last)
		}
	case name == "mgetid" && len(args) == 2:
		return func(v any, last *int64) string {
			if e, ok := v.(respError); ok {
				return wellFormed(e, nil)
			}
			ids, ok := v.([]any)
			if !ok || len(ids) == 0 {
				return "not an error, nor an array of IDs"
			}
			for _, x := range ids {
				s, _ := x.(string)
				id, ok := parseInt([]byte(s))
				if msg := above(id, ok, last); msg != "" {
					return msg
				}
			}
			return ""
		}
	}
	return wellFormed
}

// expectInMulti is the check for a reply between MULTI and EXEC: QUEUED,
// or an error, for a queued command; EXEC's array of whatever its
// commands replied (their IDs are not followed), or an error.
func expectInMulti(name string) check {
	switch name {
	case "exec", "discard", "reset", "multi", "watch":
		return wellFormed
	}
	return func(v any, last *int64) string {
		if e, ok := v.(respError); ok {
			return wellFormed(e, last)
		}
		if v != "QUEUED" {
			return "want QUEUED or an error"
		}
		return ""
	}
}

func equals(want string) check {
	return func(v any, _ *int64) string {
		if v != want {
			return "want " + want
		}
		return ""
	}
}

func isError(want string) check {
	return func(v any, _ *int64) string {
		if v != respError(want) {
			return "want the error " + want
		}
		return ""
	}
}

// wellFormed accepts any reply, but an error reply only with an upper-case
// code and on one line.
func wellFormed(v any, _ *int64) string {
	if e, ok := v.(respError); ok && (strings.ContainsAny(string(e), "\r\n") || !isErrorCode(string(e))) {
		return "a malformed error reply"
	}
	return ""
}

func above(id int64, ok bool, last *int64) string {
	if !ok || id <= *last {
		return "not an ID above the ones before"
	}
	*last = id
	return ""
}
