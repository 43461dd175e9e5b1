package resplimit_test

import (
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/tidwall/redcon"

	"github.com/idserver/idserver/resplimit"
)

// A redcon server behind Listener answers the complete commands a client
// sent before it broke a limit, then the error, then closes the connection.
func ExampleListener() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	lim := resplimit.Limits{MaxBulkLen: 64 << 10, MaxMultibulkLen: 1024}
	go redcon.Serve(resplimit.Listener(ln, lim), func(c redcon.Conn, cmd redcon.Command) {
		c.WriteString("PONG")
	}, nil, nil)

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	// Unguarded, redcon would walk 2^31 array slots on every read from now on.
	c.Write([]byte("*1\r\n$4\r\nPING\r\n*2147483647\r\n"))
	replies, err := io.ReadAll(c)
	fmt.Print(strings.ReplaceAll(string(replies), "\r\n", "\n"))
	if err == nil { // ReadAll stops cleanly at EOF
		fmt.Println("(closed)")
	}
	// Output:
	// +PONG
	// -ERR Protocol error: invalid multibulk length
	// (closed)
}
