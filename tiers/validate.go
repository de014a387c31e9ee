package tiers

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/cycled/cycled/breaker"
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
	var ps Problems
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	warn := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Message: fmt.Sprintf(format, args...), Warning: true})
	}

	if len(cfg.Tiers) == 0 {
		add("tiers", "at least one tier is required (the first is the safety tier)")
	}
	tierIdx := make(map[string]int, len(cfg.Tiers))
	for i, t := range cfg.Tiers {
		p := fmt.Sprintf("tiers[%d]", i)
		checkName(p+".name", "tier", "tiers", t.Name, i, tierIdx, add)
		if t.Budget <= 0 {
			add(p+".budget", "must be > 0")
		}
		checkAttempts(p+".max_attempts", t.MaxAttempts, add)
		if t.Policy > Abort {
			add(p+".policy", "unknown policy")
		}
		checkBackoff(p+".backoff", t, add)
		checkBreaker(p+".breaker", t.Breaker, add)
	}
	// Map order is random: report the named breakers in name order so that the same
	// configuration always gives the same problems in the same order.
	breakerNames := make([]string, 0, len(cfg.Breakers))
	for name := range cfg.Breakers {
		breakerNames = append(breakerNames, name)
	}
	sort.Strings(breakerNames)
	for _, name := range breakerNames {
		s := cfg.Breakers[name]
		p := "breakers." + name
		if !ValidName(name) {
			add(p, "%q: use letters, digits, '.', '_' and '-'", name)
		}
		checkBreaker(p, s, add)
	}

	// Modules: names, tiers, keys.
	byName := make(map[string]int, len(cfg.Modules))
	for i, m := range cfg.Modules {
		checkName(fmt.Sprintf("modules[%d].name", i), "module", "modules", m.Name, i, byName, add)
	}

	// Resolve tiers, deriving from depends_on where the tier is not given.
	tierOf := make([]int, len(cfg.Modules))
	for i := range tierOf {
		tierOf[i] = -1
	}
	for i, m := range cfg.Modules {
		p := fmt.Sprintf("modules[%d]", i)
		if m.Tier != "" {
			// No early continue: the depends_on of a module with an unknown tier is still
			// checked, so that every problem is reported at once.
			if ti, ok := tierIdx[m.Tier]; ok {
				tierOf[i] = ti
			} else {
				add(p+".tier", "unknown tier %q", m.Tier)
			}
		} else if len(m.DependsOn) == 0 {
			add(p+".tier", "must name a tier (or give depends_on)")
		}
		for j, d := range m.DependsOn {
			if _, ok := byName[d]; !ok {
				add(fmt.Sprintf("%s.depends_on[%d]", p, j), "unknown module %q", d)
			}
		}
	}
	checkDependencyOrder(cfg, byName, tierOf, add)

	writers := make(map[string]int)
	for i, m := range cfg.Modules {
		p := fmt.Sprintf("modules[%d]", i)
		key := m.Key()
		if strings.TrimSpace(key) == "" || strings.ContainsFunc(key, unicode.IsControl) {
			add(p+".writes", "invalid key %q", key)
		} else if j, dup := writers[key]; dup {
			add(p+".writes", "key %q is also written by %q", key, cfg.Modules[j].Name)
		} else {
			writers[key] = i
		}
		if m.Every < 0 || m.Every > MaxEvery {
			add(p+".every", "must be between 1 and %d", MaxEvery)
		}
		checkAttempts(p+".max_attempts", m.MaxAttempts, add)
		if m.TTL.Fixed < 0 {
			add(p+".ttl", "must be >= 0")
		}
		if m.TTL.Auto && m.TTL.Max > 0 && m.TTL.Min > m.TTL.Max {
			add(p+".ttl", "auto TTL min %s is above max %s", m.TTL.Min, m.TTL.Max)
		}
		if m.Breaker != "" {
			if _, ok := cfg.Breakers[m.Breaker]; !ok {
				add(p+".breaker", "unknown breaker %q (declare it under breakers)", m.Breaker)
			}
		} else if _, ok := cfg.Breakers[m.Name]; ok {
			// The module's own breaker carries its name: it would be the named one, with
			// either's settings silently lost.
			add(p+".name", "%q is also the name of a named breaker (breakers.%s), and a module's own breaker carries its module's name: rename one, or set breaker: %s to share it", m.Name, m.Name, m.Name)
		}
		if m.Policy > Abort {
			add(p+".policy", "unknown policy")
		}
		if tierOf[i] >= 0 {
			attempts := effectiveAttempts(m, cfg.Tiers[tierOf[i]])
			if attempts > 1 && !m.IsIdempotent() {
				add(p+".idempotent", "retry configured (%d attempts) on a non-idempotent module: set max_attempts: 1 or make it idempotent", attempts)
			}
		}
	}
	for i, m := range cfg.Modules {
		for j, r := range m.Reads {
			p := fmt.Sprintf("modules[%d].reads[%d]", i, j)
			w, ok := writers[r]
			switch {
			case !ok:
				warn(p, "no module writes key %q", r)
			case tierOf[i] >= 0 && tierOf[w] >= tierOf[i]:
				warn(p, "key %q is written by %q in tier %q, which does not run earlier: the reader sees its last-known-good value", r, cfg.Modules[w].Name, cfg.Tiers[tierOf[w]].Name)
			}
		}
	}

	if len(ps.Errors()) > 0 {
		return nil, ps
	}
	plan := &Plan{Tiers: cfg.Tiers, Breakers: cfg.Breakers, Warnings: ps.Warnings()}
	for i, m := range cfg.Modules {
		t := cfg.Tiers[tierOf[i]]
		m.Tier = t.Name
		pol := m.Policy
		if pol == PolicyDefault {
			pol = TierPolicy(t, tierOf[i])
		}
		plan.Modules = append(plan.Modules, PlannedModule{Spec: m, TierIndex: tierOf[i], Attempts: effectiveAttempts(m, t), Policy: pol})
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
	return plan, ps
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

func checkBackoff(p string, t Tier, add func(string, string, ...any)) {
	b := t.Backoff
	if b.Base < 0 {
		add(p+".base", "must be >= 0")
	}
	if b.Max < 0 {
		add(p+".max", "must be >= 0")
	}
	if b.Factor != 0 && !(b.Factor >= 1) { // also rejects NaN
		add(p+".factor", "must be >= 1")
	}
	if !(b.Jitter >= 0 && b.Jitter <= 1) { // also rejects NaN
		add(p+".jitter", "must be between 0 and 1")
	}
}

func checkBreaker(p string, s breaker.Settings, add func(string, string, ...any)) {
	if s.FailureThreshold < 0 {
		add(p+".failure_threshold", "must be >= 1")
	}
	if s.Cooldown < 0 {
		add(p+".cooldown", "must be >= 0")
	}
	if s.HalfOpenProbes < 0 {
		add(p+".half_open_probes", "must be >= 1")
	}
	if s.HalfOpenSuccesses < 0 {
		add(p+".half_open_successes", "must be >= 1")
	}
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

// checkDependencyOrder reports every depends_on cycle, derives the tier of the modules
// placed by depends_on, and checks that explicit tiers run after their dependencies. A
// cycle does not stop the other checks: its members (and the modules whose tier would be
// derived from them) are left out of the ordering checks, every other module is checked,
// so that one pass reports every problem.
func checkDependencyOrder(cfg Config, byName map[string]int, tierOf []int, add func(path, format string, args ...any)) {
	onCycle := make([]bool, len(cfg.Modules))
	for _, scc := range cyclicGroups(cfg.Modules, byName) {
		sub := make(map[string]int, len(scc))
		for _, i := range scc {
			onCycle[i] = true
			sub[cfg.Modules[i].Name] = i
		}
		cyc := findCycle(cfg.Modules, sub)
		add(fmt.Sprintf("modules[%d].depends_on", byName[cyc[0]]), "dependency cycle: %s", strings.Join(cyc, " -> "))
	}
	unresolved := onCycle // a module whose tier cannot be known; a cycle's members first
	for _, i := range topoOrder(cfg.Modules, byName) {
		if onCycle[i] {
			continue
		}
		m := cfg.Modules[i]
		need, blocked := -1, false
		for _, d := range m.DependsOn {
			if j, ok := byName[d]; ok {
				blocked = blocked || unresolved[j]
				need = max(need, tierOf[j])
			}
		}
		p := fmt.Sprintf("modules[%d]", i)
		switch {
		case m.Tier == "" && len(m.DependsOn) > 0 && blocked:
			unresolved[i] = true
		case m.Tier == "" && len(m.DependsOn) > 0:
			t := max(need+1, 1)
			if t >= len(cfg.Tiers) {
				add(p+".depends_on", "needs tier index %d but only %d tiers are configured", t, len(cfg.Tiers))
				unresolved[i] = true
				continue
			}
			tierOf[i] = t
		case tierOf[i] >= 0 && need >= tierOf[i]:
			add(p+".depends_on", "depends on a module in tier %q, which does not run before tier %q", cfg.Tiers[need].Name, m.Tier)
		}
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
