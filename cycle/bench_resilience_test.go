package cycle

import (
	"fmt"
	"testing"

	"github.com/cycled/cycled/bulkhead"
	"github.com/cycled/cycled/retrybudget"
)

// BenchmarkTickResilience is BenchmarkTick's clean case with a bulkhead and a retry
// budget on every module: one bulkhead per tier, large enough never to refuse,
// and a retry budget per tier; the modules succeed, so the budgets count first attempts
// only. Compare it with BenchmarkTick/N=… (BENCHMARKS.md, "Micro-benchmarks named in the code").
func BenchmarkTickResilience(b *testing.B) {
	for _, n := range []int{500, 5000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			ts := benchTiers()
			cfg := Config{Tiers: ts, History: 16, Bulkheads: map[string]bulkhead.Settings{},
				RetryBudgets: RetryBudgets{Tiers: map[string]retrybudget.RatioSettings{}}}
			for _, t := range ts {
				cfg.Bulkheads["bh-"+t.Name] = bulkhead.Settings{MaxInFlight: 1 << 30}
				cfg.RetryBudgets.Tiers[t.Name] = retrybudget.RatioSettings{Ratio: 0.2, Window: 10, MinPerTick: 1}
			}
			regs := benchModules(n, false)
			for i := range regs {
				regs[i].Spec.Bulkhead = "bh-" + regs[i].Spec.Tier
			}
			benchTicks(b, cfg, regs, n)
		})
	}
}
