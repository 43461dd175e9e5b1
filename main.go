// Command idserver is a unique-ID server that speaks the Redis protocol:
// time-ordered IDs (GETID, MGETID n, DECODEID id), per-key sequences that
// never repeat a value (INCR, INCRBY, SET), and public strings for either
// (PUBLICID, PRIVATEID); alone (server-id and state file in dir) or in
// cluster mode over etcd (server-ids claimed; with cluster-enabled, the
// hash slots divided among the servers). See README.md, docs/ and
// redis.conf.example.
//
// This package wires the parts: the configuration (conf), the logger,
// the mode (mode.go: single-server, or cluster mode over etcd), the
// listeners (listen), the protocol server (respserver) and the HTTP
// side (metrics); it serves until SIGINT, SIGTERM or SHUTDOWN, then stops
// gracefully (serveUntilStopped).
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/idserver/idserver/conf"
	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/buildinfo"
	"github.com/idserver/idserver/internal/tlsfiles"
	"github.com/idserver/idserver/listen"
	"github.com/idserver/idserver/metrics"
	"github.com/idserver/idserver/publicid"
	"github.com/idserver/idserver/reservation"
	"github.com/idserver/idserver/resplimit"
	"github.com/idserver/idserver/respserver"
	"github.com/idserver/idserver/sequence"
	"github.com/idserver/idserver/slots"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg, err := conf.Load(args, os.Environ())
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.Is(err, conf.ErrVersion):
		fmt.Println(buildinfo.Line())
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "idserver:", err)
		return 1
	}
	if cfg.CheckConfig {
		return checkConfig(cfg)
	}
	if cfg.CheckReady {
		return checkReady(cfg)
	}
	tc, err := tlsfiles.Server(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "idserver:", err)
		return 1
	}
	log := newLogger(cfg.LogLevel)
	if cfg.GoMaxProcs > 0 {
		runtime.GOMAXPROCS(cfg.GoMaxProcs)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && cfg.Memory(sequence.KeyBytes).Limit > 0 {
		// The collector works harder as the heap nears this, before the
		// clients reach their bound rather than after.
		debug.SetMemoryLimit(cfg.Memory(sequence.KeyBytes).Limit)
	}
	return runMode(cfg, tc, log)
}

