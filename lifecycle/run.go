// Package lifecycle runs idserver in its configured mode, from start to
// graceful stop: single-server (the server-id and the state file in
// dir), cluster mode over etcd (server-ids claimed; with
// cluster-enabled, the hash slots divided among the servers), or a
// one-node Redis Cluster (cluster-enabled without etcd). Run checks the
// addresses, locks dir, prepares the mode (mode.go), takes the ports
// (package listen), starts keeping the reservation, builds the protocol
// server (respserver) and the HTTP side (metrics), and serves until
// SIGINT, SIGTERM or SHUTDOWN; then it hands over, stops gracefully and
// stores the final reservation.
package lifecycle

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/rs/zerolog"

	"github.com/idserver/idserver/conf"
	"github.com/idserver/idserver/internal/buildinfo"
	"github.com/idserver/idserver/listen"
	"github.com/idserver/idserver/metrics"
	"github.com/idserver/idserver/publicid"
	"github.com/idserver/idserver/reservation"
	"github.com/idserver/idserver/resplimit"
	"github.com/idserver/idserver/respserver"
)

// TLS is what a server serves and reaches other servers with: Server on
// tls-port (tlsfiles.Server); ClusterServe on cluster-port and
// ClusterDial to the others' (tlsfiles.Cluster), nil for plain TCP.
type TLS struct {
	Server, ClusterServe, ClusterDial *tls.Config
}

// Run serves in cfg's mode until stopped, with tc's TLS, logging on log, and returns the process's exit status: 0
// after a graceful stop; 1, the reason logged, if the start failed, the
// server stopped by itself or the final reservation was not stored.
//
// In this order: a check of every address, so that one this machine
// cannot listen on stops the start before it takes anything; the lock of
// dir, in every mode, so that nothing reads, claims or writes what
// another process serves from; the mode's state; then every address, so
// that a start that fails leaves the state as it found it; and only then
// the first write of the reservation. The lock goes last, after every
// write.
func Run(cfg *conf.Config, tc TLS, log zerolog.Logger) int {
	passed, err := listen.Sockets(cfg, activation.Files(true))
	if err == nil {
		err = listen.Check(cfg, passed)
	}
	if err != nil {
		log.Error().Err(err).Msg("refusing to start")
		return 1
	}
	dirLock, err := reservation.LockDir(cfg.Dir, log)
	if err != nil {
		log.Error().Err(err).Msg("refusing to start")
		return 1
	}
	defer dirLock.Release()
	m, err := newMode(cfg, tc.ClusterDial, log)
	if err != nil {
		log.Error().Err(err).Msg("refusing to start")
		return 1
	}
	defer m.close()
	lns, err := listen.Open(cfg, tc.Server, tc.ClusterServe, passed, log)
	if err != nil {
		log.Error().Err(err).Msg("cannot listen")
		return 1
	}
	defer lns.Close()
	opts, err := m.reserve(lns)
	if err != nil {
		log.Error().Err(err).Msg("refusing to start: cannot write the reservation (is dir writable?)")
		return 1
	}
	defer m.finish()
	if cfg.ClusterEnabled == conf.Yes && opts.Slots == nil {
		if opts.Slots, err = oneNodeCluster(cfg, lns); err != nil {
			log.Error().Err(err).Msg("refusing to start")
			return 1
		}
	}
	stop := make(stopper, 1)
	opts.Shutdown = stop.request
	srv := newServer(cfg, log, opts)
	m.attach(srv)
	if !serve(cfg, log, srv, lns, stop, m) || !m.finish() {
		return 1
	}
	log.Info().Msg("bye")
	return 0
}

// stopper is how SHUTDOWN asks for the stop SIGTERM starts.
type stopper chan struct{}

func (s stopper) request() {
	select {
	case s <- struct{}{}:
	default:
	}
}

