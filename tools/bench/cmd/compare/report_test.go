package main

import (
	"math"
	"strings"
	"testing"

	"github.com/cycled/cycled/tools/bench/stats"
)

// TestPeriodTargets: the period targets are judged for precise timing with the default
// Ps and again on one P, each from its own runs; at 1 kHz the worst repetition decides.
func TestPeriodTargets(t *testing.T) {
	run := func(cont string, hz, rep, missed int, p99 float64) periodResult {
		expected := hz * 5
		return periodResult{Contender: cont, Hz: hz, Rep: rep, Lag: stats.Summary{N: expected - missed, P99: p99},
			Ticks: expected - missed, Missed: missed, Expected: expected}
	}
	r := &results{Period: []periodResult{
		// Two Ps: 100 Hz within its targets, 1 kHz missing 0.2% in one repetition.
		run("precise", 100, 1, 0, 40), run("precise", 100, 2, 0, 60), run("precise", 100, 3, 0, 50),
		run("precise", 1000, 1, 2, 50), run("precise", 1000, 2, 10, 60), run("precise", 1000, 3, 1, 55),
		// One P: 100 Hz misses a point in one repetition and its p99, 1 kHz within.
		run(preciseOneP, 100, 1, 1, 150), run(preciseOneP, 100, 2, 0, 120), run(preciseOneP, 100, 3, 0, 30),
		run(preciseOneP, 1000, 1, 0, 8), run(preciseOneP, 1000, 2, 4, 9), run(preciseOneP, 1000, 3, 0, 7),
		run("spin", 1000, 1, 0, 1),
	}}
	rows := map[string]string{}
	for _, line := range strings.Split(renderTargets(r), "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) == 3 {
			rows[strings.TrimPrefix(cells[0], "| ")] = strings.TrimSuffix(cells[2], " |")
		}
	}
	for target, want := range map[string]string{
		"start lag p99 ≤ 100 µs at 100 Hz (precise)":               "**met**",
		"no missed grid point at 100 Hz (precise)":                 "**met**",
		"start lag p99 ≤ 250 µs at 1 kHz (precise)":                "**met**",
		"< 0.1% missed at 1 kHz (precise)":                         "**missed**",
		"start lag p99 ≤ 100 µs at 100 Hz (precise, GOMAXPROCS 1)": "**missed**",
		"no missed grid point at 100 Hz (precise, GOMAXPROCS 1)":   "**missed**",
		"start lag p99 ≤ 250 µs at 1 kHz (precise, GOMAXPROCS 1)":  "**met**",
		"< 0.1% missed at 1 kHz (precise, GOMAXPROCS 1)":           "**met**",
	} {
		if got, ok := rows[target]; !ok {
			t.Errorf("no row %q in\n%s", target, renderTargets(r))
		} else if got != want {
			t.Errorf("%s: %s, want %s", target, got, want)
		}
	}
}

// TestHTTPTargets: the HTTP targets are judged on the daemon's default configuration, one row a
// timing that every kind of client must meet, naming the one that moved the lag most; the
// runs with the read limit lifted appear in the HTTP table but not among the targets.
func TestHTTPTargets(t *testing.T) {
	phase := func(p99 float64) loadPhase {
		return loadPhase{Lag: stats.Summary{P99: p99}, RPS: 1000, Requests: 3000}
	}
	run := func(timing string, unlimited bool, rep int, idle, load float64) httpResult {
		return httpResult{Timing: timing, Unlimited: unlimited, Rep: rep, IdleLag: stats.Summary{P99: idle},
			Load: phase(load), Niced: phase(load), LongPoll: phase(idle)}
	}
	var r results
	for rep := 1; rep <= 3; rep++ {
		r.HTTP = append(r.HTTP,
			run("coarse", false, rep, 150, 200+float64(rep)), // +51..+53 µs: within 100 µs
			run("precise", false, rep, 8, 120),               // +112 µs: over
			run("coarse", true, rep, 150, 5000),
			run("precise", true, rep, 8, 4000))
	}
	targets := targetCells(&r)
	for target, want := range map[string]string{
		// coarse: both kinds within 100 µs; the tight loop moved it most (+51..+53 µs).
		"HTTP clients move start-lag p99 ≤ max(10%, 100 µs) (coarse)": "tight loop: 150.0 → 202.0 µs, change 52.0 | **met**",
		// precise: the tight loop's +112 µs misses, although the long poll is within.
		"HTTP clients move start-lag p99 ≤ max(10%, 100 µs) (precise)": "tight loop: 8.00 → 120.0 µs, change 112.0 | **missed**",
	} {
		if got := targets[target]; got != want {
			t.Errorf("%s: %q, want %q", target, got, want)
		}
	}
	for target := range targets {
		if strings.Contains(target, "read_limit") {
			t.Errorf("runs without the read limit judged as targets: %s", target)
		}
	}
	if table := renderHTTP(&r); strings.Count(table, "read_limit.rate 0 |") != 6 {
		t.Errorf("HTTP table lacks the six rows of the runs without the read limit:\n%s", table)
	}
}

