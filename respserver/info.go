package respserver

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/stats"
)

// infoSections are INFO's sections in the order Redis prints them.
var infoSections = []struct {
	name, title string
	fields      func(s *Server) []stats.Field
	onlyAll     bool // not in the default INFO, as in Redis: asked by name, all or everything
}{
	{"server", "Server", (*Server).infoServer, false},
	{"clients", "Clients", (*Server).infoClients, false},
	{"memory", "Memory", (*Server).infoMemory, false},
	{"persistence", "Persistence", (*Server).infoPersistence, false},
	{"stats", "Stats", (*Server).infoStats, false},
	{"replication", "Replication", (*Server).infoReplication, false},
	{"cpu", "CPU", (*Server).infoCPU, false},
	{"commandstats", "Commandstats", (*Server).infoCommandStats, true},
	{"errorstats", "Errorstats", (*Server).infoErrorStats, false},
	{"cluster", "Cluster", (*Server).infoCluster, false},
	{"keyspace", "Keyspace", (*Server).infoKeyspace, false},
	{"idgen", "Idgen", (*Server).infoIDGen, false},
}

// Snapshot returns the named sections of INFO as of now (the default ones
// for none): what INFO prints and /metrics exports.
func (s *Server) Snapshot(names ...string) []stats.Section {
	var secs []stats.Section
	for _, sec := range infoSections {
		if included(names, sec.name, sec.onlyAll) {
			secs = append(secs, stats.Section{Name: sec.name, Title: sec.title, Fields: sec.fields(s)})
		}
	}
	return secs
}

// included reports whether Snapshot(names...) has the section name.
func included(names []string, name string, onlyAll bool) bool {
	return len(names) == 0 && !onlyAll || slices.Contains(names, name)
}

// cmdInfo is INFO [section ...]: no section or "default" mean the default
// sections, "all" and "everything" every one, and an unknown one adds
// nothing, as in Redis. With the keyspace section it runs off the loop
// where the keys' count walks every key (keyCountWalks).
func cmdInfo(s *Server, c *client, args [][]byte) (later, error) {
	var names []string
	for _, a := range args[1:] {
		switch name := keyword(a); name {
		case "all", "everything", "default":
			for _, sec := range infoSections {
				if name != "default" || !sec.onlyAll {
					names = append(names, sec.name)
				}
			}
		default:
			names = append(names, name)
		}
	}
	text := func() string {
		var b strings.Builder
		for i, sec := range s.Snapshot(names...) {
			if i > 0 {
				b.WriteString("\r\n")
			}
			b.WriteString("# " + sec.Title + "\r\n")
			for _, f := range sec.Fields {
				b.WriteString(f.Name + ":" + f.Value() + "\r\n")
			}
		}
		return b.String()
	}
	if !included(names, "keyspace", false) || !s.keyCountWalks() {
		c.writeVerbatim([]byte(text()))
		return later{}, nil
	}
	var out string
	return offLoop(func() error { out = text(); return nil }, func(c *client, err error) (later, error) {
		c.writeVerbatim([]byte(out))
		return later{}, nil
	}), nil
}

// infoCommandStats is Redis's commandstats: the calls that ran, the time
// they ran (usec: not their waits for the disk, etcd or the clock, as
// Redis counts the time its commands ran) in all and per call; then the
// calls rejected before they ran and those that failed. Text fields:
// /metrics exports them as labelled metrics.
func (s *Server) infoCommandStats() []stats.Field {
	var fields []stats.Field
	for _, cs := range s.Calls() {
		usec, perCall := cs.Busy*1e6, 0.0
		if cs.Count > 0 {
			perCall = usec / float64(cs.Count)
		}
		fields = append(fields, stats.T("cmdstat_"+cs.Name,
			fmt.Sprintf("calls=%d,usec=%.0f,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d", cs.Count, usec, perCall, cs.Rejected, cs.Failed)))
	}
	return fields
}

// infoErrorStats is Redis's errorstats: the error replies sent, by code
// (the reply's first word); codes never sent are left out, as Redis does.
func (s *Server) infoErrorStats() []stats.Field {
	var fields []stats.Field
	for _, e := range s.ErrorReplies() {
		if e.N == 0 {
			continue
		}
		fields = append(fields, stats.T("errorstat_"+e.Name, fmt.Sprintf("count=%d", e.N)))
	}
	return fields
}

