package respserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen"
)

// verbatim is a RESP3 verbatim string as readReply returns it, without
// its format.
type verbatim string

// set is a RESP3 set as readReply returns it: apart from arrays, which
// Redis 7.0 sends in other places (COMMAND INFO's subcommands).
type set []any

// respError is an error reply as readReply returns it.
type respError string

func (e respError) Error() string { return string(e) }

// readReply reads one RESP2/RESP3 reply: string for simple and bulk
// strings, int64, nil, []any for arrays, set for sets, map[string]any for maps, and
// respError for error replies. Anything malformed is an error.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return nil, fmt.Errorf("malformed reply line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return respError(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '_':
		return nil, nil
	case '$', '=': // '=': verbatim, "txt:" and the text
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || line[0] == '=' && n < 4 {
			return nil, fmt.Errorf("bad bulk length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		if string(buf[n:]) != "\r\n" {
			return nil, fmt.Errorf("bulk of %d not followed by CRLF", n)
		}
		if line[0] == '=' {
			return verbatim(buf[4:n]), nil
		}
		return string(buf[:n]), nil
	case '*', '%', '~':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return nil, fmt.Errorf("bad aggregate length %q", body)
		}
		if line[0] == '%' {
			m := map[string]any{}
			for range n {
				k, err := readReply(r)
				if err != nil {
					return nil, err
				}
				v, err := readReply(r)
				if err != nil {
					return nil, err
				}
				m[fmt.Sprint(k)] = v
			}
			return m, nil
		}
		if n == -1 {
			return nil, nil
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		if line[0] == '~' {
			return set(a), nil
		}
		return a, nil
	}
	return nil, fmt.Errorf("unknown reply type %q", line)
}

// startServer runs a Server for st on 127.0.0.1 with a free port.
func startServer(t testing.TB, st idgen.Settings, opts Options) (*Server, string) {
	t.Helper()
	g, err := idgen.New(st)
	if err != nil {
		t.Fatal(err)
	}
	opts.Generator = g
	s := New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return s, ln.Addr().String()
}

// rawClient talks RESP by hand, to test exact bytes and hostile input.
type rawClient struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	network := "tcp"
	if strings.HasPrefix(addr, "/") {
		network = "unix"
	}
	conn, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawClient{t: t, conn: conn, r: bufio.NewReader(conn)}
}

// send writes raw bytes.
func (c *rawClient) send(raw string) {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, raw); err != nil {
		c.t.Fatal(err)
	}
}

// do sends one command as a RESP array and returns its reply.
func (c *rawClient) do(args ...string) any {
	c.t.Helper()
	c.send(encode(args...))
	return c.reply()
}

func (c *rawClient) reply() any {
	c.t.Helper()
	v, err := readReply(c.r)
	if err != nil {
		c.t.Fatalf("reading reply: %v", err)
	}
	return v
}

func encode(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}
