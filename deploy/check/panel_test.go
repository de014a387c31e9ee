package check

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
)

// TestTickAgePanel evaluates the dashboard's tick-age query with Prometheus's engine on a
// daemon at a 1 s period scraped every 15 s, at 10 s, 25 s, 40 s: every scrape reports a
// last tick 0.5 s old. Evaluated 5 s after a scrape, the panel must show 0.5 s, the age of
// the tick when it was scraped, not 5.5 s (the age of the scrape added to it).
func TestTickAgePanel(t *testing.T) {
	root := repoRoot(t)
	var expr string
	for _, e := range dashboardExprs(t, filepath.Join(root, "deploy", "grafana", "cycled-dashboard.json")) {
		if strings.Contains(e, "cycled_last_tick_timestamp_seconds") {
			expr = e
		}
	}
	if expr == "" {
		t.Fatal("no dashboard panel queries cycled_last_tick_timestamp_seconds")
	}
	var values []string
	for k := range 8 {
		values = append(values, fmt.Sprintf("_x2 %g", float64(15*k+10)-0.5))
	}
	script := fmt.Sprintf(`load 5s
  cycled_last_tick_timestamp_seconds{instance="cycled-0:8080", job="cycled"} %s

eval instant at 45s %s
  {instance="cycled-0:8080", job="cycled"} 0.5

eval instant at 115s %s
  {instance="cycled-0:8080", job="cycled"} 0.5
`, strings.Join(values, " "), expr, expr)
	promqltest.RunTest(t, script, promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery))
}

// runbookBase is where every alert's runbook_url points: a section of docs/operations.md.
const runbookBase = "https://github.com/cycled/cycled/blob/main/docs/operations.md#"

// TestRunbookURLs: every alerting rule has a runbook_url naming a section of
// docs/operations.md that exists (the anchor GitHub makes of the heading).
func TestRunbookURLs(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			anchors[githubAnchor(strings.TrimLeft(h, "#"))] = true
		}
	}
	groups, errs := rulefmt.ParseFile(filepath.Join(root, "deploy", "prometheus", "cycled-alerts.yaml"), false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.Default())
	if len(errs) > 0 {
		t.Fatalf("the rules do not parse: %v", errs)
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			u := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(u, runbookBase)
			if !ok || !anchors[anchor] {
				t.Errorf("alert %s: runbook_url %q is not a section of docs/operations.md", r.Alert, u)
			}
		}
	}
	if !anchors["cyclednotick"] || !anchors["timing-modes-cycletiming"] {
		t.Errorf("the anchors of docs/operations.md are not computed as GitHub does: %v", anchors)
	}
}

// githubAnchor is the anchor GitHub gives a Markdown heading: lower case, punctuation
// other than - and _ dropped, spaces as -.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
