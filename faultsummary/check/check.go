package check

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// The rule names, stable: tests and reports match on them. The package documentation
// states each rule.
const (
	RuleTickConsecutive = "tick_consecutive"
	RuleSchema          = "schema"
	RuleConfig          = "config"
	RuleTiming          = "timing"
	RuleTierBudget      = "tier_budget"
	RuleBudgetViolation = "budget_violations"
	RuleSkippedTier     = "skipped_tier"
	RuleFinish          = "finish"
	RuleTierStatus      = "tier_status"
	RuleEvery           = "every"
	RuleEmergencyOnly   = "emergency_only"
	RuleRetryCounts     = "retry_counts"
	RuleStatusAttempts  = "status_attempts"
	RuleFaultKind       = "fault_kind"
	RuleServedLive      = "served_live"
	RuleStale           = "stale_tagging"
	RuleExpired         = "expired_serves_nothing"
	RuleSafetyClosed    = "safety_fail_closed"
	RuleLastGoodTTL     = "lastgood_ttl"
	RuleLastGoodAge     = "lastgood_age"
	RuleDegradedKeys    = "degraded_keys"
	RuleEmergencyEnter  = "emergency_enter"
	RuleEmergencyLeave  = "emergency_leave"
	RuleEmergencySkip   = "emergency_skip"
	RuleSeverity        = "severity"
	RuleCircuitLists    = "circuit_lists"
	RuleBreakerAdmit    = "breaker_admission"
	RuleBreakerOpen     = "breaker_open"
	RuleBreakerCooldown = "breaker_cooldown"
	RuleBreakerClose    = "breaker_close"
	RuleBreakerReopen   = "breaker_reopen"
	RuleBreakerProbes   = "breaker_probes"
	RuleBusy            = "busy_outstanding"
	// The rules of guards.go.
	RuleShed     = "shed"
	RuleStarting = "starting"
	RuleAsync    = "async"
)

// Rules lists every rule name, in the order of the package documentation.
func Rules() []string {
	return []string{RuleTickConsecutive, RuleSchema, RuleConfig, RuleTiming, RuleTierBudget, RuleBudgetViolation,
		RuleSkippedTier, RuleFinish, RuleTierStatus, RuleEvery, RuleEmergencyOnly, RuleRetryCounts, RuleStatusAttempts,
		RuleFaultKind, RuleServedLive, RuleStale, RuleExpired, RuleSafetyClosed, RuleLastGoodTTL, RuleLastGoodAge,
		RuleDegradedKeys, RuleEmergencyEnter, RuleEmergencyLeave, RuleEmergencySkip, RuleSeverity, RuleCircuitLists,
		RuleBreakerAdmit, RuleBreakerOpen, RuleBreakerCooldown, RuleBreakerClose, RuleBreakerReopen, RuleBreakerProbes,
		RuleBusy, RuleBulkhead, RuleRetryBudget, RuleShed, RuleStarting, RuleAsync,
	}
}

// Violation is one broken invariant.
type Violation struct {
	// TickID is the tick of the summary in which it was seen.
	TickID uint64
	// Rule is the stable name of the rule (one of the Rule constants).
	Rule string
	// Detail says what was seen.
	Detail string
}

// String renders "tick N: rule: detail".
func (v Violation) String() string { return fmt.Sprintf("tick %d: %s: %s", v.TickID, v.Rule, v.Detail) }

// Option configures a Checker.
type Option func(*Checker)

// DefaultTolerance is how far past its budget a tier's (or module's) elapsed time may run
// by default: enough for the virtual clock of testing/synctest, where it is exact. On the
// wall clock use WithTolerance with a larger value.
const DefaultTolerance = 2 * time.Millisecond

// WithTolerance sets how far past its budget a tier's elapsed time, or a module's
// latency, may run (default DefaultTolerance). It is also the slack of the rules that
// compare the summaries' times with durations the engine measured on its monotonic clock
// (timing, lastgood_age, breaker_cooldown): times decoded from JSON are wall times.
func WithTolerance(d time.Duration) Option { return func(c *Checker) { c.tol = d } }

// Checker checks a sequence of summaries, fed in tick order, against the invariants the
// package documentation lists. It is stateful and not safe for concurrent use.
type Checker struct {
	cfg  Config
	tol  time.Duration
	mods map[string]*Module
	skip []bool // per tier: skipped in emergency mode

	started bool
	prev    prevTick
	ms      map[string]*modState
	brs     map[string]*brState // own breakers, by breaker (= module) name

	guard guardPrev // what the previous summary said of startup (guards.go)

	emResets []uint64            // operator emergency resets, by the tick after which they were made
	brResets map[string][]uint64 // operator breaker resets, likewise

	rbWin map[string]*rbWindow // per retry budget, its window

	checked    int
	violations []Violation
}

// prevTick is what the checker keeps of the previous summary.
type prevTick struct {
	id                uint64
	started, finished time.Time
	em                faultsummary.Emergency
	emMode            bool
	circuit           map[string]string // breaker name → state after the tick
	lines             map[string]bool   // module names present
}

// modState is the per-module history.
type modState struct {
	// Last live production: prodKnown says whether hasProd and its bounds are known.
	prodKnown, hasProd bool
	prodS, prodF       time.Time
	// Outstanding run: outKnown says whether maybeOut is known; maybeOut is set after a
	// timed_out run (abandoned, possibly still running) until the module is seen to run.
	outKnown, maybeOut bool
}

// brState models a module's own breaker.
type brState struct {
	known bool
	state string
	// Consecutive counted failures since the last success (closed state): [lo, hi].
	consKnown bool
	consLo    int
	consHi    int
	// When it (last) opened: within [openLo, openHi].
	openKnown      bool
	openLo, openHi time.Time
	// Successful probes in the current half-open period.
	probeKnown bool
	probeOK    int
}

// New returns a checker for cfg.
func New(cfg Config, opts ...Option) *Checker {
	c := &Checker{tol: DefaultTolerance, ms: map[string]*modState{}, brs: map[string]*brState{}, brResets: map[string][]uint64{}}
	c.setConfig(cfg)
	for _, o := range opts {
		o(c)
	}
	return c
}

func (c *Checker) setConfig(cfg Config) {
	// Own copies: the caller may reuse its Config.
	cfg.Tiers = slices.Clone(cfg.Tiers)
	cfg.Modules = slices.Clone(cfg.Modules)
	cfg.Breakers = maps.Clone(cfg.Breakers)
	cfg.Emergency.SkipTiers = slices.Clone(cfg.Emergency.SkipTiers)
	cfg.RetryBudgets = slices.Clone(cfg.RetryBudgets) // a budget's window is kept while its settings are (rbWindow.set)
	c.cfg = cfg
	c.mods = make(map[string]*Module, len(cfg.Modules))
	for i := range cfg.Modules {
		c.mods[cfg.Modules[i].Name] = &cfg.Modules[i]
	}
	c.skip = make([]bool, len(cfg.Tiers))
	for _, n := range cfg.Emergency.SkipTiers {
		for i, t := range cfg.Tiers {
			if t.Name == n && i > 0 {
				c.skip[i] = true
			}
		}
	}
}

// Reconfigure replaces the configuration from the next summary on (call it when the engine
// has applied a reload or a registration, e.g. from its OnApply hook). The history of every
// module whose configuration changed, and of every breaker whose settings changed, is
// forgotten: their next line only seeds state again.
func (c *Checker) Reconfigure(cfg Config) {
	old := c.cfg
	oldMods := c.mods
	c.setConfig(cfg)
	for name, m := range c.mods {
		if om, ok := oldMods[name]; !ok || *om != *m || !sameSettings(old.Breakers[om.Breaker], cfg.Breakers[m.Breaker]) {
			delete(c.ms, name)
			delete(c.brs, name)
		}
	}
	for name := range oldMods {
		if _, ok := c.mods[name]; !ok {
			delete(c.ms, name)
			delete(c.brs, name)
		}
	}
}

func sameSettings(a, b breaker.Settings) bool { return a == b }

