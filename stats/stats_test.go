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
