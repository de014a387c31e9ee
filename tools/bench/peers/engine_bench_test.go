package peers

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/tools/bench/stats"
)

// BenchmarkEngineTick is one tick of cycled's engine in step mode in the harness's three
// tick-cost steady states, for profiling one of them on its own:
//
//	cd bench && go test -run '^$' -bench 'EngineTick/open/N=500$/coarse/history=1000' -benchmem -cpuprofile cpu.out ./peers
//	go tool pprof -top peers.test cpu.out
//
// clean: every module succeeds. fail: every tenth module fails on every tick after
// warm-up ticks that stored a value, breakers that never open. open: every tenth module
// fails from the first tick on, and its breaker (threshold 5, cooldown 30 s) is open
// before the timer starts, so every measured tick refuses it. history=16 is the harness's
// tick-cost setting, history=1000 the engine's default.
//
// Beside ns/op it reports the median tick (p50-ns/op) and the process's CPU time a tick
// (cpu-ns/op, all threads): on a shared machine both move less than the mean with the
// other processes' load.
func BenchmarkEngineTick(b *testing.B) {
	for _, mode := range []string{"clean", "fail", "open"} {
		for _, n := range []int{500, 5000} {
			for _, timing := range []cycle.Timing{cycle.Coarse, cycle.Precise} {
				for _, hist := range []int{16, 1000} {
					name := fmt.Sprintf("%s/N=%d/%s/history=%d", mode, n, timing, hist)
					b.Run(name, func(b *testing.B) { benchEngineTick(b, mode, n, timing, hist) })
				}
			}
		}
	}
}

func benchEngineTick(b *testing.B, mode string, n int, timing cycle.Timing, hist int) {
	var on atomic.Bool
	threshold := 1 << 30
	if mode == "open" {
		threshold = 5
	}
	spec := TrivialSpec(n, mode != "clean", &on, FiveTiers(time.Second, 1, 10*time.Millisecond, 100*time.Millisecond, threshold))
	spec.History = hist
	e, err := NewEngine(spec, timing)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	on.Store(mode == "open")
	// Warm-up: the open state's breakers open after the fifth tick, and the history fills
	// (past its newest summaries it keeps only the lines that are not plain successes).
	for range hist + 20 {
		if err := e.Tick(ctx); err != nil {
			b.Fatal(err)
		}
	}
	on.Store(mode != "clean")
	b.ReportAllocs()
	var durs []float64
	cpu0 := cpuTime()
	for b.Loop() {
		t0 := time.Now()
		if err := e.Tick(ctx); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, float64(time.Since(t0)))
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(len(durs)), "cpu-ns/op")
	b.ReportMetric(stats.Median(durs), "p50-ns/op")
	if mode == "open" {
		refused := 0
		for _, ln := range e.Last().Lines {
			if ln.Status == StatusOpen {
				refused++
			}
		}
		if want := (n + 6) / 10; refused != want {
			b.Fatalf("%d modules refused, want %d: the breakers are not open", refused, want)
		}
	}
}

// cpuTime is the process's CPU time so far (user and system, all threads).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