// ResetEmergency records an operator reset of emergency mode (POST /emergency/reset) made
// after the summary of tick after was published. The engine consumes it at the start of
// the next tick that begins, so it may show in tick after+1 or after+2; without such a
// record, a latched emergency that ends is a violation.
func (c *Checker) ResetEmergency(after uint64) { c.emResets = append(c.emResets, after) }

// ResetBreaker records an operator reset of the named breaker made after the summary of
// tick after was published. The breaker rules are suspended for it in ticks after+1 and
// after+2 (a reset applies at once, possibly in the middle of a tick) and its model is
// seeded again from what those ticks show.
func (c *Checker) ResetBreaker(name string, after uint64) {
	c.brResets[name] = append(c.brResets[name], after)
}

// forget drops everything learnt from earlier summaries (after a gap in the tick ids).
func (c *Checker) forget() {
	c.started = false
	c.prev = prevTick{}
	c.ms = map[string]*modState{}
	c.brs = map[string]*brState{}
	c.rbWin = nil
}

// Violations returns every violation found so far, in the order found.
func (c *Checker) Violations() []Violation { return slices.Clone(c.violations) }

// Checked returns the number of summaries checked.
func (c *Checker) Checked() int { return c.checked }

// Err returns nil when no violation was found, else an error listing the first ten.
func (c *Checker) Err() error {
	if len(c.violations) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d invariant violation(s) in %d summaries:", len(c.violations), c.checked)
	for i, v := range c.violations {
		if i == 10 {
			fmt.Fprintf(&b, "\n\t… and %d more", len(c.violations)-10)
			break
		}
		b.WriteString("\n\t")
		b.WriteString(v.String())
	}
	return errors.New(b.String())
}

// Check checks the next summary of the sequence and returns the violations it shows (they
// are also kept for Violations and Err). Summaries must be fed in tick order. The first
// summary seeds the state of the rules that compare a tick with the previous ones, except
// when it is tick 1: then the engine's initial state (nothing produced, every breaker
// closed, no emergency) is known and checked against. A gap in the tick ids is reported
// once (tick_consecutive) and the summary after it seeds the state again.
func (c *Checker) Check(s *faultsummary.Summary) []Violation {
	c.checked++
	if s == nil {
		v := []Violation{{Rule: RuleSchema, Detail: "nil summary"}}
		c.violations = append(c.violations, v...)
		return v
	}
	r := &run{c: c, s: s, mods: s.Modules()}
	if c.started && s.TickID != c.prev.id+1 {
		// A gap (or a restart): report it once, then check the rest as a new sequence
		// rather than comparing across the gap.
		r.add(RuleTickConsecutive, "tick %d follows tick %d", s.TickID, c.prev.id)
		c.forget()
	}
	r.index()
	r.stateless()
	r.stateful()
	c.update(r)
	c.violations = append(c.violations, r.out...)
	return r.out
}

// run is the check of one summary.
type run struct {
	c    *Checker
	s    *faultsummary.Summary
	mods []faultsummary.Module // s.Modules(), read once
	out  []Violation

	byTier [][]int // module line indexes per tier index (lines with a valid tier index)
	cfgOf  []*Module
	// Whether prev is usable, and whether it is the engine's initial state (tick 1).
	hasPrev bool
}

func (r *run) add(rule, format string, args ...any) {
	r.out = append(r.out, Violation{TickID: r.s.TickID, Rule: rule, Detail: fmt.Sprintf(format, args...)})
}

func (r *run) index() {
	s, c := r.s, r.c
	r.byTier = make([][]int, len(s.Tiers))
	r.cfgOf = make([]*Module, len(r.mods))
	for i := range r.mods {
		m := &r.mods[i]
		r.cfgOf[i] = c.mods[m.Name]
		if m.TierIndex >= 0 && m.TierIndex < len(s.Tiers) {
			r.byTier[m.TierIndex] = append(r.byTier[m.TierIndex], i)
		}
	}
	r.hasPrev = c.started || s.TickID == 1
}

// ---- classification helpers ----

func isControlOK(m *faultsummary.Module) bool {
	return m.Status == faultsummary.StatusOK && m.FaultKind == fault.KindControl.String()
}

// produced reports a line that produced a value this tick (a control short-circuit, ok
// without a value, did not).
func produced(m *faultsummary.Module) bool { return m.Status.Produced() && !isControlOK(m) }

// failedNow reports whether the line counts as the module's failure for its error policy
// (the engine's "failed after its budget, busy, or open with on_open fail" — an open
// breaker always counts in the safety tier).
func failedNow(m *faultsummary.Module, mc *Module) bool {
	switch m.Status {
	case faultsummary.StatusBusy:
		return true
	case faultsummary.StatusOpen:
		return mc.OnOpen == tiers.Fail || mc.Tier == 0
	case faultsummary.StatusRejected:
		return mc.OnReject == tiers.Fail || mc.Tier == 0
	case faultsummary.StatusTimedOut:
		return mc.Policy != tiers.Abort
	case faultsummary.StatusFailed, faultsummary.StatusProbeFailed:
		return mc.Policy != tiers.Abort && m.FaultKind != fault.KindCanceled.String()
	}
	return false
}

// aborts reports whether the line of a module with the abort policy stops the tick:
// sure, or maybe (a timed_out line is an abandoned run, which aborts, or a module the
// runners never started, which does not; the summary does not tell them apart).
func aborts(m *faultsummary.Module, mc *Module) (sure, maybe bool) {
	if mc.Policy != tiers.Abort {
		return false, false
	}
	switch m.Status {
	case faultsummary.StatusFailed, faultsummary.StatusProbeFailed, faultsummary.StatusBusy:
		return true, false
	case faultsummary.StatusOpen:
		return mc.OnOpen == tiers.Fail || mc.Tier == 0, false
	case faultsummary.StatusRejected:
		return mc.OnReject == tiers.Fail || mc.Tier == 0, false
	case faultsummary.StatusTimedOut:
		return false, true
	}
	return false, false
}

// degraded reports whether the engine serves the line's key as a degradation (tagged
// stale, listed in degraded_keys): a failing module, or a module of a skipped tier (an
// emergency-only module outside emergency mode excepted).
func (r *run) degraded(i int) bool {
	m := &r.mods[i]
	if m.Status.Failing() {
		return true
	}
	if m.Status != faultsummary.StatusSkipped || !r.tierSkipped(m.TierIndex) {
		return false
	}
	mc := r.cfgOf[i]
	return !(mc != nil && mc.EmergencyOnly && !r.s.EmergencyMode)
}

func (r *run) tierSkipped(ti int) bool {
	return ti >= 0 && ti < len(r.s.Tiers) && r.s.Tiers[ti].Status == faultsummary.TierSkipped
}