// TestMachineWake: the machine block reports the cost of waking an idle P's thread when
// it was measured (more than one P), and says nothing of it otherwise.
func TestMachineWake(t *testing.T) {
	r := &results{Machine: machine{NumCPU: 2, GOMAXPROCS: 2, WakeUs: 8.44, WakeEndUs: 0.51}, Wall: map[string]string{}}
	if got := renderMachine(r); !strings.Contains(got, "cycled's ticks: 8.4 µs at the run's start, 0.5 µs at its end\n") {
		t.Errorf("wake cost missing from the machine block:\n%s", got)
	}
	r.Machine.WakeEndUs = 0 // a run that did not finish
	if got := renderMachine(r); !strings.Contains(got, "cycled's ticks: 8.4 µs at the run's start\n") {
		t.Errorf("wake cost at the start missing from the machine block:\n%s", got)
	}
	r.Machine.GOMAXPROCS, r.Machine.WakeUs = 1, 0
	if got := renderMachine(r); strings.Contains(got, "waking") {
		t.Errorf("wake cost reported with one P:\n%s", got)
	}
}

// targetCells returns the targets table of r: for each target, its measured and verdict
// cells as "measured | verdict".
func targetCells(r *results) map[string]string {
	rows := map[string]string{}
	for _, line := range strings.Split(renderTargets(r), "\n") {
		if cells := strings.Split(line, " | "); len(cells) == 3 {
			rows[strings.TrimPrefix(cells[0], "| ")] = cells[1] + " | " + strings.TrimSuffix(cells[2], " |")
		}
	}
	return rows
}

// TestPeerRatioTargets: B and C are judged on the median of the per-repetition ratios,
// shown with a decimal, so that a ratio just under its bound does not read as the bound.
func TestPeerRatioTargets(t *testing.T) {
	sample := func(name string, rep int, mean float64) costSample {
		return costSample{Contender: name, N: 500, Rep: rep, MeanUs: mean}
	}
	var cost []costSample
	for rep, b := range []float64{1960, 2100, 1900} { // B ÷ cycled: 19.6, 21, 19
		cost = append(cost, sample(cEngine, rep+1, 100), sample(cFailsafe, rep+1, b), sample(cPython, rep+1, 100*b/10))
	}
	rows := targetCells(&results{Cost: cost})
	for target, want := range map[string]string{
		"≥ 20× cheaper than B at N=500":  "19.6× | **missed**",
		"≥ 200× cheaper than C at N=500": "196.0× | **missed**",
	} {
		if got := rows[target]; got != want {
			t.Errorf("%s: %q, want %q", target, got, want)
		}
	}
	cost[1].MeanUs = 2000 // B in repetition 1: the median ratio is now 20.0
	for _, line := range strings.Split(renderTargets(&results{Cost: cost}), "\n") {
		if strings.HasPrefix(line, "| ≥ 20× cheaper than B") && !strings.HasSuffix(line, "| 20.0× | **met** |") {
			t.Errorf("at the bound: %s", line)
		}
	}
}

