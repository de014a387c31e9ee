package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cycled/cycled/bulkhead"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/daemon/metrics"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/retrybudget"
	"github.com/cycled/cycled/tiers"
)

// TestBulkheadAndRetryBudgetFamilies: a module blocked past its tier keeps the bulkhead's
// one permit, so the other is rejected (counted, and in module_runs_total as rejected);
// two modules failing under a retry budget of one retry per tick exhaust it.
func TestBulkheadAndRetryBudgetFamilies(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := metrics.New(reg)
	release := make(chan struct{})
	hang := module(func(context.Context, *tiers.Input) (any, error) { <-release; return 1, nil })
	fail := module(func(context.Context, *tiers.Input) (any, error) { return nil, fault.Transient(errors.New("down")) })
	cfg := cycle.Config{
		Tiers: []tiers.Tier{{Name: "safety", Budget: time.Second, MaxAttempts: 1},
			{Name: "work", Budget: 20 * time.Millisecond, MaxAttempts: 3}},
		Bulkheads:    map[string]bulkhead.Settings{"db": {MaxInFlight: 1}},
		RetryBudgets: cycle.RetryBudgets{Tiers: map[string]retrybudget.RatioSettings{"work": {MinPerTick: 1}}},
	}
	mods := []cycle.Registration{
		{Spec: tiers.ModuleSpec{Name: "hang", Tier: "work", Bulkhead: "db", Priority: 2}, Module: hang},
		{Spec: tiers.ModuleSpec{Name: "other", Tier: "work", Bulkhead: "db", Priority: 1}, Module: module(func(context.Context, *tiers.Input) (any, error) { return 2, nil })},
		{Spec: tiers.ModuleSpec{Name: "f1", Tier: "work"}, Module: fail},
		{Spec: tiers.ModuleSpec{Name: "f2", Tier: "work"}, Module: fail},
	}
	e, err := cycle.New(cfg, mods, cycle.WithHooks(c.Hooks()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(release)
		_ = e.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.WaitWorkers(ctx)
	})
	c.Attach(e)
	if _, err := e.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	expect(t, reg, "cycled_bulkhead_in_flight", map[string]string{"bulkhead": "db"}, 1)
	expect(t, reg, "cycled_bulkhead_rejections_total", map[string]string{"bulkhead": "db"}, 1)
	expect(t, reg, "cycled_module_runs_total", map[string]string{"module": "other", "status": "rejected"}, 1)
	expect(t, reg, "cycled_retry_budget_exhausted_total", map[string]string{"budget": "work"}, 1)
	expect(t, reg, "cycled_retry_budget_retries_total", map[string]string{"budget": "work"}, 1)
	if v, _ := value(t, reg, "cycled_retry_budget_refused_total", map[string]string{"budget": "work"}); v < 1 {
		t.Errorf("refused %v, want at least 1", v)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "cycled_bulkhead") || strings.HasPrefix(p.Metric, "cycled_retry") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}
