package metrics

import (
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// Limits bound the HTTP side, so that whoever reaches metrics-addr
// (scrapers, probes, or a client that opens connections and lets them
// idle) cannot take the descriptors the RESP ports and the reservation's
// saves need: the connections open at once are counted in the server's
// descriptor budget (see conns), and each is closed once it idles.
type Limits struct {
	// Conns is how many connections are open at once (metrics-maxclients);
	// more wait in the listen backlog, holding no descriptor of ours.
	Conns int
	// Timeout is how long a connection may take to send a request, to
	// take its reply, and stay idle between requests (metrics-timeout).
	// pprof adds to the write's the length of a profile or trace asked
	// for, so they stay usable.
	Timeout time.Duration
}

// maxHeaderBytes bounds a request's header: probes and scrapers send a
// few hundred bytes, and a client with a megabyte of header (net/http's
// default) only costs memory.
const maxHeaderBytes = 8 << 10

// NewServer returns the HTTP server of metrics-addr for h, within lim;
// serve it on Limit(ln, lim).
func NewServer(h http.Handler, lim Limits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.Timeout,
		ReadTimeout:       lim.Timeout, // requests are GETs: the header is all there is
		IdleTimeout:       lim.Timeout,
		WriteTimeout:      lim.Timeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// Limit is ln accepting at most lim.Conns connections open at once: past
// it, Accept waits for one to close, and new clients wait in the backlog.
func Limit(ln net.Listener, lim Limits) net.Listener {
	return netutil.LimitListener(ln, lim.Conns)
}
