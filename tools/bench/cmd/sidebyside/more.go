package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/tiers"
)

// The secondary cases, which the tick's cost must not make worse: deadline overshoot,
// start lag and heap per module. Like the steady state they use only the API present at
// every commit compared.
//
//   - deadline: a safety tier with one trivial module, then a tier with a 50 ms budget of
//     48 trivial modules, one that blocks 500 ms ignoring its context and one that blocks
//     500 ms honouring it; step mode with a 5 ms gap between ticks. The figure is how far
//     the 50 ms tier's elapsed time passes its budget (median and p99 over the ticks).
//   - lag: N trivial modules in five tiers on a 10 ms period (the scheduler runs); the
//     figure is each tick's start lag behind its grid point (median and p99).
//   - memory: N trivial modules in five tiers after one tick: the heap in use per
//     module, after a collection, above the heap before the engine was made
//     (-memprofile writes the heap profile then).
const (
	deadlineBudget = 50 * time.Millisecond
	deadlineBlock  = 500 * time.Millisecond
	deadlineGap    = 5 * time.Millisecond
	lagPeriod      = 10 * time.Millisecond
)

// secondary runs one secondary case and fills its figures in s.
func secondary(n int, kase string, dur time.Duration, memProf string) (sample, error) {
	s := sample{N: n, Case: kase}
	var err error
	switch kase {
	case "deadline":
		s.P50, s.P99, s.Ticks, err = overshoot(dur)
	case "lag":
		s.P50, s.P99, s.Ticks, err = startLag(n, dur)
	case "memory":
		s.PerModule, err = heapPerModule(n, memProf)
	default:
		err = fmt.Errorf("unknown case %q", kase)
	}
	return s, err
}

func overshoot(dur time.Duration) (p50, p99 float64, ticks int, err error) {
	tier := func(name string, budget time.Duration) tiers.Tier {
		return tiers.Tier{Name: name, Budget: budget, MaxAttempts: 1,
			Breaker: breaker.Settings{FailureThreshold: 1 << 30, Cooldown: time.Second, HalfOpenProbes: 1, HalfOpenSuccesses: 1}}
	}
	ts := []tiers.Tier{tier("safety", time.Second), tier("work", deadlineBudget)}
	regs := []cycle.Registration{{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"}, Module: tiers.ModuleFunc(ok)}}
	for i := range 48 {
		regs = append(regs, cycle.Registration{Spec: tiers.ModuleSpec{Name: fmt.Sprintf("w%d", i), Tier: "work"}, Module: tiers.ModuleFunc(ok)})
	}
	hung := func(context.Context, *tiers.Input) (any, error) { time.Sleep(deadlineBlock); return 1, nil }
	honour := func(ctx context.Context, _ *tiers.Input) (any, error) {
		select {
		case <-time.After(deadlineBlock):
			return 1, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	regs = append(regs, cycle.Registration{Spec: tiers.ModuleSpec{Name: "hung", Tier: "work"}, Module: tiers.ModuleFunc(hung)},
		cycle.Registration{Spec: tiers.ModuleSpec{Name: "honour", Tier: "work"}, Module: tiers.ModuleFunc(honour)})
	e, err := cycle.New(cycle.Config{Tiers: ts}, regs)
	if err != nil {
		return 0, 0, 0, err
	}
	defer e.Close()
	var over []float64
	for start := time.Now(); len(over) < 40 || time.Since(start) < dur; {
		time.Sleep(deadlineGap)
		s, err := e.Tick(context.Background())
		if err != nil {
			return 0, 0, 0, err
		}
		if len(s.Tiers) < 2 {
			return 0, 0, 0, errors.New("deadline: no line for the work tier")
		}
		over = append(over, s.Tiers[1].ElapsedMs-float64(deadlineBudget)/1e6)
	}
	time.Sleep(deadlineBlock) // the last hung run returns before the engine closes
	return pct(over, 50), pct(over, 99), len(over), nil
}

func startLag(n int, dur time.Duration) (p50, p99 float64, ticks int, err error) {
	e, err := engineWith(n, false, lagPeriod)
	if err != nil {
		return 0, 0, 0, err
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), warmTime+dur)
	defer cancel()
	_ = e.Run(ctx) // returns at the timeout
	// The history lists the newest first; the oldest ticks, warmTime's share, are the warm-up.
	var lag []float64
	for _, s := range e.History().List(1<<20, 0) {
		lag = append(lag, s.StartLagMs)
	}
	lag = lag[:int(float64(len(lag))*float64(dur)/float64(warmTime+dur))]
	if len(lag) == 0 {
		return 0, 0, 0, errors.New("lag: no ticks")
	}
	return pct(lag, 50), pct(lag, 99), len(lag), nil
}

func heapPerModule(n int, memProf string) (float64, error) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	e, err := engine(n, false)
	if err != nil {
		return 0, err
	}
	if _, err := e.Tick(context.Background()); err != nil {
		return 0, err
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if memProf != "" {
		f, err := os.Create(memProf)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			return 0, err
		}
	}
	runtime.KeepAlive(e)
	per := float64(m1.HeapAlloc-m0.HeapAlloc) / float64(n)
	_ = e.Close()
	return per, nil
}

// pct is the p-th percentile of xs (nearest rank).
func pct(xs []float64, p float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
