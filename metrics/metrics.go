// Package metrics is idserver's HTTP side, on metrics-addr: Prometheus
// metrics at /metrics (read when scraped, so the request path pays nothing
// for them), /healthz and /readyz for probes, and profiles at
// /debug/pprof/.
package metrics

import (
	"fmt"
	"net/http"
	"net/http/pprof"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/respserver"
)

// Options are what the HTTP side reports on.
type Options struct {
	Generator *idgen.Generator
	Server    *respserver.Server
	Version   string
	// Ready says whether a GETID would be answered now, and if not why.
	Ready func() error
}

// New returns the handler of metrics-addr.
func New(o Options) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&collector{gen: o.Generator, srv: o.Server, version: o.Version},
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
	// Profiles of the live server, for performance work (go tool pprof).
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	return mux
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("idserver_"+name, help, labels, nil)
}

var (
	infoDesc       = desc("info", "Layout and identity of this server (always 1).", "version", "server_id", "id_range", "shard_range", "random_range")
	issuedDesc     = desc("ids_issued_total", "IDs issued.")
	leadDesc       = desc("lead_seconds", "How far the last issued ID's time is ahead of the clock.")
	maxLeadDesc    = desc("max_lead_seen_seconds", "The largest lead any issued ID had.")
	borrowedDesc   = desc("borrowed_calls_total", "Requests that issued IDs ahead of the clock.")
	stepsDesc      = desc("clock_steps_back_total", "Times the clock was seen to step backwards.")
	waitsDesc      = desc("lead_waits_total", "Requests that waited for the clock at the lead bound.")
	refusedDesc    = desc("lead_refusals_total", "Requests refused with -BUSY at the lead bound.")
	clientsDesc    = desc("connected_clients", "Clients connected now.")
	acceptedDesc   = desc("connections_received_total", "Connections accepted.")
	rejectedDesc   = desc("rejected_connections_total", "Connections refused at maxclients or out of file descriptors.")
	commandsDesc   = desc("commands_processed_total", "Commands processed.")
	errorRepliesDs = desc("error_replies_total", "Error replies sent.")
	heldDesc       = desc("clients_over_soft_limit", "Clients whose commands wait for their unsent replies to drain below the soft output limit.")
	limitDesc      = desc("client_output_buffer_limit_disconnections_total", "Clients closed at client-output-buffer-limit.")
)

// collector reads the counters at scrape time.
type collector struct {
	gen     *idgen.Generator
	srv     *respserver.Server
	version string
}

// Describe sends the descriptions of every metric collect sends.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{infoDesc, issuedDesc, leadDesc, maxLeadDesc, borrowedDesc, stepsDesc,
		waitsDesc, refusedDesc, clientsDesc, acceptedDesc, rejectedDesc, commandsDesc, errorRepliesDs, heldDesc, limitDesc} {
		ch <- d
	}
}

// Collect sends the current values.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	g, s, l := c.gen.Stats(), c.srv.Stats(), c.gen.Layout()
	itoa := strconv.Itoa
	send := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, labels...)
	}
	send(infoDesc, prometheus.GaugeValue, 1, c.version, strconv.FormatInt(c.gen.ServerID(), 10), itoa(l.IDBits), itoa(l.ShardBits), itoa(l.RandomBits))
	send(issuedDesc, prometheus.CounterValue, float64(g.Issued))
	send(leadDesc, prometheus.GaugeValue, g.Lead.Seconds())
	send(maxLeadDesc, prometheus.GaugeValue, g.MaxLeadSeen.Seconds())
	send(borrowedDesc, prometheus.CounterValue, float64(g.Borrowed))
	send(stepsDesc, prometheus.CounterValue, float64(g.ClockSteps))
	send(waitsDesc, prometheus.CounterValue, float64(g.Waits))
	send(refusedDesc, prometheus.CounterValue, float64(g.Refused))
	send(clientsDesc, prometheus.GaugeValue, float64(s.Clients))
	send(acceptedDesc, prometheus.CounterValue, float64(s.Accepted))
	send(rejectedDesc, prometheus.CounterValue, float64(s.Rejected))
	send(commandsDesc, prometheus.CounterValue, float64(s.Commands))
	send(errorRepliesDs, prometheus.CounterValue, float64(s.Errors))
	send(heldDesc, prometheus.GaugeValue, float64(s.Held))
	send(limitDesc, prometheus.CounterValue, float64(s.LimitClosed))
}
