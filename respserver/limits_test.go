package respserver

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/await"
)

// bigLayout issues 2^19 IDs per ms, so that large MGETIDs stay within the
// lead bound and only the output limits are at work.
var bigLayout = idgen.Settings{Layout: idgen.Layout{IDBits: 2, ShardBits: 19, RandomBits: 0}}

// awaitInfo polls INFO through c until it contains want.
func awaitInfo(t *testing.T, c *rawClient, want string) string {
	t.Helper()
	var info string
	await.True(t, time.Minute, "INFO shows "+strings.TrimSpace(want), func() bool {
		info = c.do("INFO").(string)
		return strings.Contains(info, want)
	})
	return info
}

// TestSlowReaderBackpressure: a client that sends a pipeline whose replies
// far exceed the soft limit, and reads them slowly, is held at the limit
// rather than buffered without bound, and gets every reply, whole and in
// order.
func TestSlowReaderBackpressure(t *testing.T) {
	_, addr := startServer(t, bigLayout, Options{ConnOptions: ConnOptions{Output: OutputLimits{Soft: 256 << 10, Hard: 4 << 20}}})
	slow, other := dialRaw(t, addr), dialRaw(t, addr)
	const n = 200 // 200 MGETID 1000: about 5 MB of replies
	slow.send(strings.Repeat(encode("MGETID", "1000"), n) + encode("PING"))
	awaitInfo(t, other, "clients_over_soft_limit:1\r\n")
	last := int64(0)
	for i := range n {
		if i%20 == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		last = checkIDs(t, slow.reply(), 1000, last)
	}
	if v := slow.reply(); v != "PONG" {
		t.Fatalf("after the pipeline: %v", v)
	}
	info := awaitInfo(t, other, "clients_over_soft_limit:0\r\n")
	if !strings.Contains(info, "client_output_buffer_limit_disconnections:0\r\n") {
		t.Fatalf("the slow reader was closed:\n%s", info)
	}
}

// TestNonReaderClosedAtHardLimit: a client that keeps sending and never
// reads is held at the soft limit, then closed once its unsent replies and
// waiting requests pass the hard one; another client is served throughout.
func TestNonReaderClosedAtHardLimit(t *testing.T) {
	_, addr := startServer(t, bigLayout, Options{ConnOptions: ConnOptions{Output: OutputLimits{Soft: 256 << 10, Hard: 1 << 20}, QueryBufferLimit: 64 << 20}}) // see conns.TestHardLimit
	flood, other := dialRaw(t, addr), dialRaw(t, addr)
	floodUntilClosed(t, flood, other, []byte(strings.Repeat(encode("MGETID", "1000"), 1000)), 256<<20, "the client that never reads")
	awaitInfo(t, other, "client_output_buffer_limit_disconnections:1\r\n")
}

// TestSoftSeconds: a client held at the soft limit for longer than
// SoftFor is closed, even if it sends nothing more.
func TestSoftSeconds(t *testing.T) {
	_, addr := startServer(t, bigLayout, Options{ConnOptions: ConnOptions{Output: OutputLimits{Soft: 64 << 10, SoftFor: time.Second}}})
	stuck, other := dialRaw(t, addr), dialRaw(t, addr)
	stuck.send(strings.Repeat(encode("MGETID", "1000"), 500)) // about 12 MB of replies
	awaitInfo(t, other, "clients_over_soft_limit:1\r\n")
	awaitInfo(t, other, "client_output_buffer_limit_disconnections:1\r\n")
	awaitInfo(t, other, "connected_clients:1\r\n")
}

// TestQueryBufferLimit: a client whose unfinished command would have the
// server hold more than client-query-buffer-limit is closed there, counted,
// while a command of nearly that size arriving in pieces is served, and
// another client is answered throughout.
func TestQueryBufferLimit(t *testing.T) {
	const limit = 1 << 20
	_, addr := startServer(t, idgen.Settings{}, Options{ConnOptions: ConnOptions{QueryBufferLimit: limit}})
	other := dialRaw(t, addr)

	whole := dialRaw(t, addr)
	arg := strings.Repeat("a", 60<<10)
	args := []string{"COMMAND", "DOCS"}
	for range 15 { // 900 KiB in all
		args = append(args, arg)
	}
	cmd := encode(args...)
	for i := 0; i < len(cmd); i += 8 << 10 {
		whole.send(cmd[i:min(i+8<<10, len(cmd))])
	}
	if v, ok := whole.reply().([]any); !ok {
		t.Fatalf("COMMAND DOCS of 900 KiB: %.80v", v)
	}

	// A legal command, declared as 1024 bulks of 64 KiB, never finished.
	unfinished := dialRaw(t, addr)
	unfinished.send("*1024\r\n$5\r\nSETEX\r\n")
	bulk := "$65536\r\n" + strings.Repeat("x", 64<<10) + "\r\n"
	floodUntilClosed(t, unfinished, other, []byte(bulk), 64<<20, "an unfinished command of 64 MiB")
	awaitInfo(t, other, "client_query_buffer_limit_disconnections:1\r\n")
	if _, err := io.Copy(io.Discard, unfinished.r); err != nil && !isReset(err) {
		t.Fatalf("the unfinished command's client: %v, want it closed", err)
	}
}