func kindCounted(set breaker.Settings, kind string) bool {
	k, err := fault.ParseKind(kind)
	return err == nil && set.TripOn.Has(k)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func dur(msf float64) time.Duration {
	return time.Duration(math.Round(msf * float64(time.Millisecond)))
}

// ---- stateless rules ----

func (r *run) stateless() {
	r.schema()
	r.config()
	r.timing()
	r.budgets()
	r.structure()
	r.lines()
	r.degradedKeys()
	r.severity()
	r.circuits()
	r.probes()
	r.resilience()
	r.guards() // guards.go
}

func (r *run) schema() {
	s := r.s
	if s.Schema != faultsummary.Schema {
		r.add(RuleSchema, "schema %q, want %q", s.Schema, faultsummary.Schema)
	}
	switch s.Finish {
	case faultsummary.Completed, faultsummary.ShortCircuited, faultsummary.Failed:
	default:
		r.add(RuleSchema, "finish %q is not completed, short_circuited or failed", s.Finish)
	}
	switch s.OverallSeverity {
	case faultsummary.OK, faultsummary.Degraded, faultsummary.Critical:
	default:
		r.add(RuleSchema, "overall_severity %q is not ok, degraded or critical", s.OverallSeverity)
	}
	if s.EmergencyMode != s.Emergency.Active {
		r.add(RuleSchema, "emergency_mode %v but emergency.active %v", s.EmergencyMode, s.Emergency.Active)
	}
	for _, t := range s.Tiers {
		if !t.Status.Valid() {
			r.add(RuleSchema, "tier %q: status %q is not ok, degraded, failed or skipped", t.Name, t.Status)
		}
	}
	seen := map[string]bool{}
	for _, m := range r.mods {
		if !m.Status.Valid() {
			r.add(RuleSchema, "module %q: status %q is not a module status", m.Name, m.Status)
		}
		if seen[m.Name] {
			r.add(RuleSchema, "module %q has more than one line", m.Name)
		}
		seen[m.Name] = true
		switch m.Served.Source {
		case blackboard.None, blackboard.Live, blackboard.LastGood:
		default:
			r.add(RuleSchema, "module %q: served.source %v is not live, last_good or none", m.Name, m.Served.Source)
		}
	}
}

func (r *run) config() {
	s, cfg := r.s, r.c.cfg
	if len(s.Tiers) != len(cfg.Tiers) {
		r.add(RuleConfig, "%d tiers, configuration has %d", len(s.Tiers), len(cfg.Tiers))
	}
	for i, t := range s.Tiers {
		if t.Index != i {
			r.add(RuleConfig, "tier line %d has index %d", i, t.Index)
		}
		if i < len(cfg.Tiers) {
			ct := cfg.Tiers[i]
			if t.Name != ct.Name || t.BudgetMs != ms(ct.Budget) {
				r.add(RuleConfig, "tier %d is %q with budget %vms, configuration has %q with %vms", i, t.Name, t.BudgetMs, ct.Name, ms(ct.Budget))
			}
		}
	}
	for i, m := range r.mods {
		mc := r.cfgOf[i]
		if mc == nil {
			r.add(RuleConfig, "module %q is not in the configuration", m.Name)
			continue
		}
		tierName := ""
		if mc.Tier < len(cfg.Tiers) {
			tierName = cfg.Tiers[mc.Tier].Name
		}
		if m.TierIndex != mc.Tier || m.Tier != tierName {
			r.add(RuleConfig, "module %q is in tier %d %q, configuration has %d %q", m.Name, m.TierIndex, m.Tier, mc.Tier, tierName)
		}
		if m.Breaker != mc.Breaker {
			r.add(RuleConfig, "module %q uses breaker %q, configuration has %q", m.Name, m.Breaker, mc.Breaker)
		}
		if m.Served.Key != mc.Key {
			r.add(RuleConfig, "module %q serves key %q, configuration has %q", m.Name, m.Served.Key, mc.Key)
		}
	}
	for _, mc := range cfg.Modules {
		if _, ok := s.Module(mc.Name); !ok {
			r.add(RuleConfig, "configured module %q has no line", mc.Name)
		}
	}
}

func (r *run) timing() {
	s, tol := r.s, ms(r.c.tol)
	if s.FinishedAt.Before(s.StartedAt) {
		r.add(RuleTiming, "finished_at %s before started_at %s", s.FinishedAt.Format(time.RFC3339Nano), s.StartedAt.Format(time.RFC3339Nano))
	}
	// The times may have lost their monotonic reading (JSON): compare within the tolerance.
	if w := ms(s.FinishedAt.Sub(s.StartedAt)); math.Abs(w-s.WallMs) > tol+1e-3 {
		r.add(RuleTiming, "wall_ms %v but finished_at − started_at is %vms", s.WallMs, w)
	}
	lag := max(0, ms(s.StartedAt.Sub(s.ScheduledAt)))
	if math.Abs(lag-s.StartLagMs) > tol+1e-3 {
		r.add(RuleTiming, "start_lag_ms %v but started_at − scheduled_at is %vms", s.StartLagMs, lag)
	}
	sum := 0.0
	for _, t := range s.Tiers {
		if t.ElapsedMs < 0 {
			r.add(RuleTiming, "tier %q: negative elapsed_ms %v", t.Name, t.ElapsedMs)
		}
		sum += t.ElapsedMs
	}
	if sum > s.WallMs+tol {
		r.add(RuleTiming, "the tiers took %vms in all, more than the tick's wall_ms %v", sum, s.WallMs)
	}
}

func (r *run) budgets() {
	s, tol := r.s, ms(r.c.tol)
	exhausted := map[string]bool{}
	for ti, t := range s.Tiers {
		if t.ElapsedMs > t.BudgetMs+tol {
			r.add(RuleTierBudget, "tier %q took %vms, budget %vms (tolerance %vms)", t.Name, t.ElapsedMs, t.BudgetMs, tol)
		}
		if t.BudgetExhausted {
			exhausted[t.Name] = true
		}
		if t.Status == faultsummary.TierSkipped && (t.BudgetExhausted || t.ElapsedMs != 0) {
			r.add(RuleBudgetViolation, "skipped tier %q reports budget_exhausted %v after %vms", t.Name, t.BudgetExhausted, t.ElapsedMs)
		}
		timedOut := false
		for _, i := range r.byTier[ti] {
			m := &r.mods[i]
			if m.LatencyMs > t.BudgetMs+tol {
				r.add(RuleTierBudget, "module %q ran %vms in tier %q of budget %vms", m.Name, m.LatencyMs, t.Name, t.BudgetMs)
			}
			if m.Status == faultsummary.StatusTimedOut {
				timedOut = true
			}
		}
		if timedOut && !t.BudgetExhausted {
			r.add(RuleBudgetViolation, "tier %q has a timed_out module but budget_exhausted is false", t.Name)
		}
		if timedOut && t.ElapsedMs < t.BudgetMs-tol {
			r.add(RuleTierBudget, "tier %q abandoned a module after %vms, before its budget of %vms", t.Name, t.ElapsedMs, t.BudgetMs)
		}
	}
	listed := map[string]bool{}
	for _, n := range s.BudgetViolations {
		if listed[n] {
			r.add(RuleBudgetViolation, "budget_violations lists %q twice", n)
		}
		listed[n] = true
		if !exhausted[n] {
			r.add(RuleBudgetViolation, "budget_violations lists %q, whose budget_exhausted is false", n)
		}
	}
	for n := range exhausted {
		if !listed[n] {
			r.add(RuleBudgetViolation, "tier %q exhausted its budget but budget_violations does not list it", n)
		}
	}
}

// emergencySkips reports whether tier ti is skipped by emergency mode in this summary.
func (r *run) emergencySkips(ti int) bool {
	return ti > 0 && ti < len(r.c.skip) && r.c.skip[ti] && r.s.EmergencyMode
}

// structure checks which tiers ran, the tier statuses and the finish.
func (r *run) structure() {
	s := r.s
	stopBy := "" // what ended the tick, once something did
	want := faultsummary.Completed
	for ti := range s.Tiers {
		t := &s.Tiers[ti]
		if !r.tierRan(ti, t, stopBy) {
			continue
		}
		tr := r.ranTier(ti, t)
		if tr.maybeAbort && !tr.sureAbort {
			// Ambiguous: accept the engine's choice if nothing after this tier ran.
			tr.sureAbort = s.Finish == faultsummary.ShortCircuited && r.nothingRanAfter(ti)
		}
		switch {
		case tr.sureAbort:
			stopBy, want = "abort by "+tr.abortBy, faultsummary.ShortCircuited
		case tr.failed && ti > 0:
			stopBy, want = "the failure of tier "+t.Name, faultsummary.Failed
		}
	}
	if s.Finish != want {
		r.add(RuleFinish, "finish %s, want %s", s.Finish, want)
	}
}

// tierRan checks whether tier ti (line t) was skipped as it must be (after stopBy ended
// the tick, or by emergency mode) and only then, and reports whether it ran.
func (r *run) tierRan(ti int, t *faultsummary.Tier, stopBy string) bool {
	if t.Status == faultsummary.TierSkipped { // every module of a skipped tier is skipped
		for _, i := range r.byTier[ti] {
			if m := &r.mods[i]; m.Status != faultsummary.StatusSkipped {
				r.add(RuleSkippedTier, "module %q of skipped tier %q has status %s", m.Name, t.Name, m.Status)
			}
		}
	}
	switch {
	case stopBy != "":
		if t.Status != faultsummary.TierSkipped {
			r.add(RuleFinish, "tier %q has status %s after %s ended the tick", t.Name, t.Status, stopBy)
		}
	case r.emergencySkips(ti):
		if t.Status != faultsummary.TierSkipped {
			r.add(RuleEmergencySkip, "tier %q has status %s in emergency mode; it is in emergency.skip_tiers", t.Name, t.Status)
		}
	case ti > 0 && r.s.CycleState == faultsummary.CycleStarting:
		if t.Status != faultsummary.TierSkipped {
			r.add(RuleStarting, "tier %q has status %s while the cycle is starting", t.Name, t.Status)
		}
	case t.Status == faultsummary.TierSkipped:
		if ti > 0 && ti < len(r.c.skip) && r.c.skip[ti] {
			r.add(RuleEmergencySkip, "tier %q skipped outside emergency mode, with nothing ending the tick before it", t.Name)
		} else {
			r.add(RuleFinish, "tier %q skipped with nothing ending the tick before it", t.Name)
		}
	default:
		return true
	}
	return false
}

// tierOutcome is what the lines of a tier that ran say of it.
type tierOutcome struct {
	failed, sureAbort, maybeAbort bool
	abortBy, failBy               string
}

// ranTier checks the lines and the status of tier ti (line t), which ran, and returns
// whether a module failed it or aborted the tick.
func (r *run) ranTier(ti int, t *faultsummary.Tier) tierOutcome {
	var out tierOutcome
	degraded := false
	for _, i := range r.byTier[ti] {
		m, mc := &r.mods[i], r.cfgOf[i]
		if m.Status == faultsummary.StatusSkipped && mc != nil && !mc.EmergencyOnly {
			r.add(RuleSkippedTier, "module %q has status skipped but its tier %q ran", m.Name, t.Name)
		}
		degraded = degraded || !m.Status.Nominal()
		if mc == nil {
			continue
		}
		if mc.Policy == tiers.FailFast && failedNow(m, mc) && !out.failed {
			out.failed, out.failBy = true, m.Name
		}
		sure, maybe := aborts(m, mc)
		if sure && !out.sureAbort {
			out.sureAbort, out.abortBy = true, m.Name
		}
		if maybe && !out.maybeAbort && !out.sureAbort {
			out.maybeAbort, out.abortBy = true, m.Name
		}
	}
	wantStatus := faultsummary.TierOK
	switch {
	case out.failed:
		wantStatus = faultsummary.TierFailed
	case degraded:
		wantStatus = faultsummary.TierDegraded
	}
	if t.Status != wantStatus {
		why := ""
		if out.failed {
			why = " (fail_fast module " + out.failBy + " failed)"
		}
		r.add(RuleTierStatus, "tier %q has status %s, want %s%s", t.Name, t.Status, wantStatus, why)
	}
	return out
}

func (r *run) nothingRanAfter(ti int) bool {
	for j := ti + 1; j < len(r.s.Tiers); j++ {
		if r.s.Tiers[j].Status != faultsummary.TierSkipped {
			return false
		}
	}
	return true
}

// lines checks each module line on its own.
func (r *run) lines() {
	s := r.s
	retries := map[string]bool{}
	for i := range r.mods {
		m := &r.mods[i]
		mc := r.cfgOf[i]
		r.attempts(m, mc)
		r.faultKind(m)
		r.served(i)
		if m.Attempts > 1 {
			retries[m.Name] = true
			if n, ok := s.RetryCounts[m.Name]; !ok || n != m.Attempts-1 {
				r.add(RuleRetryCounts, "module %q: %s after %d attempts, retry_counts has %d (present %v), want %d",
					m.Name, m.Status, m.Attempts, n, ok, m.Attempts-1)
			}
		}
		if mc == nil || r.tierSkipped(m.TierIndex) {
			continue
		}
		// Multi-rate and emergency-only admission (in a tier that ran).
		if mc.EmergencyOnly {
			if em, known := r.emergencyAt(mc.Tier); known {
				if !em && m.Status != faultsummary.StatusSkipped {
					r.add(RuleEmergencyOnly, "emergency-only module %q has status %s outside emergency mode", m.Name, m.Status)
				}
				if em && m.Status == faultsummary.StatusSkipped {
					r.add(RuleEmergencyOnly, "emergency-only module %q skipped in emergency mode", m.Name)
				}
				if !em {
					continue
				}
			} else {
				continue
			}
		}
		due := s.TickID%uint64(max(mc.Every, 1)) == 0
		if !due && m.Status != faultsummary.StatusNotDue {
			r.add(RuleEvery, "module %q (every %d) has status %s on tick %d, want not_due", m.Name, mc.Every, m.Status, s.TickID)
		}
		if due && m.Status == faultsummary.StatusNotDue {
			r.add(RuleEvery, "module %q (every %d) is not_due on tick %d", m.Name, mc.Every, s.TickID)
		}
	}
	for name, n := range s.RetryCounts {
		if !retries[name] {
			m, ok := s.Module(name)
			r.add(RuleRetryCounts, "retry_counts has %s: %d but the module made %d attempt(s) (line present %v)", name, n, m.Attempts, ok)
		}
	}
}

// emergencyAt returns the emergency state that admitted the modules of tier ti: the
// previous tick's for the safety tier (this tick's is decided after it), this tick's for
// the others. known is false for the safety tier of the first summary.
func (r *run) emergencyAt(ti int) (active, known bool) {
	if ti > 0 {
		return r.s.EmergencyMode, true
	}
	if !r.hasPrev {
		return false, false
	}
	if r.s.TickID == 1 && !r.c.started {
		return false, true
	}
	return r.c.prev.emMode, true
}

func (r *run) attempts(m *faultsummary.Module, mc *Module) {
	switch m.Status {
	case faultsummary.StatusOK:
		// A control short-circuit is ok whatever attempt it came on (a retry after a
		// transient failure may be gated off); a success after retries is retried.
		if m.Attempts != 1 && !(isControlOK(m) && m.Attempts > 1) {
			r.add(RuleStatusAttempts, "module %q: ok after %d attempts, want 1", m.Name, m.Attempts)
		}
	case faultsummary.StatusRetried:
		if m.Attempts < 2 {
			r.add(RuleStatusAttempts, "module %q: retried after %d attempt(s), want more than 1", m.Name, m.Attempts)
		}
	case faultsummary.StatusFailed, faultsummary.StatusProbeOK, faultsummary.StatusProbeFailed:
		// A module the tick's cancellation kept from starting failed as canceled, unrun.
		if m.Attempts < 1 && !(m.Status == faultsummary.StatusFailed && m.FaultKind == fault.KindCanceled.String()) {
			r.add(RuleStatusAttempts, "module %q: %s after %d attempts, want at least 1", m.Name, m.Status, m.Attempts)
		}
	case faultsummary.StatusTimedOut:
		if m.Attempts < 0 {
			r.add(RuleStatusAttempts, "module %q: %s after %d attempts", m.Name, m.Status, m.Attempts)
		}
	default: // busy, open, skipped, not_due: not run
		if m.Attempts != 0 || m.LatencyMs != 0 {
			r.add(RuleStatusAttempts, "module %q: %s but %d attempt(s) and %vms latency, want none", m.Name, m.Status, m.Attempts, m.LatencyMs)
		}
	}
	if mc != nil && m.Attempts > mc.MaxAttempts {
		r.add(RuleStatusAttempts, "module %q made %d attempts, at most %d allowed", m.Name, m.Attempts, mc.MaxAttempts)
	}
}

func (r *run) faultKind(m *faultsummary.Module) {
	k := m.FaultKind
	switch m.Status {
	case faultsummary.StatusRetried, faultsummary.StatusProbeOK, faultsummary.StatusNotDue, faultsummary.StatusSkipped:
		if k != "" {
			r.add(RuleFaultKind, "module %q: %s with fault_kind %q, want none", m.Name, m.Status, k)
		}
	case faultsummary.StatusOK, faultsummary.StatusOpen, faultsummary.StatusRejected:
		if k != "" && k != fault.KindControl.String() {
			r.add(RuleFaultKind, "module %q: %s with fault_kind %q, want none or control", m.Name, m.Status, k)
		}
	case faultsummary.StatusBusy, faultsummary.StatusTimedOut:
		if k != fault.KindTransient.String() {
			r.add(RuleFaultKind, "module %q: %s with fault_kind %q, want transient", m.Name, m.Status, k)
		}
	case faultsummary.StatusFailed, faultsummary.StatusProbeFailed:
		kind, err := fault.ParseKind(k)
		if err != nil || kind == fault.KindNone || kind == fault.KindControl || k != kind.String() {
			r.add(RuleFaultKind, "module %q: %s with fault_kind %q, want a fault kind", m.Name, m.Status, k)
		}
	}
}

// served checks the served entry of line i on its own.
func (r *run) served(i int) {
	m := &r.mods[i]
	sv := m.Served
	live := sv.Source == blackboard.Live
	if produced(m) != live {
		r.add(RuleServedLive, "module %q: status %s (fault_kind %q) serves %s", m.Name, m.Status, m.FaultKind, sv.Source)
	}
	if sv.Expired && sv.Source != blackboard.None {
		r.add(RuleExpired, "module %q: expired value served from %s", m.Name, sv.Source)
	}
	deg := r.degraded(i)
	switch sv.Source {
	case blackboard.Live:
		if sv.Stale || sv.Expired || m.UsingFallback || sv.AgeMs != 0 {
			r.add(RuleStale, "module %q: live value tagged stale %v expired %v using_fallback %v age %vms", m.Name, sv.Stale, sv.Expired, m.UsingFallback, sv.AgeMs)
		}
	case blackboard.LastGood:
		if sv.Stale != deg || !m.UsingFallback {
			r.add(RuleStale, "module %q: %s serving last_good with stale %v using_fallback %v, want stale %v using_fallback true", m.Name, m.Status, sv.Stale, m.UsingFallback, deg)
		}
	default:
		if sv.Stale || m.UsingFallback {
			r.add(RuleStale, "module %q: nothing served but stale %v using_fallback %v", m.Name, sv.Stale, m.UsingFallback)
		}
	}
	if m.TierIndex == 0 && m.Status.Failing() && sv.Source == blackboard.LastGood {
		r.add(RuleSafetyClosed, "safety module %q: %s but its key is served from last_good (must fail closed)", m.Name, m.Status)
	}
	if mc := r.cfgOf[i]; mc != nil && mc.TTL > 0 {
		ttl := ms(mc.TTL)
		if sv.Source == blackboard.LastGood && sv.AgeMs >= ttl {
			r.add(RuleLastGoodTTL, "module %q: last_good value %vms old served, TTL %vms", m.Name, sv.AgeMs, ttl)
		}
		if sv.Expired && sv.AgeMs < ttl {
			r.add(RuleLastGoodTTL, "module %q: value %vms old reported expired, TTL %vms", m.Name, sv.AgeMs, ttl)
		}
	}
}

// degradedKeys checks degraded_keys against the lines: "key" for a degraded line served
// from last_good, "key (none)" for a degraded line with nothing to serve, "key (expired)"
// for a degraded line whose value expired. A line that is not degraded (not due, an idle
// emergency-only module, a control outcome) is not listed, expired or not.
func (r *run) degradedKeys() {
	s := r.s
	var want []string
	for i := range r.mods {
		m := &r.mods[i]
		sv := m.Served
		switch {
		case sv.Source == blackboard.Live, !r.degraded(i):
		case sv.Expired:
			want = append(want, sv.Key+" (expired)")
		case sv.Source == blackboard.LastGood:
			want = append(want, sv.Key)
		default:
			want = append(want, sv.Key+" (none)")
		}
	}
	got := slices.Clone(s.DegradedKeys)
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		r.add(RuleDegradedKeys, "degraded_keys %q, the module lines give %q", s.DegradedKeys, want)
	}
}