// serve runs srv on lns, and the HTTP side, until SIGINT, SIGTERM or
// SHUTDOWN. It reports false if the server stopped by itself.
func serve(cfg *conf.Config, log zerolog.Logger, srv *respserver.Server, lns *listen.Set, stop stopper, m mode) bool {
	if lns.Metrics != nil {
		h := metrics.New(metrics.Options{Server: srv, Version: buildinfo.Version, Ready: srv.Ready, Pprof: cfg.MetricsPprof == conf.Yes})
		lim := metrics.Limits{Conns: cfg.MetricsMaxClients, Timeout: cfg.MetricsTimeout.Duration}
		defer serveMetrics(lns.Metrics, h, lim, log)()
	}
	logProtectedMode(cfg, lns, log)
	ready := func() {
		logReady(log, cfg, lns, m)
		notify(log, daemon.SdNotifyReady)
	}
	return serveUntilStopped(srv, lns, stop, log, ready, m.handOver)
}

// serveUntilStopped serves lns until SIGINT, SIGTERM or SHUTDOWN, then
// stops gracefully. It calls ready once the server serves (the ready
// line: /readyz can then say so too). It reports false if the server
// stopped by itself.
func serveUntilStopped(srv *respserver.Server, lns *listen.Set, stopRequested stopper, log zerolog.Logger, ready, handOver func()) bool {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	serving := len(lns.Plain) + len(lns.TLS) + len(lns.Peers)
	served := make(chan error, serving)
	for _, ln := range lns.Plain {
		go func() { served <- srv.Serve(ln) }()
	}
	for _, ln := range lns.TLS {
		go func() { served <- srv.ServeTLS(ln, lns.TLSConfig) }()
	}
	for _, ln := range lns.Peers {
		go func() { served <- srv.ServePeers(ln, lns.PeersTLS) }()
	}
	// The ready line only once /readyz can say so too.
	select {
	case <-srv.Serving():
		ready()
	case err := <-served:
		log.Error().Err(err).Msg("server stopped")
		srv.Close()
		return false
	}
	select {
	case s := <-sig:
		log.Info().Str("signal", s.String()).Msg("shutting down")
	case <-stopRequested:
		log.Info().Msg("shutting down")
	case err := <-served:
		log.Error().Err(err).Msg("server stopped")
		srv.Close()
		return false
	}
	notify(log, daemon.SdNotifyStopping)
	handOver()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn().Err(err).Msg("dropped clients that did not finish in time")
	}
	for range serving {
		<-served
	}
	return true
}

// notify tells systemd the server's state (Type=notify): READY=1 once it
// answers commands, so that systemctl start returns then and units
// ordered after it start then; STOPPING=1 when a graceful stop begins.
// Without NOTIFY_SOCKET (not started by systemd) it does nothing.
func notify(log zerolog.Logger, state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn().Err(err).Str("state", state).Msg("cannot notify systemd (NOTIFY_SOCKET)")
	}
}

// serveMetrics serves h (metrics, health, and profiles if asked) on ln within lim
// and returns a function that stops it.
func serveMetrics(ln net.Listener, h http.Handler, lim metrics.Limits, log zerolog.Logger) (stop func()) {
	hs := metrics.NewServer(h, lim)
	go func() {
		if err := hs.Serve(metrics.Limit(ln, lim)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("metrics server stopped")
		}
	}()
	log.Info().Str("metrics_addr", ln.Addr().String()).Int("metrics_maxclients", lim.Conns).Dur("metrics_timeout", lim.Timeout).
		Msg("serving /metrics, /healthz and /readyz")
	return func() { hs.Close() }
}

// maxPeers is how many connections cluster-port serves at once. Another
// server holds at most 6 to this one: 4 of its forwarding pool (2 per
// protocol), a pull of keys and an ask of slot records; 64 is room for
// 10 others with some to spare, and little of a low open files limit.
const maxPeers = 64

// getIDReply and debugAccess are respserver's values of getid-reply and
// enable-debug-command, by conf's: an index out of range would panic, not
// fall back.
var (
	getIDReply  = [...]respserver.GetIDReply{conf.GetIDAuto: respserver.GetIDAuto, conf.GetIDInteger: respserver.GetIDInteger, conf.GetIDString: respserver.GetIDString}
	debugAccess = [...]respserver.DebugAccess{conf.DebugNo: respserver.DebugNone, conf.DebugYes: respserver.DebugAll, conf.DebugLocal: respserver.DebugLocal}
)

