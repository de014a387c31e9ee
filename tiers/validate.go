package tiers

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/internal/didyoumean"
	"github.com/cycled/cycled/internal/setting"
)

// Config is everything Validate checks at once.
type Config struct {
	// Tiers in order; the first is the safety tier.
	Tiers []Tier
	// Modules to run.
	Modules []ModuleSpec
	// Breakers are the named shared breakers modules may use.
	Breakers map[string]breaker.Settings
}

// Problem is one finding of Validate.
type Problem struct {
	// Path is the field at fault, e.g. "tiers[2].budget" or "modules[0].reads[1]".
	Path string `json:"field"`
	// Message says what is wrong.
	Message string `json:"message"`
	// Warning marks a finding that does not stop the configuration from running.
	Warning bool `json:"warning,omitempty"`
}

// String renders "path: message".
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Problems is the list of findings of a validation.
type Problems []Problem

// Errors returns the findings that are not warnings.
func (ps Problems) Errors() Problems {
	var out Problems
	for _, p := range ps {
		if !p.Warning {
			out = append(out, p)
		}
	}
	return out
}

// Warnings returns the findings that are warnings.
func (ps Problems) Warnings() Problems {
	var out Problems
	for _, p := range ps {
		if p.Warning {
			out = append(out, p)
		}
	}
	return out
}

// Err returns a *ValidationError holding the errors, or nil when there are none.
func (ps Problems) Err() error {
	errs := ps.Errors()
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Problems: errs}
}

// ErrInvalid is wrapped by every *ValidationError.
var ErrInvalid = errors.New("invalid configuration")

// ValidationError is a configuration rejected by Validate.
type ValidationError struct {
	// Problems are the errors found, each with its path.
	Problems Problems
}

// Error lists every problem, one per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return fmt.Sprintf("%d problem(s): %s", len(lines), strings.Join(lines, "; "))
}

// Unwrap returns ErrInvalid.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// PlannedModule is a validated module spec with its tier resolved.
type PlannedModule struct {
	// Spec is the module spec as given (Tier filled in when derived from DependsOn).
	Spec ModuleSpec
	// TierIndex is the index of the module's tier.
	TierIndex int
	// Attempts is the effective number of attempts (module override or tier default, ≥ 1).
	Attempts int
	// Policy is the effective error policy.
	Policy Policy
}

// Plan is a validated configuration.
type Plan struct {
	// Tiers as configured.
	Tiers []Tier
	// Modules sorted by tier, then priority (higher first), then name.
	Modules []PlannedModule
	// Breakers are the named breakers.
	Breakers map[string]breaker.Settings
	// Warnings are the non-fatal findings.
	Warnings Problems
}

// TierPolicy returns the effective default policy of tier i.
func TierPolicy(t Tier, i int) Policy {
	if t.Policy != PolicyDefault {
		return t.Policy
	}
	if i == 0 {
		return FailFast
	}
	return Degrade
}

// ValidName reports whether s is a valid module, tier or breaker name: 1–128 characters of
// letters, digits, '.', '_' and '-', not starting with '.'.
func ValidName(s string) bool {
	if s == "" || len(s) > 128 || s[0] == '.' {
		return false
	}
	for _, r := range s {
		if !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '_' || r == '-')) {
			return false
		}
	}
	return true
}

// Validate checks a whole configuration and returns the plan (nil when there are errors)
// and every finding, each with its path.
func Validate(cfg Config) (*Plan, Problems) {
	v := &validator{cfg: cfg}
	v.checkTiers()
	v.checkBreakers()
	v.byName = make(map[string]int, len(cfg.Modules))
	for i, m := range cfg.Modules {
		checkName(fmt.Sprintf("modules[%d].name", i), "module", "modules", m.Name, i, v.byName, v.add)
	}
	v.resolveTiers()
	v.reportCycles()
	v.deriveTiers()
	v.writers = make(map[string]int)
	for i, m := range cfg.Modules {
		v.checkModule(i, m)
	}
	v.checkReads()
	if len(v.ps.Errors()) > 0 {
		return nil, v.ps
	}
	return v.plan(), v.ps
}

// validator is one run of Validate: the configuration, the findings so far, and what the
// checks learn on the way for the later ones.
type validator struct {
	cfg     Config
	ps      Problems
	tierIdx map[string]int // tier name → index
	byName  map[string]int // module name → index of its first module
	tierOf  []int          // module index → tier index; -1 while unknown
	// unresolved marks the modules whose tier order cannot be checked: on a depends_on
	// cycle, or placed by depends_on after one.
	unresolved []bool
	writers    map[string]int // key → index of the module that writes it
}

