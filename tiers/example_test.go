package tiers_test

import (
	"fmt"

	"github.com/cycled/cycled/tiers"
)

func ExampleValidate() {
	cfg := tiers.Config{
		Tiers: tiers.SeedTiers()[:3], // safety, knowledge, perception
		Modules: []tiers.ModuleSpec{
			{Name: "guard", Tier: "safety"},
			{Name: "lidar", Tier: "knowledge", Reads: []string{"map.result"}},
			{Name: "fusion", DependsOn: []string{"lidar"}}, // tier derived: perception
		},
	}
	plan, problems := tiers.Validate(cfg)
	for _, m := range plan.Modules {
		fmt.Printf("%-6s tier %d (%s), %d attempt(s), %s\n", m.Spec.Name, m.TierIndex, m.Spec.Tier, m.Attempts, m.Policy)
	}
	for _, p := range problems {
		fmt.Println("warning:", p)
	}

	// A broken configuration: every problem is reported at once, each with its path.
	cfg.Tiers[2].Budget = 0
	cfg.Modules[0].Tier = "brakes"
	cfg.Modules = append(cfg.Modules, tiers.ModuleSpec{Name: "a", DependsOn: []string{"b"}},
		tiers.ModuleSpec{Name: "b", DependsOn: []string{"a"}})
	plan, problems = tiers.Validate(cfg)
	fmt.Println("plan:", plan)
	for _, p := range problems.Errors() {
		fmt.Println("error:", p)
	}
	// Output:
	// guard  tier 0 (safety), 1 attempt(s), fail_fast
	// lidar  tier 1 (knowledge), 3 attempt(s), degrade
	// fusion tier 2 (perception), 2 attempt(s), degrade
	// warning: modules[1].reads[0]: no module writes key "map.result"
	// plan: <nil>
	// error: tiers[2].budget: must be > 0
	// error: modules[0].tier: unknown tier "brakes"
	// error: modules[3].depends_on: dependency cycle: a -> b -> a
}
