package cycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cycled/cycled/tiers"
)

// spin is a module that computes for about d (a busy loop on the clock): a module that
// does real work, where a second runner pays off, unlike a trivial one.
type spin struct{ d time.Duration }

func (m spin) Run(context.Context, *tiers.Input) (any, error) {
	for t0 := time.Now(); time.Since(t0) < m.d; {
	}
	return 1, nil
}

// BenchmarkTickWork is a tick of N modules that each compute for a while.
func BenchmarkTickWork(b *testing.B) {
	for _, n := range []int{500, 5000} {
		for _, d := range []time.Duration{time.Microsecond, 3 * time.Microsecond, 10 * time.Microsecond} {
			b.Run(fmt.Sprintf("N=%d/work=%v", n, d), func(b *testing.B) {
				regs := benchModules(n, false)
				for i := range regs {
					regs[i].Module = spin{d}
				}
				e, err := New(Config{Tiers: benchTiers(), History: 16}, regs)
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				ctx := context.Background()
				for i := 0; i <= fastStreak; i++ {
					if _, err := e.Tick(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := e.Tick(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/module")
			})
		}
	}
}
