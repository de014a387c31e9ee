package main

import (
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tools/bench/stats"
)

var sectionOrder = []string{"machine", "targets", "tickcost", "deadline", "period", "memory", "http"}

func med(xs []float64) float64 { return stats.Median(xs) }

// f formats a number with a precision that suits its size ("—" for NaN).
func f(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "—"
	case a == 0:
		return "0"
	case a < 1:
		return fmt.Sprintf("%.3f", v)
	case a < 10:
		return fmt.Sprintf("%.2f", v)
	case a < 1000:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

func ratio(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	if v >= 10 {
		return fmt.Sprintf("%.0f×", v)
	}
	return fmt.Sprintf("%.2f×", v)
}

func metStr(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

// costAgg is the aggregate of one contender for one case over the repetitions.
type costAgg struct {
	mean, p99, allocs, bytes, cpu float64
	reps, ticks                   int
	// ratio: the engine's mean over this contender's, median of per-repetition ratios.
	engineOver float64
}

func aggCost(all []costSample, name string, n int, m costMode) (costAgg, bool) {
	return aggCostOver(all, name, cEngine, n, m)
}

// aggCostOver is aggCost with the ratio taken to contender over instead of the engine.
func aggCostOver(all []costSample, name, over string, n int, m costMode) (costAgg, bool) {
	var means, p99s, allocs, bytes, cpus, ticks, ratios []float64
	byRep := map[int]costSample{}
	for _, s := range all {
		if s.N == n && modeOf(s) == m && s.Contender == over {
			byRep[s.Rep] = s
		}
	}
	for _, s := range all {
		if s.Contender != name || s.N != n || modeOf(s) != m {
			continue
		}
		means = append(means, s.MeanUs)
		p99s = append(p99s, s.P99Us)
		allocs = append(allocs, float64(s.Allocs))
		bytes = append(bytes, float64(s.Bytes))
		cpus = append(cpus, float64(s.CPUUs))
		ticks = append(ticks, float64(s.Ticks))
		if e, ok := byRep[s.Rep]; ok {
			ratios = append(ratios, e.MeanUs/s.MeanUs)
		}
	}
	if len(means) == 0 {
		return costAgg{}, false
	}
	return costAgg{mean: med(means), p99: med(p99s), allocs: med(allocs), bytes: med(bytes), cpu: med(cpus), reps: len(means),
		ticks: int(med(ticks)), engineOver: med(ratios)}, true
}

func costSizes(all []costSample) []int {
	var ns []int
	for _, s := range all {
		if !slices.Contains(ns, s.N) {
			ns = append(ns, s.N)
		}
	}
	slices.Sort(ns)
	return ns
}

func renderCost(r *results) string {
	var b strings.Builder
	var names []string
	for _, name := range []string{cEngine, cEnginePrecise, cEngineHistory, cFloor, cPlain, cFailsafe, cPython} {
		if hasContender(r.Cost, name) {
			names = append(names, name)
		}
	}
	b.WriteString("Step mode, ticks back to back: five tiers, N trivial modules, budget 1 s, one attempt, a history of 16 summaries for every contender. " +
		"`fail 10%`: every tenth module fails on every tick, taking the whole fault path. ")
	if hasMode(r.Cost, modeOpen) {
		fmt.Fprintf(&b, "`open 10%%`: the same modules fail from the first tick on, with breakers that open after %d failed ticks, so in steady state they are refused. ", openThreshold)
	}
	if hasContender(r.Cost, cEngineHistory) {
		fmt.Fprintf(&b, "`cycled history 1000`: the engine's default history, which keeps the newest %d summaries whole. ", faultsummary.KeepWhole)
	}
	fmt.Fprintf(&b, "Medians over %d repetitions; ratios per repetition.\n\n", r.Reps)
	b.WriteString("**Mean µs/tick** (— not measured)\n\n")
	b.WriteString(costPivot(r, names, peerModes, func(a costAgg) float64 { return a.mean }))
	b.WriteString("\n")
	b.WriteString("**Ratios** of the mean tick from N = 500 on (targets: cycled ÷ A ≤ 0.25; at N = 500, B ÷ cycled ≥ 20 and C ÷ cycled ≥ 200)\n\n")
	b.WriteString("| N | mode | cycled ÷ A | B ÷ cycled | C ÷ cycled |\n|---:|---|---:|---:|---:|\n")
	for _, n := range costSizes(r.Cost) {
		if n < 500 {
			continue // below the sizes the targets name; the mean table has them
		}
		for _, m := range peerModes {
			if !slices.ContainsFunc(r.Cost, func(s costSample) bool { return s.N == n && modeOf(s) == m }) {
				continue // a state not measured (an older run's results)
			}
			a, bb, c := peerRatios(r, cEngine, n, m)
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", n, m, a, bb, c)
		}
	}
	b.WriteString(preciseTable(r))
	if hasMode(r.Cost, modeOpen) {
		b.WriteString(modeTable(r))
	}
	if hasContender(r.Cost, cFloor) {
		b.WriteString(floorTable(r))
	}
	if hasContenderAt(r.Cost, cPython, 50000) {
		b.WriteString("\nC at N = 50 000 (about 3 s a tick) runs in the first repetition only, two measured ticks.\n")
	}
	return b.String()
}

// peerModes are the steady states compared across contenders; open 10% is cycled's own
// target against its clean tick (modeTable).
var peerModes = []costMode{modeClean, modeFail}

// costPivot is a table of one figure (pick) of the tick-cost samples: a row per size and
// steady state of modes measured, a column per contender in names.
func costPivot(r *results, names []string, modes []costMode, pick func(costAgg) float64) string {
	var b strings.Builder
	b.WriteString("| N | state | " + strings.Join(names, " | ") + " |\n|---:|---|" + strings.Repeat("---:|", len(names)) + "\n")
	for _, n := range costSizes(r.Cost) {
		for _, m := range modes {
			cells := make([]string, len(names))
			any := false
			for i, name := range names {
				cells[i] = "—"
				if a, ok := aggCost(r.Cost, name, n, m); ok {
					cells[i], any = f(pick(a)), true
				}
			}
			if any {
				fmt.Fprintf(&b, "| %d | %s | %s |\n", n, m, strings.Join(cells, " | "))
			}
		}
	}
	return b.String()
}

// openTarget is the bound on cycled's tick in the open-10% state, as a multiple of its
// clean tick: a module its breaker refuses must cost no more than one that runs.
const openTarget = 1.1

// modeRatio is one contender's tick in a steady state against its own clean tick.
type modeRatio struct {
	// ratio is the median of the per-repetition ratios of the means (mode ÷ clean), p50
	// that of the median ticks, and cpu that of the process's CPU time a tick (NaN where
	// not measured).
	ratio, p50, cpu float64
	mode, clean     costAgg
	// refused is the fewest modules refused by their breakers in a repetition's last tick.
	refused int
}

// modeOverClean compares contender name's tick in mode m with its clean tick at n modules,
// repetition by repetition; false if either was not measured.
func modeOverClean(all []costSample, name string, n int, m costMode) (modeRatio, bool) {
	var x modeRatio
	var ok1, ok2 bool
	if x.mode, ok1 = aggCost(all, name, n, m); !ok1 {
		return x, false
	}
	if x.clean, ok2 = aggCost(all, name, n, modeClean); !ok2 {
		return x, false
	}
	clean := map[int]costSample{}
	for _, s := range all {
		if s.Contender == name && s.N == n && modeOf(s) == modeClean {
			clean[s.Rep] = s
		}
	}
	var ratios, p50s, cpus []float64
	x.refused = n
	for _, s := range all {
		if s.Contender != name || s.N != n || modeOf(s) != m {
			continue
		}
		x.refused = min(x.refused, s.Refused)
		if c, ok := clean[s.Rep]; ok {
			ratios = append(ratios, s.MeanUs/c.MeanUs)
			p50s = append(p50s, s.P50Us/c.P50Us)
			cpus = append(cpus, float64(s.CPUUs/c.CPUUs))
		}
	}
	if len(ratios) == 0 {
		return x, false
	}
	x.ratio, x.p50, x.cpu = med(ratios), med(p50s), med(cpus)
	return x, true
}

// failingModules is the number of modules of n that fail in the failing states (every
// tenth: peers.TrivialSpec).
func failingModules(n int) int {
	k := 0
	for i := range n {
		if i%10 == 3 {
			k++
		}
	}
	return k
}

// modeTable is the tick-cost section's comparison of cycled's open-10% tick with its own
// clean tick, for each engine contender measured in that state at the sizes the target
// names.
func modeTable(r *results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n**Open breakers against clean** (cycled's tick in `open 10%%` ÷ its clean tick: mean, median tick and CPU time; target ≤ %.1f×; "+
		"refused: the fewest failing modules refused in a repetition's last tick)\n\n", openTarget)
	b.WriteString("| N | contender | open µs/tick | open ÷ clean | median tick | CPU | refused |\n|---:|---|---:|---:|---:|---:|---:|\n")
	for _, n := range preciseCostSizes {
		for _, name := range []string{cEngine, cEnginePrecise, cEngineHistory} {
			x, ok := modeOverClean(r.Cost, name, n, modeOpen)
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %d of %d |\n", n, name, f(x.mode.mean), ratio(x.ratio), ratio(x.p50), ratio(x.cpu), x.refused, failingModules(n))
		}
	}
	return b.String()
}

// preciseTable is the tick-cost section's ratios of cycled with precise timing, or
// nothing where it was not measured.
func preciseTable(r *results) string {
	if !hasContender(r.Cost, cEnginePrecise) {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n**Ratios with precise timing** (same targets)\n\n")
	b.WriteString("| N | mode | precise ÷ A | B ÷ precise | C ÷ precise | precise ÷ cycled | its CPU ÷ cycled's |\n|---:|---|---:|---:|---:|---:|---:|\n")
	for _, n := range costSizes(r.Cost) {
		for _, m := range peerModes {
			p, ok := aggCost(r.Cost, cEnginePrecise, n, m)
			if !ok {
				continue
			}
			a, bb, c := peerRatios(r, cEnginePrecise, n, m)
			e, _ := aggCost(r.Cost, cEngine, n, m)
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s |\n", n, m, a, bb, c, ratio(1/p.engineOver), ratio(p.cpu/e.cpu))
		}
	}
	return b.String()
}

// floorTable is the floor's section of the tick-cost tables: what the components alone
// cost a tick, and what that leaves of the ratio to C (clean ticks).
func floorTable(r *results) string {
	var b strings.Builder
	b.WriteString("\n**The floor** (clean): a successful module's work done by cycled's components in a bare loop on one goroutine (`tools/bench/floor`). " +
		"No engine built on them ticks faster on one core.\n\n")
	b.WriteString("| N | floor µs/tick | ns/module | cycled ÷ floor | precise ÷ floor | C ÷ floor |\n|---:|---:|---:|---:|---:|---:|\n")
	for _, n := range costSizes(r.Cost) {
		fl, ok := aggCostOver(r.Cost, cFloor, cFloor, n, modeClean)
		if !ok {
			continue
		}
		// this ÷ floor: aggCostOver's ratio is the floor's mean over this one's.
		over := func(name string) string {
			x, ok := aggCostOver(r.Cost, name, cFloor, n, modeClean)
			if !ok || math.IsNaN(x.engineOver) { // not measured, or in no repetition the floor was
				return "—"
			}
			return ratio(1 / x.engineOver)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", n, f(fl.mean), f(fl.mean*1000/float64(n)),
			over(cEngine), over(cEnginePrecise), over(cPython))
	}
	return b.String()
}

// deadAgg is the aggregate of one contender's deadline runs over the repetitions (the raw
// results keep the first wrong status and the hung module's concurrency).
type deadAgg struct {
	p50, p99, max      float64
	ticks, reps, wrong int
	hung               string  // the hung module's statuses in the first repetition
	overA              float64 // p99 ÷ A's p99, median of per-repetition ratios
}

func aggDeadline(all []deadlineSample, name string) (deadAgg, bool) {
	var p50, p99, mx, ratios []float64
	var a deadAgg
	aByRep := map[int]deadlineSample{}
	for _, s := range all {
		if s.Contender == cPlain {
			aByRep[s.Rep] = s
		}
	}
	for _, s := range all {
		if s.Contender != name {
			continue
		}
		p50, p99, mx = append(p50, s.P50Ms), append(p99, s.P99Ms), append(mx, s.MaxMs)
		a.ticks += s.Ticks
		a.reps++
		a.wrong += s.Wrong
		if a.hung == "" {
			a.hung = s.HungStatus
		}
		if x, ok := aByRep[s.Rep]; ok {
			ratios = append(ratios, s.P99Ms/x.P99Ms)
		}
	}
	if a.reps == 0 {
		return a, false
	}
	a.p50, a.p99, a.max, a.overA = med(p50), med(p99), med(mx), med(ratios)
	return a, true
}

func renderDeadline(r *results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "A tier of 50 modules, budget 50 ms, 2 attempts: 48 trivial, one blocking 500 ms **ignoring** its context, one honouring it; ticks %v apart. "+
		"Overshoot: the tier's time − 50 ms. A tick is wrong unless the hung module is `timed_out` or `busy` and the others as expected. Medians of %d repetitions.\n\n", deadlineGap, r.Reps)
	b.WriteString("| contender | ticks | overshoot p50 ms | p99 ms | max ms | p99 ÷ A's | wrong ticks | hung module (rep 1) |\n|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, name := range []string{cEngineCoarse, cEnginePrecise, cPlain, cFailsafe, cPython} {
		a, ok := aggDeadline(r.Deadline, name)
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %d | `%s` |\n", name, a.ticks, f(a.p50), f(a.p99), f(a.max), ratio(a.overA), a.wrong, a.hung)
	}
	if c, ok := aggDeadline(r.Deadline, cPython); ok && c.wrong > 0 {
		b.WriteString("\nC (10 ticks a repetition) waits for the cancelled attempt and reports the hung module's late value as `ok`: a correctness failure, not a speed figure.\n")
	}
	return b.String()
}

func aggPeriod(all []periodResult, cont string, hz int) (p50, p99, mx, missedMed, missedMax, expected, cpu float64, over, reps int, ok bool) {
	var a, c, d, m, e, u []float64
	for _, r := range all {
		if r.Contender == cont && r.Hz == hz {
			a, c, d = append(a, r.Lag.P50), append(c, r.Lag.P99), append(d, r.Lag.Max)
			m, e, u = append(m, float64(r.Missed)), append(e, float64(r.Expected)), append(u, r.CPUPct)
			over += r.Overruns
			reps++
		}
	}
	if reps == 0 {
		return
	}
	return med(a), med(c), med(d), med(m), stats.Max(m), med(e), med(u), over, reps, true
}

func renderPeriod(r *results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "500 trivial modules for 5 s, each configuration in its own process; lag: start − grid point. "+
		"`A ticker`: peer A on a `time.Ticker`; `machine floor`: a goroutine spinning on the clock, delayed only by what no scheduler avoids. "+
		"CPU: process CPU ÷ wall time. Medians of %d repetitions.\n\n", r.Reps)
	b.WriteString("| contender | rate | lag p50 µs | p99 µs | missed (median / worst) | CPU |\n|---|---:|---:|---:|---:|---:|\n")
	label := map[string]string{"coarse": "cycled coarse", "precise": "cycled precise", preciseOneP: "cycled precise, GOMAXPROCS 1",
		"ticker": "A ticker", "spin": "machine floor"}
	for _, hz := range []int{100, 1000} {
		for _, c := range []string{"coarse", "precise", preciseOneP, "ticker", "spin"} {
			p50, p99, _, mm, mmax, _, cpu, _, _, ok := aggPeriod(r.Period, c, hz)
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %s | %d Hz | %s | %s | %s / %s | %.0f%% |\n", label[c], hz, f(p50), f(p99), f(mm), f(mmax), cpu)
		}
	}
	return b.String()
}

func renderMemory(r *results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Each row is its own process: heap after two GCs and RSS, per registered module. cycled keeps 1000 summaries (the newest %d whole, older ones compacted), "+
		"A and B a ring of 16; `+ per summary`: one more summary's cost; `history full`: measured, or extrapolated from it.\n\n", faultsummary.KeepWhole)
	b.WriteString("| contender | modules | heap B/module | RSS B/module | + per summary B/module | history full: heap B/module | goroutines |\n|---|---:|---:|---:|---:|---:|---:|\n")
	label := map[string]string{"engine": "cycled", "plain": "A plain Go", "failsafe": "B failsafe-go"}
	for _, m := range r.Memory {
		full := f(m.FullHeapPerMod) + " (extrapolated)"
		if m.FullMeasured {
			full = f(m.FullHeapPerMod) + " (measured)"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %d |\n", label[m.Contender], m.N, f(m.HeapPerMod), f(m.RSSPerMod), f(m.SlopePerMod), full, m.Goroutines)
	}
	return b.String()
}

// httpAgg aggregates one timing and one client priority over the repetitions.
type httpAgg struct {
	rps, p50, p99, body, idle, load, deltaUs, deltaPct float64
	missed, errs, reps                                 int
}

// clientNames names the kinds of client of the HTTP table, in the order of aggHTTP's
// phases: tight loop, tight loop under nice, long poll.
var clientNames = [...]string{"tight loop", "tight loop, nice 19", "long-polling"}

func aggHTTP(all []httpResult, m httpMode, client int) (httpAgg, bool) {
	var a httpAgg
	var rps, p50, p99, body, idle, load, dUs, dPct []float64
	for _, r := range all {
		if r.Timing != m.timing || r.Unlimited != m.unlimited {
			continue
		}
		ph := [...]loadPhase{r.Load, r.Niced, r.LongPoll}[client]
		rps, p50, p99, body = append(rps, ph.RPS), append(p50, ph.Latency.P50), append(p99, ph.Latency.P99), append(body, ph.BodyBytes)
		idle, load = append(idle, r.IdleLag.P99), append(load, ph.Lag.P99)
		dUs = append(dUs, ph.Lag.P99-r.IdleLag.P99)
		dPct = append(dPct, 100*(ph.Lag.P99-r.IdleLag.P99)/r.IdleLag.P99)
		a.missed += ph.Missed
		a.errs += ph.Errors
		a.reps++
	}
	if a.reps == 0 {
		return a, false
	}
	a.rps, a.p50, a.p99, a.body, a.idle, a.load, a.deltaUs, a.deltaPct = med(rps), med(p50), med(p99), med(body), med(idle), med(load), med(dUs), med(dPct)
	return a, true
}

func renderHTTP(r *results) string {
	var b strings.Builder
	errs := 0
	for _, h := range r.HTTP {
		errs += h.Load.Errors + h.Niced.Errors + h.LongPoll.Errors
	}
	fmt.Fprintf(&b, "The daemon at 100 Hz (50 builtin modules) while 64 keep-alive clients in another process read `GET /ticks/latest` for 3 s: in a tight loop, "+
		"then under `nice -n 19` (like a client on another machine), then long-polling. The change is against the idle 3 s before. "+
		"Rows `read_limit.rate 0` lift the default `http.read_limit`. Medians of %d repetitions; %d failed requests.\n\n", r.Reps, errs)
	b.WriteString("| timing | clients | req/s | lag p99 µs, idle → load | change µs | missed |\n|---|---|---:|---:|---:|---:|\n")
	for _, m := range httpModes {
		for client := range clientNames {
			a, ok := aggHTTP(r.HTTP, m, client)
			if !ok || a.rps == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %s → %s | %s | %d |\n", m.label(), clientNames[client], a.rps, f(a.idle), f(a.load), f(a.deltaUs), a.missed)
		}
	}
	return b.String()
}

// tickCostTargets adds the tick-cost section's targets to a targets table through row: for
// the default timing, then for precise timing where it was measured; then the open-10%
// rows, also for the default history.
func tickCostTargets(r *results, row func(target, measured string, ok bool)) {
	for _, c := range []struct{ name, suffix string }{{cEngine, ""}, {cEnginePrecise, " (precise)"}} {
		if hasContender(r.Cost, c.name) {
			costTargets(r, c.name, c.suffix, row)
		}
	}
	for _, c := range []struct{ name, suffix string }{{cEngine, ""}, {cEnginePrecise, " (precise)"}, {cEngineHistory, " (history 1000)"}} {
		openTargets(r, c.name, c.suffix, row)
	}
}

// deadlineTargets adds the deadline section's targets to a targets table through row.
func deadlineTargets(r *results, row func(target, measured string, ok bool)) {
	if p, ok := aggDeadline(r.Deadline, cEnginePrecise); ok {
		row("deadline overshoot p99 ≤ 0.25 ms (precise)", fmt.Sprintf("%s ms", f(p.p99)), p.p99 <= 0.25)
	}
	if c, ok := aggDeadline(r.Deadline, cEngineCoarse); ok {
		a, _ := aggDeadline(r.Deadline, cPlain)
		row("deadline overshoot p99 (coarse) ≤ A's", fmt.Sprintf("%s ms vs A %s ms (%s × A)", f(c.p99), f(a.p99), f(c.overA)), c.overA <= 1)
	}
	for _, name := range []string{cEngineCoarse, cEnginePrecise} {
		if c, ok := aggDeadline(r.Deadline, name); ok {
			row("every status right ("+name+")", fmt.Sprintf("%d of %d ticks wrong", c.wrong, c.ticks), c.wrong == 0)
		}
	}
}

// openTargets adds the open-10% rows of engine contender name (suffix: how its rows are
// told apart) to a targets table through row: its tick against its own clean tick.
func openTargets(r *results, name, suffix string, row func(target, measured string, ok bool)) {
	for _, n := range []int{5000, 500} {
		if x, ok := modeOverClean(r.Cost, name, n, modeOpen); ok {
			row(fmt.Sprintf("tick cost N=%d open 10%% ≤ %.1f × clean%s", n, openTarget, suffix),
				fmt.Sprintf("%.3f × clean (%s vs %s µs)", x.ratio, f(x.mode.mean), f(x.clean.mean)),
				x.ratio <= openTarget)
		}
	}
}

// costTargets adds the tick-cost targets of engine contender name (suffix: how its rows
// are told apart) to a targets table through row.
func costTargets(r *results, name, suffix string, row func(target, measured string, ok bool)) {
	worst, worstAt := -1.0, "" // allocations a module, the most of any size and state
	for _, n := range []int{5000, 500} {
		for _, m := range []costMode{modeClean, modeFail} {
			mode := m.String()
			a, ok := aggCostOver(r.Cost, cPlain, name, n, m)
			e, ok2 := aggCost(r.Cost, name, n, m)
			if !ok || !ok2 {
				continue
			}
			row(fmt.Sprintf("tick cost N=%d %s ≤ 0.25 × A%s", n, mode, suffix),
				fmt.Sprintf("%s × A (%s vs %s µs)", f(a.engineOver), f(e.mean), f(a.mean)), a.engineOver <= 0.25)
			if per := e.allocs / float64(n); per > worst {
				worst, worstAt = per, fmt.Sprintf("N=%d %s, %s allocs/tick", n, mode, f(e.allocs))
			}
		}
	}
	if name == cEngine && worst >= 0 {
		row("≤ 1 alloc/module/tick at N=500 and 5000", fmt.Sprintf("at most %s allocs/module (%s)", f(worst), worstAt), worst <= 1)
	}
	if a, ok := aggCostOver(r.Cost, cFailsafe, name, 500, modeClean); ok {
		// One decimal: a ratio judged against a bound must not round onto it (19.6 read "20×, missed").
		row("≥ 20× cheaper than B at N=500"+suffix, fmt.Sprintf("%.1f×", 1/a.engineOver), 1/a.engineOver >= 20)
	}
	if a, ok := aggCostOver(r.Cost, cPython, name, 500, modeClean); ok {
		m := fmt.Sprintf("%.1f×", 1/a.engineOver)
		if fl, ok := aggCostOver(r.Cost, cPython, cFloor, 500, modeClean); ok && !math.IsNaN(fl.engineOver) {
			m += fmt.Sprintf(" (C ÷ floor %.1f×)", 1/fl.engineOver)
		}
		row("≥ 200× cheaper than C at N=500"+suffix, m, 1/a.engineOver >= 200)
	}
}

func renderTargets(r *results) string {
	var b strings.Builder
	b.WriteString("| target | measured | verdict |\n|---|---|---|\n")
	row := func(target, measured string, ok bool) {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", target, measured, metStr(ok))
	}
	tickCostTargets(r, row)
	deadlineTargets(r, row)
	// The period targets, for precise timing as configured by default and in a process
	// limited to one P.
	for _, pc := range []struct{ cont, mode string }{{"precise", "precise"}, {preciseOneP, "precise, GOMAXPROCS 1"}} {
		if _, p99, _, _, _, _, _, _, _, ok := aggPeriod(r.Period, pc.cont, 100); ok {
			row("start lag p99 ≤ 100 µs at 100 Hz ("+pc.mode+")", f(p99)+" µs", p99 <= 100)
		}
		if _, p99, _, _, _, _, _, _, _, ok := aggPeriod(r.Period, pc.cont, 1000); ok {
			row("start lag p99 ≤ 250 µs at 1 kHz ("+pc.mode+")", f(p99)+" µs", p99 <= 250)
		}
		if _, _, _, _, mmax, _, _, _, _, ok := aggPeriod(r.Period, pc.cont, 100); ok {
			row("no missed grid point at 100 Hz ("+pc.mode+")", fmt.Sprintf("worst repetition: %s missed", f(mmax)), mmax == 0)
		}
		if _, _, _, mm, mmax, exp, _, _, _, ok := aggPeriod(r.Period, pc.cont, 1000); ok {
			floor := ""
			if _, _, _, fm, fmax, fexp, _, _, _, ok := aggPeriod(r.Period, "spin", 1000); ok {
				floor = fmt.Sprintf("; machine floor %.3f%%, worst %.3f%%", 100*fm/fexp, 100*fmax/fexp)
			}
			row("< 0.1% missed at 1 kHz ("+pc.mode+")", fmt.Sprintf("%.3f%% (median), worst %.3f%%%s", 100*mm/exp, 100*mmax/exp, floor), 100*mmax/exp < 0.1)
		}
	}
	for _, m := range r.Memory {
		if m.Contender == "engine" && m.N == 100000 {
			how := "extrapolated"
			if m.FullMeasured {
				how = "measured"
			}
			row("≤ 2 KiB heap per registered module at 100 000 (history of 1000)", fmt.Sprintf("%s B/module (%s)", f(m.FullHeapPerMod), how), m.FullHeapPerMod <= 2048)
		}
	}
	for _, m := range httpModes {
		if m.unlimited {
			continue // not the daemon's configuration: shown in the HTTP table only
		}
		// One row a timing, judged on every kind of client and showing the one that moved
		// the start lag most.
		worst, at, all := httpAgg{}, -1, true
		for client := range clientNames {
			a, ok := aggHTTP(r.HTTP, m, client)
			if !ok || a.rps == 0 {
				continue
			}
			all = all && a.deltaUs <= math.Max(0.10*a.idle, 100)
			if at < 0 || a.deltaUs > worst.deltaUs {
				worst, at = a, client
			}
		}
		if at >= 0 {
			row(fmt.Sprintf("HTTP clients move start-lag p99 ≤ max(10%%, 100 µs) (%s)", m.label()),
				fmt.Sprintf("%s: %s → %s µs, change %s", clientNames[at], f(worst.idle), f(worst.load), f(worst.deltaUs)), all)
		}
	}
	return b.String()
}

func renderMachine(r *results) string {
	m := r.Machine
	var b strings.Builder
	fmt.Fprintf(&b, "- %s, commit %s: %d CPUs (GOMAXPROCS %d), %s, Linux %s; Go %s, Python %s, failsafe-go v0.9.8\n",
		m.Date, m.Commit, m.NumCPU, m.GOMAXPROCS, m.CPU, m.Kernel, m.Go, m.Python)
	if m.WakeUs > 0 {
		end := ""
		if m.WakeEndUs > 0 {
			end = fmt.Sprintf(", %.1f µs at its end", m.WakeEndUs)
		}
		fmt.Fprintf(&b, "- waking a parked goroutine, the hand-off that ends each of cycled's ticks: %.1f µs at the run's start%s\n", m.WakeUs, end)
	}
	var parts []string
	for _, s := range sectionOrder {
		if w, ok := r.Wall[s]; ok {
			parts = append(parts, s+" "+w)
		}
	}
	fmt.Fprintf(&b, "- `make bench-compare`, %d repetitions%s: %s (%s)\n", r.Reps, map[bool]string{true: ", -quick: development numbers", false: ""}[r.Quick],
		r.Wall["total"], strings.Join(parts, ", "))
	var busy []string
	for _, s := range sectionOrder {
		if v, ok := r.Foreign[s]; ok {
			busy = append(busy, fmt.Sprintf("%s %.0f%% (load %s)", s, v, r.Load[s]))
		}
	}
	if len(busy) > 0 {
		fmt.Fprintf(&b, "- CPU taken by other processes: %s\n", strings.Join(busy, ", "))
	}
	return b.String()
}

// render returns the markdown of each section that ran.
func render(r *results, ran map[string]bool) map[string]string {
	out := map[string]string{"machine": renderMachine(r), "targets": renderTargets(r)}
	if ran["tickcost"] {
		out["tickcost"] = renderCost(r)
	}
	if ran["deadline"] {
		out["deadline"] = renderDeadline(r)
	}
	if ran["period"] {
		out["period"] = renderPeriod(r)
	}
	if ran["memory"] {
		out["memory"] = renderMemory(r)
	}
	if ran["http"] {
		out["http"] = renderHTTP(r)
	}
	// A partial run does not judge the targets of the sections it did not run.
	if len(ran) < 5 {
		out["targets"] = "_(targets are judged by a full run; this partial run measured: " + strings.Join(slices.Sorted(maps.Keys(ran)), ", ") + ")_\n\n" + out["targets"]
	}
	return out
}

func markers(s string) (string, string) {
	return "<!-- BEGIN generated:" + s + " -->", "<!-- END generated:" + s + " -->"
}

// updateMarkdown replaces the generated block of each rendered section in path; sections
// without markers are appended under a heading.
func updateMarkdown(path string, rep map[string]string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	doc := string(old)
	if doc == "" {
		doc = "# Benchmarks\n"
	}
	for _, s := range sectionOrder {
		body, ok := rep[s]
		if !ok {
			continue
		}
		begin, end := markers(s)
		block := begin + "\n" + strings.TrimRight(body, "\n") + "\n" + end
		i := strings.Index(doc, begin)
		j := strings.Index(doc, end)
		if i >= 0 && j > i {
			doc = doc[:i] + block + doc[j+len(end):]
		} else {
			doc = strings.TrimRight(doc, "\n") + "\n\n## " + s + "\n\n" + block + "\n"
		}
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// hasContender reports whether any sample is of contender name.
func hasContender(all []costSample, name string) bool {
	return slices.ContainsFunc(all, func(s costSample) bool { return s.Contender == name })
}

// peerRatios returns the cells of a ratio row for engine contender eng: eng ÷ A, B ÷ eng and
// C ÷ eng, medians of the per-repetition ratios ("—" where a peer was not measured).
func peerRatios(r *results, eng string, n int, m costMode) (a, b, c string) {
	cell := func(name string, invert bool) string {
		x, ok := aggCostOver(r.Cost, name, eng, n, m)
		if !ok {
			return "—"
		}
		if invert {
			return ratio(1 / x.engineOver)
		}
		return ratio(x.engineOver)
	}
	return cell(cPlain, false), cell(cFailsafe, true), cell(cPython, true)
}

// hasMode reports whether any sample was measured in steady state m.
func hasMode(all []costSample, m costMode) bool {
	return slices.ContainsFunc(all, func(s costSample) bool { return modeOf(s) == m })
}

// hasContenderAt reports whether contender name was measured at n modules.
func hasContenderAt(all []costSample, name string, n int) bool {
	return slices.ContainsFunc(all, func(s costSample) bool { return s.Contender == name && s.N == n })
}