func (r *run) severity() {
	s := r.s
	crit := s.EmergencyMode || s.Finish == faultsummary.Failed
	deg := len(s.DegradedKeys) > 0 || len(s.OpenCircuits) > 0 || len(s.BudgetViolations) > 0 || s.Finish == faultsummary.ShortCircuited
	for _, t := range s.Tiers {
		crit = crit || t.Status == faultsummary.TierFailed
		deg = deg || t.Status != faultsummary.TierOK
	}
	for _, m := range r.mods {
		deg = deg || !m.Status.Nominal()
	}
	want := faultsummary.OK
	switch {
	case crit:
		want = faultsummary.Critical
	case deg:
		want = faultsummary.Degraded
	}
	if s.OverallSeverity != want {
		r.add(RuleSeverity, "overall_severity %s, want %s", s.OverallSeverity, want)
	}
}

func (r *run) circuits() {
	s := r.s
	for _, l := range []struct {
		name string
		list []string
	}{{"open_circuits", s.OpenCircuits}, {"half_open_circuits", s.HalfOpenCircuits}} {
		if !slices.IsSorted(l.list) || len(slices.Compact(slices.Clone(l.list))) != len(l.list) {
			r.add(RuleCircuitLists, "%s %q is not sorted and unique", l.name, l.list)
		}
		for _, n := range l.list {
			if _, ok := r.c.cfg.Breakers[n]; !ok {
				r.add(RuleCircuitLists, "%s lists %q, which is not a configured breaker", l.name, n)
			}
		}
	}
	state := map[string]string{}
	for _, m := range r.mods {
		if r.brResetWindow(m.Breaker) {
			continue
		}
		if st, ok := state[m.Breaker]; ok && st != m.CircuitState {
			r.add(RuleCircuitLists, "breaker %q is %s on one line and %s on another", m.Breaker, st, m.CircuitState)
		}
		state[m.Breaker] = m.CircuitState
		inOpen, inHalf := slices.Contains(s.OpenCircuits, m.Breaker), slices.Contains(s.HalfOpenCircuits, m.Breaker)
		var ok bool
		switch m.CircuitState {
		case breaker.Closed.String():
			ok = !inOpen && !inHalf
		case breaker.Open.String():
			ok = inOpen && !inHalf
		case breaker.HalfOpen.String():
			ok = !inOpen && inHalf
		default:
			r.add(RuleSchema, "module %q: circuit_state %q is not closed, open or half_open", m.Name, m.CircuitState)
			continue
		}
		if !ok {
			r.add(RuleCircuitLists, "module %q: breaker %q is %s but open_circuits %q half_open_circuits %q",
				m.Name, m.Breaker, m.CircuitState, s.OpenCircuits, s.HalfOpenCircuits)
		}
	}
}

