// Package stats is the one snapshot of idserver's figures that INFO prints
// and /metrics exports, so the two cannot disagree or drift apart: a field
// added to INFO is a metric too.
package stats

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Kind says what a field's value is, and so how it is exported.
type Kind uint8

// Kinds of fields.
const (
	Text    Kind = iota // not a number: INFO only
	Gauge               // a number that goes up and down
	Counter             // a number that only goes up
)

// Field is one line of INFO, name:value. Numbers are in the unit their
// name ends with (Unit), or a plain count; or, for CPU time,
// microseconds that INFO shows in seconds (Micros). A number whose name
// says it is a point in time (TimePoint) is unix time.
type Field struct {
	Name   string // as INFO prints it; the metric's name is made from it
	Kind   Kind   // Text, Gauge or Counter
	Num    int64  // for Gauge and Counter
	Micros bool   // Num is microseconds, shown in seconds with six decimals
	Text   string // for Text
	Help   string // what it is, for the metric's HELP
}

// units are the suffixes of a figure's name that say its unit, and how
// many of the unit make a second.
var units = []struct {
	suffix string
	per    float64
}{{"_ms", 1e3}, {"_usec", 1e6}, {"_in_seconds", 1}, {"_seconds", 1}}

// Unit splits the name of a figure (an INFO field, or a metric) into its
// stem and how many of its unit make a second: lead_ms is lead and 1000,
// uptime_in_seconds is uptime and 1. A name with no unit is its own stem,
// with 0.
func Unit(name string) (stem string, per float64) {
	for _, u := range units {
		if stem, ok := strings.CutSuffix(name, u.suffix); ok {
			return stem, u.per
		}
	}
	return name, 0
}

// pointWords are the last words of the stems of points in time.
var pointWords = []string{"at", "until", "end", "time", "epoch"}

// TimePoint reports whether the figure named name (an INFO field, or a
// metric) is a point in time, by the rule every figure's name keeps: the
// last word of its stem (Unit) is at, until, end, time or epoch, as in
// reserved_until_ms, epoch_ms, seq_last_save_time and Prometheus's
// process_start_time_seconds. Such a figure is unix time in its unit, or
// in seconds where its name has none (as Redis's rdb_last_save_time); as
// text, RFC 3339 (time_field_end).
// Every other figure with a unit is a duration: lead_ms, last_save_usec,
// uptime_in_seconds, lease_ttl_left_ms.
func TimePoint(name string) bool {
	stem, _ := Unit(name)
	return slices.Contains(pointWords, stem[strings.LastIndexByte(stem, '_')+1:])
}

// Value is the field as INFO prints it.
func (f Field) Value() string {
	switch {
	case f.Kind == Text:
		return f.Text
	case f.Micros:
		return fmt.Sprintf("%d.%06d", f.Num/1e6, f.Num%1e6)
	}
	return strconv.FormatInt(f.Num, 10)
}

// Section is one section of INFO.
type Section struct {
	Name   string  // lower case, as INFO takes it: "idgen"
	Title  string  // as INFO prints it: "Idgen"
	Fields []Field // in INFO's order
}

// G is a gauge field: a number that goes up and down.
func G(name string, v int64, help string) Field {
	return Field{Name: name, Kind: Gauge, Num: v, Help: help}
}

// C is a counter field: a number that only goes up.
func C(name string, v uint64, help string) Field {
	return Field{Name: name, Kind: Counter, Num: int64(v), Help: help}
}

// T is a text field: INFO shows it, /metrics does not.
func T(name, v string) Field { return Field{Name: name, Kind: Text, Text: v} }

// CPU is a counter field of CPU time, as Redis prints it: in seconds,
// to the microsecond.
func CPU(name string, d time.Duration, help string) Field {
	return Field{Name: name, Kind: Counter, Num: d.Microseconds(), Micros: true, Help: help}
}

// Count is a number of something named: error replies of one code.
type Count struct {
	Name string // what is counted: "ERR"
	N    uint64 // how many
}

// Latency buckets: bucket i counts durations below 1024<<i ns (about 1 us,
// 2 us, 4 us, ... 4.3 s); the last counts the rest.
const latencyBuckets = 24

// Latency is a histogram of a command's latencies. Observing costs two
// uncontended atomic adds and allocates nothing; it is read when scraped.
type Latency struct {
	counts [latencyBuckets]atomic.Uint64
	sum    atomic.Uint64 // ns
}

// Observe counts one latency d.
func (l *Latency) Observe(d time.Duration) { l.ObserveN(d, 1) }

// ObserveN counts n latencies d.
func (l *Latency) ObserveN(d time.Duration, n uint64) {
	d = max(d, 0)
	l.counts[min(bits.Len64(uint64(d)>>10), latencyBuckets-1)].Add(n)
	l.sum.Add(uint64(d) * n)
}

// Histogram is a Latency as read at one moment.
type Histogram struct {
	Name    string             // the command, as COMMAND names it: "getid", "client|list"
	Count   uint64             // observations
	Sum     float64            // seconds
	Buckets map[float64]uint64 // upper bound in seconds: observations at or below it (+Inf left out)
}

// Calls is a command's figures as read at one moment: the latencies of
// the calls that ran, and, as Redis counts them, the calls refused before
// they ran (arity, authentication, inside MULTI) and those that ran and
// replied with an error.
type Calls struct {
	Histogram
	// Busy is the seconds the calls ran, their waits (for the disk,
	// etcd, the clock) left out, as Redis's commandstats usec.
	Busy float64
	// Rejected counts the calls refused before they ran, Failed those
	// that ran and replied with an error.
	Rejected, Failed uint64
}

// Read returns the histogram of l for the command name.
func (l *Latency) Read(name string) Histogram {
	h := Histogram{Name: name, Sum: float64(l.sum.Load()) / 1e9, Buckets: make(map[float64]uint64, latencyBuckets-1)}
	for i := range l.counts {
		h.Count += l.counts[i].Load()
		if i < latencyBuckets-1 {
			h.Buckets[float64(uint64(1024)<<i)/1e9] = h.Count
		}
	}
	return h
}
