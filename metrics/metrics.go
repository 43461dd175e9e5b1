// Package metrics is idserver's HTTP side, on metrics-addr: Prometheus
// metrics at /metrics (read when scraped, so the request path pays nothing
// for them), /healthz and /readyz for probes, and, when asked for,
// profiles at /debug/pprof/.
package metrics

import (
	"fmt"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idserver/idserver/stats"
)

// Source is what /metrics reads of the server when scraped: the stats
// snapshot INFO prints, so that the two cannot disagree, and the
// per-command calls and error replies behind INFO commandstats and
// errorstats. *respserver.Server is one.
type Source interface {
	// Snapshot returns the named sections of INFO as of now.
	Snapshot(names ...string) []stats.Section
	// Calls returns each command's latencies and counts of calls.
	Calls() []stats.Calls
	// ErrorReplies returns the error replies sent, by code.
	ErrorReplies() []stats.Count
}

// Options are what the HTTP side reports on.
type Options struct {
	Server  Source // what the metrics read: the server's one stats snapshot
	Version string // the build's version, a label of idserver_info
	// Ready says whether a GETID would be answered now, and if not why.
	Ready func() error
	// Pprof serves profiles at /debug/pprof/ (metrics-pprof): off by
	// default, as they show the server's workings to whoever reaches
	// metrics-addr, and a profile or trace costs CPU while it runs.
	Pprof bool
}

// New returns the handler of metrics-addr.
func New(o Options) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&collector{srv: o.Server, version: o.Version},
	)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// Liveness: the process serves HTTP. Restarting a server whose IDs
	// are refused for a while (a clock set back) would not help it.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "OK")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := o.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:", err)
			return
		}
		fmt.Fprintln(w, "OK")
	})
	if o.Pprof {
		// Profiles of the live server, for performance work (go tool
		// pprof), and execution traces, for latency (go tool trace).
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// exported are the INFO sections /metrics exports, every numeric field of
// them; the server's memory and process figures come from the Go and
// process collectors (go_memstats_*, process_*).
var exported = []string{"clients", "stats", "cpu", "persistence", "cluster", "idgen"}

// layoutFields are the fields of INFO idgen that label idserver_info.
var layoutFields = []string{"id_range", "shard_range", "random_range"}

var (
	infoDesc = prometheus.NewDesc("idserver_info", "Version and layout of this server (always 1).",
		append([]string{"version"}, layoutFields...), nil)
	latencyDesc = prometheus.NewDesc("idserver_command_duration_seconds",
		"Time from a command's start to its reply, by command (waits at the lead bound included).", []string{"command"}, nil)
	busyDesc = prometheus.NewDesc("idserver_command_busy_seconds_total",
		"Time the calls ran, their waits (disk, etcd, the clock) left out, by command: INFO commandstats' usec.", []string{"command"}, nil)
	rejectedDesc = prometheus.NewDesc("idserver_command_rejected_calls_total",
		"Calls refused before they ran (arity, authentication, refused inside MULTI), by command: INFO commandstats' rejected_calls.", []string{"command"}, nil)
	failedDesc = prometheus.NewDesc("idserver_command_failed_calls_total",
		"Calls that ran and replied with an error, by command: INFO commandstats' failed_calls.", []string{"command"}, nil)
	errorDesc = prometheus.NewDesc("idserver_error_replies_by_code_total",
		"Error replies sent, by code (their first word): INFO errorstats.", []string{"code"}, nil)
)

// collector reads the server's stats snapshot when scraped. It is
// unchecked (Describe sends nothing): its metrics are INFO's fields.
type collector struct {
	srv     Source
	version string
}

// Describe sends nothing: the collector is unchecked.
func (c *collector) Describe(chan<- *prometheus.Desc) {}

// Collect sends the current values.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	var layout [3]string // layoutFields' values
	for _, sec := range c.srv.Snapshot(exported...) {
		for _, f := range sec.Fields {
			if i := slices.Index(layoutFields, f.Name); i >= 0 && sec.Name == "idgen" {
				layout[i] = f.Value()
			}
			if f.Kind == stats.Text {
				continue
			}
			name, per := metricName(f)
			kind := prometheus.GaugeValue
			if f.Kind == stats.Counter {
				kind = prometheus.CounterValue
			}
			help := f.Help
			if stats.TimePoint(f.Name) {
				help += " Unix time."
			}
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, nil, nil), kind, float64(f.Num)/per)
		}
	}
	ch <- prometheus.MustNewConstMetric(infoDesc, prometheus.GaugeValue, 1, c.version, layout[0], layout[1], layout[2])
	for _, cs := range c.srv.Calls() {
		if cs.Count > 0 {
			ch <- prometheus.MustNewConstHistogram(latencyDesc, cs.Count, cs.Sum, cs.Buckets, cs.Name)
		}
		ch <- prometheus.MustNewConstMetric(busyDesc, prometheus.CounterValue, cs.Busy, cs.Name)
		ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(cs.Rejected), cs.Name)
		ch <- prometheus.MustNewConstMetric(failedDesc, prometheus.CounterValue, float64(cs.Failed), cs.Name)
	}
	for _, e := range c.srv.ErrorReplies() {
		ch <- prometheus.MustNewConstMetric(errorDesc, prometheus.CounterValue, float64(e.N), e.Name)
	}
}

// metricName is the Prometheus name of an INFO field, and how many of
// its unit make the base unit (a divisor: 6354 us / 1e6 is 0.006354 s,
// as INFO prints it, where 6354 * 1e-6 is 0.006353999999999999):
// idserver_<field>, without Redis's "total_" prefix, in seconds rather
// than _ms, _usec or CPU time's microseconds, and with _total for a
// counter.
func metricName(f stats.Field) (string, float64) {
	name, per := strings.TrimPrefix(f.Name, "total_"), 1.0
	if stem, p := stats.Unit(name); p > 0 {
		name, per = stem+"_seconds", p
	}
	if f.Micros {
		name, per = name+"_seconds", 1e6
	}
	if f.Kind == stats.Counter {
		name += "_total"
	}
	return "idserver_" + name, per
}