// probes bounds the probes of a breaker in one tier. Failed probes hold their slot until
// the tier ends, so at most half_open_probes of them; every probe needs a free slot, and
// slots are freed in the tier only by successes, at most half_open_successes−1 of which
// leave the breaker half-open.
func (r *run) probes() {
	s := r.s
	for ti := range s.Tiers {
		failed, all := map[string]int{}, map[string]int{}
		for _, i := range r.byTier[ti] {
			m := &r.mods[i]
			switch m.Status {
			case faultsummary.StatusProbeFailed:
				failed[m.Breaker]++
				all[m.Breaker]++
			case faultsummary.StatusProbeOK:
				all[m.Breaker]++
			}
		}
		for name, n := range all {
			set, ok := r.c.cfg.Breakers[name]
			if !ok || r.brResetWindow(name) {
				continue
			}
			if failed[name] > set.HalfOpenProbes {
				r.add(RuleBreakerProbes, "breaker %q: %d failed probes in tier %q, half_open_probes %d", name, failed[name], s.Tiers[ti].Name, set.HalfOpenProbes)
			}
			if limit := set.HalfOpenProbes + set.HalfOpenSuccesses - 1; n > limit {
				r.add(RuleBreakerProbes, "breaker %q: %d probes in tier %q, at most %d possible", name, n, s.Tiers[ti].Name, limit)
			}
		}
	}
}

