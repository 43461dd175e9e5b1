package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/idserver/idserver/internal/testetcd"
)

// The alerting rules (deploy/prometheus) and the Grafana dashboard
// (deploy/grafana) that ship with the server, checked against promtool
// and against what a live server exports.

const (
	rulesFile     = "../deploy/prometheus/idserver-rules.yml"
	rulesTestFile = "../deploy/prometheus/idserver-rules.test.yml"
	dashboardFile = "../deploy/grafana/idserver.json"
	runbookFile   = "../docs/operations.md"
)

// alertRule is one rule of the rules file.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// alertRules reads the rules file.
func alertRules(t *testing.T) []alertRule {
	t.Helper()
	var file struct {
		Groups []struct {
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, rulesFile, &file)
	var rules []alertRule
	for _, g := range file.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) < 10 {
		t.Fatalf("%s: %d rules", rulesFile, len(rules))
	}
	return rules
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(text, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// dashboardQuery is one PromQL query of the dashboard: a panel's target,
// or a template variable's query; where names it for messages.
type dashboardQuery struct{ where, expr string }

// dashboardQueries reads every query of the dashboard: each panel's
// targets, and each query variable's query (label_values(...) and the
// like).
func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	text, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			// A variable's query is a string or {"query": "..."}, by
			// type and Grafana version.
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(text, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var qs []dashboardQuery
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			qs = append(qs, dashboardQuery{"panel " + strconv.Quote(p.Title) + " query " + strconv.Itoa(i+1), tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if json.Unmarshal(v.Query, &q.Query) != nil && json.Unmarshal(v.Query, &q) != nil || q.Query == "" {
			t.Fatalf("%s: variable %s has no query: %s", dashboardFile, v.Name, v.Query)
		}
		qs = append(qs, dashboardQuery{"variable $" + v.Name, q.Query})
	}
	if len(qs) < 20 {
		t.Fatalf("%s: only %d queries", dashboardFile, len(qs))
	}
	return qs
}

// PromQL, reduced to its metric names: what is not a name is removed
// first (Grafana's variables, strings, label matchers, ranges, grouping
// labels, offsets), then every identifier left is a name unless a call
// or a paren follows it (a function, an aggregation) or it is a keyword.
var (
	promVariable = regexp.MustCompile(`\$(\{[^}]*\}|\w+)`)
	promString   = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`(?i)\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promOffset   = regexp.MustCompile(`(?i)\boffset\s+-?\w+`)
	// A number first, so that 1e3 and 0x1f are not read as names.
	promToken      = regexp.MustCompile(`(?i)0x[0-9a-f]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?|[a-z_:][a-z0-9_:]*`)
	promCall       = regexp.MustCompile(`^\s*\(`)
	promKeywords   = []string{"and", "or", "unless", "bool", "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "inf", "nan"}
	promLabelValue = regexp.MustCompile(`^\s*(?:label_values|query_result)\s*\(`)
)

// promQLNames returns the metric names expr reads, each once, in order.
// A Grafana variable query label_values(metric{...}, label) reads metric.
func promQLNames(expr string) []string {
	label := promLabelValue.MatchString(expr)
	e := promVariable.ReplaceAllString(expr, "")
	e = promString.ReplaceAllString(e, `""`)
	e = promMatchers.ReplaceAllString(e, " ")
	e = promRange.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	e = promOffset.ReplaceAllString(e, " ")
	var names []string
	for _, loc := range promToken.FindAllStringIndex(e, -1) {
		tok := e[loc[0]:loc[1]]
		if c := tok[0]; c >= '0' && c <= '9' || c == '.' {
			continue
		}
		if promCall.MatchString(e[loc[1]:]) || slices.Contains(promKeywords, strings.ToLower(tok)) {
			continue
		}
		if !slices.Contains(names, tok) {
			names = append(names, tok)
		}
		if label { // label_values' second argument is a label
			break
		}
	}
	return names
}

// TestPromQLNames: the metric names read from PromQL leave out functions,
// aggregations, keywords, labels (in matchers, in by/on/without, in
// label_values), strings, numbers, durations and Grafana's variables.
func TestPromQLNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`sum by (instance) (rate(idserver_ids_issued_total{job=~"$job", instance=~"$instance"}[$__rate_interval]))`, []string{"idserver_ids_issued_total"}},
		{`histogram_quantile(0.99, sum by (command, le) (rate(x_bucket{le="1e3", code="CLUSTERDOWN"}[5m])))`, []string{"x_bucket"}},
		{`a > 0.8 * b or increase(c[5m]) > 0`, []string{"a", "b", "c"}},
		{"count by (job) (s == -1)\nunless on (job)\n  (count by (job) (s >= 0) >= on (job) max by (job) (2 ^ r))", []string{"s", "r"}},
		{`sum without (le) (a) / ignoring (code) group_left (c) b offset 5m`, []string{"a", "b"}},
		{`1e3 * m2 + 0x1F - Inf + .5 + NaN > bool 2.5e-3`, []string{"m2"}},
		{`label_replace(a, "dst", "$1", "src", "(.*) and b")`, []string{"a"}},
		{`max_over_time(g{a="}"}[1h:5m]) and ON(x) sum(h)`, []string{"g", "h"}},
		{`rate(ns:m:rate5m[5m])`, []string{"ns:m:rate5m"}},
		{`label_values(idserver_info{job=~"$job"}, instance)`, []string{"idserver_info"}},
		{`label_values(idserver_info, job)`, []string{"idserver_info"}},
		{`idserver_reserved_ahead_seconds{job=~"${job}"} - idserver_lead_seconds`, []string{"idserver_reserved_ahead_seconds", "idserver_lead_seconds"}},
	} {
		if got := promQLNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("promQLNames(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}

// TestAlertRulesDocumented: every alert has a severity, a summary and a
// description, and a runbook_url to its own entry in docs/operations.md,
// which has a heading of the alert's name; and idserver-rules.test.yml
// has, for every alert, series that fire it and series that do not.
func TestAlertRulesDocumented(t *testing.T) {
	runbook, err := os.ReadFile(runbookFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			Name       string `yaml:"name"`
			AlertTests []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, rulesTestFile, &tests)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertTests {
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
	}
	for _, r := range alertRules(t) {
		if r.Labels["severity"] != "critical" && r.Labels["severity"] != "warning" {
			t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, r.Labels["severity"])
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("alert %s: no summary or description", r.Alert)
		}
		if want := "docs/operations.md#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
			t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
		if !regexp.MustCompile(`(?m)^#{3,4} ` + regexp.QuoteMeta(r.Alert) + `\n`).Match(runbook) {
			t.Errorf("alert %s: %s has no heading ### %s (its runbook entry)", r.Alert, runbookFile, r.Alert)
		}
		if !fires[r.Alert] || !quiet[r.Alert] {
			t.Errorf("alert %s: %s has series that fire it: %v, that do not: %v; want both", r.Alert, rulesTestFile, fires[r.Alert], quiet[r.Alert])
		}
	}
}

// TestAlertRulesPromtool: promtool (Prometheus's own parser and
// evaluator) accepts the rules and passes their tests, and parses every
// query of the dashboard (given to it as recording rules, Grafana's
// variables filled in).
func TestAlertRulesPromtool(t *testing.T) {
	promtool := needProgram(t, "promtool", "apt-get install --no-install-recommends prometheus")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(promtool, args...)
		cmd.Dir = filepath.Dir(rulesFile)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("check", "rules", filepath.Base(rulesFile))
	run("test", "rules", filepath.Base(rulesTestFile))

	fill := strings.NewReplacer("$__rate_interval", "5m", "$job", ".*", "$instance", ".*")
	type record struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var records []record
	for i, q := range dashboardQueries(t) {
		if promLabelValue.MatchString(q.expr) {
			continue // Grafana's, not PromQL: checked by TestDashboardAndRulesMetricsExported
		}
		records = append(records, record{"dashboard:query" + strconv.Itoa(i), fill.Replace(q.expr)})
	}
	text, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": records}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(path, text, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules of the dashboard's queries: %v\n%s", err, out)
	}
}

// TestDashboardAndRulesMetricsExported: every metric each rule and each
// dashboard query reads is one that a live server exports at /metrics,
// a single server or one in cluster mode over a real etcd (etcd's
// figures), so that no panel shows nothing and no alert stays silent
// after a rename. Only Prometheus's own up is not the server's. Both
// scrapes pass promtool check metrics, where promtool is installed.
func TestDashboardAndRulesMetricsExported(t *testing.T) {
	e := testetcd.Start(t)
	single := start(t, nil, "--metrics-addr", "127.0.0.1:0", "--max-lead-ms", "3000")
	clustered := member(t, e, "--metrics-addr", "127.0.0.1:0")
	waitHolding(t, clustered, 10*time.Second)
	exported := map[string]bool{"up": true}
	for _, p := range []*process{single, clustered} {
		// Series that appear once used: a command's latency histogram,
		// error replies by code, sequences.
		c := redis.NewClient(&redis.Options{Addr: p.Addr})
		ctx := context.Background()
		for _, cmd := range [][]any{{"GETID"}, {"MGETID", 10}, {"INCRBY", "k", 5}, {"NOSUCH"}} {
			c.Do(ctx, cmd...)
		}
		c.Close()
		code, body := get(t, "http://"+p.MetricsAddr(t)+"/metrics")
		if code != 200 {
			t.Fatalf("/metrics: %d", code)
		}
		// The scrapes, cluster mode's and the sequences' included, keep
		// to Prometheus's naming rules (metrics.TestPromtool checks a
		// single server's in process).
		if promtool, err := exec.LookPath("promtool"); err == nil {
			lint := exec.Command(promtool, "check", "metrics")
			lint.Stdin = strings.NewReader(body)
			if out, err := lint.CombinedOutput(); err != nil || len(out) > 0 {
				t.Errorf("promtool check metrics of %s's scrape: %v\n%s", p.Addr, err, out)
			}
		}
		for line := range strings.Lines(body) {
			if name, _, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") {
				name, _, _ = strings.Cut(name, "{")
				exported[name] = true
			}
		}
		if p == single && !strings.Contains(body, "\nidserver_max_lead_seconds 3\n") {
			t.Errorf("a server given --max-lead-ms 3000: no idserver_max_lead_seconds 3 at /metrics")
		}
	}
	used := 0
	check := func(where, expr string) {
		names := promQLNames(expr)
		if len(names) == 0 {
			t.Errorf("%s reads no metric: %q", where, expr)
		}
		for _, name := range names {
			used++
			if !exported[name] {
				t.Errorf("%s reads %s, which no server exports: %q", where, name, expr)
			}
		}
	}
	for _, r := range alertRules(t) {
		check("alert "+r.Alert, r.Expr)
	}
	for _, q := range dashboardQueries(t) {
		check(q.where, q.expr)
	}
	t.Logf("%d metric reads checked against %d exported names", used, len(exported))
}
