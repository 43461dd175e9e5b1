package conf

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Bind is bind: the addresses port and tls-port listen on, one or more,
// space-separated, as in Redis 7 (bind 127.0.0.1 -::1). Each is an IP
// address, * (every IPv4 address) or ::* (every IPv6 address); a leading
// - makes it optional: a start skips it, with a warning, when this
// machine has no such address. It is kept as text, so that Config stays
// comparable and CONFIG GET shows it as written; Validate checks it and
// Addrs reads it.
type Bind string

// MaxBindAddrs is how many addresses bind takes, as Redis
// (CONFIG_BINDADDR_MAX): more is refused.
const MaxBindAddrs = 16

// BindAddr is one address of bind.
type BindAddr struct {
	// IP is the address; for * and ::* the unspecified address of the
	// family.
	IP netip.Addr
	// Optional is the leading -: an address this machine does not have
	// is skipped rather than failing the start.
	Optional bool
	text     string // as written, without the -
}

// UnmarshalText takes the words of bind from any source (the file's
// words joined, a flag's or a variable's one string) with single spaces
// between them, the form CONFIG GET shows; Validate checks them.
func (b *Bind) UnmarshalText(text []byte) error {
	*b = Bind(strings.Join(strings.Fields(string(text)), " "))
	return nil
}

// Addrs returns the addresses of b, in their order; nil if b is not
// valid (Validate says why).
func (b Bind) Addrs() []BindAddr {
	addrs, err := b.parse()
	if err != nil {
		return nil
	}
	return addrs
}

// parse reads every address of b, and refuses a list no start could
// listen on: empty, too long, or binding one address of a port twice
// (as Redis, which fails its start at the second with EADDRINUSE).
func (b Bind) parse() ([]BindAddr, error) {
	words := strings.Fields(string(b))
	switch {
	case len(words) == 0:
		return nil, errors.New("bind must not be empty")
	case len(words) > MaxBindAddrs:
		return nil, fmt.Errorf("bind %q: %d addresses, at most %d (as Redis)", b, len(words), MaxBindAddrs)
	}
	addrs := make([]BindAddr, len(words))
	for i, w := range words {
		a, err := parseBindAddr(w)
		if err != nil {
			return nil, fmt.Errorf("bind %q: %w", b, err)
		}
		addrs[i] = a
	}
	for i, a := range addrs {
		for _, o := range addrs[:i] {
			if err := a.overlaps(o); err != nil {
				return nil, fmt.Errorf("bind %q: %w", b, err)
			}
		}
	}
	return addrs, nil
}

// parseBindAddr reads one word of bind. Host names are refused, where
// Redis resolves them: the addresses a server listens on are this
// machine's, stated as such; a name would make the start (and this
// check, before anything is locked) depend on a resolver, and move the
// server when the name moves.
func parseBindAddr(w string) (BindAddr, error) {
	a := BindAddr{text: w}
	if rest, ok := strings.CutPrefix(w, "-"); ok {
		a.Optional, a.text = true, rest
	}
	switch a.text {
	case "":
		return a, fmt.Errorf("%q: an address must follow the -", w)
	case "*":
		a.IP = netip.IPv4Unspecified()
		return a, nil
	case "::*":
		a.IP = netip.IPv6Unspecified()
		return a, nil
	}
	ip, err := netip.ParseAddr(a.text)
	if err != nil {
		return a, fmt.Errorf("%s is not an IP address, * (every IPv4 address) or ::* (every IPv6 address); host names are not taken", a.text)
	}
	a.IP = ip
	return a, nil
}

// overlaps says why a and o, earlier in the list, cannot both listen on
// one port: the same address twice, or one the unspecified address of
// its family already covers. Not for an optional address beside *: it
// may be one this machine lacks, which Redis then skips, and so does
// the start.
func (a BindAddr) overlaps(o BindAddr) error {
	switch {
	case a.IP == o.IP && a.text == o.text:
		return fmt.Errorf("%s is given twice", a.text)
	case a.IP == o.IP:
		return fmt.Errorf("%s and %s are the same address", o.text, a.text)
	}
	if a.Network() != o.Network() {
		return nil
	}
	for _, p := range [][2]BindAddr{{a, o}, {o, a}} {
		if any, specific := p[0], p[1]; any.IP.IsUnspecified() && !specific.Optional {
			return fmt.Errorf("%s already covers %s: both cannot listen on one port", any.text, specific.text)
		}
	}
	return nil
}

// Network is the network the address listens on: tcp6 for an IPv6
// address (one written with a colon, as Redis tells them apart), which
// Go opens IPv6-only, as Redis does, so that * and ::* share a port;
// tcp4 otherwise.
func (a BindAddr) Network() string {
	if a.IP.Is6() {
		return "tcp6"
	}
	return "tcp4"
}

// HostPort is the address of a's port for net.Listen.
func (a BindAddr) HostPort(port int) string {
	return net.JoinHostPort(a.IP.String(), strconv.Itoa(port))
}

// String is the address as written, with its - if optional.
func (a BindAddr) String() string {
	if a.Optional {
		return "-" + a.text
	}
	return a.text
}

// validateMetricsAddr checks metrics-addr's form, host:port, before the
// start takes anything: a malformed one was found only when the server
// listened, after it had locked the state file. The host is left to the
// listener (a name is resolved there).
func (c *Config) validateMetricsAddr() error {
	if c.MetricsAddr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(c.MetricsAddr)
	if err == nil {
		if _, perr := strconv.ParseUint(port, 10, 16); perr != nil {
			err = fmt.Errorf("port %q is not a number 0..65535", port)
		}
	}
	if err != nil {
		return fmt.Errorf("metrics-addr %q: %w (want host:port, as 127.0.0.1:9121 or :9121)", c.MetricsAddr, err)
	}
	return nil
}
