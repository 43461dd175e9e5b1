package forward_test

import (
	"fmt"
	"net"

	"github.com/idserver/idserver/forward"
	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/respserver"
)

// A Call carries commands to an owner together and brings back each
// reply as the owner wrote it.
func ExamplePool() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	g, _ := idgen.New(idgen.Settings{})
	owner := respserver.New(respserver.Options{Generator: g})
	go owner.Serve(ln)
	defer owner.Close()

	p := forward.New(forward.Options{})
	defer p.Close()
	call := forward.NewCall(ln.Addr().String(), false)
	call.Command([][]byte{[]byte("PING")})
	call.Command([][]byte{[]byte("ECHO"), []byte("hi")})
	p.Send(call)
	if err := call.Wait(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q %q\n", call.Reply(0), call.Reply(1))
	// Output: "+PONG\r\n" "$2\r\nhi\r\n"
}
