// Package listen takes the addresses a server serves: port and tls-port
// on every address of bind, cluster-port there too in cluster mode, and
// metrics-addr; or the sockets systemd
// passes for them (socket activation). It checks them all before a start
// takes anything, and takes them all or none.
package listen

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/conf"
	"github.com/idserver/idserver/internal/portholder"
)

// Set is the addresses a server serves: plain TCP (port) and TLS
// (tls-port), each on every address of bind (none when off), and HTTP
// (metrics-addr; nil when off).
type Set struct {
	Plain     []net.Listener // port's: one per address of bind, or per socket passed
	TLS       []net.Listener // tls-port's, likewise
	Peers     []net.Listener // cluster-port's (cluster mode), likewise
	Metrics   net.Listener   // metrics-addr's
	TLSConfig *tls.Config    // what TLS is served with on tls-port
	PeersTLS  *tls.Config    // and on cluster-port (tls-cluster); nil: plain TCP
}

// Open takes every address of cfg, or none: on an error, those already
// taken are let go. tc is the TLS configuration for tls-port, peersTC
// for cluster-port (tls-cluster; nil: plain TCP). Sockets
// passed by systemd (see Sockets), by the name of an address, serve it
// instead of those bound here. An address of bind is skipped, with a
// warning, where Redis 7 skips it: optional (-) and not this machine's,
// or of a protocol this machine lacks (IPv6 turned off); the start fails
// if that leaves a port with no address.
func Open(cfg *conf.Config, tc, peersTC *tls.Config, passed map[string][]*os.File, log zerolog.Logger) (*Set, error) {
	l := &Set{TLSConfig: tc, PeersTLS: peersTC}
	var err error
	if cfg.Port != 0 {
		l.Plain, err = listenPort(cfg, "port", cfg.Port, passed["port"], log)
	}
	if cfg.TLSPort != 0 && err == nil {
		l.TLS, err = listenPort(cfg, "tls-port", cfg.TLSPort, passed["tls-port"], log)
	}
	if cfg.EtcdEndpoints != "" && err == nil {
		l.Peers, err = listenPort(cfg, "cluster-port", cfg.ClusterPort, passed["cluster-port"], log)
	}
	if cfg.MetricsAddr != "" && err == nil {
		if fs := passed["metrics-addr"]; fs != nil {
			l.Metrics, err = fileListener(fs[0])
		} else {
			l.Metrics, err = net.Listen("tcp", cfg.MetricsAddr)
			err = portholder.Explain(err)
		}
		if err != nil {
			err = fmt.Errorf("metrics-addr: %w", err)
		}
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// listenPort takes port, named what, on every address of cfg's bind, or
// serves the sockets passed for it instead.
func listenPort(cfg *conf.Config, what string, port int, passed []*os.File, log zerolog.Logger) ([]net.Listener, error) {
	var lns []net.Listener
	var err error
	if passed != nil {
		for _, f := range passed {
			ln, ferr := fileListener(f)
			if ln != nil {
				lns = append(lns, ln)
			}
			err = cmp.Or(err, ferr)
		}
	} else {
		for _, a := range cfg.Bind.Addrs() {
			if port == 0 && len(lns) > 0 { // cluster-port 0: the port the kernel chose for the first
				port = lns[0].Addr().(*net.TCPAddr).Port
			}
			ln, lerr := net.Listen(a.Network(), a.HostPort(port))
			if why := skipped(a, lerr); why != "" {
				log.Warn().Err(lerr).Str("bind", a.String()).Str(what, strconv.Itoa(port)).Msg("skipping an address of bind: " + why)
				continue
			}
			if lerr != nil {
				err = portholder.Explain(lerr)
				break
			}
			lns = append(lns, ln)
		}
		if err == nil && len(lns) == 0 {
			err = fmt.Errorf("no address of bind %q could be listened on", cfg.Bind)
		}
	}
	if err != nil {
		closeAll(lns)
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return lns, nil
}

// fileListener serves a socket passed by systemd; f is closed (the
// listener holds a duplicate).
func fileListener(f *os.File) (net.Listener, error) {
	defer f.Close()
	return net.FileListener(f)
}

// skipped says why an address of bind that err kept from listening is
// skipped rather than failing the start, as Redis 7's listenToPort: an
// optional address this machine does not have, or any address of a
// protocol it does not support. "" if it is not skipped.
func skipped(a conf.BindAddr, err error) string {
	switch {
	case err == nil:
		return ""
	case a.Optional && errors.Is(err, syscall.EADDRNOTAVAIL):
		return "it is optional (-) and not an address of this machine"
	case errors.Is(err, syscall.EAFNOSUPPORT), errors.Is(err, syscall.EPFNOSUPPORT), errors.Is(err, syscall.EPROTONOSUPPORT),
		errors.Is(err, syscall.ESOCKTNOSUPPORT), errors.Is(err, syscall.ENOPROTOOPT):
		return "this machine does not support its protocol"
	}
	return ""
}

// Check tries every address the start will listen on, on a port of
// the kernel's choice let go at once, before the start takes anything:
// an address this machine cannot listen on (192.0.2.1 where no interface
// has it; a metrics-addr host that does not resolve) then stops it with
// one line before the state file is locked or a start logged. Open
// still has the last word: a port in use shows only there.
func Check(cfg *conf.Config, passed map[string][]*os.File) error {
	if cfg.Port != 0 && passed["port"] == nil || cfg.TLSPort != 0 && passed["tls-port"] == nil {
		usable := 0
		for _, a := range cfg.Bind.Addrs() {
			ln, err := net.Listen(a.Network(), a.HostPort(0))
			if err == nil {
				ln.Close()
				usable++
				continue
			}
			if skipped(a, err) != "" {
				continue
			}
			if errors.Is(err, syscall.EADDRNOTAVAIL) {
				return fmt.Errorf("cannot listen on bind %s: this machine has no such address (-%s would skip it)", a, a)
			}
			return fmt.Errorf("cannot listen on bind %s: %w", a, err)
		}
		if usable == 0 {
			return fmt.Errorf("cannot listen on any address of bind %q: none is this machine's", cfg.Bind)
		}
	}
	if cfg.MetricsAddr != "" && passed["metrics-addr"] == nil {
		host, _, err := net.SplitHostPort(cfg.MetricsAddr)
		if err == nil {
			var ln net.Listener
			if ln, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err == nil {
				ln.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("cannot listen on metrics-addr %s: %w", cfg.MetricsAddr, err)
		}
	}
	return nil
}

// Sockets names the listening sockets passed to the server by systemd's
// socket activation protocol (LISTEN_FDS, LISTEN_FDNAMES; a .socket unit
// with FileDescriptorName=port, tls-port, cluster-port or metrics-addr),
// which tests use too: a socket the parent bound and keeps cannot be taken
// by another process between a port being chosen and served. Each serves
// the address of its name, which must be on in cfg (tls-port needs its
// files, cluster-port etcd-endpoints). port, tls-port and cluster-port may
// have several, as they have several addresses of bind (a unit with a
// ListenStream= for each); metrics-addr has one address.
func Sockets(cfg *conf.Config, passed []*os.File) (map[string][]*os.File, error) {
	on := map[string]bool{"port": cfg.Port != 0, "tls-port": cfg.TLSPort != 0, "cluster-port": cfg.EtcdEndpoints != "", "metrics-addr": cfg.MetricsAddr != ""}
	named := map[string][]*os.File{}
	for _, f := range passed {
		name := f.Name()
		switch isOn, known := on[name]; {
		case !known:
			return nil, fmt.Errorf("a socket passed by systemd is named %s: name each port, tls-port, cluster-port or metrics-addr (FileDescriptorName=)", name)
		case !isOn:
			return nil, fmt.Errorf("a socket passed by systemd is named %s, but %s is off in the configuration", name, name)
		case name == "metrics-addr" && named[name] != nil:
			return nil, fmt.Errorf("two sockets passed by systemd are named %s", name)
		}
		named[name] = append(named[name], f)
	}
	return named, nil
}

// Close lets every address go.
func (l *Set) Close() {
	closeAll(l.Plain)
	closeAll(l.TLS)
	closeAll(l.Peers)
	if l.Metrics != nil {
		l.Metrics.Close()
	}
}

func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}
