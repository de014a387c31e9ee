package check

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// fromRecorder are the metric families the recorder exposes once it is enabled, and up,
// which Prometheus itself writes for every target: a rule or panel may reference them
// although a daemon without a recorder has none.
var fromRecorder = map[string]bool{"cycled_recorder_dropped_total": true, "up": true}

// metricsConfig makes every metric family appear within a second: a breaker that opens
// and closes, a last-known-good value served and then expired, a module abandoned at its
// deadline, a tier out of budget. flaky's last value (tick 2) is served only while it is
// younger than its TTL, and never written again: a TTL of ten periods leaves late ticks on
// a loaded machine the time to serve it before it expires.
const metricsConfig = `
cycle: {period: 20ms}
tiers:
  - name: safety
    budget: 50ms
  - name: knowledge
    budget: 15ms
    max_attempts: 2
    breaker: {failure_threshold: 1, cooldown: 40ms, half_open_successes: 1}
modules:
  - {name: guard, tier: safety, builtin: {value: 1}}
  - {name: flaky, tier: knowledge, ttl: 200ms, builtin: {value: 1, fail_ticks: [[3, 100000]]}}
  - {name: sleepy, tier: knowledge, builtin: {value: 1, hang: 30ms}}
`

// TestRulesAndDashboardMetricsExist parses deploy/prometheus's rules with Prometheus's
// rule parser, and checks that every metric the rules and deploy/grafana's dashboard
// reference is exposed by a real daemon's /metrics.
func TestRulesAndDashboardMetricsExist(t *testing.T) {
	root := repoRoot(t)
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(filepath.Join(root, "deploy", "prometheus", "cycled-alerts.yaml"), false, model.UTF8Validation, p, slog.Default())
	if len(errs) > 0 {
		t.Fatalf("the rules do not parse: %v", errs)
	}
	used := map[string][]string{} // metric → where
	alerts := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts++
			addMetrics(t, p, r.Expr, "rule "+r.Alert, used)
		}
	}
	if alerts < 5 {
		t.Errorf("%d alerting rules, want at least the five of the issue", alerts)
	}
	for _, e := range dashboardExprs(t, filepath.Join(root, "deploy", "grafana", "cycled-dashboard.json")) {
		addMetrics(t, p, e, "dashboard", used)
	}

	d := startDaemon(t, metricsConfig)
	exposed := waitForFamilies(t, d, used)
	var missing []string
	for m, where := range used {
		if !exposed[family(m, exposed)] && !fromRecorder[m] {
			missing = append(missing, m+" (used by "+strings.Join(where, ", ")+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("metrics referenced but not exposed by the daemon:\n  %s", strings.Join(missing, "\n  "))
	}
}

// addMetrics parses expr and records the metric names it selects.
func addMetrics(t *testing.T, p parser.Parser, expr, where string, used map[string][]string) {
	t.Helper()
	e, err := p.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" {
			used[vs.Name] = append(used[vs.Name], where)
		}
		return nil
	})
}

// dashboardExprs returns the PromQL of every panel target of the dashboard, with
// Grafana's variables replaced by values PromQL accepts.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	r := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$instance", ".*")
	var out []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, r.Replace(tg.Expr))
		}
	}
	return out
}

// family maps a sample name to its family as exposed (a histogram's _bucket, _sum and
// _count belong to it).
func family(name string, exposed map[string]bool) string {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(name, suf); ok && exposed[f] {
			return f
		}
	}
	return name
}

// waitForFamilies scrapes /metrics until every used family is exposed (some appear with
// their first event) or 15 s pass, and returns the families of the last scrape.
func waitForFamilies(t *testing.T, d *daemon, used map[string][]string) map[string]bool {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		exposed := scrape(t, d)
		all := true
		for m := range used {
			if !exposed[family(m, exposed)] && !fromRecorder[m] {
				all = false
			}
		}
		if all || time.Now().After(deadline) {
			return exposed
		}
		<-time.After(100 * time.Millisecond)
	}
}

// scrape returns the metric families of the daemon's /metrics that have samples.
func scrape(t *testing.T, d *daemon) map[string]bool {
	t.Helper()
	resp, err := http.Get(d.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f, ok := strings.CutPrefix(sc.Text(), "# TYPE "); ok {
			name, _, _ := strings.Cut(f, " ")
			out[name] = true
		}
	}
	return out
}