// TestPreciseCostTargets: cycled with precise timing is judged against A and B on its own
// per-repetition ratios, in rows of its own, and the tick-cost section shows its ratios and
// what its CPU time is to the default's; without its samples, neither appears.
func TestPreciseCostTargets(t *testing.T) {
	var cost []costSample
	for rep := 1; rep <= 3; rep++ {
		for _, fail := range []bool{false, true} {
			add := func(name string, mean, cpu float64) {
				cost = append(cost, costSample{Contender: name, N: 500, Fail: fail, Rep: rep, MeanUs: mean, CPUUs: jfloat(cpu)})
			}
			add(cEngine, 110, 120)       // 0.275 × A: missed
			add(cEnginePrecise, 90, 150) // 0.225 × A: met
			add(cPlain, 400, 700)        //
			add(cFailsafe, 2000, 2100)   // B ÷ cycled 18.2, ÷ precise 22.2
		}
	}
	targets := renderTargets(&results{Cost: cost})
	for _, want := range []string{
		"| tick cost N=500 fail 10% ≤ 0.25 × A | 0.275 × A (110.0 vs 400.0 µs) | **missed** |",
		"| tick cost N=500 fail 10% ≤ 0.25 × A (precise) | 0.225 × A (90.0 vs 400.0 µs) | **met** |",
		"| ≥ 20× cheaper than B at N=500 | 18.2× | **missed** |",
		"| ≥ 20× cheaper than B at N=500 (precise) | 22.2× | **met** |",
	} {
		if !strings.Contains(targets, want+"\n") {
			t.Errorf("targets lack %s:\n%s", want, targets)
		}
	}
	if strings.Contains(targets, "alloc/module/tick, N=500 clean (precise)") {
		t.Errorf("allocations judged twice:\n%s", targets)
	}
	section := renderCost(&results{Cost: cost, Reps: 3})
	if want := "| 500 | fail 10% | 0.23× | 22× | — | 0.82× | 1.25× |\n"; !strings.Contains(section, want) {
		t.Errorf("precise ratio row %q missing:\n%s", want, section)
	}
	var plain []costSample
	for _, s := range cost {
		if s.Contender != cEnginePrecise {
			plain = append(plain, s)
		}
	}
	if got := renderTargets(&results{Cost: plain}); strings.Contains(got, "(precise)") {
		t.Errorf("precise targets without precise samples:\n%s", got)
	}
	if got := renderCost(&results{Cost: plain, Reps: 3}); strings.Contains(got, "Ratios with precise timing") {
		t.Errorf("precise ratios without precise samples:\n%s", got)
	}
	// States not measured get no table: neither an empty open-10% table nor the
	// comparison of steady states, which needs the open state.
	if got := renderCost(&results{Cost: plain, Reps: 3}); strings.Contains(got, "open 10%") || strings.Contains(got, "Steady states") {
		t.Errorf("tables of a state not measured:\n%s", got)
	}
}

// TestFloorRatios: the floor's table and the C target's row give C ÷ floor and the
// engines ÷ floor as medians of per-repetition ratios, and the verdict stays the engine's.
func TestFloorRatios(t *testing.T) {
	var r results
	r.Reps = 3
	for rep := 1; rep <= 3; rep++ {
		k := float64(rep) // every contender slower by the same factor in a repetition
		for name, us := range map[string]float64{cEngine: 60, cEnginePrecise: 50, cFloor: 40, cPython: 9000} {
			r.Cost = append(r.Cost, costSample{Contender: name, N: 500, Rep: rep, Ticks: 100, MeanUs: us * k})
		}
	}
	rows := targetCells(&r)
	for target, want := range map[string]string{
		"≥ 200× cheaper than C at N=500":           "150.0× (C ÷ floor 225.0×) | **missed**",
		"≥ 200× cheaper than C at N=500 (precise)": "180.0× (C ÷ floor 225.0×) | **missed**",
	} {
		if got := rows[target]; got != want {
			t.Errorf("%s: %q, want %q", target, got, want)
		}
	}
	table := renderCost(&r)
	if want := "| 500 | 80.0 | 160.0 | 1.50× | 1.25× | 225× |"; !strings.Contains(table, want) { // medians: the second repetition
		t.Errorf("no floor row %q in\n%s", want, table)
	}
}

