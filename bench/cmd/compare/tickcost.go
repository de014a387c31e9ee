package main

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/bench/peers"
	"github.com/cycled/cycled/bench/stats"
	"github.com/cycled/cycled/cycle"
)

// Contender names.
const (
	cEngine        = "cycled"
	cEngineCoarse  = "cycled coarse"
	cEnginePrecise = "cycled precise"
	cPlain         = "A plain Go"
	cFailsafe      = "B failsafe-go"
	cPython        = "C asyncio"
	// cFloor is not a contender but a bound: the components' own work per module in a bare
	// loop (peers.Floor), measured on clean ticks at the target sizes.
	cFloor = "floor"
)

// costSample is one contender's tick cost in one repetition.
type costSample struct {
	Contender string  `json:"contender"`
	N         int     `json:"n"`
	Fail      bool    `json:"fail"`
	Rep       int     `json:"rep"`
	Ticks     int     `json:"ticks"`
	MeanUs    float64 `json:"mean_us"`
	P99Us     float64 `json:"p99_us"`
	Allocs    jfloat  `json:"allocs_per_tick"` // NaN: not measured (Python)
	Bytes     jfloat  `json:"bytes_per_tick"`
	CPUUs     jfloat  `json:"cpu_us_per_tick"` // the process's CPU time, all threads; NaN: not measured (Python)
	NotOK     int     `json:"not_ok_last_tick"`
}

// preciseCostSizes are the sizes at which cycled is also measured with precise timing,
// whose hand-offs spin (the sizes with tick-cost targets).
var preciseCostSizes = []int{500, 5000}

type limits struct {
	warmup, minTicks, maxTicks int
	warmTime, minTime, maxTime time.Duration
}

// goLimits are the measuring limits of a Go contender for n modules.
func goLimits(n int, quick bool) limits {
	// The warm-up runs at least 5 ticks and 0.25 s: a scheduler runs for hours, and what a
	// tick costs in steady state is the figure that matters. The first ticks of a fresh
	// process touch fresh heap (page faults) while its history fills; they are not it.
	l := limits{warmup: 5, minTicks: 10, maxTicks: 20000, warmTime: 250 * time.Millisecond, minTime: 300 * time.Millisecond, maxTime: 800 * time.Millisecond}
	if n >= 50000 {
		l.warmup, l.minTicks, l.maxTime = 4, 3, 1200*time.Millisecond
	}
	if quick {
		l.warmTime, l.minTime, l.maxTime, l.minTicks = 0, 30*time.Millisecond, 150*time.Millisecond, 3
	}
	return l
}

// tiersForCost are the tick-cost tiers: budget 1 s, one attempt (a transient failure takes
// the fault path, not a backoff sleep), breakers that never open (every tick pays for the
// failure).
func tiersForCost() []peers.TierSpec {
	return peers.FiveTiers(time.Second, 1, 10*time.Millisecond, 100*time.Millisecond, 1<<30)
}

func measureGo(c peers.Contender, on *atomic.Bool, fail bool, l limits) costSample {
	ctx := context.Background()
	on.Store(false)
	for i, w0 := 0, time.Now(); i < l.warmup || time.Since(w0) < l.warmTime; i++ {
		_ = c.Tick(ctx)
	}
	on.Store(fail)
	durs := make([]float64, 0, 1024)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := cpuTime()
	start := time.Now()
	for len(durs) < l.maxTicks {
		t0 := time.Now()
		_ = c.Tick(ctx)
		durs = append(durs, float64(time.Since(t0).Nanoseconds())/1e3)
		el := time.Since(start)
		if (len(durs) >= l.minTicks && el >= l.minTime) || el >= l.maxTime {
			break
		}
	}
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&m1)
	on.Store(false)
	n := float64(len(durs))
	notOK := 0
	for _, ln := range c.Last().Lines {
		if ln.Status != peers.StatusOK {
			notOK++
		}
	}
	s := stats.Summarize(durs)
	return costSample{Ticks: len(durs), MeanUs: s.Mean, P99Us: s.P99,
		Allocs: jfloat(float64(m1.Mallocs-m0.Mallocs) / n), Bytes: jfloat(float64(m1.TotalAlloc-m0.TotalAlloc) / n),
		CPUUs: jfloat(float64(cpu.Nanoseconds()) / 1e3 / n), NotOK: notOK}
}