// brResetWindow reports whether an operator reset of the breaker may show in this tick.
func (r *run) brResetWindow(name string) bool {
	for _, after := range r.c.brResets[name] {
		if r.s.TickID > after && r.s.TickID <= after+2 {
			return true
		}
	}
	return false
}

// ---- rules over time ----

func (r *run) stateful() {
	c, s := r.c, r.s
	if c.started && s.StartedAt.Before(c.prev.finished.Add(-c.tol)) {
		r.add(RuleTiming, "started at %s, before tick %d finished at %s", s.StartedAt.Format(time.RFC3339Nano), c.prev.id, c.prev.finished.Format(time.RFC3339Nano))
	}
	r.emergency()
	if !r.hasPrev {
		return
	}
	for i := range r.mods {
		m := &r.mods[i]
		st := r.modState(m.Name)
		r.lastGoodAge(i, st)
		if st.outKnown && !st.maybeOut && m.Status == faultsummary.StatusBusy {
			r.add(RuleBusy, "module %q is busy but its last run returned (no abandoned run is outstanding)", m.Name)
		}
		if mc := r.cfgOf[i]; mc != nil && mc.OwnBreaker() && m.Breaker == mc.Breaker {
			r.ownBreaker(m, mc)
		} else if mc != nil {
			r.sharedBreaker(i)
		}
	}
}

// modState returns the state of a module, seeding it for a module the checker has not
// followed: at tick 1 everything is known (nothing ran before); later, only a module
// absent from the previous summary is new.
func (r *run) modState(name string) *modState {
	c := r.c
	st := c.ms[name]
	if st != nil {
		return st
	}
	st = &modState{}
	if !c.started && r.s.TickID == 1 {
		st.prodKnown, st.outKnown = true, true
	}
	c.ms[name] = st
	return st
}

// lastGoodAge checks a fallback against the module's last live production: its age is the
// time from that production to this tick's start.
func (r *run) lastGoodAge(i int, st *modState) {
	s := r.s
	m := &r.mods[i]
	sv := m.Served
	if !st.prodKnown || sv.Source == blackboard.Live {
		return
	}
	fallback := sv.Source == blackboard.LastGood || sv.Expired
	if !st.hasProd {
		if fallback {
			r.add(RuleLastGoodAge, "module %q serves a last-known-good value (source %s, expired %v) but never produced one", m.Name, sv.Source, sv.Expired)
		}
		return
	}
	if !fallback {
		// Nothing served although a value was produced: only the safety tier's fail-closed
		// rule may hide it.
		if !(m.TierIndex == 0 && r.degraded(i)) {
			r.add(RuleLastGoodAge, "module %q produced a value (tick started %s) but nothing is served and it is not expired", m.Name, st.prodS.Format(time.RFC3339Nano))
		}
		return
	}
	age := dur(sv.AgeMs)
	lo, hi := s.StartedAt.Sub(st.prodF), s.StartedAt.Sub(st.prodS)
	eps := time.Microsecond + r.c.tol // wall times (JSON) against the engine's monotonic age
	if age < lo-eps || age > hi+eps {
		r.add(RuleLastGoodAge, "module %q: fallback age %vms, but its last value was produced between %vms and %vms before this tick", m.Name, sv.AgeMs, ms(lo), ms(hi))
	}
}

// emergency checks the emergency state machine.
func (r *run) emergency() {
	c, s := r.c, r.s
	em := s.Emergency
	safetyFailed, by, healthyTick := r.safetyTick()
	if em.Active && (em.Reason == "" || em.SinceTick == 0 || em.SinceTick > s.TickID) {
		r.add(RuleEmergencyEnter, "emergency active with reason %q since tick %d", em.Reason, em.SinceTick)
	}
	if em.Latched && (!em.Active || !c.cfg.Emergency.Latch) {
		r.add(RuleEmergencyLeave, "emergency latched while active %v and latch %v", em.Active, c.cfg.Emergency.Latch)
	}
	if s.CycleState == faultsummary.CycleStarting {
		r.startingEmergency() // no emergency while starting
		return
	}
	if safetyFailed && (!s.EmergencyMode || em.HealthyTicks != 0) {
		r.add(RuleEmergencyEnter, "safety failure (%s) but emergency_mode %v with %d healthy ticks", by, s.EmergencyMode, em.HealthyTicks)
	}
	if !r.hasPrev {
		return
	}
	var p faultsummary.Emergency
	if c.started {
		p = c.prev.em
	}
	if !p.Active {
		r.emergencyFromCalm(p, safetyFailed, by)
		return
	}
	r.emergencyStep(p, safetyFailed, healthyTick)
	if em.SinceTick != p.SinceTick || em.Reason != p.Reason {
		r.add(RuleEmergencyEnter, "emergency since_tick %d→%d reason %q→%q while it lasted", p.SinceTick, em.SinceTick, p.Reason, em.Reason)
	}
	if !em.Active && em.EndedTick != s.TickID {
		r.add(RuleEmergencyLeave, "emergency ended on tick %d but ended_tick is %d", s.TickID, em.EndedTick)
	}
	if em.Active && em.EndedTick != p.EndedTick {
		r.add(RuleEmergencyLeave, "ended_tick changed %d→%d while emergency lasted", p.EndedTick, em.EndedTick)
	}
}

// safetyTick returns whether a safety module failed this tick (and which, with its
// status), and whether every safety module that was due succeeded.
func (r *run) safetyTick() (failed bool, by string, healthy bool) {
	healthy = true
	if len(r.byTier) == 0 {
		return false, "", true
	}
	for _, j := range r.byTier[0] {
		m := &r.mods[j]
		healthy = healthy && m.Status.Nominal()
		if mc := r.cfgOf[j]; mc != nil && mc.Policy != tiers.Abort && failedNow(m, mc) && !failed {
			failed, by = true, m.Name+" "+string(m.Status)
		}
	}
	return failed, by, healthy
}

// emergencyFromCalm checks a tick after one outside emergency mode (p): only a safety
// failure enters it, and the record of the last emergency is kept.
func (r *run) emergencyFromCalm(p faultsummary.Emergency, safetyFailed bool, by string) {
	c, s, em := r.c, r.s, r.s.Emergency
	switch {
	case safetyFailed:
		if em.Active && (em.SinceTick != s.TickID || em.Latched != c.cfg.Emergency.Latch) {
			r.add(RuleEmergencyEnter, "entered on a safety failure (%s) with since_tick %d latched %v, want %d %v", by, em.SinceTick, em.Latched, s.TickID, c.cfg.Emergency.Latch)
		}
	case em.Active && r.startupTimedOut():
	case em.Active:
		r.add(RuleEmergencyEnter, "entered emergency mode without a safety failure")
	default:
		if em.SinceTick != p.SinceTick || em.EndedTick != p.EndedTick || (c.started && em.Reason != p.Reason) {
			r.add(RuleEmergencyLeave, "emergency record changed outside emergency: since %d→%d ended %d→%d reason %q→%q", p.SinceTick, em.SinceTick, p.EndedTick, em.EndedTick, p.Reason, em.Reason)
		}
	}
}

// emOutcome is the emergency state the checker expects after a tick.
type emOutcome struct {
	active, latched bool
	healthy         int
}

