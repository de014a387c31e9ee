package cycle

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/bulkhead"
	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/faultsummary/check"
	"github.com/cycled/cycled/internal/didyoumean"
	"github.com/cycled/cycled/internal/setting"
	"github.com/cycled/cycled/retrybudget"
	"github.com/cycled/cycled/tiers"
)

// This file holds the engine's side of bulkheads and retry-amplification budgets (issue
// 37): their configuration, their validation, and the objects a state shares with its
// modules. What a refusal means is decided in package decide (AdmitBulkhead, Judge); the
// budgets' rule is decide.RetryAllowed.

// RetryBudgets are the retry-amplification budgets: retries may be at most a ratio of
// first attempts over a sliding window (retrybudget.RatioSettings). A module counts
// against exactly one budget: its named downstream's (ModuleSpec.RetryBudget) if it names
// one, else its tier's, if its tier has one.
type RetryBudgets struct {
	// Tiers are the budgets of tiers, by tier name.
	Tiers map[string]retrybudget.RatioSettings
	// Downstreams are the budgets of named downstreams, by name.
	Downstreams map[string]retrybudget.RatioSettings
}

// rtExtra is what a module with a bulkhead or a retry budget carries (a nil pointer on
// modRT otherwise, so that modules without them pay one nil check).
type rtExtra struct {
	bh *bulkhead.Bulkhead
	rb *ratioBudget
}

// resilience is a state's bulkheads and retry budgets. Bulkheads and budgets carry over
// from state to state by name (a reload keeps their permits and windows); a budget whose
// settings changed starts a new window.
type resilience struct {
	bulkheads map[string]*bulkhead.Bulkhead
	budgets   []namedBudget // tiers' in tier order, then downstreams' by name
}

// namedBudget is a retry budget and the name the summary gives it.
type namedBudget struct {
	name string
	rb   *ratioBudget
}

// begin opens a tick on every retry budget.
func (r *resilience) begin(now time.Time) {
	for _, b := range r.budgets {
		b.rb.Begin(now)
	}
}

// exhausted returns the names of the budgets that refused a retry in the tick (nil if none).
func (r *resilience) exhausted() []string {
	var out []string
	for _, b := range r.budgets {
		if b.rb.Exhausted() {
			out = append(out, b.name)
		}
	}
	return out
}

// budget returns the budget called name, or nil.
func (r *resilience) budget(name string) *ratioBudget {
	for _, b := range r.budgets {
		if b.name == name {
			return b.rb
		}
	}
	return nil
}

// bulkheadUpdate is a kept bulkhead's new settings, applied when the state that keeps it
// is installed.
type bulkheadUpdate struct {
	b *bulkhead.Bulkhead
	s bulkhead.Settings
}

// prepareResilience gives st its bulkheads and retry budgets, base's kept by name, and
// points each module at its own. It runs off the tick path (Engine.prepare): a kept
// bulkhead's new settings are recorded in st.carry for installing st to apply.
func (e *Engine) prepareResilience(st, base *state) {
	cfg := &st.cfg
	if len(cfg.Bulkheads) == 0 && len(cfg.RetryBudgets.Tiers) == 0 && len(cfg.RetryBudgets.Downstreams) == 0 {
		return
	}
	old := base.resil
	r := &resilience{bulkheads: make(map[string]*bulkhead.Bulkhead, len(cfg.Bulkheads))}
	for name, s := range cfg.Bulkheads {
		s.Name = name
		if b := old.bulkhead(name); b != nil {
			st.carry.bulkheads = append(st.carry.bulkheads, bulkheadUpdate{b, s})
			r.bulkheads[name] = b
		} else {
			r.bulkheads[name] = bulkhead.New(s)
		}
	}
	for _, t := range cfg.Tiers {
		if s, ok := cfg.RetryBudgets.Tiers[t.Name]; ok {
			r.budgets = append(r.budgets, namedBudget{t.Name, old.keepBudget(t.Name, s)})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.RetryBudgets.Downstreams)) {
		r.budgets = append(r.budgets, namedBudget{name, old.keepBudget(name, cfg.RetryBudgets.Downstreams[name])})
	}
	st.resil = r
	for _, rt := range st.lines {
		var x rtExtra
		if n := rt.spec.Bulkhead; n != "" {
			x.bh = r.bulkheads[n]
		}
		if n := rt.spec.RetryBudget; n != "" {
			x.rb = r.budget(n)
		} else if _, ok := cfg.RetryBudgets.Tiers[cfg.Tiers[rt.planned.TierIndex].Name]; ok {
			x.rb = r.budget(cfg.Tiers[rt.planned.TierIndex].Name)
		}
		if x != (rtExtra{}) {
			rt.res = &x
		}
	}
}

