package check

import (
	"slices"
	"time"

	"github.com/cycled/cycled/faultsummary"
)

// The rules of bulkheads and retry budgets.
const (
	// RuleBulkhead: a rejected module names a bulkhead (and, like every module not run,
	// made no attempt and moved no breaker: status_attempts, breaker rules).
	RuleBulkhead = "bulkhead"
	// RuleRetryBudget: retry_budget_exhausted names configured budgets only, once each;
	// a tick's retries under a budget are at most min_per_tick, or else the retries of the
	// budget's window ending with the tick are at most ratio × its first attempts +
	// min_per_tick (the last retry the ratio allowed fitted, and only the minimum's may
	// follow it). A window checked later may hold more: first attempts leave it.
	RuleRetryBudget = "retry_budget"
)

// rbTick is one tick of a retry budget's window as the checker follows it.
type rbTick struct {
	at              time.Time
	firsts, retries int
}

// rbWindow is a retry budget's window as the checker follows it. It is complete when it
// holds every tick the engine's window holds: from the engine's first tick, or once the
// checker has followed the budget for a whole window (before that the engine may count
// first attempts the checker did not see, and the check is skipped).
type rbWindow struct {
	ticks    []rbTick
	firstAt  time.Time
	complete bool
	set      RetryBudget
}

// resilience checks the bulkhead and retry-budget rules of one summary.
func (r *run) resilience() {
	for i := range r.mods {
		m, mc := &r.mods[i], r.cfgOf[i]
		if m.Status == faultsummary.StatusRejected && mc != nil && mc.Bulkhead == "" {
			r.add(RuleBulkhead, "module %q is rejected but names no bulkhead", m.Name)
		}
	}
	known := make(map[string]bool, len(r.c.cfg.RetryBudgets))
	for _, b := range r.c.cfg.RetryBudgets {
		known[b.Name] = true
	}
	seen := map[string]bool{}
	for _, name := range r.s.RetryBudgetExhausted {
		if !known[name] || seen[name] {
			r.add(RuleRetryBudget, "retry_budget_exhausted names %q, which is not a configured budget or is listed twice", name)
		}
		seen[name] = true
	}
	for _, b := range r.c.cfg.RetryBudgets {
		r.retryWindow(b)
	}
}

// retryWindow adds this tick to budget b's window and checks the window's retries.
func (r *run) retryWindow(b RetryBudget) {
	c := r.c
	if c.rbWin == nil {
		c.rbWin = map[string]*rbWindow{}
	}
	w := c.rbWin[b.Name]
	if w == nil || w.set != b {
		w = &rbWindow{firstAt: r.s.StartedAt, complete: r.s.TickID == 1, set: b}
		c.rbWin[b.Name] = w
	}
	t := rbTick{at: r.s.StartedAt}
	for i := range r.mods {
		m, mc := &r.mods[i], r.cfgOf[i]
		if mc == nil || mc.RetryBudget != b.Name || m.Attempts < 1 {
			continue
		}
		t.firsts++
		t.retries += m.Attempts - 1
	}
	win := append(w.ticks, t)
	if b.WindowTime > 0 {
		win = slices.DeleteFunc(win, func(x rbTick) bool { return t.at.Sub(x.at) >= b.WindowTime })
		w.complete = w.complete || t.at.Sub(w.firstAt) >= b.WindowTime
	} else if n := max(b.Window, 1); len(win) >= n {
		win = win[len(win)-n:]
		w.complete = true
	}
	w.ticks = win
	if t.retries <= b.MinPerTick || !w.complete {
		return
	}
	var firsts, retries int
	for _, x := range win {
		firsts, retries = firsts+x.firsts, retries+x.retries
	}
	if limit := b.Ratio*float64(firsts) + float64(b.MinPerTick); float64(retries) > limit+1e-9 {
		r.add(RuleRetryBudget, "budget %q: %d retries over a window of %d tick(s) with %d first attempts, at most %.1f allowed (ratio %v, min_per_tick %d)",
			b.Name, retries, len(win), firsts, limit, b.Ratio, b.MinPerTick)
	}
}
