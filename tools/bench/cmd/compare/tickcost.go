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

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/tools/bench/peers"
	"github.com/cycled/cycled/tools/bench/stats"
)

// Contender names.
const (
	cEngine        = "cycled"
	cEngineCoarse  = "cycled coarse"
	cEnginePrecise = "cycled precise"
	// cEngineHistory is cycled with the engine's default history of 1000 summaries (the
	// other contenders keep 16, as A and B do): past the newest faultsummary.KeepWhole
	// summaries the history keeps the lines that are not plain successes, so what a
	// failing or refused module costs a tick includes its line's life in the history.
	cEngineHistory = "cycled history 1000"
	cPlain         = "A plain Go"
	cFailsafe      = "B failsafe-go"
	cPython        = "C asyncio"
	// cFloor is not a contender but a bound: the components' own work per module in a bare
	// loop (peers.Floor), measured on clean ticks at the target sizes.
	cFloor = "floor"
)

// costSample is one contender's tick cost in one repetition.
type costSample struct {
	Contender string `json:"contender"`
	N         int    `json:"n"`
	Fail      bool   `json:"fail"`
	// Open marks the open-10% steady state (Fail is set too): see modeOpen.
	Open   bool    `json:"open,omitempty"`
	Rep    int     `json:"rep"`
	Ticks  int     `json:"ticks"`
	MeanUs float64 `json:"mean_us"`
	// P50Us is the median tick: on a shared machine, less moved than the mean by the
	// ticks during which other processes held the CPUs.
	P50Us  float64 `json:"p50_us,omitempty"`
	P99Us  float64 `json:"p99_us"`
	Allocs jfloat  `json:"allocs_per_tick"` // NaN: not measured (Python)
	Bytes  jfloat  `json:"bytes_per_tick"`
	CPUUs  jfloat  `json:"cpu_us_per_tick"` // the process's CPU time, all threads; NaN: not measured (Python)
	NotOK  int     `json:"not_ok_last_tick"`
	// Refused is the number of modules the breaker refused in the last measured tick
	// (status open): in the open-10% state, every failing module.
	Refused int `json:"open_last_tick"`
}

// costMode is a steady state of the tick-cost section.
type costMode int

const (
	// modeClean: every module succeeds.
	modeClean costMode = iota
	// modeFail: every tenth module fails on every measured tick, after warm-up ticks in
	// which it succeeded (it has a last-known-good value); its breaker never opens, so
	// every tick runs it and takes the whole fault path.
	modeFail
	// modeOpen: every tenth module fails on every call from the first tick on (it never
	// had a value), its breaker opens after openThreshold failed ticks with a cooldown
	// longer than the measurement, so in steady state the breaker refuses it every tick.
	modeOpen
)

// costModes are the steady states, in the tables' order.
var costModes = []costMode{modeClean, modeFail, modeOpen}

// historyDefault is the engine's default history (summaries kept).
const historyDefault = 1000

// openThreshold is the breakers' failure threshold in the open-10% state (their cooldown
// is peers.FiveTiers's 30 s, longer than any measurement).
const openThreshold = 5

// String names a tick-cost case in the tables.
func (m costMode) String() string {
	switch m {
	case modeFail:
		return "fail 10%"
	case modeOpen:
		return "open 10%"
	}
	return "clean"
}

// failing reports whether a tenth of the modules fail in the measured ticks.
func (m costMode) failing() bool { return m != modeClean }

// modeOf is the steady state sample s was measured in.
func modeOf(s costSample) costMode {
	switch {
	case s.Open:
		return modeOpen
	case s.Fail:
		return modeFail
	}
	return modeClean
}

// mark records mode m on s.
func (m costMode) mark(s *costSample) { s.Fail, s.Open = m.failing(), m == modeOpen }

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

// tiersForCost are the tick-cost tiers of mode m: budget 1 s, one attempt (a transient
// failure takes the fault path, not a backoff sleep), and breakers that never open (every
// tick pays for the failure) or, in the open-10% state, open after openThreshold.
func tiersForCost(m costMode) []peers.TierSpec {
	threshold := 1 << 30
	if m == modeOpen {
		threshold = openThreshold
	}
	return peers.FiveTiers(time.Second, 1, 10*time.Millisecond, 100*time.Millisecond, threshold)
}

