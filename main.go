// Command idserver is a unique-ID server that speaks the Redis protocol:
// GETID, MGETID n and DECODEID id. See README.md and redis.conf.example.
package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/idserver/idserver/conf"
	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/metrics"
	"github.com/idserver/idserver/resplimit"
	"github.com/idserver/idserver/respserver"
)

// version is idserver's version, shown in INFO.
const version = "0.1.0"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg, err := conf.Load(args)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "idserver:", err)
		return 1
	}
	log := newLogger(cfg.LogLevel)

	maxWait := cfg.MaxWait
	if maxWait == 0 {
		maxWait = -1 // max-wait-ms 0: refuse at once rather than wait
	}
	gen, err := idgen.New(idgen.Settings{
		Layout:   idgen.Layout{IDBits: cfg.IDRange, ShardBits: cfg.ShardRange, RandomBits: cfg.RandomRange},
		Epoch:    time.UnixMilli(cfg.Epoch),
		ServerID: int64(cfg.ServerID),
		MaxLead:  cfg.MaxLead,
		MaxWait:  maxWait,
	})
	if err != nil {
		log.Error().Err(err).Msg("cannot start the generator")
		return 1
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Bind, strconv.Itoa(cfg.Port)))
	if err != nil {
		log.Error().Err(err).Msg("cannot listen")
		return 1
	}
	srv := respserver.New(respserver.Options{
		Generator:   gen,
		Logger:      log,
		Version:     version,
		MGetIDMax:   cfg.MGetIDMax,
		RequirePass: cfg.RequirePass,
		MaxClients:  cfg.MaxClients,
		IdleTimeout: cfg.Timeout,
		Limits:      resplimit.Limits{MaxBulkLen: cfg.ProtoMaxBulkLen, MaxMultibulkLen: cfg.ProtoMaxMultibulkLen},
		Config:      cfg.Pairs(),
	})
	if cfg.MetricsAddr != "" {
		stop, err := serveMetrics(cfg.MetricsAddr, metrics.Handler(gen, srv, version), log)
		if err != nil {
			log.Error().Err(err).Msg("cannot serve metrics")
			return 1
		}
		defer stop()
	}

	log.Info().
		Str("addr", ln.Addr().String()).
		Int("server_id", cfg.ServerID).
		Str("layout", fmt.Sprintf("id-range %d shard-range %d random-range %d", cfg.IDRange, cfg.ShardRange, cfg.RandomRange)).
		Int64("epoch_ms", cfg.Epoch).
		Str("config", cfg.File).
		Str("version", version).
		Msg("idserver ready")

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		log.Info().Str("signal", s.String()).Msg("shutting down")
		srv.Close()
		<-served
		return 0
	case err := <-served:
		log.Error().Err(err).Msg("server stopped")
		return 1
	}
}

// serveMetrics serves h at /metrics on addr and returns a function that
// stops it.
func serveMetrics(addr string, h http.Handler, log zerolog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("metrics server stopped")
		}
	}()
	log.Info().Str("metrics_addr", ln.Addr().String()).Msg("serving Prometheus metrics at /metrics")
	return func() { hs.Close() }, nil
}

// newLogger logs human-readable lines on a terminal and JSON otherwise, at
// Redis's level names.
func newLogger(level string) zerolog.Logger {
	levels := map[string]zerolog.Level{
		"debug":   zerolog.DebugLevel,
		"verbose": zerolog.DebugLevel,
		"notice":  zerolog.InfoLevel,
		"warning": zerolog.WarnLevel,
	}
	lvl, ok := levels[level]
	if !ok {
		lvl = zerolog.InfoLevel // conf.Validate has refused anything else
	}
	var log zerolog.Logger
	if isatty.IsTerminal(os.Stderr.Fd()) {
		log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.DateTime})
	} else {
		log = zerolog.New(os.Stderr)
	}
	return log.Level(lvl).With().Timestamp().Logger()
}
