package respserver

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/idserver/idserver/internal/replyerr"
)

// MONITOR streams every command any client runs to the clients that asked
// for it, one line each in Redis's format:
//
//	+1700000000.123456 [0 127.0.0.1:50000] "getid"
//
// Commands with the admin flag (CONFIG, CLIENT LIST, DEBUG, ...) are not
// shown, and passwords (AUTH, HELLO's AUTH) are redacted, as in Redis 7.
// With no monitor the request path pays one atomic load per command.
//
// A command's line is made on the loop that ran it and appended to each
// monitor's pending lines; the monitor's own loop, woken, writes them out.
// Pending lines and unsent output together are bounded by the hard output
// limit, and a monitor above the soft limit for soft-seconds is closed,
// like any client that does not read.

var monitorCommand = &command{
	name: "monitor", arity: 1, flags: []string{"admin", "noscript", "loading", "stale"}, run: cmdMonitor, doc: doc{
		summary: "Listens for all requests received by the server in real-time.", since: "1.0.0", group: "server", complexity: "",
	},
}

// monitor is what a monitoring client has been sent but not yet written.
// Other loops append to it; only the monitor's loop takes from it.
type monitor struct {
	mu       sync.Mutex
	pending  []byte // lines to write
	spare    []byte // the buffer taken last, reused
	woken    bool   // a wake is on its way to the monitor's loop
	overflow bool   // pending reached the hard limit: close the monitor
}

var errMonitorInMulti = replyerr.New(replyerr.ERR, "MONITOR isn't allowed for DENY BLOCKING client")

// cmdMonitor makes c a monitor. Inside a transaction it is refused, and a
// second MONITOR gets no reply, as in Redis.
func cmdMonitor(s *Server, c *client, args [][]byte) error {
	switch {
	case c.inExec:
		return errMonitorInMulti
	case c.mon != nil:
		return nil
	}
	c.mon = &monitor{}
	s.monMu.Lock()
	s.monitors = append(s.monitors, c)
	s.monitoring.Store(int32(len(s.monitors)))
	s.monMu.Unlock()
	c.refreshShown()
	c.writeString("OK")
	return nil
}

// unmonitor ends c's monitoring, if it was monitoring; it is safe to call
// for any client.
func (s *Server) unmonitor(c *client) {
	if s.monitoring.Load() == 0 {
		return
	}
	s.monMu.Lock()
	defer s.monMu.Unlock()
	if i := slices.Index(s.monitors, c); i >= 0 {
		s.monitors = slices.Delete(s.monitors, i, i+1)
		s.monitoring.Store(int32(len(s.monitors)))
	}
}

// feed shows a command c ran to the monitors, if there are any. It is small enough to be inlined.
func (s *Server) feed(c *client, cmd *command, args [][]byte) {
	if s.monitoring.Load() != 0 && !cmd.noMonitor {
		s.feedMonitors(c, cmd, args)
	}
}

func (s *Server) feedMonitors(c *client, cmd *command, args [][]byte) {
	limit := s.opts.Output.Hard
	line := monitorLine(nil, time.Now(), c.RemoteAddr(), cmd, args, limit)
	s.monMu.Lock()
	defer s.monMu.Unlock()
	for _, m := range s.monitors {
		if m.mon.add(line, limit) {
			m.Wake() // its loop writes the lines out (Handler.Pending)
		}
	}
}

// add appends line to what m is to be sent and reports whether m's loop
// must be woken to send it. Past limit (0: none), m is marked to close.
func (m *monitor) add(line []byte, limit int) (wake bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.overflow {
		return false
	}
	if limit > 0 && len(m.pending)+len(line) > limit {
		m.overflow = true
	} else {
		m.pending = append(m.pending, line...)
	}
	wake = !m.woken
	m.woken = true
	return wake
}

// bytes is what m holds: its pending lines.
func (m *monitor) bytes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}

// take returns the lines pending, valid until the next take, and whether
// m went past its limit.
func (m *monitor) take() ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	lines := m.pending
	m.pending, m.spare = m.spare[:0], lines
	if cap(m.pending) > keepBuf {
		m.pending = nil
	}
	m.woken = false
	return lines, m.overflow
}

// monitorLine appends the line MONITOR shows for a command from addr at
// now, as Redis writes it: a status reply of the time, the database and
// the client, then each argument quoted. Quoting may make an argument
// four times longer, so it stops soon after limit (0: none): a line that
// long closes every monitor anyway.
func monitorLine(b []byte, now time.Time, addr string, cmd *command, args [][]byte, limit int) []byte {
	b = append(b, '+')
	b = strconv.AppendInt(b, now.Unix(), 10)
	var digits [8]byte
	us := strconv.AppendInt(digits[:0], int64(now.Nanosecond()/1000+1000000), 10) // 1 and six digits
	b = append(b, '.')
	b = append(b, us[1:]...)
	b = append(b, " [0 "...)
	b = append(b, addr...)
	b = append(b, ']')
	var redacted span
	if cmd.redact != nil {
		redacted = cmd.redact(args)
	}
	for i, a := range args {
		if limit > 0 && len(b) > limit {
			break
		}
		b = append(b, ' ')
		if i >= redacted.from && i < redacted.to {
			b = append(b, `"(redacted)"`...)
			continue
		}
		b = appendRepr(b, a)
	}
	return append(b, '\r', '\n')
}

// span is a range of argument positions, [from, to).
type span struct{ from, to int }

// redactAuth is which arguments of AUTH carry a password: all of them.
func redactAuth(args [][]byte) span { return span{1, len(args)} }

// redactHello is which of HELLO's do: the two after AUTH.
func redactHello(args [][]byte) span {
	for i := 2; i < len(args); i++ {
		if keyword(args[i]) == "auth" {
			return span{i + 1, i + 3}
		}
	}
	return span{}
}

// appendRepr appends s quoted as Redis's sdscatrepr does: printable ASCII
// as is, the usual escapes, and \xHH for other bytes.
func appendRepr(b, s []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, ch := range s {
		switch ch {
		case '\\', '"':
			b = append(b, '\\', ch)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\a':
			b = append(b, '\\', 'a')
		case '\b':
			b = append(b, '\\', 'b')
		default:
			if ch >= ' ' && ch <= '~' {
				b = append(b, ch)
			} else {
				b = append(b, '\\', 'x', hex[ch>>4], hex[ch&15])
			}
		}
	}
	return append(b, '"')
}