func (v *validator) add(path, format string, args ...any) {
	v.ps = append(v.ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) warn(path, format string, args ...any) {
	v.ps = append(v.ps, Problem{Path: path, Message: fmt.Sprintf(format, args...), Warning: true})
}

// checkTiers checks every tier and indexes them by name.
func (v *validator) checkTiers() {
	if len(v.cfg.Tiers) == 0 {
		v.add("tiers", "at least one tier is required (the first is the safety tier)")
	}
	v.tierIdx = make(map[string]int, len(v.cfg.Tiers))
	for i, t := range v.cfg.Tiers {
		p := fmt.Sprintf("tiers[%d]", i)
		checkName(p+".name", "tier", "tiers", t.Name, i, v.tierIdx, v.add)
		if t.Budget <= 0 {
			v.add(p+".budget", "must be > 0")
		}
		checkAttempts(p+".max_attempts", t.MaxAttempts, v.add)
		if t.Policy > Abort {
			v.add(p+".policy", "unknown policy")
		}
		setting.Report(p+".backoff", t.Backoff.Check(), v.add)
		setting.Report(p+".breaker", t.Breaker.Check(), v.add)
	}
}

// checkBreakers checks the named breakers. Map order is random: they are reported in name
// order so that the same configuration always gives the same problems in the same order.
func (v *validator) checkBreakers() {
	names := make([]string, 0, len(v.cfg.Breakers))
	for name := range v.cfg.Breakers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := "breakers." + name
		if !ValidName(name) {
			v.add(p, "%q: use letters, digits, '.', '_' and '-'", name)
		}
		setting.Report(p, v.cfg.Breakers[name].Check(), v.add)
	}
}

// tierNames returns the names of the configured tiers, in order.
func (v *validator) tierNames() []string {
	names := make([]string, len(v.cfg.Tiers))
	for i, t := range v.cfg.Tiers {
		names[i] = t.Name
	}
	return names
}

// resolveTiers sets the tier of every module that names one, and checks its depends_on.
func (v *validator) resolveTiers() {
	v.tierOf = make([]int, len(v.cfg.Modules))
	for i := range v.tierOf {
		v.tierOf[i] = -1
	}
	for i, m := range v.cfg.Modules {
		p := fmt.Sprintf("modules[%d]", i)
		if m.Tier != "" {
			// No early continue: the depends_on of a module with an unknown tier is still
			// checked, so that every problem is reported at once.
			if ti, ok := v.tierIdx[m.Tier]; ok {
				v.tierOf[i] = ti
			} else {
				v.add(p+".tier", "unknown tier %q%s", m.Tier, didyoumean.Hint(m.Tier, v.tierNames()))
			}
		} else if len(m.DependsOn) == 0 {
			v.add(p+".tier", "must name a tier (or give depends_on)")
		}
		for j, d := range m.DependsOn {
			if _, ok := v.byName[d]; !ok {
				v.add(fmt.Sprintf("%s.depends_on[%d]", p, j), "unknown module %q", d)
			}
		}
	}
}

// reportCycles reports every depends_on cycle once, and marks its members: their tier
// order cannot be checked (see deriveTiers).
func (v *validator) reportCycles() {
	v.unresolved = make([]bool, len(v.cfg.Modules))
	for _, scc := range cyclicGroups(v.cfg.Modules, v.byName) {
		sub := make(map[string]int, len(scc))
		for _, i := range scc {
			v.unresolved[i] = true
			sub[v.cfg.Modules[i].Name] = i
		}
		cyc := findCycle(v.cfg.Modules, sub)
		v.add(fmt.Sprintf("modules[%d].depends_on", v.byName[cyc[0]]), "dependency cycle: %s", strings.Join(cyc, " -> "))
	}
}

// deriveTiers, in dependency order, puts a module without a tier in the tier after its
// latest dependency (tier 1 at least), and checks that a module with a tier runs after
// every module it depends on. A cycle does not stop it, so that one pass reports every
// problem: the cycle's members are skipped, and so is a module whose tier would be
// derived from one (its tier cannot be known; the cycle is its problem).
func (v *validator) deriveTiers() {
	for _, i := range topoOrder(v.cfg.Modules, v.byName) {
		if v.unresolved[i] {
			continue
		}
		m := v.cfg.Modules[i]
		need, blocked := -1, false
		for _, d := range m.DependsOn {
			if j, ok := v.byName[d]; ok {
				blocked = blocked || v.unresolved[j]
				need = max(need, v.tierOf[j])
			}
		}
		p := fmt.Sprintf("modules[%d]", i)
		switch {
		case m.Tier == "" && len(m.DependsOn) > 0 && blocked:
			v.unresolved[i] = true
		case m.Tier == "" && len(m.DependsOn) > 0:
			t := max(need+1, 1)
			if t >= len(v.cfg.Tiers) {
				v.add(p+".depends_on", "needs tier index %d but only %d tiers are configured", t, len(v.cfg.Tiers))
				v.unresolved[i] = true
				continue
			}
			v.tierOf[i] = t
		case v.tierOf[i] >= 0 && need >= v.tierOf[i]:
			v.add(p+".depends_on", "depends on a module in tier %q, which does not run before tier %q", v.cfg.Tiers[need].Name, m.Tier)
		}
	}
}

