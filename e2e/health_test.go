package e2e

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/testetcd"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/testbin"
)

// get fetches url and returns the status code and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// runCheckReady runs idserver --check-ready against metrics-addr addr and
// returns its exit code and output.
func runCheckReady(t *testing.T, addr string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, "--check-ready", "--metrics-addr", addr)
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// TestHealthAndReadiness: a restart whose reservation is 60 s ahead of the
// clock (the clock was set back while the server was down) is ready while
// it may still issue max-lead-ms of IDs; past them GETID gets -BUSY,
// /readyz says 503 and why, and /healthz stays 200: the process is fine,
// and restarting it would not help. --check-ready agrees with /readyz.
func TestHealthAndReadiness(t *testing.T) {
	dir := t.TempDir()
	reserved := time.Now().UnixMilli() - idgen.DefaultEpoch.UnixMilli() + 60_000
	writeState(t, dir, reserved)
	const maxLead = 20
	p := start(t, nil, "--dir", dir, "--metrics-addr", "127.0.0.1:0", "--max-lead-ms", "20")
	base := "http://" + p.MetricsAddr(t)
	expect := func(path string, code int, body string) {
		t.Helper()
		if got, b := get(t, base+path); got != code || !strings.Contains(b, body) {
			t.Fatalf("GET %s: %d %q, want %d and %q", path, got, b, code, body)
		}
	}
	expect("/healthz", 200, "OK")
	expect("/readyz", 200, "OK")
	if code, out := runCheckReady(t, p.MetricsAddr(t)); code != 0 || out != "OK\n" {
		t.Fatalf("--check-ready while ready: exit %d, %q", code, out)
	}

	checkAbove(t, mgetid(t, p.Addr, (maxLead+1)<<9), 0) // the budget: max-lead-ms and the floor's own ms
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	if err := c.Do(context.Background(), "GETID").Err(); err == nil || !strings.HasPrefix(err.Error(), "BUSY ") {
		t.Fatalf("GETID past the budget: %v, want -BUSY", err)
	}
	expect("/readyz", 503, "not ready: GETID would get -BUSY lead ")
	expect("/healthz", 200, "OK")
	if code, out := runCheckReady(t, p.MetricsAddr(t)); code != 1 || !strings.Contains(out, "retry in ") {
		t.Fatalf("--check-ready while refusing: exit %d, %q", code, out)
	}
}

// TestCheckReadyNoServer: --check-ready fails, with the reason, when
// nothing answers or metrics-addr is not set.
func TestCheckReadyNoServer(t *testing.T) {
	if code, out := runCheckReady(t, testbin.Unused(t)); code != 1 || !strings.Contains(out, "connection refused") {
		t.Fatalf("no server: exit %d, %q", code, out)
	}
	if code, out := runCheckReady(t, ""); code != 1 || !strings.Contains(out, "needs metrics-addr") {
		t.Fatalf("no metrics-addr: exit %d, %q", code, out)
	}
}

// TestEveryInfoFieldIsAMetric walks INFO clients, stats, cpu, persistence
// and idgen: every numeric field is at /metrics as idserver_<field>, without
// Redis's "total_" prefix, in seconds where INFO has _ms or _usec (and
// for CPU time, which INFO shows in seconds), and
// with _total and type counter where it only grows, and it has INFO's
// value: between those of two INFOs taken around the scrape, give or take
// the milliseconds between them for the time fields. A command that ran
// has a latency histogram, and INFO commandstats counts it too.
func TestEveryInfoFieldIsAMetric(t *testing.T) {
	checkInfoMetrics(t, start(t, nil, "--metrics-addr", "127.0.0.1:0"))
}

// TestEveryClusterInfoFieldIsAMetric is TestEveryInfoFieldIsAMetric in
// cluster mode, INFO cluster included.
func TestEveryClusterInfoFieldIsAMetric(t *testing.T) {
	p := member(t, testetcd.Start(t), "--metrics-addr", "127.0.0.1:0")
	waitHolding(t, p, 10*time.Second)
	checkInfoMetrics(t, p)
}

