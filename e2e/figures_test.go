package e2e

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/stats"
)

// TestTimePointsAreUnixTime: every INFO field and every /metrics series
// whose name says it is a point in time (stats.TimePoint) is unix time
// in its unit, on a single server: within a day of the test's clock
// (before its start, after now plus max-lead-ms), or, for the epoch and
// the end of the time field, exactly the layout's.
func TestTimePointsAreUnixTime(t *testing.T) {
	checkTimePoints(t, start(t, nil, "--metrics-addr", "127.0.0.1:0"), "reserved_until_ms", "seq_last_save_time")
}

// TestClusterTimePointsAreUnixTime is TestTimePointsAreUnixTime in
// cluster mode over etcd, INFO cluster included.
func TestClusterTimePointsAreUnixTime(t *testing.T) {
	p := member(t, testetcd.Start(t), "--metrics-addr", "127.0.0.1:0")
	waitHolding(t, p, 10*time.Second)
	checkTimePoints(t, p, "reserved_until_ms", "seq_last_save_time", "etcd_reserved_until_ms")
}

// checkTimePoints checks every time point of p's INFO and /metrics
// against the clock, once each has a value; INFO's fields named in
// musts must be among them.
func checkTimePoints(t *testing.T, p *process, musts ...string) {
	t.Helper()
	began := time.Now()
	info, fams := liveFigures(t, p)
	maxLead, _ := info.get("max_lead_ms")
	lead, _ := strconv.ParseInt(maxLead, 10, 64)
	from, to := began.Add(-24*time.Hour), time.Now().Add(time.Duration(lead)*time.Millisecond+24*time.Hour)
	points := slices.Concat(infoPoints(info), metricPoints(t, fams))
	for _, pt := range points {
		pt.check(t, from, to)
	}
	for _, name := range musts {
		if !slices.ContainsFunc(points, func(pt timePoint) bool { return pt.name == name }) {
			t.Errorf("INFO %s is not taken for a time point, or missing", name)
		}
	}
}

// liveFigures gives every time point of p a value (an ID, a counter, a
// collection of the server's garbage) and returns p's INFO everything
// and /metrics.
func liveFigures(t *testing.T, p *process) (serverInfo, map[string]*dto.MetricFamily) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	ctx := context.Background()
	for _, cmd := range [][]any{{"GETID"}, {"INCR", "k"}} {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	// go_memstats_last_gc_time_seconds is 0 until the server's runtime
	// first collects: garbage until it has.
	var fams map[string]*dto.MetricFamily
	await.True(t, 30*time.Second, "a garbage collection in the server", func() bool {
		for range 10 {
			c.Do(ctx, "MGETID", 10000)
		}
		fams = scrape(t, p)
		return fams["go_memstats_last_gc_time_seconds"].GetMetric()[0].GetGauge().GetValue() > 0
	})
	return mustReadInfo(t, c, "everything"), fams
}

// timePoint is a figure whose name says it is a point in time.
type timePoint struct {
	where string        // "INFO name" or "/metrics name"
	name  string        // INFO's name, or the metric's less idserver_
	v     float64       // unix seconds
	prec  time.Duration // how precisely v gives the time
	err   error         // parsing v
}

// infoPoints are the time points of INFO.
func infoPoints(info serverInfo) []timePoint {
	var points []timePoint
	for _, f := range info.fields {
		if !stats.TimePoint(f.Name) {
			continue
		}
		pt := timePoint{where: "INFO " + f.Name, name: f.Name, prec: time.Millisecond}
		pt.v, pt.err = strconv.ParseFloat(f.Value, 64)
		if _, per := stats.Unit(f.Name); pt.err == nil && per > 0 {
			pt.v /= per
		}
		if at, err := time.Parse(time.RFC3339Nano, f.Value); pt.err != nil && err == nil {
			pt.v, pt.prec, pt.err = float64(at.UnixMilli())/1e3, time.Second, nil // text: time_field_end
		}
		points = append(points, pt)
	}
	return points
}

// metricPoints are the time points of a scrape, whose HELP, idserver's,
// must say they are unix time.
func metricPoints(t *testing.T, fams map[string]*dto.MetricFamily) []timePoint {
	t.Helper()
	var points []timePoint
	for name, fam := range fams {
		if !stats.TimePoint(name) {
			continue
		}
		if strings.HasPrefix(name, "idserver_") && !strings.HasSuffix(fam.GetHelp(), " Unix time.") {
			t.Errorf("/metrics %s: HELP %q does not say it is unix time", name, fam.GetHelp())
		}
		for _, m := range fam.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			points = append(points, timePoint{"/metrics " + name, strings.TrimPrefix(name, "idserver_"), v, time.Millisecond, nil})
		}
	}
	return points
}

// fixedPoints are the time points of the default layout, by stem; every
// other lies near the clock.
var fixedPoints = map[string]time.Time{"epoch": idgen.DefaultEpoch, "time_field_end": idgen.End(idgen.DefaultEpoch)}

// check fails t unless pt is its fixed point or lies between from and to.
func (pt timePoint) check(t *testing.T, from, to time.Time) {
	t.Helper()
	stem, _ := stats.Unit(pt.name)
	at := time.UnixMilli(int64(math.Round(pt.v * 1e3)))
	want, fixed := fixedPoints[stem]
	switch {
	case pt.err != nil:
		t.Errorf("%s: %v", pt.where, pt.err)
	case fixed && at.Sub(want).Abs() >= pt.prec:
		t.Errorf("%s is %v (%s), want %s", pt.where, pt.v, at.UTC(), want.UTC())
	case !fixed && (at.Before(from) || at.After(to)):
		t.Errorf("%s is %v (%s read as unix time), not between %s and %s", pt.where, pt.v, at.UTC(), from.UTC(), to.UTC())
	}
}

// scrape returns p's /metrics.
func scrape(t *testing.T, p *process) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, "http://"+p.MetricsAddr(t)+"/metrics")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if code != 200 || err != nil {
		t.Fatalf("/metrics: %d, %v", code, err)
	}
	return fams
}