// checkModule checks module i's own fields and records the key it writes.
func (v *validator) checkModule(i int, m ModuleSpec) {
	p := fmt.Sprintf("modules[%d]", i)
	key := m.Key()
	if strings.TrimSpace(key) == "" || strings.ContainsFunc(key, unicode.IsControl) {
		v.add(p+".writes", "invalid key %q", key)
	} else if j, dup := v.writers[key]; dup {
		v.add(p+".writes", "key %q is also written by %q", key, v.cfg.Modules[j].Name)
	} else {
		v.writers[key] = i
	}
	if m.Every < 0 || m.Every > MaxEvery {
		v.add(p+".every", "must be between 1 and %d", MaxEvery)
	}
	checkAttempts(p+".max_attempts", m.MaxAttempts, v.add)
	setting.Report(p+".ttl", m.TTL.Check(), v.add)
	v.checkModuleBreaker(p, m)
	if m.Policy > Abort {
		v.add(p+".policy", "unknown policy")
	}
	if v.tierOf[i] >= 0 {
		attempts := effectiveAttempts(m, v.cfg.Tiers[v.tierOf[i]])
		if attempts > 1 && !m.IsIdempotent() {
			v.add(p+".idempotent", "retry configured (%d attempts) on a non-idempotent module: set max_attempts: 1 or make it idempotent", attempts)
		}
	}
}

// checkModuleBreaker checks the breaker a module names, or that its own breaker's name (the
// module's) is not a named breaker's: it would be the named one, with either's settings
// silently lost.
func (v *validator) checkModuleBreaker(p string, m ModuleSpec) {
	if m.Breaker != "" {
		if _, ok := v.cfg.Breakers[m.Breaker]; !ok {
			v.add(p+".breaker", "unknown breaker %q%s", m.Breaker, didyoumean.HintOr(m.Breaker, slices.Sorted(maps.Keys(v.cfg.Breakers)), "declare it under breakers"))
		}
	} else if _, ok := v.cfg.Breakers[m.Name]; ok {
		v.add(p+".name", "%q is also the name of a named breaker (breakers.%s), and a module's own breaker carries its module's name: rename one, or set breaker: %s to share it", m.Name, m.Name, m.Name)
	}
}

// checkReads warns of keys read that nobody writes, or that are written in the same or a
// later tier (the reader then sees last-known-good values).
func (v *validator) checkReads() {
	for i, m := range v.cfg.Modules {
		for j, r := range m.Reads {
			p := fmt.Sprintf("modules[%d].reads[%d]", i, j)
			w, ok := v.writers[r]
			switch {
			case !ok:
				v.warn(p, "no module writes key %q", r)
			case v.tierOf[i] >= 0 && v.tierOf[w] >= v.tierOf[i]:
				v.warn(p, "key %q is written by %q in tier %q, which does not run earlier: the reader sees its last-known-good value", r, v.cfg.Modules[w].Name, v.cfg.Tiers[v.tierOf[w]].Name)
			}
		}
	}
}

// plan builds the plan of a configuration without errors: every module with its tier,
// attempts and policy, ordered by tier, then priority (highest first), then name.
func (v *validator) plan() *Plan {
	cfg := v.cfg
	plan := &Plan{Tiers: cfg.Tiers, Breakers: cfg.Breakers, Warnings: v.ps.Warnings()}
	for i, m := range cfg.Modules {
		t := cfg.Tiers[v.tierOf[i]]
		m.Tier = t.Name
		pol := m.Policy
		if pol == PolicyDefault {
			pol = TierPolicy(t, v.tierOf[i])
		}
		plan.Modules = append(plan.Modules, PlannedModule{Spec: m, TierIndex: v.tierOf[i], Attempts: effectiveAttempts(m, t), Policy: pol})
	}
	sort.SliceStable(plan.Modules, func(a, b int) bool {
		x, y := plan.Modules[a], plan.Modules[b]
		if x.TierIndex != y.TierIndex {
			return x.TierIndex < y.TierIndex
		}
		if x.Spec.Priority != y.Spec.Priority {
			return x.Spec.Priority > y.Spec.Priority
		}
		return x.Spec.Name < y.Spec.Name
	})
	return plan
}