// bulkhead returns r's bulkhead called name, or nil (also for a nil r).
func (r *resilience) bulkhead(name string) *bulkhead.Bulkhead {
	if r == nil {
		return nil
	}
	return r.bulkheads[name]
}

// keepBudget returns r's budget called name if its settings are s, or a new one.
func (r *resilience) keepBudget(name string, s retrybudget.RatioSettings) *ratioBudget {
	if r != nil {
		if b := r.budget(name); b != nil && b.Settings() == s {
			return b
		}
	}
	return newRatioBudget(s)
}

// Bulkheads returns a snapshot of every bulkhead in force, sorted by name.
func (e *Engine) Bulkheads() []bulkhead.Snapshot {
	st := e.activeView.Load()
	if st == nil || st.resil == nil {
		return []bulkhead.Snapshot{}
	}
	out := make([]bulkhead.Snapshot, 0, len(st.resil.bulkheads))
	for _, name := range slices.Sorted(maps.Keys(st.resil.bulkheads)) {
		out = append(out, st.resil.bulkheads[name].Snapshot())
	}
	return out
}

// RetryBudgetView is a retry budget's state: its name, its settings and its counts.
type RetryBudgetView struct {
	Name     string
	Tier     bool // a tier's budget (else a named downstream's)
	Settings retrybudget.RatioSettings
	RatioSnapshot
}

// RetryBudgetStates returns the state of every retry budget in force: the tiers' in tier
// order, then the downstreams' by name.
func (e *Engine) RetryBudgetStates() []RetryBudgetView {
	st := e.activeView.Load()
	if st == nil || st.resil == nil {
		return nil
	}
	out := make([]RetryBudgetView, 0, len(st.resil.budgets))
	for _, b := range st.resil.budgets {
		_, tier := st.cfg.RetryBudgets.Tiers[b.name]
		out = append(out, RetryBudgetView{Name: b.name, Tier: tier, Settings: b.rb.Settings(), RatioSnapshot: b.rb.Snapshot()})
	}
	return out
}

// validateResilience checks the bulkheads and retry budgets of cfg and the modules' names
// of them.
func validateResilience(cfg Config, ts []tiers.Tier, mods []Registration) tiers.Problems {
	var ps tiers.Problems
	add := func(path, format string, args ...any) {
		ps = append(ps, tiers.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Bulkheads)) {
		setting.Report("bulkheads."+name, cfg.Bulkheads[name].Check(), add)
	}
	tierNames := make(map[string]bool, len(ts))
	for _, t := range ts {
		tierNames[t.Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.RetryBudgets.Tiers)) {
		p := "retry_budget.tiers." + name
		if !tierNames[name] {
			add(p, "unknown tier %q%s", name, didyoumean.Hint(name, slices.Sorted(maps.Keys(tierNames))))
		}
		setting.Report(p, cfg.RetryBudgets.Tiers[name].Check(), add)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.RetryBudgets.Downstreams)) {
		p := "retry_budget.downstreams." + name
		if tierNames[name] {
			add(p, "a downstream's budget cannot take a tier's name (%q): the summary names both alike", name)
		}
		setting.Report(p, cfg.RetryBudgets.Downstreams[name].Check(), add)
	}
	for i, m := range mods {
		p := fmt.Sprintf("modules[%d]", i)
		if n := m.Spec.Bulkhead; n != "" {
			if _, ok := cfg.Bulkheads[n]; !ok {
				add(p+".bulkhead", "unknown bulkhead %q%s", n, didyoumean.HintOr(n, slices.Sorted(maps.Keys(cfg.Bulkheads)), "declare it under bulkheads"))
			}
		}
		if n := m.Spec.RetryBudget; n != "" {
			if _, ok := cfg.RetryBudgets.Downstreams[n]; !ok {
				add(p+".retry_budget", "unknown retry budget %q%s", n, didyoumean.HintOr(n, slices.Sorted(maps.Keys(cfg.RetryBudgets.Downstreams)), "declare it under retry_budget.downstreams"))
			}
		}
	}
	return ps
}

