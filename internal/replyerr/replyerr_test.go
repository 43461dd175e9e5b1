package replyerr

import "testing"

// TestAppend: a reply is one line whatever its message quotes, its code
// first.
func TestAppend(t *testing.T) {
	for _, tt := range []struct {
		e    *Error
		want string
	}{
		{New(ERR, "syntax error"), "-ERR syntax error\r\n"},
		{Errorf("unknown command '%s'", "a\r\nb"), "-ERR unknown command 'a  b'\r\n"},
		{Newf(BUSY, "retry %s", "shortly"), "-BUSY retry shortly\r\n"},
		{New(EXECABORT, "x\n"), "-EXECABORT x \r\n"},
	} {
		if got := string(tt.e.Append([]byte("+OK\r\n"))); got != "+OK\r\n"+tt.want {
			t.Errorf("%#v: %q, want %q", tt.e, got, tt.want)
		}
		if got := tt.e.Reply(); got != tt.want {
			t.Errorf("%#v: Reply %q", tt.e, got)
		}
	}
	if got := New(CLUSTERDOWN, "no server-id").Error(); got != "CLUSTERDOWN no server-id" {
		t.Errorf("Error() %q", got)
	}
}