// checkInfoMetrics walks INFO clients, stats, cpu, persistence, cluster
// and idgen of p against its /metrics.
func checkInfoMetrics(t *testing.T, p *process) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	ctx := context.Background()
	if err := c.Do(ctx, "MGETID", 100).Err(); err != nil {
		t.Fatal(err)
	}
	sections := []string{"clients", "stats", "cpu", "persistence", "cluster", "idgen"}
	before, began := mustReadInfo(t, c, sections...), time.Now()
	code, body := get(t, "http://"+p.MetricsAddr(t)+"/metrics")
	slack := float64(time.Since(began).Milliseconds() + 1)
	after := mustReadInfo(t, c, sections...)
	if len(before.fields) < 20 {
		t.Fatalf("INFO %v: only %d fields:\n%s", sections, len(before.fields), before.text)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if code != 200 || err != nil {
		t.Fatalf("/metrics: %d, %v", code, err)
	}
	for _, f := range before.fields {
		v1, err := strconv.ParseFloat(f.Value, 64)
		if err != nil {
			continue // text: os, state_file, time_field_end
		}
		later, _ := after.get(f.Name)
		v2, _ := strconv.ParseFloat(later, 64)
		base, scale, fieldSlack := "idserver_"+strings.TrimPrefix(f.Name, "total_"), 1.0, 0.0
		for suffix, s := range map[string]float64{"_ms": 1e-3, "_usec": 1e-6} {
			if strings.HasSuffix(base, suffix) {
				base, scale, fieldSlack = strings.TrimSuffix(base, suffix)+"_seconds", s, slack/(s*1000)
			}
		}
		if strings.HasPrefix(f.Name, "used_cpu_") {
			base += "_seconds"
		}
		gauge, counter := fams[base], fams[base+"_total"]
		var m float64
		switch {
		case gauge != nil && counter == nil && gauge.GetType() == dto.MetricType_GAUGE:
			m = gauge.Metric[0].GetGauge().GetValue()
		case counter != nil && gauge == nil && counter.GetType() == dto.MetricType_COUNTER:
			m = counter.Metric[0].GetCounter().GetValue()
		default:
			t.Errorf("INFO %s: no one gauge %s or counter %s_total at /metrics", f.Name, base, base)
			continue
		}
		if m /= scale; m < min(v1, v2)-fieldSlack || m > max(v1, v2)+fieldSlack {
			t.Errorf("INFO %s is %v then %v, but /metrics has %v (in INFO's unit)", f.Name, v1, v2, m)
		}
	}
	counts := map[string]uint64{}
	for _, m := range fams["idserver_command_duration_seconds"].GetMetric() {
		counts[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
	}
	// The MGETID is counted before the first INFO runs: a connection's
	// reads are served in order. (That INFO's own count may come after
	// the scrape: it is taken once its reply is written.)
	if counts["mgetid"] != 1 {
		t.Errorf("latency histograms count %v; want mgetid 1", counts)
	}
	// INFO commandstats reads the same histograms.
	cmdstats, err := readInfo(c, "commandstats")
	mgetid, _ := cmdstats.get("cmdstat_mgetid")
	if err != nil || !regexp.MustCompile(`^calls=1,usec=\d+,usec_per_call=\d+\.\d\d,rejected_calls=0,failed_calls=0$`).MatchString(mgetid) {
		t.Errorf("INFO commandstats: cmdstat_mgetid %q, %v; want calls=1,...\n%s", mgetid, err, cmdstats.text)
	}
}

// TestPprofOnlyWhenAsked: /debug/pprof/ is not served by default, only
// with metrics-pprof yes; /metrics is served either way.
func TestPprofOnlyWhenAsked(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
	}{{nil, 404}, {[]string{"--metrics-pprof", "yes"}, 200}} {
		p := start(t, nil, append(c.args, "--metrics-addr", "127.0.0.1:0")...)
		base := "http://" + p.MetricsAddr(t)
		if code, _ := get(t, base+"/debug/pprof/"); code != c.code {
			t.Errorf("idserver %v: GET /debug/pprof/: %d, want %d", c.args, code, c.code)
		}
		if code, _ := get(t, base+"/metrics"); code != 200 {
			t.Errorf("idserver %v: GET /metrics: %d", c.args, code)
		}
	}
}
