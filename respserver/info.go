package respserver

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// infoSections are INFO's sections in the order Redis prints them.
var infoSections = []struct {
	name  string
	write func(s *Server, b *strings.Builder)
}{
	{"server", (*Server).infoServer},
	{"clients", (*Server).infoClients},
	{"memory", (*Server).infoMemory},
	{"persistence", (*Server).infoPersistence},
	{"stats", (*Server).infoStats},
	{"keyspace", (*Server).infoKeyspace},
	{"idgen", (*Server).infoIDGen},
}

// cmdInfo is INFO [section ...]; no section, "all", "default" or
// "everything" mean every section, and an unknown one adds nothing, as in Redis.
func cmdInfo(s *Server, c *client, args [][]byte) error {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["default"] || want["everything"]
	var b strings.Builder
	for _, sec := range infoSections {
		if all || want[sec.name] {
			if b.Len() > 0 {
				b.WriteString("\r\n")
			}
			sec.write(s, &b)
		}
	}
	c.writeVerbatim([]byte(b.String()))
	return nil
}

func field(b *strings.Builder, name string, v any) {
	fmt.Fprintf(b, "%s:%v\r\n", name, v)
}

func (s *Server) infoServer(b *strings.Builder) {
	up := time.Since(s.started)
	b.WriteString("# Server\r\n")
	field(b, "redis_version", RedisVersion)
	field(b, "idserver_version", s.opts.Version)
	field(b, "redis_mode", "standalone")
	field(b, "os", runtime.GOOS+" "+runtime.GOARCH)
	field(b, "go_version", runtime.Version())
	field(b, "gomaxprocs", runtime.GOMAXPROCS(0))
	field(b, "process_id", os.Getpid())
	field(b, "event_loops", s.loops.Load())
	field(b, "tcp_port", s.port.Load())
	field(b, "uptime_in_seconds", int64(up.Seconds()))
	field(b, "uptime_in_days", int64(up.Hours()/24))
}

func (s *Server) infoClients(b *strings.Builder) {
	b.WriteString("# Clients\r\n")
	st := s.Stats()
	field(b, "connected_clients", st.Clients)
	field(b, "blocked_clients", st.Blocked)
	field(b, "clients_over_soft_limit", st.Held)
	field(b, "maxclients", s.opts.MaxClients)
}

// infoMemory reports the Go runtime's memory as Redis reports its
// allocator's: used_memory is what the runtime holds for the program
// (total, less heap it has freed or returned to the OS), maxmemory is the
// GOMEMLIMIT soft limit (0: none).
func (s *Server) infoMemory(b *strings.Builder) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(samples)
	used := samples[0].Value.Uint64() - samples[1].Value.Uint64() - samples[2].Value.Uint64()
	rss := residentBytes()
	limit := debug.SetMemoryLimit(-1)
	if limit == math.MaxInt64 {
		limit = 0
	}
	b.WriteString("# Memory\r\n")
	field(b, "used_memory", used)
	field(b, "used_memory_human", humanBytes(used))
	field(b, "used_memory_rss", rss)
	field(b, "used_memory_rss_human", humanBytes(rss))
	field(b, "maxmemory", limit)
	field(b, "maxmemory_human", humanBytes(uint64(limit)))
	field(b, "maxmemory_policy", "noeviction")
	field(b, "mem_allocator", "go-"+runtime.Version())
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

// infoKeyspace has no database lines: idserver has no keys.
func (s *Server) infoKeyspace(b *strings.Builder) {
	b.WriteString("# Keyspace\r\n")
}

func (s *Server) infoStats(b *strings.Builder) {
	st := s.Stats()
	b.WriteString("# Stats\r\n")
	field(b, "total_connections_received", st.Accepted)
	field(b, "total_commands_processed", st.Commands)
	field(b, "rejected_connections", st.Rejected)
	field(b, "total_error_replies", st.Errors)
	field(b, "client_output_buffer_limit_disconnections", st.LimitClosed)
}

func (s *Server) infoPersistence(b *strings.Builder) {
	b.WriteString("# Persistence\r\n")
	field(b, "loading", 0)
	if s.opts.Persistence != nil {
		for _, kv := range s.opts.Persistence() {
			field(b, kv[0], kv[1])
		}
	}
}

func (s *Server) infoIDGen(b *strings.Builder) {
	st := s.gen.Stats()
	l := s.gen.Layout()
	b.WriteString("# Idgen\r\n")
	field(b, "server_id", s.gen.ServerID())
	field(b, "id_range", l.IDBits)
	field(b, "shard_range", l.ShardBits)
	field(b, "random_range", l.RandomBits)
	field(b, "epoch_ms", s.gen.Epoch().UnixMilli())
	field(b, "time_field_end_ms", s.gen.End().UnixMilli())
	field(b, "time_field_end", s.gen.End().UTC().Format(time.RFC3339))
	field(b, "ids_issued", st.Issued)
	field(b, "lead_ms", st.Lead.Milliseconds())
	field(b, "max_lead_seen_ms", st.MaxLeadSeen.Milliseconds())
	field(b, "borrowed_calls", st.Borrowed)
	field(b, "clock_steps_back", st.ClockSteps)
	field(b, "last_clock_step_ms", st.LastStep.Milliseconds())
	field(b, "lead_waits", st.Waits)
	field(b, "lead_refusals", st.Refused)
	field(b, "unreserved_refusals", st.Unreserved)
	field(b, "clock_offset_ms", s.gen.ClockOffset().Milliseconds())
}