// infoCPU is Redis's cpu section, from getrusage: the process's time in
// the kernel and in user space, and its waited-for children's (none: it
// starts none). Redis's main thread runs its commands, and its
// *_main_thread fields are that thread's; idserver's commands run on
// every event loop and goroutine, on whatever thread the Go runtime
// gives them, so no one thread stands for the server: those fields are
// the process's, as the other two.
func (s *Server) infoCPU() []stats.Field {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	d := func(tv syscall.Timeval) time.Duration { return time.Duration(tv.Nano()) }
	return []stats.Field{
		stats.CPU("used_cpu_sys", d(self.Stime), "CPU time in the kernel, seconds."),
		stats.CPU("used_cpu_user", d(self.Utime), "CPU time in user space, seconds."),
		stats.CPU("used_cpu_sys_children", d(children.Stime), "CPU time of child processes in the kernel, seconds (idserver starts none)."),
		stats.CPU("used_cpu_user_children", d(children.Utime), "CPU time of child processes in user space, seconds (idserver starts none)."),
		stats.CPU("used_cpu_sys_main_thread", d(self.Stime), "As used_cpu_sys: commands run on every thread, none is the main one."),
		stats.CPU("used_cpu_user_main_thread", d(self.Utime), "As used_cpu_user: commands run on every thread, none is the main one."),
	}
}

func (s *Server) infoServer() []stats.Field {
	up := time.Since(s.started)
	return []stats.Field{
		stats.T("redis_version", RedisVersion),
		stats.T("idserver_version", s.opts.Version),
		stats.T("redis_mode", s.redisMode()),
		stats.T("os", runtime.GOOS+" "+runtime.GOARCH),
		stats.T("go_version", runtime.Version()),
		stats.G("gomaxprocs", int64(runtime.GOMAXPROCS(0)), "CPU cores the Go runtime runs on."),
		stats.G("process_id", int64(os.Getpid()), "The process id."),
		stats.G("event_loops", s.conns.Stats().Loops, "Event loops serving clients."),
		stats.G("tcp_port", s.port.Load(), "The plain TCP port; 0: none."),
		stats.G("uptime_in_seconds", int64(up.Seconds()), "Time since start."),
		stats.G("uptime_in_days", int64(up.Hours()/24), "Time since start, in whole days."),
	}
}

func (s *Server) infoClients() []stats.Field {
	st := s.Stats()
	return []stats.Field{
		stats.G("connected_clients", st.Clients, "Clients connected now."),
		stats.G("cluster_connections", st.Peers, "Connections of other servers on cluster-port now (Redis's: its cluster bus's), apart from connected_clients and maxclients."),
		stats.G("blocked_clients", st.Blocked, "Clients whose command waits: for its IDs (at the lead bound or for the reservation), or for a sequence's segment."),
		stats.G("clients_over_soft_limit", st.Held, "Clients whose commands wait for their unsent replies to drain below the soft output limit."),
		stats.G("maxclients", int64(s.opts.MaxClients), "Most clients served at once."),
		stats.G("mem_clients_normal", st.ClientMem, "Bytes all clients have the server hold: input, unsent replies, queued transactions; and TLS handshakes under way (32 KiB each, and twice what they read)."),
		stats.G("tls_handshakes_in_progress", st.Handshakes, "TLS handshakes under way: not yet clients, but charged in mem_clients_normal and closed at maxmemory-clients like them."),
		stats.G("maxmemory_clients", int64(s.opts.MaxMemoryClients), "The bound on mem_clients_normal (maxmemory-clients); 0: none."),
	}
}

