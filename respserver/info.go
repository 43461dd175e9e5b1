package respserver

import (
	"fmt"
	"os"
	"runtime"
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
	{"stats", (*Server).infoStats},
	{"persistence", (*Server).infoPersistence},
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
	c.writeBulkString(b.String())
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
	field(b, "clients_over_soft_limit", st.Held)
	field(b, "maxclients", s.opts.MaxClients)
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