// runTickCost measures every contender for every size, clean and failing, reps times;
// within a repetition the contenders of a case run back to back (in an order rotated per
// repetition).
func runTickCost(o *opts, py *pySketch) []costSample {
	sizes := []int{5, 50, 500, 5000, 50000}
	if o.quick {
		sizes = []int{5, 500, 5000}
	}
	if len(o.sizes) > 0 {
		sizes = o.sizes
	}
	var out []costSample
	for rep := 1; rep <= o.reps; rep++ {
		for _, n := range sizes {
			for _, fail := range []bool{false, true} {
				names := []string{cEngine, cPlain, cFailsafe, cPython}
				if slices.Contains(preciseCostSizes, n) {
					names = append(names, cEnginePrecise)
					if !fail {
						names = append(names, cFloor)
					}
				}
				k := (rep - 1) % len(names)
				names = append(names[k:], names[:k]...)
				for _, name := range names {
					if o.only != "" && !strings.HasPrefix(name, o.only) {
						continue
					}
					var s costSample
					var ok bool
					if name == cPython {
						s, ok = pythonCost(o, py, n, fail, rep)
					} else {
						s, ok = goCost(o, name, n, fail)
					}
					if !ok {
						continue
					}
					s.Contender, s.N, s.Fail, s.Rep = name, n, fail, rep
					logf("tickcost rep %d N=%d fail=%v %-14s %6d ticks mean %10.1f µs p99 %10.1f µs cpu %10.1f µs allocs %8.0f B %10.0f",
						rep, n, fail, name, s.Ticks, s.MeanUs, s.P99Us, s.CPUUs, s.Allocs, s.Bytes)
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// newGoContender returns the Go contender called name for spec (cycled with precise
// timing for cEnginePrecise, coarse otherwise).
func newGoContender(name string, spec peers.Spec) peers.Contender {
	switch name {
	case cEngine, cEngineCoarse, cEnginePrecise:
		t := cycle.Coarse
		if name == cEnginePrecise {
			t = cycle.Precise
		}
		e, err := peers.NewEngine(spec, t)
		if err != nil {
			fatalf("engine: %v", err)
		}
		return e
	case cPlain:
		return peers.NewPlain(spec)
	case cFailsafe:
		return peers.NewFailsafe(spec)
	case cFloor:
		return peers.NewFloor(spec)
	}
	fatalf("unknown contender %q", name)
	return nil
}

func goCost(o *opts, name string, n int, fail bool) (costSample, bool) {
	var on atomic.Bool
	spec := peers.TrivialSpec(n, fail, &on, tiersForCost())
	c := newGoContender(name, spec)
	s := measureGo(c, &on, fail, goLimits(n, o.quick))
	c.Close()
	return s, true
}

func pythonCost(o *opts, py *pySketch, n int, fail bool, rep int) (costSample, bool) {
	if py == nil {
		return costSample{}, false
	}
	req := map[string]any{"cmd": "tickcost", "n": n, "failing": fail, "warmup": 4, "min_ticks": 5, "min_time": 0.3, "max_time": 1.0}
	if o.quick {
		req["min_time"], req["max_time"], req["min_ticks"] = 0.05, 0.2, 2
	}
	if n >= 5000 {
		req["warmup"] = 1
	}
	if n >= 50000 {
		// About 3 s per tick: one repetition of two ticks (see BENCHMARKS.md).
		if rep > 1 || o.quick {
			return costSample{}, false
		}
		req["min_ticks"], req["max_time"], req["min_time"] = 2, 60.0, 0.0
	}
	var res struct {
		TickUs []float64 `json:"tick_us"`
		NotOK  int       `json:"not_ok_last_tick"`
	}
	if err := py.call(req, &res); err != nil {
		fatalf("%v", err)
	}
	s := stats.Summarize(res.TickUs)
	return costSample{Ticks: s.N, MeanUs: s.Mean, P99Us: s.P99, Allocs: jfloat(math.NaN()), Bytes: jfloat(math.NaN()), CPUUs: jfloat(math.NaN()),
		NotOK: res.NotOK}, true
}

func (c costSample) String() string { return fmt.Sprintf("%s N=%d", c.Contender, c.N) }