// TestOpenTarget: the open-10% row judges cycled's tick in that state against its own
// clean tick, the median of the per-repetition ratios, bound included, for each timing
// measured; fail-10% samples stay out of it (and open-10% samples out of the fail-10%
// rows); the section compares each engine contender's open tick with its clean tick and
// shows how many modules the breakers refused.
func TestOpenTarget(t *testing.T) {
	var cost []costSample
	add := func(name string, n, rep int, m costMode, mean float64, refused int) {
		s := costSample{Contender: name, N: n, Rep: rep, MeanUs: mean, P50Us: 100, CPUUs: jfloat(mean * 1.5), Refused: refused}
		if name == cPython {
			s.CPUUs = jfloat(math.NaN())
		}
		m.mark(&s)
		cost = append(cost, s)
	}
	for rep, k := range []float64{1, 2, 1} { // repetition 2 twice as slow: only ratios inside a repetition hold
		add(cEngine, 500, rep+1, modeClean, 100*k, 0)
		add(cEngine, 500, rep+1, modeFail, 500*k, 0) // would miss the bound if taken for open
		add(cEngine, 500, rep+1, modeOpen, []float64{110, 120, 105}[rep]*k, 50)
		add(cEngine, 5000, rep+1, modeClean, 1000*k, 0)
		add(cEngine, 5000, rep+1, modeOpen, 1500*k, 500)
		add(cEnginePrecise, 500, rep+1, modeClean, 80*k, 0)
		add(cEnginePrecise, 500, rep+1, modeOpen, 96*k, 50)
		add(cEngineHistory, 500, rep+1, modeClean, 120*k, 0)
		add(cEngineHistory, 500, rep+1, modeOpen, 180*k, 50)
		add(cPlain, 500, rep+1, modeClean, 400*k, 0)
		add(cPlain, 500, rep+1, modeFail, 440*k, 0)
		add(cPlain, 500, rep+1, modeOpen, 360*k, 50-rep) // fewest refused: 48
		add(cPython, 500, rep+1, modeClean, 8000*k, 0)
	}
	rows := targetCells(&results{Cost: cost})
	for target, want := range map[string]string{
		// 1.10, 1.20, 1.05: median 1.10, at the bound.
		"tick cost N=500 open 10% ≤ 1.1 × clean":                "1.100 × clean (110.0 vs 100.0 µs) | **met**",
		"tick cost N=5000 open 10% ≤ 1.1 × clean":               "1.500 × clean (1500 vs 1000 µs) | **missed**",
		"tick cost N=500 open 10% ≤ 1.1 × clean (precise)":      "1.200 × clean (96.0 vs 80.0 µs) | **missed**",
		"tick cost N=500 fail 10% ≤ 0.25 × A":                   "1.14 × A (500.0 vs 440.0 µs) | **missed**",
		"≤ 1 alloc/module/tick at N=500 and 5000":               "at most 0 allocs/module (N=500 clean, 0 allocs/tick) | **met**",
		"tick cost N=500 clean ≤ 0.25 × A":                      "0.250 × A (100.0 vs 400.0 µs) | **met**",
		"tick cost N=5000 open 10% ≤ 1.1 × clean (precise)":     "",
		"tick cost N=500 open 10% ≤ 1.1 × clean (history 1000)": "1.500 × clean (180.0 vs 120.0 µs) | **missed**",
		"tick cost N=500 clean ≤ 0.25 × A (history 1000)":       "", // judged for the default history only
	} {
		if got := rows[target]; got != want {
			t.Errorf("%s: %q, want %q", target, got, want)
		}
	}
	section := renderCost(&results{Cost: cost, Reps: 3})
	for _, want := range []string{
		"| 500 | cycled | 110.0 | 1.10× | 1.00× | 1.10× | 50 of 50 |\n", // 110.0: the median of the open means
		"| 500 | cycled history 1000 | 180.0 | 1.50× | 1.00× | 1.50× | 50 of 50 |\n",
		"| 5000 | cycled | 1500 | 1.50× | 1.00× | 1.50× | 500 of 500 |\n",
		"| 500 | fail 10% | 1.14× | — | — |\n", // cycled ÷ A in the ratios table
	} {
		if !strings.Contains(section, want) {
			t.Errorf("tick-cost section lacks %q:\n%s", want, section)
		}
	}
	if strings.Contains(section, "| 500 | A plain Go | 360.0") || strings.Contains(section, "| 500 | open 10% |") {
		t.Errorf("the open state across contenders; it is cycled's own target, in its own table:\n%s", section)
	}
}

// TestAllocTarget: the allocation target is one row, judged on the most allocations a
// module of any size and state measured, which it names.
func TestAllocTarget(t *testing.T) {
	var cost []costSample
	for rep := 1; rep <= 3; rep++ {
		for _, n := range []int{500, 5000} {
			for _, m := range []costMode{modeClean, modeFail} {
				allocs := 34.0
				if m == modeFail {
					allocs = 38
				}
				if n == 500 && m == modeFail {
					allocs = 600 // 1.2 a module: over the bound
				}
				for _, name := range []string{cEngine, cPlain} {
					s := costSample{Contender: name, N: n, Rep: rep, MeanUs: 100, Allocs: jfloat(allocs)}
					m.mark(&s)
					cost = append(cost, s)
				}
			}
		}
	}
	rows := targetCells(&results{Cost: cost})
	if got, want := rows["≤ 1 alloc/module/tick at N=500 and 5000"], "at most 1.20 allocs/module (N=500 fail 10%, 600.0 allocs/tick) | **missed**"; got != want {
		t.Errorf("allocation target: %q, want %q", got, want)
	}
}
