// Command idserver is a unique-ID server that speaks the Redis protocol:
// time-ordered IDs (GETID, MGETID n, DECODEID id), per-key sequences that
// never repeat a value (INCR, INCRBY, SET), and public strings for either
// (PUBLICID, PRIVATEID); alone (server-id and state file in dir) or in
// cluster mode over etcd (server-ids claimed; with cluster-enabled, the
// hash slots divided among the servers). See README.md, docs/ and
// redis.conf.example.
//
// This package only wires: it loads the configuration (conf), answers
// --version, --check-config and --check-ready, reads the TLS files
// (tlsfiles), builds the logger (logging), sets the runtime's limits,
// and hands over to lifecycle, which serves in the configured mode until
// SIGINT, SIGTERM or SHUTDOWN and then stops gracefully.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/spf13/pflag"

	"github.com/idserver/idserver/conf"
	"github.com/idserver/idserver/internal/buildinfo"
	"github.com/idserver/idserver/internal/logging"
	"github.com/idserver/idserver/internal/tlsfiles"
	"github.com/idserver/idserver/lifecycle"
	"github.com/idserver/idserver/metrics"
	"github.com/idserver/idserver/sequence"
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
	var files lifecycle.TLS
	files.Server, err = tlsfiles.Server(cfg)
	if err == nil {
		files.ClusterServe, files.ClusterDial, err = tlsfiles.Cluster(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "idserver:", err)
		return 1
	}
	log := logging.New(cfg.LogLevel)
	if cfg.GoMaxProcs > 0 {
		runtime.GOMAXPROCS(cfg.GoMaxProcs)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && cfg.Memory(sequence.KeyBytes).Limit > 0 {
		// The collector works harder as the heap nears this, before the
		// clients reach their bound rather than after.
		debug.SetMemoryLimit(cfg.Memory(sequence.KeyBytes).Limit)
	}
	return lifecycle.Run(cfg, files, log)
}

// checkConfig is --check-config, as nginx -t: the configuration Load
// accepted, and the TLS files it names read as a start reads them.
// Nothing is written, locked, bound or dialled, so it may run beside the
// server it checks.
func checkConfig(cfg *conf.Config) int {
	_, err := tlsfiles.Server(cfg)
	if err == nil {
		_, _, err = tlsfiles.Cluster(cfg)
	}
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