// emergencyStep checks a tick after one in emergency mode (p): the outcome without, or
// with, an operator reset consumed now.
func (r *run) emergencyStep(p faultsummary.Emergency, safetyFailed, healthyTick bool) {
	c, s, em := r.c, r.s, r.s.Emergency
	R := c.cfg.Emergency.RecoverAfter
	step := func(latched bool, healthy int) emOutcome {
		if safetyFailed || !healthyTick {
			// A safety failure latches again an emergency a reset unlatched.
			return emOutcome{true, latched || (safetyFailed && c.cfg.Emergency.Latch), 0}
		}
		healthy++
		if !latched && healthy >= R {
			return emOutcome{false, false, healthy}
		}
		return emOutcome{true, latched, healthy}
	}
	got := emOutcome{em.Active, em.Latched, em.HealthyTicks}
	plain := step(p.Latched, p.HealthyTicks)
	match := func(o emOutcome) bool {
		return o.active == got.active && (!o.active || (o.latched == got.latched && o.healthy == got.healthy))
	}
	resetIdx := -1
	for k, after := range c.emResets {
		if s.TickID > after && s.TickID <= after+2 {
			resetIdx = k
		}
	}
	switch {
	case match(plain):
	case resetIdx >= 0 && match(step(false, 0)):
		c.emResets = slices.Delete(c.emResets, resetIdx, resetIdx+1)
	case plain.active && !got.active && p.Latched:
		r.add(RuleEmergencyLeave, "latched emergency left without an operator reset")
	case p.Latched && got.active && !got.latched:
		r.add(RuleEmergencyLeave, "latched emergency unlatched without an operator reset")
	case plain.active && !got.active:
		r.add(RuleEmergencyLeave, "emergency left after %d healthy safety ticks, recover_after %d", got.healthy, R)
	case !plain.active && got.active:
		r.add(RuleEmergencyLeave, "emergency still active after %d consecutive healthy safety ticks, recover_after %d", plain.healthy, R)
	default:
		r.add(RuleEmergencyLeave, "emergency healthy_ticks %d latched %v, want %d %v", got.healthy, got.latched, plain.healthy, plain.latched)
	}
}

// sharedBreaker checks the admission of a module on a shared breaker: refused or probed
// only while the breaker was open or half-open, or opened by a failure in an earlier tier
// of the same tick.
func (r *run) sharedBreaker(i int) {
	c := r.c
	m := &r.mods[i]
	if m.Status != faultsummary.StatusOpen && m.Status != faultsummary.StatusProbeOK && m.Status != faultsummary.StatusProbeFailed {
		return
	}
	if r.brResetWindow(m.Breaker) {
		return
	}
	prev := breaker.Closed.String()
	if c.started {
		p, ok := c.prev.circuit[m.Breaker]
		if !ok {
			return
		}
		prev = p
	}
	if prev != breaker.Closed.String() {
		return
	}
	for j := range r.mods {
		o := &r.mods[j]
		if o.Breaker == m.Breaker && o.TierIndex < m.TierIndex && o.Status.Failing() {
			return
		}
	}
	r.add(RuleBreakerAdmit, "module %q: %s while its shared breaker %q was closed", m.Name, m.Status, m.Breaker)
}

// ownBreaker follows a module's own breaker through the states its line shows.
func (r *run) ownBreaker(m *faultsummary.Module, mc *Module) {
	c, s := r.c, r.s
	b := c.brs[mc.Breaker]
	if b == nil {
		b = &brState{}
		if !c.started && s.TickID == 1 {
			*b = brState{known: true, state: breaker.Closed.String(), consKnown: true, probeKnown: true}
		}
		c.brs[mc.Breaker] = b
	}
	x := &brStep{r: r, b: b, m: m, set: c.cfg.Breakers[mc.Breaker], S: s.StartedAt, F: s.FinishedAt,
		P: b.state, C: m.CircuitState, st: m.Status, kind: m.FaultKind, name: m.Name, success: produced(m)}
	if !b.known || r.brResetWindow(mc.Breaker) {
		x.resync()
		return
	}
	x.failSure, x.failMaybe = countedFailure(m, mc, x.set)
	if mc.Tier == 0 && (s.CycleState == faultsummary.CycleStarting || c.guard.starting) {
		// Judged while the cycle was starting (the tick before was starting, or this one
		// still is): a safety module's failure records nothing on its breaker.
		x.failSure, x.failMaybe = false, false
	}
	// A module not started records nothing on its breaker, but a busy one, which records a
	// failure.
	notRun := !x.st.Ran() && x.st != faultsummary.StatusBusy
	// Only the lazy open → half_open (any reader of the breaker's state half-opens it once
	// the cooldown has passed) may happen on a tick the module did not run.
	if notRun && x.C != x.P && !(x.P == brOpen && x.C == brHalf) {
		r.add(ruleFor(x.P, x.C), "module %q: breaker went %s → %s on a tick it did not run (%s)", x.name, x.P, x.C, x.st)
		x.resync()
		return
	}
	switch x.P {
	case brClosed:
		x.fromClosed()
	case brOpen, brHalf:
		x.fromOpen()
	default:
		x.resync()
	}
}

// The breaker states as the summary names them.
var (
	brClosed = breaker.Closed.String()
	brOpen   = breaker.Open.String()
	brHalf   = breaker.HalfOpen.String()
)

// countedFailure reports whether line m is surely a failure its breaker counts, or maybe
// one (a timed-out module: an abandoned run counts, a run never started before the
// deadline is released). An abort module's failures record nothing.
func countedFailure(m *faultsummary.Module, mc *Module, set breaker.Settings) (sure, maybe bool) {
	switch m.Status {
	case faultsummary.StatusFailed, faultsummary.StatusProbeFailed:
		sure = mc.Policy != tiers.Abort && m.FaultKind != fault.KindCanceled.String() && kindCounted(set, m.FaultKind)
	case faultsummary.StatusBusy:
		sure = mc.Policy != tiers.Abort && kindCounted(set, fault.KindTransient.String())
	case faultsummary.StatusTimedOut:
		maybe = mc.Policy != tiers.Abort && kindCounted(set, fault.KindTransient.String())
	}
	return sure, maybe
}

// brStep is one tick of a module's own breaker: the state before it (P) and after it (C)
// as the module's lines show them, and what the line says happened.
type brStep struct {
	r                            *run
	b                            *brState
	m                            *faultsummary.Module
	set                          breaker.Settings
	S, F                         time.Time // the tick's start and finish
	P, C                         string
	st                           faultsummary.Status
	kind, name                   string
	success, failSure, failMaybe bool
}

// resync takes the breaker's state from the line, knowing nothing else of it.
func (x *brStep) resync() {
	*x.b = brState{known: true, state: x.C}
	if x.C == brClosed && x.success {
		x.b.consKnown = true
	}
}

// setOpen records that the breaker (re-)opened within [lo, hi] (known: that is certain).
func (x *brStep) setOpen(lo, hi time.Time, known bool) {
	b := x.b
	b.state = brOpen
	b.openKnown, b.openLo, b.openHi = known, lo, hi
	b.probeKnown, b.probeOK = true, 0
	b.consKnown = false
}

// fromClosed checks a tick that found the breaker closed: it counts consecutive failures
// and opens at the threshold.
func (x *brStep) fromClosed() {
	r, b, name, st := x.r, x.b, x.name, x.st
	if st == faultsummary.StatusOpen || st == faultsummary.StatusProbeOK || st == faultsummary.StatusProbeFailed {
		r.add(RuleBreakerAdmit, "module %q: %s while its breaker was closed", name, st)
	}
	lo, hi := b.consLo, b.consHi
	switch {
	case x.success:
		lo, hi = 0, 0
	case x.failSure:
		lo, hi = lo+1, hi+1
	case x.failMaybe:
		hi++
	}
	switch x.C {
	case brOpen:
		switch {
		case !x.failSure && !x.failMaybe:
			r.add(RuleBreakerOpen, "module %q: breaker opened on a tick without a counted failure (%s, kind %q)", name, st, x.kind)
		case x.set.Kind == breaker.Consecutive && b.consKnown && hi < x.set.FailureThreshold:
			r.add(RuleBreakerOpen, "module %q: breaker opened after %d consecutive counted failures, threshold %d", name, hi, x.set.FailureThreshold)
		}
		x.setOpen(x.S, x.F, true)
	case brHalf:
		r.add(RuleBreakerCooldown, "module %q: breaker went closed → half_open", name)
		x.resync()
	default:
		// A rate breaker's rule needs its window, which the lines do not show: only the
		// consecutive kind's threshold is checked here.
		if x.set.Kind == breaker.Consecutive && x.failSure && b.consKnown && lo >= x.set.FailureThreshold {
			r.add(RuleBreakerOpen, "module %q: %d consecutive counted failures reached the threshold %d but the breaker stayed closed", name, lo, x.set.FailureThreshold)
		}
		b.consLo, b.consHi = lo, hi
		if x.success {
			b.consKnown = true
		}
	}
}