// infoMemory reports the Go runtime's memory as Redis reports its
// allocator's: used_memory is what the runtime holds for the program
// (total, less heap it has freed or returned to the OS), maxmemory is the
// GOMEMLIMIT soft limit (0: none).
func (s *Server) infoMemory() []stats.Field {
	samples := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(samples)
	used := samples[0].Value.Uint64() - samples[1].Value.Uint64() - samples[2].Value.Uint64()
	rss := residentBytes()
	limit := memoryLimit()
	return []stats.Field{
		stats.G("used_memory", int64(used), "Bytes the Go runtime holds for the program (heap in use, stacks, runtime)."),
		stats.T("used_memory_human", humanBytes(used)),
		stats.G("used_memory_rss", int64(rss), "Resident set size, bytes."),
		stats.T("used_memory_rss_human", humanBytes(rss)),
		stats.G("maxmemory", limit, "The Go runtime's memory limit (GOMEMLIMIT, or set from maxmemory-clients), bytes; 0: none."),
		stats.T("maxmemory_human", humanBytes(uint64(limit))),
		stats.T("maxmemory_policy", "noeviction"),
		stats.T("mem_allocator", "go-"+runtime.Version()),
	}
}

// memoryLimit is the Go runtime's soft memory limit (GOMEMLIMIT) in
// bytes, 0 for none: what INFO and CONFIG GET show as maxmemory.
func memoryLimit() int64 {
	if limit := debug.SetMemoryLimit(-1); limit != math.MaxInt64 {
		return limit
	}
	return 0
}

// residentBytes is the process's resident set size, from /proc; 0 where
// that cannot be read.
func residentBytes() uint64 {
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(statm))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// humanBytes formats n as Redis's INFO does: 1023B, 1.50K, 2.25M, 1.00G.
func humanBytes(n uint64) string {
	units := []string{"B", "K", "M", "G", "T", "P"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%dB", n)
	}
	return fmt.Sprintf("%.2f%s", f, units[i])
}

// infoKeyspace is Redis's line for database 0, the sequences, when there
// are any (redis-cli --stat reads its keys): DBSIZE's number (keyCount).
// Sequences never expire.
func (s *Server) infoKeyspace() []stats.Field {
	n := s.keyCount()
	if n == 0 {
		return nil
	}
	return []stats.Field{stats.T("db0", fmt.Sprintf("keys=%d,expires=0,avg_ttl=0", n))}
}

func (s *Server) infoStats() []stats.Field {
	st := s.Stats()
	return []stats.Field{
		stats.C("total_connections_received", st.Accepted, "Connections accepted."),
		stats.C("total_commands_processed", st.Commands, "Commands processed."),
		stats.C("rejected_connections", st.Rejected, "Connections refused: at maxclients, out of file descriptors, by protected mode, or too many TLS handshakes under way."),
		stats.C("total_error_replies", st.Errors, "Error replies sent."),
		stats.C("client_query_buffer_limit_disconnections", st.QueryClosed, "Clients closed at client-query-buffer-limit."),
		stats.C("client_output_buffer_limit_disconnections", st.LimitClosed, "Clients closed at client-output-buffer-limit."),
		stats.C("evicted_clients", st.Evicted, "Clients (and TLS handshakes under way) closed at maxmemory-clients, those holding the most first."),
		stats.C("tls_handshake_failures", st.TLSFailed, "TLS handshakes that failed (no or a bad client certificate, plain text on the TLS port, a timeout)."),
		stats.C("script_calls_refused", st.Scripts, "Scripting commands refused (EVAL, EVALSHA, SCRIPT, FUNCTION, FCALL and their _RO forms): idserver runs no scripts."),
	}
}

// infoReplication answers as a Redis primary with no replicas, which is
// what idserver is: clients that check the role before they send (Valkey
// GLIDE looks for role:master) connect. Its fields are constants, not
// measurements, so they are text and not exported as metrics.
func (s *Server) infoReplication() []stats.Field {
	return []stats.Field{
		stats.T("role", "master"),
		stats.T("connected_slaves", "0"),
		stats.T("master_failover_state", "no-failover"),
		stats.T("master_replid", s.replID),
		stats.T("master_replid2", strings.Repeat("0", 40)),
		stats.T("master_repl_offset", "0"),
		stats.T("second_repl_offset", "-1"),
		stats.T("repl_backlog_active", "0"),
		stats.T("repl_backlog_size", "0"),
		stats.T("repl_backlog_first_byte_offset", "0"),
		stats.T("repl_backlog_histlen", "0"),
	}
}