// newServer is the protocol server for cfg, with the fields of opts that
// depend on the mode.
func newServer(cfg *conf.Config, log zerolog.Logger, opts respserver.Options) *respserver.Server {
	opts.Logger = log
	opts.Version = buildinfo.Version
	opts.MGetIDMax = cfg.MGetIDMax
	opts.MaxLead = cfg.MaxLead.Duration
	opts.PublicID, _ = publicid.New(cfg.PublicID()) // Validate checked it
	opts.GetIDReply = getIDReply[cfg.GetIDReply]
	opts.RequirePass = cfg.RequirePass
	opts.MaxClients = cfg.MaxClients
	opts.ProtectedMode = cfg.ProtectedMode == conf.Yes
	opts.IdleTimeout = cfg.Timeout.Duration
	opts.Limits = resplimit.Limits{MaxBulkLen: int(cfg.ProtoMaxBulkLen), MaxMultibulkLen: cfg.ProtoMaxMultibulkLen}
	opts.QueryBufferLimit = int(cfg.ClientQueryBufferLimit)
	opts.MaxMemoryClients = int(cfg.MaxMemoryClients)
	if cfg.MetricsAddr != "" {
		opts.OtherFDs = cfg.MetricsMaxClients
	}
	if cfg.EtcdEndpoints != "" {
		opts.MaxPeers = maxPeers
	}
	opts.Output = respserver.OutputLimits{
		Soft:    int(cfg.ClientOutputBufferLimit.Soft),
		Hard:    int(cfg.ClientOutputBufferLimit.Hard),
		SoftFor: cfg.ClientOutputBufferLimit.SoftSeconds,
	}
	opts.Config = cfg.Shown()
	opts.EnableDebug = debugAccess[cfg.EnableDebugCommand]
	return respserver.New(opts)
}

// logReady logs the line that says the server serves, where, and where
// m keeps the reservation. addr and tls_addr are the first address of
// each port, as with one; addrs and tls_addrs list them all when there
// are more.
func logReady(log zerolog.Logger, cfg *conf.Config, lns *listen.Set, m mode) {
	ready := log.Info()
	for _, port := range []struct {
		one, all string
		lns      []net.Listener
	}{{"addr", "addrs", lns.Plain}, {"tls_addr", "tls_addrs", lns.TLS}, {"cluster_addr", "cluster_addrs", lns.Peers}} {
		if len(port.lns) > 0 {
			ready.Str(port.one, port.lns[0].Addr().String())
		}
		if len(port.lns) > 1 {
			ready.Strs(port.all, addrStrings(port.lns))
		}
	}
	serverID := cfg.ServerID
	if cfg.EtcdEndpoints != "" {
		serverID = -1 // none yet: it is claimed from etcd, as INFO cluster then shows
	}
	ready.Int("server_id", serverID).
		Str("layout", fmt.Sprintf("id-range %d shard-range %d random-range %d", cfg.IDRange, cfg.ShardRange, cfg.RandomRange)).
		Int64("epoch_ms", cfg.EpochMs).
		Str("config", cfg.File).
		Str(m.where()).
		Str("version", buildinfo.Version).
		Msg("idserver ready")
}

// addrStrings are the addresses of lns.
func addrStrings(lns []net.Listener) []string {
	s := make([]string, len(lns))
	for i, ln := range lns {
		s[i] = ln.Addr().String()
	}
	return s
}

// logProtectedMode warns when protected mode will refuse every client
// that is not on loopback although the server listens beyond it, on any
// of its addresses: a container's clients, for one. What it listens on,
// not bind: an optional address skipped does not count, a socket passed
// by systemd does.
func logProtectedMode(cfg *conf.Config, lns *listen.Set, log zerolog.Logger) {
	if cfg.ProtectedMode != conf.Yes || cfg.RequirePass != "" {
		return
	}
	var beyond []string
	for _, ln := range slices.Concat(lns.Plain, lns.TLS) {
		if a, ok := ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
			beyond = append(beyond, ln.Addr().String())
		}
	}
	if len(beyond) > 0 {
		log.Warn().Str("bind", string(cfg.Bind)).Strs("beyond_loopback", beyond).
			Msg("protected mode: no requirepass is set, so only loopback clients are served (others get -DENIED); set requirepass, or protected-mode no on a trusted network")
	}
}