// probes reports whether the line surely ran as a probe, or maybe did (timed out, busy).
func (x *brStep) probes() (probe, maybe bool) {
	probe = x.st == faultsummary.StatusProbeOK || x.st == faultsummary.StatusProbeFailed || isControlOK(x.m)
	return probe, x.st == faultsummary.StatusTimedOut || x.st == faultsummary.StatusBusy
}

// fromOpen checks a tick that found the breaker open or half-open: only probes run, and
// only after the cooldown.
func (x *brStep) fromOpen() {
	r, b, name, st, c := x.r, x.b, x.name, x.st, x.r.c
	if (st == faultsummary.StatusOK && !isControlOK(x.m)) || st == faultsummary.StatusRetried || st == faultsummary.StatusFailed {
		r.add(RuleBreakerAdmit, "module %q: ran as %s (not as a probe) while its breaker was %s", name, st, x.P)
	}
	probe, maybeProbe := x.probes()
	if x.P == brOpen && b.openKnown {
		if st == faultsummary.StatusOpen && x.S.Sub(b.openHi) >= x.set.Cooldown+c.tol {
			r.add(RuleBreakerCooldown, "module %q: refused although the cooldown %s had elapsed (opened by %s, tick started %s)",
				name, x.set.Cooldown, b.openHi.Format(time.RFC3339Nano), x.S.Format(time.RFC3339Nano))
		}
		if (probe || (x.C != brOpen && maybeProbe)) && x.F.Sub(b.openLo) < x.set.Cooldown-c.tol {
			r.add(RuleBreakerCooldown, "module %q: probed (%s) %s after the breaker opened, cooldown %s", name, st, x.F.Sub(b.openLo), x.set.Cooldown)
		}
	}
	if x.P == brHalf && st == faultsummary.StatusBusy && x.failSure && x.C != brOpen {
		r.add(RuleBreakerReopen, "module %q: busy while half-open (a failed probe) but the breaker is %s", name, x.C)
	}
	switch x.C {
	case brOpen:
		x.toOpen(maybeProbe)
	case brHalf:
		x.toHalf(probe, maybeProbe)
	case brClosed:
		x.toClosed()
	default:
		x.resync()
	}
}

// toOpen checks an open or half-open breaker that is open after the tick.
func (x *brStep) toOpen(maybeProbe bool) {
	switch {
	case x.st == faultsummary.StatusProbeOK || isControlOK(x.m):
		x.r.add(RuleBreakerReopen, "module %q: breaker %s → open after %s", x.name, x.P, x.st)
		x.setOpen(x.S, x.F, true)
	case x.st == faultsummary.StatusProbeFailed:
		if !x.failSure {
			x.r.add(RuleBreakerReopen, "module %q: probe failed with kind %q, which does not count, but the breaker re-opened", x.name, x.kind)
		}
		x.setOpen(x.S, x.F, true)
	case maybeProbe && x.P == brHalf:
		x.setOpen(x.S, x.F, true)
	case maybeProbe && x.P == brOpen:
		// Re-opened by a failed probe, or refused and unchanged.
		x.setOpen(x.b.openLo, x.F, x.b.openKnown)
	default: // refused, not due, skipped: unchanged
	}
}

// toHalf checks an open or half-open breaker that is half-open after the tick.
func (x *brStep) toHalf(probe, maybeProbe bool) {
	r, b, c := x.r, x.b, x.r.c
	if x.P == brOpen && !probe && !maybeProbe && b.openKnown && x.F.Sub(b.openLo) < x.set.Cooldown-c.tol {
		r.add(RuleBreakerCooldown, "module %q: breaker half-opened %s after it opened, cooldown %s", x.name, x.F.Sub(b.openLo), x.set.Cooldown)
	}
	if x.P == brOpen {
		b.probeKnown, b.probeOK = true, 0
	}
	if x.st == faultsummary.StatusProbeOK {
		b.probeOK++
		if b.probeKnown && b.probeOK >= x.set.HalfOpenSuccesses {
			r.add(RuleBreakerClose, "module %q: %d successful probes, half_open_successes %d, but the breaker stayed half_open", x.name, b.probeOK, x.set.HalfOpenSuccesses)
		}
	}
	if x.st == faultsummary.StatusProbeFailed && x.failSure {
		r.add(RuleBreakerReopen, "module %q: probe failed with counted kind %q but the breaker stayed half_open", x.name, x.kind)
	}
	b.state = brHalf
}

// toClosed checks an open or half-open breaker that is closed after the tick: only enough
// successful probes close it.
func (x *brStep) toClosed() {
	b := x.b
	if x.st != faultsummary.StatusProbeOK {
		x.r.add(RuleBreakerClose, "module %q: breaker %s → closed on a tick with status %s (not a successful probe)", x.name, x.P, x.st)
	} else {
		n := b.probeOK + 1
		if x.P == brOpen {
			n = 1
		}
		if (x.P == brOpen || b.probeKnown) && n < x.set.HalfOpenSuccesses {
			x.r.add(RuleBreakerClose, "module %q: breaker closed after %d successful probes, half_open_successes %d", x.name, n, x.set.HalfOpenSuccesses)
		}
	}
	*b = brState{known: true, state: brClosed, consKnown: true}
}

// ruleFor names the breaker rule of a transition P → C.
func ruleFor(P, C string) string {
	switch C {
	case breaker.Open.String():
		if P == breaker.Closed.String() {
			return RuleBreakerOpen
		}
		return RuleBreakerReopen
	case breaker.Closed.String():
		return RuleBreakerClose
	}
	return RuleBreakerCooldown
}

// update records what later ticks compare against.
func (c *Checker) update(r *run) {
	s := r.s
	if !c.started || s.TickID == 1 {
		// A sequence that does not start at tick 1 knows nothing of earlier productions.
		for i := range r.mods {
			r.modState(r.mods[i].Name)
		}
	} else {
		for i := range r.mods {
			if !c.prev.lines[r.mods[i].Name] {
				c.ms[r.mods[i].Name] = &modState{}
			}
		}
	}
	for i := range r.mods {
		m := &r.mods[i]
		st := c.ms[m.Name]
		if produced(m) && m.Served.Source == blackboard.Live {
			st.prodKnown, st.hasProd, st.prodS, st.prodF = true, true, s.StartedAt, s.FinishedAt
		}
		switch {
		case m.Status == faultsummary.StatusTimedOut:
			st.outKnown, st.maybeOut = true, true
		case m.Status.Ran():
			st.outKnown, st.maybeOut = true, false
		}
		if mc := r.cfgOf[i]; mc == nil || !mc.OwnBreaker() {
			continue
		}
		if b := c.brs[m.Breaker]; b == nil {
			c.brs[m.Breaker] = &brState{known: true, state: m.CircuitState}
		}
	}
	p := prevTick{id: s.TickID, started: s.StartedAt, finished: s.FinishedAt, em: s.Emergency, emMode: s.EmergencyMode,
		circuit: map[string]string{}, lines: map[string]bool{}}
	for _, m := range r.mods {
		p.circuit[m.Breaker] = m.CircuitState
		p.lines[m.Name] = true
	}
	c.prev = p
	c.guard = guardPrev{starting: s.CycleState == faultsummary.CycleStarting}
	c.started = true
	// Forget operator resets that can no longer show.
	c.emResets = slices.DeleteFunc(c.emResets, func(after uint64) bool { return after+2 <= s.TickID })
	for name, rs := range c.brResets {
		rs = slices.DeleteFunc(rs, func(after uint64) bool { return after+2 <= s.TickID })
		if len(rs) == 0 {
			delete(c.brResets, name)
		} else {
			c.brResets[name] = rs
		}
	}
}
