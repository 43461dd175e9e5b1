package seqpull

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/idserver/idserver/slots"
)

// TestPullEndsWithItsContext: an old owner that accepts the connection
// and never answers (a host cut off, a process stopped) holds a pull no
// longer than the caller's context, not go-redis's own socket timeouts
// (5 s: the INCRs waiting for the slots' take timed out so).
func TestPullEndsWithItsContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // read nothing, answer nothing
		}
	}()
	addr := ln.Addr().(*net.TCPAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Pull(ctx, Config{}, slots.Node{ID: "n", IP: "127.0.0.1", Port: addr.Port}, []int{1, 2})
		done <- err
	}()
	// Generous against a busy machine, and well under the 5 s the pull
	// took before.
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Pull from an owner that never answers: no error")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Pull from an owner that never answers outlived its context by 3 s")
	}
}
