package tiers

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/lastgood"
)

func ptr[T any](v T) *T { return &v }

// mod returns a module spec in the named tier.
func mod(name, tier string) ModuleSpec { return ModuleSpec{Name: name, Tier: tier} }

// baseConfig is a valid configuration: the five seed tiers, one module in each, a named
// breaker, and reads that all follow the tier order.
func baseConfig() Config {
	return Config{
		Tiers: SeedTiers(),
		Modules: []ModuleSpec{
			mod("guard", "safety"),
			{Name: "lidar", Tier: "knowledge", Breaker: "llm"},
			{Name: "camera", Tier: "perception", Reads: []string{"lidar.result"}},
			{Name: "planner", Tier: "planning", Reads: []string{"camera.result", "guard.result"}},
			{Name: "actuator", Tier: "execution", Reads: []string{"planner.result"}},
		},
		Breakers: map[string]breaker.Settings{"llm": {FailureThreshold: 3, Cooldown: 10 * time.Second}},
	}
}

func TestBaseConfigIsValid(t *testing.T) {
	plan, ps := Validate(baseConfig())
	if len(ps) != 0 {
		t.Fatalf("problems in the base config: %v", ps)
	}
	if plan == nil || len(plan.Modules) != 5 || len(plan.Tiers) != 5 || len(plan.Breakers) != 1 {
		t.Fatalf("plan = %+v, want 5 modules, 5 tiers, 1 breaker", plan)
	}
}

// TestModuleSharesBreakerOfItsName: a module named like a named breaker may share it, by
// naming it; only a module that would make its own breaker of that name is refused.
func TestModuleSharesBreakerOfItsName(t *testing.T) {
	cfg := baseConfig()
	cfg.Modules[4].Name, cfg.Modules[4].Breaker = "llm", "llm"
	if _, ps := Validate(cfg); len(ps) != 0 {
		t.Fatalf("problems: %v", ps)
	}
}

