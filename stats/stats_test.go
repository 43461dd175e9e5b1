package stats

import (
	"testing"
	"time"
)

// TestLatencyBuckets: each latency lands in the first bucket whose bound
// is above it; counts are cumulative, as Prometheus wants them, and the
// sum is in seconds.
func TestLatencyBuckets(t *testing.T) {
	var l Latency
	l.Observe(500 * time.Nanosecond)    // below 1.024 us
	l.ObserveN(1500*time.Nanosecond, 3) // below 2.048 us
	l.Observe(3 * time.Millisecond)     // below 4.194 ms
	l.Observe(time.Hour)                // past every bound: +Inf only
	h := l.Read("getid")
	for bound, want := range map[float64]uint64{1.024e-6: 1, 2.048e-6: 4, 2.097152e-3: 4, 4.194304e-3: 5, 4.294967296: 5} {
		if got, ok := h.Buckets[bound]; !ok || got != want {
			t.Errorf("bucket le %g: %d (present %v), want %d", bound, got, ok, want)
		}
	}
	if want := 0.5e-6 + 4.5e-6 + 3e-3 + 3600; h.Count != 6 || h.Sum < want-1e-9 || h.Sum > want+1e-9 || h.Name != "getid" {
		t.Errorf("count %d sum %g name %q, want 6, %g, getid", h.Count, h.Sum, h.Name, want)
	}
}

// TestTimePoint: the names of points in time are told from those of
// durations and counts, INFO's and Prometheus's alike.
func TestTimePoint(t *testing.T) {
	for name, want := range map[string]bool{
		"reserved_until_ms": true, "etcd_reserved_until_ms": true, "epoch_ms": true,
		"time_field_end_ms": true, "time_field_end": true, "seq_last_save_time": true,
		"idserver_etcd_reserved_until_seconds": true, "process_start_time_seconds": true,
		"go_memstats_last_gc_time_seconds": true,
		"lead_ms":                          false, "reserved_ahead_ms": false, "last_save_usec": false, "uptime_in_seconds": false,
		"lease_ttl_left_ms": false, "last_clock_step_ms": false, "clock_step_held_ms": false,
		"process_cpu_seconds_total": false, "idserver_command_duration_seconds": false,
		"seq_saves": false, "ids_issued": false,
	} {
		if got := TimePoint(name); got != want {
			t.Errorf("TimePoint(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestUnit: a name's unit, and its stem without it.
func TestUnit(t *testing.T) {
	for name, want := range map[string]struct {
		stem string
		per  float64
	}{
		"lead_ms": {"lead", 1e3}, "last_save_usec": {"last_save", 1e6}, "uptime_in_seconds": {"uptime", 1},
		"idserver_lead_seconds": {"idserver_lead", 1}, "seq_last_save_time": {"seq_last_save_time", 0},
	} {
		if stem, per := Unit(name); stem != want.stem || per != want.per {
			t.Errorf("Unit(%q) = %q, %g, want %q, %g", name, stem, per, want.stem, want.per)
		}
	}
}