// admitExtra asks module rt's bulkhead, if it has one, for a permit (waiting, if the
// bulkhead says so, at most until the tier's deadline), and records a refusal on ln. It
// returns whether the module was refused, and then gives back the breaker's permit p of
// br (a rejection records nothing on the breaker); admitted, the run holds the permit
// until it returns (worker.endRun). Called by the admission, which owns the worker.
func (tr *tierRun) admitExtra(w *worker, x *rtExtra, ln *lineRec, br *breaker.Breaker, p breaker.Permit) bool {
	if b := x.bh; b != nil {
		ok := b.TryAcquire(b.Wait() <= 0)
		if !ok && b.Wait() > 0 {
			// The wait comes out of the tier's budget, and ends when the engine takes the
			// tier (its context is cancelled before the engine looks at admissions).
			left := tr.deadline.Sub(tr.e.clock.Now())
			ok = b.AcquireWithin(tr.e.clock, decide.BulkheadWait(b.Wait(), left), tr.ctx.Done())
			if ok && !tr.e.clock.Now().Before(tr.deadline) {
				b.Refund() // a permit at the deadline is no use: the module could not start
				ok = false
			}
		}
		if ln.refusal = decide.AdmitBulkhead(ok); ln.refusal != decide.NotRefused {
			br.Release(p)
			return true
		}
		w.held = b
	}
	return false
}

// endRun gives back the bulkhead permit the worker's run holds, if any: a nil check for
// the modules without a bulkhead. The permit is the one taken at admission (a reload may
// give the worker another runtime, or another bulkhead, while the run is outstanding).
// Called by whoever runs the module, when the run has returned or was not started.
func (w *worker) endRun() {
	if b := w.held; b != nil {
		w.held = nil
		b.Release()
	}
}

// moduleResilience sets on m, the checker's view of the module spec, its bulkhead,
// on_reject and the retry budget it counts against (its named downstream's, else its
// tier's if the tier has one).
func moduleResilience(m *check.Module, spec tiers.ModuleSpec, ts []tiers.Tier, c Config) {
	m.Bulkhead, m.OnReject = spec.Bulkhead, spec.OnReject
	switch {
	case spec.RetryBudget != "":
		m.RetryBudget = spec.RetryBudget
	case m.Tier < len(ts):
		if _, ok := c.RetryBudgets.Tiers[ts[m.Tier].Name]; ok {
			m.RetryBudget = ts[m.Tier].Name
		}
	}
}

// addBudgetChecks adds to out the settings of c's retry budgets, their defaults resolved.
func addBudgetChecks(out *check.Config, c Config) {
	add := func(name string, s retrybudget.RatioSettings) {
		if s.Window <= 0 && s.WindowTime <= 0 {
			s.Window = retrybudget.DefaultWindow
		}
		out.RetryBudgets = append(out.RetryBudgets, check.RetryBudget{Name: name, Ratio: s.Ratio, Window: s.Window,
			WindowTime: s.WindowTime, MinPerTick: s.MinPerTick})
	}
	for _, name := range slices.Sorted(maps.Keys(c.RetryBudgets.Tiers)) {
		add(name, c.RetryBudgets.Tiers[name])
	}
	for _, name := range slices.Sorted(maps.Keys(c.RetryBudgets.Downstreams)) {
		add(name, c.RetryBudgets.Downstreams[name])
	}
}
