package cycle

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkTickClean is BenchmarkTick's clean case alone (N = 500 and 5000), selectable
// without the failing cases, whose names nest under it: the baseline of
// BenchmarkTickResilience, and the file to copy onto an older commit to compare it
// (BENCHMARKS.md, "Bulkheads and retry budgets").
func BenchmarkTickClean(b *testing.B) {
	for _, n := range []int{500, 5000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			e, err := New(Config{Tiers: benchTiers(), History: 16}, benchModules(n, false))
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			for i := 0; i <= max(fastStreak, 6); i++ {
				if _, err := e.Tick(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := e.Tick(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/module")
		})
	}
}