// runMode serves in cfg's mode until stopped. In this order: a check of
// every address, so that one this machine cannot listen on stops the
// start before it takes anything; the lock of dir, in every mode, so that
// nothing reads, claims or writes what another process serves from; the
// mode's state; then every address, so that a start that fails leaves
// the state as it found it; and only then the first write of the
// reservation. The lock goes last, after every write.
func runMode(cfg *conf.Config, tc *tls.Config, log zerolog.Logger) int {
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
	m, err := newMode(cfg, log)
	if err != nil {
		log.Error().Err(err).Msg("refusing to start")
		return 1
	}
	defer m.close()
	lns, err := listen.Open(cfg, tc, passed, log)
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

// addrOf is the address clients reach this server at, for its claim:
// the first of bind's it listens on (0.0.0.0:port for *, as it is
// bound), the plain port's if on.
func addrOf(lns *listen.Set) string {
	if len(lns.Plain) > 0 {
		return lns.Plain[0].Addr().String()
	}
	return lns.TLS[0].Addr().String()
}

// oneNodeCluster is the Redis Cluster of cluster-enabled yes without
// etcd: this node (announced) owns every slot.
func oneNodeCluster(cfg *conf.Config, lns *listen.Set) (slots.Source, error) {
	self, err := announced(cfg, lns)
	if err != nil {
		return nil, err
	}
	return slots.NewStatic(self.ID, slots.Single(self)), nil
}

// announced is this node as cluster clients are told of it, with the ID
// kept in dir: the cluster-announce-* address and ports, or the first
// address and ports it listens on (no address when that is every
// address: then clients use the one they reached, as with Redis).
func announced(cfg *conf.Config, lns *listen.Set) (slots.Node, error) {
	id, err := slots.LoadID(cfg.Dir)
	if err != nil {
		return slots.Node{}, err
	}
	self := slots.Node{ID: id, IP: cfg.ClusterAnnounceIP, Port: cfg.ClusterAnnouncePort,
		TLSPort: cfg.ClusterAnnounceTLSPort, Hostname: cfg.ClusterAnnounceHostname}
	first := func(lns []net.Listener) *net.TCPAddr {
		if len(lns) > 0 {
			if a, ok := lns[0].Addr().(*net.TCPAddr); ok {
				return a
			}
		}
		return nil
	}
	plain, tls := first(lns.Plain), first(lns.TLS)
	if self.IP == "" {
		if a := cmp.Or(plain, tls); a != nil && !a.IP.IsUnspecified() {
			self.IP = a.IP.String()
		}
	}
	if self.Port == 0 && plain != nil {
		self.Port = plain.Port
	}
	if self.TLSPort == 0 && tls != nil {
		self.TLSPort = tls.Port
	}
	return self, nil
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
	}{{"addr", "addrs", lns.Plain}, {"tls_addr", "tls_addrs", lns.TLS}} {
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

// maxWait is max-wait-ms for idgen: 0 there means the default, and
// max-wait-ms 0 means refuse at once rather than wait.
func maxWait(cfg *conf.Config) time.Duration {
	if cfg.MaxWait.Duration == 0 {
		return -1
	}
	return cfg.MaxWait.Duration
}

// openState locks the state file, reads where the last run stopped, and
// returns a generator that starts above it and issues nothing until the
// keeper has a reservation on disk, and a function that logs where it
// resumed from (once the start is sure to go on).
func openState(cfg *conf.Config, identity reservation.State, log zerolog.Logger) (*reservation.FileStore, *idgen.Generator, func(), error) {
	store, err := reservation.OpenFile(filepath.Join(cfg.Dir, cfg.StateFile), log)
	if err != nil {
		return nil, nil, nil, err
	}
	resumed, err := store.Resume(identity)
	if err != nil {
		store.Close()
		return nil, nil, nil, fmt.Errorf("%w (the file is left as it is)", err)
	}
	now := time.Now().UnixMilli() + cfg.DebugClockOffset.Milliseconds() - cfg.EpochMs
	floor := resumed.Floor(now, cfg.MaxLead.Duration)
	gen, err := idgen.New(idgen.Settings{
		Layout:      identity.Layout,
		Epoch:       cfg.Epoch(),
		ServerID:    identity.ServerID,
		MaxLead:     cfg.MaxLead.Duration,
		MaxWait:     maxWait(cfg),
		Floor:       floor,
		Ceiling:     max(floor, 1),
		ClockOffset: cfg.DebugClockOffset.Duration,
	})
	if err != nil {
		store.Close()
		return nil, nil, nil, err
	}
	return store, gen, func() { logResumption(log, resumed, store.Path(), gen, floor, cfg) }, nil
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
	opts.Output = respserver.OutputLimits{
		Soft:    int(cfg.ClientOutputBufferLimit.Soft),
		Hard:    int(cfg.ClientOutputBufferLimit.Hard),
		SoftFor: cfg.ClientOutputBufferLimit.SoftSeconds,
	}
	opts.Config = cfg.Shown()
	opts.EnableDebug = debugAccess[cfg.EnableDebugCommand]
	return respserver.New(opts)
}

// serveUntilStopped serves lns until SIGINT, SIGTERM or SHUTDOWN, then
// stops gracefully. It calls ready once the server serves (the ready
// line: /readyz can then say so too). It reports false if the server
// stopped by itself.
func serveUntilStopped(srv *respserver.Server, lns *listen.Set, stopRequested stopper, log zerolog.Logger, ready, handOver func()) bool {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	serving := len(lns.Plain) + len(lns.TLS)
	served := make(chan error, serving)
	for _, ln := range lns.Plain {
		go func() { served <- srv.Serve(ln) }()
	}
	for _, ln := range lns.TLS {
		go func() { served <- srv.ServeTLS(ln, lns.TLSConfig) }()
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

// checkConfig is --check-config, as nginx -t: the configuration Load
// accepted, and the TLS files it names read as a start reads them.
// Nothing is written, locked, bound or dialled, so it may run beside the
// server it checks.
func checkConfig(cfg *conf.Config) int {
	_, err := tlsfiles.Server(cfg)
	if err == nil {
		_, err = tlsfiles.Etcd(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "idserver:", err)
		return 1
	}
	fmt.Println("configuration OK")
	return 0
}

// checkReady is --check-ready: it asks the server at cfg's metrics-addr
// whether it is ready, prints the answer, and returns the exit code.
func checkReady(cfg *conf.Config) int {
	if cfg.MetricsAddr == "" {
		fmt.Fprintln(os.Stderr, "idserver: --check-ready needs metrics-addr, where /readyz is served")
		return 1
	}
	body, ready, err := metrics.Probe(cfg.MetricsAddr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "idserver:", err)
		return 1
	}
	fmt.Print(body)
	if !ready {
		return 1
	}
	return 0
}

// logResumption says where the start resumed from when it was not a plain
// restart: from the lock file's copy (the state file is gone), from
// nothing (a first start), or from a reservation so far ahead of the clock
// that requests will be refused for a while.
func logResumption(log zerolog.Logger, r reservation.Resumed, statePath string, gen *idgen.Generator, floor int64, cfg *conf.Config) {
	switch r.From {
	case "":
		log.Info().Str("state_file", statePath).Int64("max_lead_ms", cfg.MaxLead.Milliseconds()).
			Msg("no state file: a first start on this dir; IDs begin max-lead-ms ahead of the clock, above anything a server whose state file was deleted could have issued")
	case statePath:
	default:
		log.Warn().Str("state_file", statePath).Str("from", r.From).
			Msg("the state file is missing; resuming from the copy of the reservation in the lock file")
	}
	// A restart jumps at most the previous run's lead plus reserve-ms
	// ahead of the clock; further means the clock went back while the
	// server was down. The lead is counted from the reservation until the
	// clock gets there, so max-lead-ms worth of IDs go out at once, and
	// then requests get -BUSY until the clock reaches it.
	ahead := floor - gen.Now()
	if ahead <= cfg.MaxLead.Milliseconds()+cfg.ReserveAhead.Milliseconds() {
		return
	}
	at := cfg.Epoch().Add(time.Duration(floor) * time.Millisecond).UTC()
	budget := (cfg.MaxLead.Milliseconds() + 1) << cfg.ShardRange // the floor's millisecond and max-lead-ms more
	log.Warn().Int64("ahead_ms", ahead).Str("available_at", at.Format(time.RFC3339Nano)).Int64("ids_before_then", budget).
		Msgf("the reservation is %s ahead of the clock (was the clock set back while the server was down?): "+
			"until the clock reaches it at %s, this server can issue at most %d IDs (max-lead-ms %d at 2^%d per ms); past those, requests get -BUSY until then",
			time.Duration(ahead)*time.Millisecond, at.Format(time.RFC3339), budget, cfg.MaxLead.Milliseconds(), cfg.ShardRange)
}

// newLogger logs human-readable lines on a terminal and JSON otherwise, at
// Redis's level names.
func newLogger(level conf.LogLevel) zerolog.Logger {
	lvl := [...]zerolog.Level{conf.LogDebug: zerolog.DebugLevel, conf.LogVerbose: zerolog.DebugLevel, conf.LogNotice: zerolog.InfoLevel, conf.LogWarning: zerolog.WarnLevel}[level]
	var log zerolog.Logger
	if isatty.IsTerminal(os.Stderr.Fd()) {
		log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.DateTime})
	} else {
		log = zerolog.New(os.Stderr)
	}
	return log.Level(lvl).With().Timestamp().Logger()
}
