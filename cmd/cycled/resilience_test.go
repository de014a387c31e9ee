package main

import (
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
)

const resilienceConfig = `
cycle: {period: 0}
bulkheads:
  db: {max_in_flight: 1}
retry_budget:
  downstreams:
    llm: {ratio: 0, min_per_tick: 1}
breakers:
  ds: {kind: rate, window: 4, min_ticks: 2, failure_rate: 0.5, cooldown: 1h}
modules:
  - {name: guard, tier: safety, builtin: {value: {clear: true}}}
  - {name: hog, tier: knowledge, bulkhead: db, priority: 2, builtin: {value: 1, hang: 400ms}}
  - {name: shy, tier: knowledge, bulkhead: db, priority: 1, builtin: {value: 2}}
  - {name: r1, tier: planning, retry_budget: llm, builtin: {fail_rate: 1, fail_kind: transient}}
  - {name: r2, tier: planning, retry_budget: llm, builtin: {fail_rate: 1, fail_kind: transient}}
  - {name: viarate, tier: execution, breaker: ds, builtin: {fail_rate: 1, fail_kind: downstream}}
http: {addr: 127.0.0.1:0}
`

type resilienceSummary struct {
	TickID               uint64   `json:"tick_id"`
	RetryBudgetExhausted []string `json:"retry_budget_exhausted"`
	Modules              []struct {
		Name         string `json:"name"`
		Status       string `json:"status"`
		Attempts     int    `json:"attempts"`
		CircuitState string `json:"circuit_state"`
	} `json:"modules"`
}

func (s resilienceSummary) line(t *testing.T, name string) (status string, attempts int, circuit string) {
	t.Helper()
	for _, m := range s.Modules {
		if m.Name == name {
			return m.Status, m.Attempts, m.CircuitState
		}
	}
	t.Fatalf("tick %d: no line %q", s.TickID, name)
	return "", 0, ""
}

// TestDaemonResilience drives the real daemon in step mode through a bulkhead held by a
// module that ignores its context (the other is rejected), a retry budget of one retry
// per tick shared by two failing modules, a rate breaker that opens at half of its
// window, and a reload that changes the rate breaker's settings (replaced, logged).
func TestDaemonResilience(t *testing.T) {
	cfgPath := write(t, "cycled.yaml", resilienceConfig)
	d := start(t, nil, "--config", cfgPath)
	var s resilienceSummary
	if st := d.do("POST", "/ticks", "", &s); st != http.StatusOK {
		t.Fatalf("POST /ticks = %d", st)
	}
	if st, n, _ := s.line(t, "shy"); st != "rejected" || n != 0 {
		t.Fatalf("tick 1: shy %s after %d attempts, want rejected, none", st, n)
	}
	if st, _, _ := s.line(t, "hog"); st != "timed_out" {
		t.Fatalf("tick 1: hog %s, want timed_out (it ignores its context)", st)
	}
	_, a1, _ := s.line(t, "r1")
	_, a2, _ := s.line(t, "r2")
	if a1+a2 != 3 || !slices.Equal(s.RetryBudgetExhausted, []string{"llm"}) {
		t.Fatalf("tick 1: r1 %d + r2 %d attempts, exhausted %v; want 3 (one retry), [llm]", a1, a2, s.RetryBudgetExhausted)
	}
	if _, _, c := s.line(t, "viarate"); c != "closed" {
		t.Fatalf("tick 1: rate breaker %s before min_ticks", c)
	}
	var bh struct {
		Bulkheads []struct {
			Name       string `json:"name"`
			InFlight   int    `json:"in_flight"`
			Rejections int    `json:"rejections"`
		} `json:"bulkheads"`
	}
	if st := d.do("GET", "/bulkheads", "", &bh); st != http.StatusOK || len(bh.Bulkheads) != 1 || bh.Bulkheads[0].Rejections < 1 {
		t.Fatalf("GET /bulkheads = %d %+v", st, bh)
	}
	if st := d.do("POST", "/ticks", "", &s); st != http.StatusOK {
		t.Fatalf("POST /ticks = %d", st)
	}
	if _, _, c := s.line(t, "viarate"); c != "open" {
		t.Fatalf("tick 2: rate breaker %s, want open (2 of 2 counted ticks failed)", c)
	}

	// A reload that changes the named breaker replaces it and says so.
	changed := strings.Replace(resilienceConfig, "cooldown: 1h}", "cooldown: 30m}", 1)
	if err := os.WriteFile(cfgPath, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitLog("configuration reloaded")
	if st := d.do("POST", "/ticks", "", &s); st != http.StatusOK {
		t.Fatalf("POST /ticks = %d", st)
	}
	if l := d.waitLog("breaker settings changed by a reload"); !strings.Contains(l, "cooldown: registered 1h0m0s, requested 30m0s") {
		t.Fatalf("replacement log line %q does not say what changed", l)
	}
	if st, _, c := s.line(t, "viarate"); st != "failed" || c != "closed" {
		t.Fatalf("tick 3: viarate %s on a %s breaker, want failed on the new, closed one", st, c)
	}
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, d.stderr())
	}
}
