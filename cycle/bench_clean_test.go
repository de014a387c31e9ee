package cycle

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// BenchmarkTickClean is BenchmarkTick's clean case alone (N = 500 and 5000), selectable
// without the failing cases, whose names nest under it: the baseline of
// BenchmarkTickResilience, and the file to copy onto an older commit to compare it
// (BENCHMARKS.md, "Micro-benchmarks named in the code").
func BenchmarkTickClean(b *testing.B) {
	for _, n := range []int{500, 5000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			benchTicks(b, Config{Tiers: benchTiers(), History: 16}, benchModules(n, false), n)
		})
	}
}

// benchTicks runs b.N ticks of an engine of cfg and regs (n modules) after a warm-up
// (modules proven fast, keys stored, failing modules' breakers open where they may), and
// reports allocations, ns/module and cpu-ns/op.
func benchTicks(b *testing.B, cfg Config, regs []Registration, n int) {
	e, err := New(cfg, regs)
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
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		if _, err := e.Tick(ctx); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0, n)
}

// processCPU returns the CPU time (user and system) the process has used so far, on every
// thread: the engine's runners and workers included.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports ns/module (wall clock) and cpu-ns/op, the CPU time per tick since cpu0:
// on a shared machine the CPU a tick takes varies less than its wall-clock time.
func reportCPU(b *testing.B, cpu0 time.Duration, n int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/module")
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}