// TestValidateRules checks every rule on its own: one mistake in an otherwise valid
// configuration gives exactly one problem with its exact path.
func TestValidateRules(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(c *Config)
		path    string
		msg     string // the problem must contain this
		warning bool
	}{
		// Tiers.
		{"no tiers", func(c *Config) { c.Tiers, c.Modules = nil, nil }, "tiers", "at least one tier is required", false},
		{"empty tier name", func(c *Config) { c.Tiers[4].Name = ""; c.Modules = c.Modules[:4] }, "tiers[4].name", "must not be empty", false},
		{"tier name with a space", func(c *Config) { c.Tiers[4].Name = "bad name"; c.Modules = c.Modules[:4] }, "tiers[4].name", `"bad name": use letters, digits`, false},
		{"tier name starting with a dot", func(c *Config) { c.Tiers[4].Name = ".hidden"; c.Modules = c.Modules[:4] }, "tiers[4].name", `".hidden"`, false},
		{"duplicate tier name", func(c *Config) { c.Tiers[4].Name = "knowledge"; c.Modules = c.Modules[:4] }, "tiers[4].name", `duplicate tier "knowledge" (also tiers[1])`, false},
		{"zero budget", func(c *Config) { c.Tiers[2].Budget = 0 }, "tiers[2].budget", "must be > 0", false},
		{"negative budget", func(c *Config) { c.Tiers[2].Budget = -time.Millisecond }, "tiers[2].budget", "must be > 0", false},
		{"negative tier attempts", func(c *Config) { c.Tiers[1].MaxAttempts = -1 }, "tiers[1].max_attempts", "must be between 1 and 100", false},
		{"tier attempts over the bound", func(c *Config) { c.Tiers[1].MaxAttempts = 1e9 }, "tiers[1].max_attempts", "must be between 1 and 100", false},
		{"unknown tier policy", func(c *Config) { c.Tiers[1].Policy = Policy(9) }, "tiers[1].policy", "unknown policy", false},
		{"backoff factor below 1", func(c *Config) { c.Tiers[1].Backoff.Factor = 0.5 }, "tiers[1].backoff.factor", "must be >= 1", false},
		{"negative backoff base", func(c *Config) { c.Tiers[1].Backoff.Base = -1 }, "tiers[1].backoff.base", "must be >= 0", false},
		{"negative backoff max", func(c *Config) { c.Tiers[1].Backoff.Max = -1 }, "tiers[1].backoff.max", "must be >= 0", false},
		{"negative jitter", func(c *Config) { c.Tiers[3].Backoff.Jitter = -0.1 }, "tiers[3].backoff.jitter", "must be between 0 and 1", false},
		{"jitter above 1", func(c *Config) { c.Tiers[3].Backoff.Jitter = 1.5 }, "tiers[3].backoff.jitter", "must be between 0 and 1", false},
		{"negative failure threshold", func(c *Config) { c.Tiers[0].Breaker.FailureThreshold = -1 }, "tiers[0].breaker.failure_threshold", "must be >= 1", false},
		{"negative cooldown", func(c *Config) { c.Tiers[0].Breaker.Cooldown = -time.Second }, "tiers[0].breaker.cooldown", "must be >= 0", false},
		{"negative half-open probes", func(c *Config) { c.Tiers[0].Breaker.HalfOpenProbes = -1 }, "tiers[0].breaker.half_open_probes", "must be >= 1", false},
		{"negative half-open successes", func(c *Config) { c.Tiers[0].Breaker.HalfOpenSuccesses = -2 }, "tiers[0].breaker.half_open_successes", "must be >= 1", false},
		{"negative named breaker threshold", func(c *Config) { c.Breakers["llm"] = breaker.Settings{FailureThreshold: -1} }, "breakers.llm.failure_threshold", "must be >= 1", false},
		{"invalid named breaker name", func(c *Config) { c.Breakers["bad name"] = breaker.Settings{} }, "breakers.bad name", `"bad name": use letters`, false},

		// Module names and tiers.
		{"empty module name", func(c *Config) { c.Modules[1].Name = ""; c.Modules[1].Writes = "lidar.result" }, "modules[1].name", "must not be empty", false},
		{"invalid module name", func(c *Config) { c.Modules[1].Name = "li/dar"; c.Modules[1].Writes = "lidar.result" }, "modules[1].name", `"li/dar": use letters`, false},
		{"duplicate module name", func(c *Config) { c.Modules[4].Name = "lidar"; c.Modules[4].Writes = "act.result" }, "modules[4].name", `duplicate module "lidar" (also modules[1])`, false},
		{"unknown tier", func(c *Config) { c.Modules[2].Tier = "vision" }, "modules[2].tier", `unknown tier "vision"`, false},
		{"misspelled tier", func(c *Config) { c.Modules[2].Tier = "knowlege" }, "modules[2].tier", `unknown tier "knowlege" (did you mean "knowledge"?)`, false},
		{"misspelled safety tier", func(c *Config) { c.Modules[2].Tier = "safty" }, "modules[2].tier", `unknown tier "safty" (did you mean "safety"?)`, false},
		{"no tier and no depends_on", func(c *Config) { c.Modules[2].Tier = "" }, "modules[2].tier", "must name a tier (or give depends_on)", false},

		// Keys.
		{"two modules write one key", func(c *Config) { c.Modules[4].Writes = "camera.result" }, "modules[4].writes", `key "camera.result" is also written by "camera"`, false},
		{"explicit key clashes with a default key", func(c *Config) { c.Modules[4].Writes = "guard.result" }, "modules[4].writes", `key "guard.result" is also written by "guard"`, false},
		{"blank key", func(c *Config) { c.Modules[4].Writes = "  " }, "modules[4].writes", `invalid key "  "`, false},
		{"key with a control character", func(c *Config) { c.Modules[4].Writes = "a\nb" }, "modules[4].writes", "invalid key", false},
		{"read of a key nobody writes", func(c *Config) { c.Modules[4].Reads = append(c.Modules[4].Reads, "map.result") }, "modules[4].reads[1]", `no module writes key "map.result"`, true},
		{"read of a key written by a later tier", func(c *Config) { c.Modules[1].Reads = []string{"planner.result"} }, "modules[1].reads[0]", `key "planner.result" is written by "planner" in tier "planning", which does not run earlier`, true},
		{"read of a key written in the same tier", func(c *Config) { c.Modules[2].Reads = []string{"camera.result"} }, "modules[2].reads[0]", `key "camera.result" is written by "camera" in tier "perception"`, true},

		// Per-module settings.
		{"negative every", func(c *Config) { c.Modules[1].Every = -1 }, "modules[1].every", "must be between 1 and 1000000", false},
		{"every over the bound", func(c *Config) { c.Modules[1].Every = 1e18 }, "modules[1].every", "must be between 1 and 1000000", false},
		{"negative module attempts", func(c *Config) { c.Modules[1].MaxAttempts = -1 }, "modules[1].max_attempts", "must be between 1 and 100", false},
		{"module attempts over the bound", func(c *Config) { c.Modules[0].MaxAttempts = 1e9 }, "modules[0].max_attempts", "must be between 1 and 100", false},
		{"negative ttl", func(c *Config) { c.Modules[1].TTL = lastgood.TTL{Fixed: -time.Second} }, "modules[1].ttl", "must be >= 0", false},
		{"auto ttl min above max", func(c *Config) {
			c.Modules[1].TTL = lastgood.TTL{Auto: true, Min: time.Second, Max: time.Millisecond}
		}, "modules[1].ttl", "auto TTL min 1s is above max 1ms", false},
		{"unknown named breaker", func(c *Config) { c.Modules[2].Breaker = "db" }, "modules[2].breaker", `unknown breaker "db" (declare it under breakers)`, false},
		{"misspelled named breaker", func(c *Config) { c.Modules[2].Breaker = "lm" }, "modules[2].breaker", `unknown breaker "lm" (did you mean "llm"?)`, false},
		{"module named like a named breaker", func(c *Config) { c.Modules[4].Name = "llm" }, "modules[4].name",
			`"llm" is also the name of a named breaker (breakers.llm)`, false},
		{"unknown module policy", func(c *Config) { c.Modules[2].Policy = Abort + 1 }, "modules[2].policy", "unknown policy", false},
		{"retry on a non-idempotent module (tier attempts)", func(c *Config) { c.Modules[1].Idempotent = ptr(false) }, "modules[1].idempotent", "retry configured (3 attempts) on a non-idempotent module", false},
		{"retry on a non-idempotent module (module attempts)", func(c *Config) {
			c.Modules[0].Idempotent, c.Modules[0].MaxAttempts = ptr(false), 2
		}, "modules[0].idempotent", "retry configured (2 attempts)", false},

		// depends_on.
		{"depends on an unknown module", func(c *Config) { c.Modules[3].DependsOn = []string{"camera", "ghost"} }, "modules[3].depends_on[1]", `unknown module "ghost"`, false},
		{"explicit tier not after its dependency", func(c *Config) { c.Modules[1].DependsOn = []string{"camera"} }, "modules[1].depends_on",
			`depends on a module in tier "perception", which does not run before tier "knowledge"`, false},
		{"explicit tier equal to its dependency's", func(c *Config) {
			c.Modules = append(c.Modules, ModuleSpec{Name: "fusion", Tier: "perception", DependsOn: []string{"camera"}})
		}, "modules[5].depends_on", `depends on a module in tier "perception", which does not run before tier "perception"`, false},
		{"derived tier past the last tier", func(c *Config) {
			c.Modules = append(c.Modules, ModuleSpec{Name: "logger", DependsOn: []string{"actuator"}})
		}, "modules[5].depends_on", "needs tier index 5 but only 5 tiers are configured", false},
		{"dependency cycle", func(c *Config) {
			c.Modules = append(c.Modules,
				ModuleSpec{Name: "a", DependsOn: []string{"b"}},
				ModuleSpec{Name: "b", DependsOn: []string{"a"}})
		}, "modules[5].depends_on", "dependency cycle: a -> b -> a", false},
		{"self dependency", func(c *Config) { c.Modules[2].DependsOn = []string{"camera"} }, "modules[2].depends_on", "dependency cycle: camera -> camera", false},
		{"three-module cycle", func(c *Config) {
			c.Modules = append(c.Modules,
				ModuleSpec{Name: "x", DependsOn: []string{"lidar", "y"}},
				ModuleSpec{Name: "y", DependsOn: []string{"z"}},
				ModuleSpec{Name: "z", DependsOn: []string{"x"}})
		}, "modules[5].depends_on", "dependency cycle: x -> y -> z -> x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig()
			tt.mutate(&cfg)
			plan, ps := Validate(cfg)
			if len(ps) != 1 {
				t.Fatalf("got %d problems, want exactly 1:\n%s", len(ps), dump(ps))
			}
			p := ps[0]
			if p.Path != tt.path || !strings.Contains(p.Message, tt.msg) || p.Warning != tt.warning {
				t.Fatalf("problem = %+v, want path %q, message containing %q, warning %v", p, tt.path, tt.msg, tt.warning)
			}
			if got, want := p.String(), tt.path+": "+p.Message; got != want {
				t.Errorf("String() = %q, want %q", got, want)
			}
			if tt.warning {
				if plan == nil {
					t.Fatal("a warning must not stop the plan")
				}
				if len(plan.Warnings) != 1 || plan.Warnings[0] != p {
					t.Errorf("plan.Warnings = %v, want [%v]", plan.Warnings, p)
				}
				if err := ps.Err(); err != nil {
					t.Errorf("Err() = %v, want nil for warnings only", err)
				}
				return
			}
			if plan != nil {
				t.Errorf("plan = %+v, want nil with an error", plan)
			}
			err := ps.Err()
			var ve *ValidationError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0] != p {
				t.Errorf("Err() = %#v, want a *ValidationError wrapping ErrInvalid with the problem", err)
			}
		})
	}
}