func measureGo(c peers.Contender, on *atomic.Bool, m costMode, l limits) costSample {
	ctx := context.Background()
	// Open 10%: the modules fail from the first tick, and the warm-up runs the ticks that
	// open their breakers.
	on.Store(m == modeOpen)
	if m == modeOpen {
		l.warmup = max(l.warmup, openThreshold+1)
	}
	for i, w0 := 0, time.Now(); i < l.warmup || time.Since(w0) < l.warmTime; i++ {
		_ = c.Tick(ctx)
	}
	on.Store(m.failing())
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
	notOK, refused := 0, 0
	for _, ln := range c.Last().Lines {
		if ln.Status != peers.StatusOK {
			notOK++
		}
		if ln.Status == peers.StatusOpen {
			refused++
		}
	}
	s := stats.Summarize(durs)
	return costSample{Ticks: len(durs), MeanUs: s.Mean, P50Us: s.P50, P99Us: s.P99,
		Allocs: jfloat(float64(m1.Mallocs-m0.Mallocs) / n), Bytes: jfloat(float64(m1.TotalAlloc-m0.TotalAlloc) / n),
		CPUUs: jfloat(float64(cpu.Nanoseconds()) / 1e3 / n), NotOK: notOK, Refused: refused}
}

// runTickCost measures every contender for every size in every steady state, reps times;
// within a repetition the contenders of a case run back to back, in an order rotated per
// repetition, and so do the steady states of a size (their ratios to clean are taken
// inside a repetition too).
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
			for _, m := range rotate(costModes, rep-1) {
				for _, name := range rotate(caseContenders(n, m), rep-1) {
					if o.only != "" && !strings.HasPrefix(name, o.only) {
						continue
					}
					var s costSample
					var ok bool
					if name == cPython {
						s, ok = pythonCost(o, py, n, m, rep)
					} else {
						s, ok = goCost(o, name, n, m)
					}
					if !ok {
						continue
					}
					s.Contender, s.N, s.Rep = name, n, rep
					m.mark(&s)
					logf("tickcost rep %d N=%d %-8s %-14s %6d ticks mean %10.1f µs p99 %10.1f µs cpu %10.1f µs allocs %8.0f B %10.0f open %d",
						rep, n, m, name, s.Ticks, s.MeanUs, s.P99Us, s.CPUUs, s.Allocs, s.Bytes, s.Refused)
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// caseContenders are the contenders of the case of n modules in mode m: cycled with
// precise timing at the sizes with targets, and the floor there on clean ticks only (it
// has no breakers and no fault path).
func caseContenders(n int, m costMode) []string {
	names := []string{cEngine, cPlain, cFailsafe, cPython}
	if slices.Contains(preciseCostSizes, n) {
		names = append(names, cEnginePrecise, cEngineHistory)
		if m == modeClean {
			names = append(names, cFloor)
		}
	}
	return names
}

// rotate returns xs rotated left by k (a fresh slice).
func rotate[T any](xs []T, k int) []T {
	k %= len(xs)
	return append(slices.Clone(xs[k:]), xs[:k]...)
}

// newGoContender returns the Go contender called name for spec (cycled with precise
// timing for cEnginePrecise, coarse otherwise).
func newGoContender(name string, spec peers.Spec) peers.Contender {
	switch name {
	case cEngine, cEngineCoarse, cEnginePrecise, cEngineHistory:
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

func goCost(o *opts, name string, n int, m costMode) (costSample, bool) {
	var on atomic.Bool
	spec := peers.TrivialSpec(n, m.failing(), &on, tiersForCost(m))
	l := goLimits(n, o.quick)
	if name == cEngineHistory {
		// Steady state: a full history, whose oldest summaries are compacted.
		spec.History = historyDefault
		l.warmup = max(l.warmup, historyDefault)
	}
	c := newGoContender(name, spec)
	s := measureGo(c, &on, m, l)
	c.Close()
	return s, true
}

func pythonCost(o *opts, py *pySketch, n int, m costMode, rep int) (costSample, bool) {
	if py == nil {
		return costSample{}, false
	}
	// Open 10%: the sketch warms up with at least openThreshold+1 ticks, failing from the first.
	req := map[string]any{"cmd": "tickcost", "n": n, "failing": m.failing(), "open": m == modeOpen, "threshold": openThreshold, "warmup": 4, "min_ticks": 5, "min_time": 0.3, "max_time": 1.0}
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
		TickUs  []float64 `json:"tick_us"`
		NotOK   int       `json:"not_ok_last_tick"`
		Refused int       `json:"open_last_tick"`
	}
	if err := py.call(req, &res); err != nil {
		fatalf("%v", err)
	}
	s := stats.Summarize(res.TickUs)
	return costSample{Ticks: s.N, MeanUs: s.Mean, P50Us: s.P50, P99Us: s.P99, Allocs: jfloat(math.NaN()), Bytes: jfloat(math.NaN()), CPUUs: jfloat(math.NaN()),
		NotOK: res.NotOK, Refused: res.Refused}, true
}

func (c costSample) String() string { return fmt.Sprintf("%s N=%d", c.Contender, c.N) }