// floodUntilClosed writes chunk to c again and again, up to limit bytes,
// until the server closes c, checking after each write that other is
// answered; it fails t if c is still open after limit bytes.
func floodUntilClosed(t *testing.T, c, other *rawClient, chunk []byte, limit int, what string) {
	t.Helper()
	for sent := 0; sent < limit; sent += len(chunk) {
		if _, err := c.conn.Write(chunk); err != nil {
			return // closed: the kernel answered with a reset
		}
		if v := other.do("PING"); v != "PONG" {
			t.Fatalf("other client after %d bytes: %v", sent, v)
		}
	}
	t.Fatalf("%s was not closed after %d bytes", what, limit)
}

// TestMaxMemoryClients: with no per-client limit, clients that together
// hold more than maxmemory-clients are closed, the one holding the most
// first; a client holding little goes on, and INFO counts the eviction
// and what the clients hold.
func TestMaxMemoryClients(t *testing.T) {
	s, addr := startServer(t, idgen.Settings{}, Options{ConnOptions: ConnOptions{MaxMemoryClients: 1 << 20}})
	small, big, other := dialRaw(t, addr), dialRaw(t, addr), dialRaw(t, addr)
	small.do("MULTI")
	small.do("PING")
	other.do("MULTI")
	for range 5 {
		other.do("ECHO", strings.Repeat("y", 60<<10)) // 300 KiB: under the bound alone
	}
	big.do("MULTI")
	arg := strings.Repeat("x", 60<<10)
	for i := 0; ; i++ {
		big.send(encode("ECHO", arg))
		v, err := readReply(big.r)
		if err != nil {
			break // closed: evicted
		}
		if v != "QUEUED" || i > 100 {
			t.Fatalf("ECHO %d queued in a transaction of %d KiB: %v", i, i*60, v)
		}
	}
	if s.Stats().Evicted != 1 {
		t.Fatalf("evicted_clients %d, want 1: the biggest only", s.Stats().Evicted)
	}
	if v := small.do("EXEC").([]any); len(v) != 1 || v[0] != "PONG" {
		t.Fatalf("the small client's EXEC: %v", v)
	}
	if v := other.do("EXEC").([]any); len(v) != 5 {
		t.Fatalf("the other client's EXEC: %d replies", len(v))
	}
	info := awaitInfo(t, small, "evicted_clients:1\r\n")
	if !strings.Contains(info, "maxmemory_clients:1048576\r\n") || !strings.Contains(info, "mem_clients_normal:") {
		t.Fatalf("INFO:\n%s", info)
	}
}

// TestChargeFollowsDrainedReplies: a client charged for replies it has
// not read yet is charged nothing once it has read them, though it sends
// nothing more: an idle client must not be evicted for replies long since
// written.
func TestChargeFollowsDrainedReplies(t *testing.T) {
	s, addr := startServer(t, bigLayout, Options{MGetIDMax: 100000})
	c := dialRaw(t, addr)
	c.conn.SetDeadline(time.Now().Add(3 * time.Minute)) // reading 5 M IDs under -race beside two CPU hogs took over 20 s
	const n = 50
	c.send(strings.Repeat(encode("MGETID", "100000"), n))
	// 50 replies of 100,000 IDs take seconds under -race.
	await.True(t, time.Minute, "the client is charged for its unread replies", func() bool { return s.Stats().ClientMem != 0 })
	t.Logf("charged %d KiB for unread replies", s.Stats().ClientMem>>10)
	for range n {
		if ids, ok := c.reply().([]any); !ok || len(ids) != 100000 {
			t.Fatalf("reply: %d IDs", len(ids))
		}
	}
	await.True(t, time.Minute, "the client is charged nothing once every reply was read", func() bool { return s.Stats().ClientMem == 0 })
}