func dump(ps Problems) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("  ")
		b.WriteString(p.String())
		if p.Warning {
			b.WriteString(" (warning)")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestBudgetProblemText pins the exact text the contract shows for `cycled validate`.
func TestBudgetProblemText(t *testing.T) {
	cfg := baseConfig()
	cfg.Tiers[2].Budget = 0
	_, ps := Validate(cfg)
	if len(ps) != 1 || ps[0].String() != "tiers[2].budget: must be > 0" {
		t.Fatalf("problems = %q, want exactly %q", ps, "tiers[2].budget: must be > 0")
	}
	if got, want := ps.Err().Error(), "1 problem(s): tiers[2].budget: must be > 0"; got != want {
		t.Errorf("Err().Error() = %q, want %q", got, want)
	}
}

func TestValidateReportsEveryMistake(t *testing.T) {
	cfg := baseConfig()
	cfg.Tiers[2].Budget = 0                // 1
	cfg.Modules[1].Tier = "vision"         // 2
	cfg.Modules[3].Writes = "lidar.result" // 3
	cfg.Modules[4].Reads = []string{"x"}   // a warning on top
	plan, ps := Validate(cfg)
	if plan != nil {
		t.Fatalf("plan = %+v, want nil", plan)
	}
	want := []string{
		"tiers[2].budget: must be > 0",
		`modules[1].tier: unknown tier "vision"`,
		`modules[3].writes: key "lidar.result" is also written by "lidar"`,
	}
	var got []string
	for _, p := range ps.Errors() {
		got = append(got, p.String())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("errors =\n%q\nwant\n%q", got, want)
	}
	if w := ps.Warnings(); len(w) != 1 || w[0].Path != "modules[4].reads[0]" {
		t.Errorf("warnings = %v, want the unknown read", w)
	}
	msg := ps.Err().Error()
	if !strings.HasPrefix(msg, "3 problem(s): ") {
		t.Errorf("Err() = %q, want it to count 3 problems", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("Err() = %q, missing %q", msg, w)
		}
	}
}

// An unknown tier must not hide the other problems of the same module.
func TestUnknownTierDoesNotHideDependsOnProblems(t *testing.T) {
	cfg := baseConfig()
	cfg.Modules[2].Tier = "vision"
	cfg.Modules[2].DependsOn = []string{"ghost"}
	_, ps := Validate(cfg)
	got := make([]string, 0, len(ps))
	for _, p := range ps {
		got = append(got, p.String())
	}
	want := []string{`modules[2].tier: unknown tier "vision"`, `modules[2].depends_on[0]: unknown module "ghost"`}
	if !slices.Equal(got, want) {
		t.Fatalf("problems = %q, want %q", got, want)
	}
}

// Named breakers live in a map: their problems must still come out in a stable order.
func TestNamedBreakerProblemsAreSorted(t *testing.T) {
	cfg := baseConfig()
	for _, n := range []string{"e", "b", "d", "a", "c", "f", "h", "g"} {
		cfg.Breakers[n] = breaker.Settings{Cooldown: -1}
	}
	var first []string
	for i := range 20 {
		_, ps := Validate(cfg)
		var got []string
		for _, p := range ps {
			got = append(got, p.Path)
		}
		if i == 0 {
			first = got
			want := []string{"breakers.a.cooldown", "breakers.b.cooldown", "breakers.c.cooldown", "breakers.d.cooldown",
				"breakers.e.cooldown", "breakers.f.cooldown", "breakers.g.cooldown", "breakers.h.cooldown"}
			if !slices.Equal(got, want) {
				t.Fatalf("paths = %q, want %q", got, want)
			}
		} else if !slices.Equal(got, first) {
			t.Fatalf("run %d: paths = %q, first run gave %q", i, got, first)
		}
	}
}

func TestValidNonIdempotentModules(t *testing.T) {
	tests := []struct {
		name string
		spec ModuleSpec
	}{
		{"single attempt tier", ModuleSpec{Name: "n", Tier: "safety", Idempotent: ptr(false)}},
		{"module limited to one attempt", ModuleSpec{Name: "n", Tier: "knowledge", Idempotent: ptr(false), MaxAttempts: 1}},
		{"explicitly idempotent with retries", ModuleSpec{Name: "n", Tier: "knowledge", Idempotent: ptr(true), MaxAttempts: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.Modules = append(cfg.Modules, tt.spec)
			plan, ps := Validate(cfg)
			if len(ps) != 0 || plan == nil {
				t.Fatalf("problems = %v, want none", ps)
			}
		})
	}
}

func TestValidBoundaryValues(t *testing.T) {
	cfg := baseConfig()
	cfg.Tiers[1].Backoff = DefaultBackoff()
	cfg.Tiers[1].Backoff.Factor = 0 // zero means the default
	cfg.Tiers[2].Backoff.Jitter = 1
	cfg.Tiers[3].Backoff.Factor = 1
	cfg.Tiers[3].MaxAttempts = 0
	cfg.Tiers[4].Breaker = breaker.Settings{}                       // zeros mean the defaults
	cfg.Modules[1].TTL = lastgood.TTL{Auto: true, Min: time.Second} // Max 0: no upper bound to violate
	cfg.Modules[2].Every = 0
	cfg.Modules[2].Policy = Abort
	if _, ps := Validate(cfg); len(ps) != 0 {
		t.Fatalf("problems = %v, want none", ps)
	}
}

func TestDerivedTiers(t *testing.T) {
	cfg := baseConfig()
	cfg.Modules = append(cfg.Modules,
		// Listed before its dependencies on purpose: derivation follows the graph.
		ModuleSpec{Name: "report", DependsOn: []string{"fusion"}},
		ModuleSpec{Name: "fusion", DependsOn: []string{"lidar", "camera"}}, // latest: perception → planning
		ModuleSpec{Name: "watch", DependsOn: []string{"guard"}},            // safety → knowledge
		ModuleSpec{Name: "late", Tier: "execution", DependsOn: []string{"fusion"}},
	)
	plan, ps := Validate(cfg)
	if len(ps) != 0 {
		t.Fatalf("problems:\n%s", dump(ps))
	}
	want := map[string]string{"fusion": "planning", "report": "execution", "watch": "knowledge", "late": "execution"}
	for _, m := range plan.Modules {
		w, ok := want[m.Spec.Name]
		if !ok {
			continue
		}
		if m.Spec.Tier != w || plan.Tiers[m.TierIndex].Name != w {
			t.Errorf("%s: tier %q (index %d), want %q", m.Spec.Name, m.Spec.Tier, m.TierIndex, w)
		}
		delete(want, m.Spec.Name)
	}
	if len(want) != 0 {
		t.Errorf("modules missing from the plan: %v", want)
	}
	// The caller's config is not modified.
	if cfg.Modules[5].Tier != "" {
		t.Errorf("Validate wrote the derived tier into the caller's config: %q", cfg.Modules[5].Tier)
	}
}

// A derived module reading a key written by a derived module in a later tier gets the warning.
func TestDerivedTierReadWarnings(t *testing.T) {
	cfg := baseConfig()
	cfg.Modules = append(cfg.Modules,
		ModuleSpec{Name: "fusion", DependsOn: []string{"camera"}, Reads: []string{"camera.result"}}, // planning: fine
		ModuleSpec{Name: "early", Tier: "perception", Reads: []string{"fusion.result"}},             // later tier
	)
	plan, ps := Validate(cfg)
	if plan == nil {
		t.Fatalf("problems:\n%s", dump(ps))
	}
	if len(ps) != 1 || ps[0].Path != "modules[6].reads[0]" || !ps[0].Warning ||
		!strings.Contains(ps[0].Message, `written by "fusion" in tier "planning"`) {
		t.Fatalf("problems:\n%s\nwant one warning at modules[6].reads[0]", dump(ps))
	}
}

func TestPlanOrderAttemptsAndPolicy(t *testing.T) {
	tiers := []Tier{
		{Name: "safety", Budget: time.Millisecond, MaxAttempts: 1},
		{Name: "work", Budget: time.Millisecond, MaxAttempts: 3},
		{Name: "strict", Budget: time.Millisecond, Policy: FailFast}, // MaxAttempts 0 → 1
		{Name: "lenient-safety", Budget: time.Millisecond},
	}
	cfg := Config{Tiers: tiers, Modules: []ModuleSpec{
		{Name: "w-b", Tier: "work", Priority: 1},
		{Name: "s-z", Tier: "safety"},
		{Name: "w-a", Tier: "work", Priority: 1},
		{Name: "w-hi", Tier: "work", Priority: 5, MaxAttempts: 1},
		{Name: "w-lo", Tier: "work", Priority: -1, Policy: Abort},
		{Name: "s-a", Tier: "safety", Policy: Degrade, MaxAttempts: 2},
		{Name: "x", Tier: "strict"},
		{Name: "l", Tier: "lenient-safety", Priority: 100},
		{Name: "w-dep", DependsOn: []string{"s-z"}}, // derived: work
	}}
	plan, ps := Validate(cfg)
	if len(ps) != 0 {
		t.Fatalf("problems:\n%s", dump(ps))
	}
	type line struct {
		name     string
		tier     int
		attempts int
		policy   Policy
	}
	want := []line{
		{"s-a", 0, 2, Degrade},
		{"s-z", 0, 1, FailFast}, // first tier: fail_fast by default
		{"w-hi", 1, 1, Degrade}, // priority 5 first; module attempts override the tier's
		{"w-a", 1, 3, Degrade},  // priority 1, by name
		{"w-b", 1, 3, Degrade},
		{"w-dep", 1, 3, Degrade},
		{"w-lo", 1, 3, Abort},
		{"x", 2, 1, FailFast}, // the tier's policy; zero attempts means 1
		{"l", 3, 1, Degrade},
	}
	var got []line
	for _, m := range plan.Modules {
		got = append(got, line{m.Spec.Name, m.TierIndex, m.Attempts, m.Policy})
		if m.Spec.Tier != tiers[m.TierIndex].Name {
			t.Errorf("%s: Spec.Tier = %q, want %q", m.Spec.Name, m.Spec.Tier, tiers[m.TierIndex].Name)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("plan =\n%+v\nwant\n%+v", got, want)
	}
}

func TestTierPolicy(t *testing.T) {
	tests := []struct {
		policy Policy
		index  int
		want   Policy
	}{
		{PolicyDefault, 0, FailFast},
		{PolicyDefault, 1, Degrade},
		{PolicyDefault, 7, Degrade},
		{Degrade, 0, Degrade},
		{Abort, 0, Abort},
		{FailFast, 3, FailFast},
	}
	for _, tt := range tests {
		if got := TierPolicy(Tier{Policy: tt.policy}, tt.index); got != tt.want {
			t.Errorf("TierPolicy(%v, %d) = %v, want %v", tt.policy, tt.index, got, tt.want)
		}
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		s    string
		want bool
	}{
		{"a", true},
		{"lidar-2_b.v1", true},
		{"A9", true},
		{"_x", true},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{"", false},
		{".x", false},
		{"a b", false},
		{"a/b", false},
		{"a:b", false},
		{"é", false},
		{"a\x7f", false},
	}
	for _, tt := range tests {
		if got := ValidName(tt.s); got != tt.want {
			t.Errorf("ValidName(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

func TestProblemsErrorsWarningsAndJSON(t *testing.T) {
	ps := Problems{
		{Path: "a", Message: "bad"},
		{Path: "b", Message: "odd", Warning: true},
		{Message: "global"},
	}
	if e := ps.Errors(); len(e) != 2 || e[0].Path != "a" || e[1].Message != "global" {
		t.Errorf("Errors() = %v", e)
	}
	if w := ps.Warnings(); len(w) != 1 || w[0].Path != "b" {
		t.Errorf("Warnings() = %v", w)
	}
	if s := ps[2].String(); s != "global" {
		t.Errorf("String() without a path = %q, want %q", s, "global")
	}
	if err := (Problems{ps[1]}).Err(); err != nil {
		t.Errorf("Err() with warnings only = %v, want nil", err)
	}
	if err := Problems(nil).Err(); err != nil {
		t.Errorf("Err() of nothing = %v, want nil", err)
	}
	if got, want := ps.Err().Error(), "2 problem(s): a: bad; global"; got != want {
		t.Errorf("Err() = %q, want %q", got, want)
	}
	b, err := json.Marshal(ps[:2])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `[{"field":"a","message":"bad"},{"field":"b","message":"odd","warning":true}]`; got != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}
}

func TestSeedTiers(t *testing.T) {
	type seed struct {
		name      string
		budget    time.Duration
		attempts  int
		threshold int
		cooldown  time.Duration
		successes int
	}
	want := []seed{
		{"safety", 50 * time.Millisecond, 1, 2, 60 * time.Second, 3},
		{"knowledge", 200 * time.Millisecond, 3, 5, 30 * time.Second, 2},
		{"perception", 150 * time.Millisecond, 2, 7, 20 * time.Second, 2},
		{"planning", 100 * time.Millisecond, 2, 10, 15 * time.Second, 1},
		{"execution", 100 * time.Millisecond, 2, 10, 10 * time.Second, 1},
	}
	got := SeedTiers()
	if len(got) != len(want) {
		t.Fatalf("%d seed tiers, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		s := seed{g.Name, g.Budget, g.MaxAttempts, g.Breaker.FailureThreshold, g.Breaker.Cooldown, g.Breaker.HalfOpenSuccesses}
		if s != w {
			t.Errorf("tier %d = %+v, want %+v", i, s, w)
		}
		if g.Breaker.HalfOpenProbes != 1 {
			t.Errorf("tier %d: half_open_probes = %d, want 1", i, g.Breaker.HalfOpenProbes)
		}
		if g.Backoff != DefaultBackoff() || g.Policy != PolicyDefault {
			t.Errorf("tier %d: backoff %+v policy %v, want the defaults", i, g.Backoff, g.Policy)
		}
	}
	if b := DefaultBackoff(); b.Base != 10*time.Millisecond || b.Factor != 2 || b.Max != 100*time.Millisecond || b.Jitter != 0.2 {
		t.Errorf("DefaultBackoff() = %+v", b)
	}
}

// TestValidateDependsOnOnePass: a dependency cycle does not hide the other depends_on
// problems of the configuration; every one is reported in one pass, each cycle once, and
// a module placed by depends_on after a cycle member is not reported (its tier cannot be
// known, the cycle is the problem).
func TestValidateDependsOnOnePass(t *testing.T) {
	cfg := baseConfig()
	cfg.Modules = append(cfg.Modules,
		ModuleSpec{Name: "a", DependsOn: []string{"b"}},                               // 5: cycle a, b
		ModuleSpec{Name: "b", DependsOn: []string{"a"}},                               // 6
		ModuleSpec{Name: "after-a", DependsOn: []string{"a"}},                         // 7: derived from a cycle member
		ModuleSpec{Name: "early", Tier: "knowledge", DependsOn: []string{"camera"}},   // 8: tier order
		ModuleSpec{Name: "orphan", Tier: "planning", DependsOn: []string{"ghost"}},    // 9: unknown module
		ModuleSpec{Name: "logger", DependsOn: []string{"actuator"}},                   // 10: past the last tier
		ModuleSpec{Name: "selfish", Tier: "planning", DependsOn: []string{"selfish"}}, // 11: self cycle
	)
	_, ps := Validate(cfg)
	var got []string
	for _, p := range ps.Errors() {
		got = append(got, p.String())
	}
	want := []string{
		`modules[9].depends_on[0]: unknown module "ghost"`,
		`modules[5].depends_on: dependency cycle: a -> b -> a`,
		`modules[11].depends_on: dependency cycle: selfish -> selfish`,
		`modules[8].depends_on: depends on a module in tier "perception", which does not run before tier "knowledge"`,
		`modules[10].depends_on: needs tier index 5 but only 5 tiers are configured`,
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