func (s *Server) infoPersistence() []stats.Field {
	fields := []stats.Field{stats.G("loading", 0, "Always 0: idserver loads no dataset.")}
	if s.opts.Persistence != nil {
		fields = append(fields, s.opts.Persistence()...)
	}
	return fields
}

// infoCluster is Redis's cluster_enabled, 1 only with cluster-enabled
// yes (a Redis Cluster node: tools read it so), then cluster mode's
// fields (etcd's) if any.
func (s *Server) infoCluster() []stats.Field {
	enabled := int64(0)
	if s.opts.Slots != nil {
		enabled = 1
	}
	fields := []stats.Field{stats.G("cluster_enabled", enabled, "1 with cluster-enabled yes: a Redis Cluster node.")}
	if s.opts.Cluster != nil {
		fields = append(fields, s.opts.Cluster()...)
	}
	return fields
}

// redisMode is what HELLO and INFO say the server is: a Redis Cluster
// node with cluster-enabled yes, otherwise a standalone server.
func (s *Server) redisMode() string {
	if s.opts.Slots != nil {
		return "cluster"
	}
	return "standalone"
}

func (s *Server) infoIDGen() []stats.Field {
	st := s.genStats()
	l := s.opts.Layout
	end := idgen.End(s.opts.Epoch)
	// Readiness as a number: an alert cannot probe /readyz, and a scrape
	// of a server that is not ready still succeeds.
	ready := int64(0)
	if s.Ready() == nil {
		ready = 1
	}
	return []stats.Field{
		stats.G("server_id", s.serverID(), "This server's id; -1 while it holds none (cluster mode)."),
		stats.G("id_range", int64(l.IDBits), "Bits of the server-id field."),
		stats.G("shard_range", int64(l.ShardBits), "Bits of the shard field."),
		stats.G("random_range", int64(l.RandomBits), "Bits of the random field."),
		stats.G("epoch_ms", s.opts.Epoch.UnixMilli(), "The epoch of the time field."),
		stats.G("time_field_end_ms", end.UnixMilli(), "When the 42-bit time field runs out."),
		stats.T("time_field_end", end.UTC().Format(time.RFC3339)),
		stats.C("ids_issued", st.Issued, "IDs issued."),
		stats.G("lead_ms", st.Lead.Milliseconds(), "How far the last issued ID's time is ahead of the clock."),
		stats.G("max_lead_ms", s.maxLead().Milliseconds(), "The bound on lead_ms (max-lead-ms): past it requests wait, then get -BUSY."),
		stats.G("max_lead_seen_ms", st.MaxLeadSeen.Milliseconds(), "The largest lead any issued ID had."),
		stats.C("borrowed_calls", st.Borrowed, "Requests that issued IDs ahead of the clock."),
		stats.C("clock_steps_back", st.ClockSteps, "Times the clock was seen to step backwards."),
		stats.G("last_clock_step_ms", st.LastStep.Milliseconds(), "The size of the latest backward clock step."),
		stats.C("clock_steps_forward_held", st.ForwardSteps, "Forward clock steps of more than max-lead-ms held back until they held for a minute."),
		stats.G("last_clock_step_forward_ms", st.LastForwardStep.Milliseconds(), "The size of the latest forward clock step held back."),
		stats.G("clock_step_held_ms", st.StepHeld.Milliseconds(), "How far the clock is ahead of the time IDs go by, while a forward step is held back; 0: none."),
		stats.C("lead_waits", st.Waits, "Requests that waited for the clock at the lead bound."),
		stats.C("lead_refusals", st.Refused, "Requests refused with -BUSY at the lead bound."),
		stats.C("unreserved_refusals", st.Unreserved, "Requests refused with -BUSY because the reservation on disk did not advance in time."),
		stats.G("clock_offset_ms", s.offset.Load(), "The clock shift set by DEBUG CLOCK-OFFSET (tests)."),
		stats.G("ready", ready, "1 when a GETID would be answered now, as /readyz answers 200; 0 when not (/readyz says why)."),
	}
}

// maxLead is the bound on the lead the generators are given.
func (s *Server) maxLead() time.Duration {
	if s.opts.MaxLead > 0 {
		return s.opts.MaxLead
	}
	return idgen.DefaultMaxLead
}
