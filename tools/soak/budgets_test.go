package main

import (
	"strings"
	"testing"

	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/faultsummary/check"
)

func TestScrapeBudgets(t *testing.T) {
	body := `# HELP cycled_retry_budget_first_attempts_total First attempts counted by a retry budget.
cycled_retry_budget_first_attempts_total{budget="gpu"} 120
cycled_retry_budget_retries_total{budget="gpu"} 7
cycled_retry_budget_refused_total{budget="gpu"} 3
cycled_retry_budget_first_attempts_total{budget="knowledge"} 1e+03
cycled_ticks_total{outcome="completed"} 99
`
	got := scrapeBudgets([]byte(body))
	want := map[string]budgetCounts{"gpu": {firsts: 120, retries: 7}, "knowledge": {firsts: 1000}}
	if len(got) != len(want) || got["gpu"] != want["gpu"] || got["knowledge"] != want["knowledge"] {
		t.Fatalf("scrapeBudgets = %v, want %v", got, want)
	}
}

// TestBudgetMismatches: the daemon's first attempts must lie between the summaries'
// through the tick before the scrape and through the tick after it (+1, in progress); its
// retries (allowed) must be at least those made through the tick before.
func TestBudgetMismatches(t *testing.T) {
	tally := newBudgetTally()
	tally.configure(check.Config{Modules: []check.Module{{Name: "a", RetryBudget: "b"}, {Name: "c"}},
		RetryBudgets: []check.RetryBudget{{Name: "b"}}})
	// Ticks 1-4: a makes 1, 2, 1, 3 attempts (abandoned at the deadline in tick 2); c (no
	// budget) always 3.
	for id, n := range []int{1, 2, 1, 3} {
		s := &faultsummary.Summary{TickID: uint64(id + 1)}
		a := faultsummary.Module{Name: "a", Attempts: n, Status: faultsummary.StatusOK}
		if id == 1 {
			a.Status, a.Error = faultsummary.StatusTimedOut, "still running at the tier deadline: abandoned, its late result discarded"
		}
		s.SetModules([]faultsummary.Module{a, {Name: "c", Attempts: 3}})
		tally.add(s)
	}
	// Through tick 2: 2 firsts (one line abandoned), 1 retry; through tick 3: 3, 1.
	for _, c := range []struct {
		name     string
		counts   budgetCounts
		mismatch bool
	}{
		{"the tick before", budgetCounts{firsts: 2, retries: 1}, false},
		{"the tick in progress counted", budgetCounts{firsts: 3, retries: 1}, false},
		{"a retry allowed but not made", budgetCounts{firsts: 3, retries: 2}, false},
		{"the abandoned run had not begun", budgetCounts{firsts: 1, retries: 1}, false},
		{"a first attempt no summary shows, one line abandoned", budgetCounts{firsts: 4, retries: 1}, false},
		{"two first attempts no summary shows", budgetCounts{firsts: 5, retries: 1}, true},
		{"more first attempts missing than abandoned", budgetCounts{firsts: 0, retries: 1}, true},
		{"a retry made but not counted", budgetCounts{firsts: 2}, true},
	} {
		got := budgetMismatches(tally, []budgetScrape{{before: 2, after: 2, counts: map[string]budgetCounts{"b": c.counts}}})
		if (len(got) > 0) != c.mismatch || (c.mismatch && !strings.Contains(got[0], `budget "b" between ticks 2 and 2`)) {
			t.Errorf("%s: %v, want mismatch %v", c.name, got, c.mismatch)
		}
	}
	if got := budgetMismatches(tally, []budgetScrape{{before: 4, after: 4, counts: map[string]budgetCounts{"b": {firsts: 9, retries: 9}}}}); len(got) != 0 {
		t.Errorf("a scrape past the tally's last tick is not compared: %v", got)
	}
}
