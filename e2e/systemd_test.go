package e2e

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/idserver/idserver/internal/testbin"
)

// TestSystemdNotify: started by systemd as Type=notify (NOTIFY_SOCKET
// names a datagram socket), the server sends READY=1 once it answers
// commands, at which moment a PING on a new connection gets PONG, and
// STOPPING=1 when SIGTERM starts its graceful stop. The port is one the
// server binds itself (not a socket passed to it), so that a READY=1
// sent before it listens finds the connection refused.
func TestSystemdNotify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	port := testbin.ReservedPort(t)
	messages := make(chan notifyMessage, 4)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := sock.Read(buf)
			if err != nil {
				close(messages)
				return
			}
			m := notifyMessage{text: string(buf[:n])}
			if m.text == "READY=1" {
				m.ping = ping("127.0.0.1:" + port)
			}
			messages <- m
		}
	}()
	p := start(t, []string{"NOTIFY_SOCKET=" + path}, "--port", port)
	if m := nextMessage(t, messages); m.text != "READY=1" || m.ping != nil {
		t.Fatalf("first message %q, PING then: %v; want READY=1 and PONG", m.text, m.ping)
	}
	if code := p.Stop(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if m := nextMessage(t, messages); m.text != "STOPPING=1" {
		t.Fatalf("message after SIGTERM %q, want STOPPING=1", m.text)
	}
}

// notifyMessage is a message the server sent to NOTIFY_SOCKET.
type notifyMessage struct {
	text string
	ping error // of a PING sent as READY=1 came
}

// nextMessage is the next message of messages, within a generous time.
func nextMessage(t *testing.T, messages <-chan notifyMessage) notifyMessage {
	t.Helper()
	select {
	case m, ok := <-messages:
		if !ok {
			t.Fatal("the notify socket closed")
		}
		return m
	case <-time.After(20 * time.Second):
		t.Fatal("no message on the notify socket after 20s")
	}
	return notifyMessage{}
}

// ping sends PING to addr on a new connection, dialled once, and
// reports an error unless +PONG comes back.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	reply := make([]byte, 7)
	if _, err := io.ReadFull(c, reply); err != nil || string(reply) != "+PONG\r\n" {
		return fmt.Errorf("PING: %q, %v", reply, err)
	}
	return nil
}
