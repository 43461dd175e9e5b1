package sequence

import "github.com/idserver/idserver/stats"

// Info is INFO persistence's part for the sequences of t: where they are
// kept (a field that names it: seq_file), their keys and writes, and
// what the last restart r may have skipped (nil: not reported).
func Info(where stats.Field, t *Table, r *Restart) []stats.Field {
	s := t.Stats()
	fields := []stats.Field{
		where,
		stats.G("seq_keys", int64(s.Keys), "Sequences (INCR keys)."),
		stats.G("seq_memory_bytes", s.Bytes, "What the sequences' keys cost in memory, about."),
		stats.C("seq_saves", s.Takes, "Writes of sequence reservations and SETs (each of many keys)."),
		stats.C("seq_values_reserved", s.Taken, "Sequence values reserved by those writes."),
		stats.C("seq_values_issued", s.Issued, "Sequence values handed out (INCR: 1, INCRBY n: n)."),
		stats.C("seq_save_failures", s.Failures, "Keys whose reservation write failed."),
		stats.C("seq_waits", s.Waits, "Requests that waited for a reservation write: a key's first value, or a key that outran its segment."),
		stats.G("seq_last_save_time", s.LastTake/1000, "When sequence reservations were last written successfully; 0: never yet."),
	}
	if r == nil {
		return fields
	}
	clean := int64(0)
	if r.Clean {
		clean = 1
	}
	return append(fields,
		stats.G("seq_restart_clean", clean, "1 if the last run stopped gracefully: every key continued from its last value."),
		stats.G("seq_restart_skipped_max", r.Skipped, "Values the last restart may have skipped, summed over keys, at most: reserved by the previous run beyond what it had handed out when it last wrote (0 after a graceful stop)."),
	)
}