// checkName checks the name of item i of list (a tier or a module): not empty, valid, and
// not a duplicate of an earlier item; seen records the first index of every valid name.
func checkName(path, what, list, name string, i int, seen map[string]int, add func(string, string, ...any)) {
	switch {
	case name == "":
		add(path, "must not be empty")
	case !ValidName(name):
		add(path, "%q: use letters, digits, '.', '_' and '-'", name)
	default:
		if j, dup := seen[name]; dup {
			add(path, "duplicate %s %q (also %s[%d])", what, name, list, j)
		} else {
			seen[name] = i
		}
	}
}

func effectiveAttempts(m ModuleSpec, t Tier) int {
	a := t.MaxAttempts
	if m.MaxAttempts > 0 {
		a = m.MaxAttempts
	}
	if a < 1 {
		a = 1
	}
	return a
}

// Upper bounds of per-tier and per-module settings: a larger value could never take
// effect (a module due once in more ticks than a process lives through, more attempts
// than any budget leaves time for), so it is refused as a mistake.
const (
	// MaxEvery is the largest "every": at the default 10 Hz, once a day is every 864000.
	MaxEvery = 1_000_000
	// MaxAttempts is the largest max_attempts of a tier or a module.
	MaxAttempts = 100
)

// checkAttempts checks a max_attempts value (0: the default).
func checkAttempts(path string, n int, add func(path, format string, args ...any)) {
	if n < 0 || n > MaxAttempts {
		add(path, "must be between 1 and %d", MaxAttempts)
	}
}

// cyclicGroups returns the groups of modules that depend on each other in a cycle (the
// strongly connected components with a cycle, a self-dependency included, found by
// Tarjan's algorithm), each sorted, in the order of their first module.
func cyclicGroups(ms []ModuleSpec, byName map[string]int) [][]int {
	index, low := make([]int, len(ms)), make([]int, len(ms))
	onStack := make([]bool, len(ms))
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var groups [][]int
	next := 0
	var visit func(i int)
	visit = func(i int) {
		index[i], low[i] = next, next
		next++
		stack = append(stack, i)
		onStack[i] = true
		self := false
		for _, d := range ms[i].DependsOn {
			j, ok := byName[d]
			switch {
			case !ok:
			case j == i:
				self = true
			case index[j] < 0:
				visit(j)
				low[i] = min(low[i], low[j])
			case onStack[j]:
				low[i] = min(low[i], index[j])
			}
		}
		if low[i] != index[i] {
			return
		}
		k := len(stack) - 1
		for stack[k] != i {
			k--
		}
		g := slices.Clone(stack[k:])
		for _, j := range g {
			onStack[j] = false
		}
		stack = stack[:k]
		if len(g) > 1 || self {
			slices.Sort(g)
			groups = append(groups, g)
		}
	}
	for i := range ms {
		if index[i] < 0 {
			visit(i)
		}
	}
	slices.SortFunc(groups, func(a, b []int) int { return a[0] - b[0] })
	return groups
}

// findCycle returns the names along a depends_on cycle (first name repeated at the end), or nil.
func findCycle(ms []ModuleSpec, byName map[string]int) []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(ms))
	var stack []int
	var cycle []string
	var visit func(i int) bool
	visit = func(i int) bool {
		color[i] = grey
		stack = append(stack, i)
		for _, d := range ms[i].DependsOn {
			j, ok := byName[d]
			if !ok {
				continue
			}
			if color[j] == grey {
				k := len(stack) - 1
				for stack[k] != j {
					k--
				}
				for _, s := range stack[k:] {
					cycle = append(cycle, ms[s].Name)
				}
				cycle = append(cycle, ms[j].Name)
				return true
			}
			if color[j] == white && visit(j) {
				return true
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
		return false
	}
	for i := range ms {
		if color[i] == white && visit(i) {
			return cycle
		}
	}
	return nil
}

// topoOrder returns module indexes with dependencies first (the graph must be acyclic).
func topoOrder(ms []ModuleSpec, byName map[string]int) []int {
	seen := make([]bool, len(ms))
	out := make([]int, 0, len(ms))
	var visit func(i int)
	visit = func(i int) {
		if seen[i] {
			return
		}
		seen[i] = true
		for _, d := range ms[i].DependsOn {
			if j, ok := byName[d]; ok {
				visit(j)
			}
		}
		out = append(out, i)
	}
	for i := range ms {
		visit(i)
	}
	return out
}
