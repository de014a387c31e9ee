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
	names := []string{cEngine, cEnginePrecise, cEngineHistory, cFloor, cPlain, cFailsafe, cPython}
	fmt.Fprintf(&b, "Five tiers, N trivial modules spread over them, tier budget 1 s, one attempt, breakers that never open (but in `open 10%%`), history of 16 summaries (A and B: the same ring). "+
		"`fail 10%%`: every tenth module fails transiently on every tick (none in the safety tier), after warm-up ticks that stored a last-known-good value, so each failure "+
		"takes the whole fault path: classification, breaker failure, stale last-good fallback, degraded key. "+
		"`open 10%%`: the same tenth of the modules fails on every call from the first tick on (it never had a value), with breakers that open after %d failed ticks "+
		"(cooldown 30 s); the warm-up (at least %d ticks) opens them, so in steady state the breaker refuses every failing module each tick and nothing is served for it. "+
		"`cycled history 1000` (N = %s) is `cycled` with the engine's default history of 1000 summaries instead of 16, after a warm-up of at least 1000 ticks: past the newest %d summaries "+
		"the history keeps only the lines that are not plain successes, so a failing or refused module's line lives on in it. The three states of a size run one after another, in an order rotated per repetition. Mean and p99 of back-to-back ticks in steady state (Go contenders: after a warm-up of at least 5 ticks and 0.25 s; C: 4 ticks, 1 from N = 5000 on); allocations and bytes from "+
		"`runtime.MemStats` around the measured ticks (the whole process); CPU µs/tick: the process's CPU time over the measured ticks (`getrusage`, all threads; C: not measured), "+
		"what a contender's use of the second core costs. `cycled` runs with the default timing (`coarse`); `cycled precise` (N = %s) with `timing: precise`, whose hand-offs between engine and runners spin "+
		"instead of waking a sleeping thread (docs/operations.md, timing modes). `floor` (clean, N = %s) is not a contender but a bound: cycled's own components doing a successful module's work "+
		"in a bare loop on one goroutine, without an engine (`tools/bench/floor`; below, \"The floor\"). Medians over %d repetitions; the ratio column is the median of the per-repetition ratios of the means.\n\n",
		openThreshold, openThreshold+1, joinInts(preciseCostSizes, ", "), faultsummary.KeepWhole, joinInts(preciseCostSizes, ", "), joinInts(preciseCostSizes, ", "), r.Reps)
	for _, m := range costModes {
		fmt.Fprintf(&b, "**%s**\n\n", m)
		b.WriteString("| N | contender | mean µs/tick | p99 µs/tick | CPU µs/tick | ns/module | allocs/tick | allocs/module | B/tick | reps × ticks | cycled ÷ this |\n")
		b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, n := range costSizes(r.Cost) {
			for _, name := range names {
				a, ok := aggCost(r.Cost, name, n, m)
				if !ok {
					continue
				}
				rc := ratio(a.engineOver)
				if name == cEngine {
					rc = ""
				}
				fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %d × %d | %s |\n", n, name, f(a.mean), f(a.p99), f(a.cpu),
					f(a.mean*1000/float64(n)), f(a.allocs), f(a.allocs/float64(n)), f(a.bytes), a.reps, a.ticks, rc)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("**Ratios** (median of per-repetition ratios of mean tick cost)\n\n")
	b.WriteString("| N | mode | cycled ÷ A (target ≤ 0.25) | B ÷ cycled (target ≥ 20 at 500) | C ÷ cycled (target ≥ 200 at 500) |\n|---:|---|---:|---:|---:|\n")
	for _, n := range costSizes(r.Cost) {
		for _, m := range costModes {
			if !slices.ContainsFunc(r.Cost, func(s costSample) bool { return s.N == n && modeOf(s) == m }) {
				continue // a state not measured (an older run's results)
			}
			a, bb, c := peerRatios(r, cEngine, n, m)
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", n, m, a, bb, c)
		}
	}
	b.WriteString(preciseTable(r))
	b.WriteString(modeTable(r))
	if hasContender(r.Cost, cFloor) {
		b.WriteString(floorTable(r))
	}
	b.WriteString("\nC at N = 50 000 takes about 3 s per tick: it runs in the first repetition only, one warm-up tick and two measured ticks. " +
		"At N = 50 000 the Go contenders measure at least 3 ticks within 1.2 s. C's allocations are not comparable and not measured (—).\n")
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

// modeTable is the tick-cost section's comparison of each contender's failing states with
// its own clean tick; "n/a" where a contender was measured clean but not in that state.
func modeTable(r *results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n**Steady states against clean** (each contender's mean tick ÷ its own clean tick at the same N, median of the per-repetition ratios; "+
		"target for cycled in `open 10%%`: ≤ %.1f× at N = %s; median tick and CPU: the same for the median tick and for the process's CPU time a tick, less moved by other processes on a shared machine; refused: the fewest modules whose breaker refused them in a repetition's last tick, of the failing ones)\n\n",
		openTarget, joinInts(preciseCostSizes, " and "))
	b.WriteString("| N | contender | fail 10% ÷ clean | open 10% ÷ clean | open 10% ÷ clean, median tick | open 10% ÷ clean, CPU | refused in open 10% |\n|---:|---|---:|---:|---:|---:|---:|\n")
	for _, n := range costSizes(r.Cost) {
		for _, name := range []string{cEngine, cEnginePrecise, cEngineHistory, cPlain, cFailsafe, cPython} {
			if _, ok := aggCost(r.Cost, name, n, modeClean); !ok {
				continue
			}
			cell := func(m costMode, pick func(modeRatio) float64) string {
				if x, ok := modeOverClean(r.Cost, name, n, m); ok {
					return ratio(pick(x))
				}
				return "n/a"
			}
			mean := func(x modeRatio) float64 { return x.ratio }
			refused := "n/a"
			if x, ok := modeOverClean(r.Cost, name, n, modeOpen); ok {
				refused = fmt.Sprintf("%d of %d", x.refused, failingModules(n))
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s |\n", n, name, cell(modeFail, mean), cell(modeOpen, mean),
				cell(modeOpen, func(x modeRatio) float64 { return x.p50 }), cell(modeOpen, func(x modeRatio) float64 { return x.cpu }), refused)
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
	b.WriteString("\n**Ratios with precise timing** (`cycled precise` in place of `cycled`)\n\n")
	b.WriteString("| N | mode | cycled precise ÷ A (target ≤ 0.25) | B ÷ cycled precise (target ≥ 20 at 500) | C ÷ cycled precise (target ≥ 200 at 500) | cycled precise ÷ cycled | its CPU ÷ cycled's |\n|---:|---|---:|---:|---:|---:|---:|\n")
	for _, n := range costSizes(r.Cost) {
		for _, m := range costModes {
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
	b.WriteString("\n**The floor** (clean): the per-module work of a successful run, done by cycled's components in a bare loop on one goroutine, with no tiers, deadlines, " +
		"hand-offs, admission checks, settling or summary (`tools/bench/floor`, `peers.Floor`). An engine built on these components does at least this work; " +
		"on one core its tick takes at least this long, so C ÷ floor is the most it could reach against C in this run without sharing the modules out between cores.\n\n")
	b.WriteString("| N | floor µs/tick | ns/module | cycled ÷ floor | cycled precise ÷ floor | C ÷ floor (target for cycled ≥ 200 at 500) |\n|---:|---:|---:|---:|---:|---:|\n")
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

type deadAgg struct {
	p50, p99, max, worst float64
	ticks, reps, wrong   int
	what, hung           string
	hungMax              int64
	overA                float64 // p99 ÷ A's p99, median of per-repetition ratios
}

func aggDeadline(all []deadlineSample, name string) (deadAgg, bool) {
	var p50, p99, mx, ratios []float64
	a := deadAgg{worst: math.Inf(-1)}
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
		a.worst = math.Max(a.worst, s.MaxMs)
		a.ticks += s.Ticks
		a.reps++
		a.wrong += s.Wrong
		if a.what == "" {
			a.what = s.WrongWhat
		}
		a.hungMax = max(a.hungMax, s.HungMax)
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
	fmt.Fprintf(&b, "A safety tier (one trivial module), then a tier of 50 modules with a 50 ms budget (2 attempts, backoff 10 ms ×2 ± 20%%): 48 trivial, "+
		"one blocking 500 ms **ignoring** its context, one blocking 500 ms honouring it. Breakers never open, so the hung module is started again as soon as it has returned. "+
		"Ticks run %v apart (as a scheduler leaves the rest of its period). Overshoot = the tier's elapsed time − 50 ms, as each contender measures its tier. "+
		"A tick's statuses are right when the 49 trivial modules are `ok`, the honouring module `failed` or `timed_out`, the hung one `timed_out` or `busy`, "+
		"and the tier `degraded` with its budget exhausted. Medians over %d repetitions.\n\n", deadlineGap, r.Reps)
	b.WriteString("| contender | ticks (total) | overshoot p50 ms | p99 ms | max ms | worst max ms | p99 ÷ A's | ticks with a wrong status | first wrong status | hung module statuses (rep 1) | max concurrent runs of the hung module |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|\n")
	for _, name := range []string{cEngineCoarse, cEnginePrecise, cPlain, cFailsafe, cPython} {
		a, ok := aggDeadline(r.Deadline, name)
		if !ok {
			continue
		}
		what := a.what
		if what == "" {
			what = "—"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %d | %s | `%s` | %d |\n", name, a.ticks, f(a.p50), f(a.p99), f(a.max), f(a.worst),
			ratio(a.overA), a.wrong, what, a.hung, a.hungMax)
	}
	b.WriteString("\nC runs 10 ticks per repetition (each takes about 0.5 s: `wait_for` waits for the cancelled attempt to finish and `gather` for every task). " +
		"Its hung module is reported `ok`: its late value is returned as a success after the tier overran its budget by 450 ms — a correctness failure, not a speed figure.\n")
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
	fmt.Fprintf(&b, "The scheduler ticking N = 500 trivial modules over five tiers (history 1000) for 5 s after a 0.5 s warm-up, each run in its own process. "+
		"Start lag = actual start − grid point, from each summary's `scheduled_at` and `started_at`; missed = grid points skipped (overrun policy `skip`). "+
		"`cycled precise, GOMAXPROCS 1`: the same in a process limited to one P (`GOMAXPROCS=1` in its environment). "+
		"`A ticker`: peer A's tick driven by a `time.Ticker` (lag = receive time − the ticker's scheduled time; one repetition, for context, as is cycled coarse at 1 kHz). "+
		"`machine floor`: a goroutine with no work that never sleeps or yields, reading the clock until each grid point (a point is missed when it sees it a period or more late): "+
		"what delays it is other processes or the virtual machine taking its vCPU, or the Go runtime preempting it, which no scheduler in the process can avoid. "+
		"CPU = process CPU time ÷ wall time (100%% = one core). Medians over %d repetitions.\n\n", r.Reps)
	b.WriteString("| contender | rate | lag p50 µs | lag p99 µs | lag max µs | missed (median / worst rep) | of grid points | overruns (total) | CPU |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	label := map[string]string{"coarse": "cycled coarse", "precise": "cycled precise", preciseOneP: "cycled precise, GOMAXPROCS 1",
		"ticker": "A ticker", "spin": "machine floor (spin, no work)"}
	for _, hz := range []int{100, 1000} {
		for _, c := range []string{"coarse", "precise", preciseOneP, "ticker", "spin"} {
			p50, p99, mx, mm, mmax, exp, cpu, over, _, ok := aggPeriod(r.Period, c, hz)
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %s | %d Hz | %s | %s | %s | %s / %s | %s | %d | %.0f%% |\n", label[c], hz, f(p50), f(p99), f(mx), f(mm), f(mmax), f(exp), over, cpu)
		}
	}
	return b.String()
}

func renderMemory(r *results) string {
	var b strings.Builder
	b.WriteString("Each row is its own process: heap (`HeapAlloc` after two forced GCs) and RSS (`VmRSS` after `debug.FreeOSMemory`) minus the process's own before anything " +
		"was built, divided by the registered modules (the modules' own objects — names, funcs — included). cycled runs with its default history of 1000 summaries; " +
		fmt.Sprintf("its history keeps the newest `KeepWhole` summaries whole (at most %d, and at most %d module lines in all) and compacts older ones to their non-plain lines, ",
			faultsummary.KeepWhole, faultsummary.WholeLines) +
		"so it is measured past that window: `+ per summary` is the heap one more (compacted) summary costs. `history full` is measured by ticking until the history " +
		"holds 1000 summaries where marked; at 100 000 modules a tick takes about 0.1 s (1000 ticks would take minutes), so it is the last point plus the remaining " +
		"summaries × the per-summary slope. Peers A and B keep whole summaries in a ring of 16 (every whole summary costs them about 140 B per module).\n\n")
	b.WriteString("| contender | modules | summaries held | heap B/module | RSS B/module | + per summary B/module | history | history full: heap B/module | history full: RSS B/module | goroutines |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	label := map[string]string{"engine": "cycled", "plain": "A plain Go", "failsafe": "B failsafe-go"}
	for _, m := range r.Memory {
		full := f(m.FullHeapPerMod) + " (extrapolated)"
		rss := "—"
		if m.FullMeasured {
			full = f(m.FullHeapPerMod) + " (measured)"
			rss = f(m.FullRSSPerMod)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %d | %s | %s | %d |\n", label[m.Contender], m.N, m.Points[0].Summaries, f(m.HeapPerMod), f(m.RSSPerMod),
			f(m.SlopePerMod), m.History, full, rss, m.Goroutines)
	}
	return b.String()
}

// httpAgg aggregates one timing and one client priority over the repetitions.
type httpAgg struct {
	rps, p50, p99, body, idle, load, deltaUs, deltaPct float64
	missed, errs, reps                                 int
}

// Client kinds of the HTTP table.
const (
	clientNormal = iota
	clientNiced
	clientLongPoll
)

var clientNames = [...]string{"64 tight-loop, normal priority", "64 tight-loop, nice 19", "64 long-polling"}

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
	fmt.Fprintf(&b, "The daemon binary (built from `cmd/cycled`) in its own process, ticking at 100 Hz: five seed tiers, 50 trivial builtin modules, history 1000. "+
		"A load generator in another process keeps 64 keep-alive connections in a tight loop of `GET /ticks/latest` (full body, no ETag) for 3 s, "+
		"first at normal priority (it competes with the daemon for the same 2 cores), then under `nice -n 19` (it yields the cores to the daemon, as a client on another "+
		"machine would; the daemon still serves every request); then 64 clients long-poll for every tick (`?wait=5s&after=ID`, the polling the API is designed for). "+
		"The idle phase is the 3 s before. Start lags are read afterwards from `GET /ticks?limit=1000` "+
		"(`start_lag_ms` of the ticks started in each phase). Each timing runs twice, at the normal scheduling policy: with the daemon's default configuration, "+
		"whose `http.read_limit` paces read requests (the targets), and with `http.read_limit.rate: 0` (no pacing: what the limit buys). "+
		"Medians over %d repetitions; the change is the median of the per-repetition changes.\n\n", r.Reps)
	b.WriteString("| timing | client | req/s | latency p50 µs | latency p99 µs | body B | start lag p99 idle µs | under load µs | change µs | change % | missed grid points (all reps) | errors |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range httpModes {
		for client := range clientNames {
			a, ok := aggHTTP(r.HTTP, m, client)
			if !ok || a.rps == 0 {
				continue
			}
			p50, p99 := f(a.p50), f(a.p99)
			if client == clientLongPoll {
				p50, p99 = "(waits for the tick)", "—"
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %.0f | %s | %s | %s | %s | %d | %d |\n", m.label(), clientNames[client], a.rps, p50, p99, a.body,
				f(a.idle), f(a.load), f(a.deltaUs), f(a.deltaPct), a.missed, a.errs)
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
		row("deadline overshoot p99 (coarse) ≤ A's", fmt.Sprintf("%s ms vs A %s ms (%s × A, median of per-repetition ratios)", f(c.p99), f(a.p99), f(c.overA)), c.overA <= 1)
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
				fmt.Sprintf("%.3f × clean (%s µs vs %s µs; median tick %s ×, CPU time %s ×)", x.ratio, f(x.mode.mean), f(x.clean.mean), f(x.p50), f(x.cpu)),
				x.ratio <= openTarget)
		}
	}
}

// costTargets adds the tick-cost targets of engine contender name (suffix: how its rows
// are told apart) to a targets table through row.
func costTargets(r *results, name, suffix string, row func(target, measured string, ok bool)) {
	for _, n := range []int{5000, 500} {
		for _, m := range []costMode{modeClean, modeFail} {
			mode := m.String()
			a, ok := aggCostOver(r.Cost, cPlain, name, n, m)
			e, ok2 := aggCost(r.Cost, name, n, m)
			if !ok || !ok2 {
				continue
			}
			row(fmt.Sprintf("tick cost N=%d %s ≤ 0.25 × A%s", n, mode, suffix),
				fmt.Sprintf("%s × A (%s µs vs %s µs)", f(a.engineOver), f(e.mean), f(a.mean)), a.engineOver <= 0.25)
			if name == cEngine {
				row(fmt.Sprintf("≤ 1 alloc/module/tick, N=%d %s", n, mode), fmt.Sprintf("%s allocs/module (%s allocs/tick)", f(e.allocs/float64(n)), f(e.allocs)), e.allocs/float64(n) <= 1)
			}
		}
	}
	if a, ok := aggCostOver(r.Cost, cFailsafe, name, 500, modeClean); ok {
		// One decimal: a ratio judged against a bound must not round onto it (19.6 read "20×, missed").
		row("≥ 20× cheaper than B at N=500"+suffix, fmt.Sprintf("B ÷ %s = %.1f×", name, 1/a.engineOver), 1/a.engineOver >= 20)
	}
	if a, ok := aggCostOver(r.Cost, cPython, name, 500, modeClean); ok {
		m := fmt.Sprintf("C ÷ %s = %.1f×", name, 1/a.engineOver)
		if fl, ok := aggCostOver(r.Cost, cPython, cFloor, 500, modeClean); ok && !math.IsNaN(fl.engineOver) {
			m += fmt.Sprintf(" (C ÷ floor = %.1f×: the components alone on one core, without an engine)", 1/fl.engineOver)
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
				floor = fmt.Sprintf("; the machine's floor (spinning, no work) %.3f%%, worst %.3f%%", 100*fm/fexp, 100*fmax/fexp)
			}
			row("< 0.1% missed at 1 kHz ("+pc.mode+")", fmt.Sprintf("%.3f%% (median), worst repetition %.3f%%%s", 100*mm/exp, 100*mmax/exp, floor), 100*mmax/exp < 0.1)
		}
	}
	for _, m := range r.Memory {
		if m.Contender == "engine" && m.N == 100000 {
			how := "extrapolated"
			if m.FullMeasured {
				how = "measured"
			}
			row("≤ 2 KiB heap per registered module at 100 000 (history of 1000)", fmt.Sprintf("%s B/module (%s; %s B/module with %d summaries held)",
				f(m.FullHeapPerMod), how, f(m.HeapPerMod), m.Points[0].Summaries), m.FullHeapPerMod <= 2048)
		}
	}
	for _, m := range httpModes {
		if m.unlimited {
			continue // not the daemon's configuration: shown in the HTTP table only
		}
		for client := range clientNames {
			a, ok := aggHTTP(r.HTTP, m, client)
			if !ok || a.rps == 0 {
				continue
			}
			limit := math.Max(0.10*a.idle, 100)
			row(fmt.Sprintf("HTTP polling moves start-lag p99 by ≤ max(10%%, 100 µs) (%s, %s)", m.label(), clientNames[client]),
				fmt.Sprintf("%s → %s µs (%s µs, %s%%; allowed %s µs)", f(a.idle), f(a.load), f(a.deltaUs), f(a.deltaPct), f(limit)), a.deltaUs <= limit)
		}
	}
	return b.String()
}

func renderMachine(r *results) string {
	m := r.Machine
	var b strings.Builder
	fmt.Fprintf(&b, "- date: %s; commit %s\n- machine: %d CPUs (nproc; GOMAXPROCS %d), %s, Linux %s\n- Go %s; Python %s; failsafe-go v0.9.8\n",
		m.Date, m.Commit, m.NumCPU, m.GOMAXPROCS, m.CPU, m.Kernel, m.Go, m.Python)
	if m.WakeUs > 0 {
		end := ""
		if m.WakeEndUs > 0 {
			end = fmt.Sprintf(", %.1f µs at its end", m.WakeEndUs)
		}
		fmt.Fprintf(&b, "- waking a parked goroutine while the other CPUs idle (a channel's close after %d µs of work, median of %d; the hand-off that ends each of cycled's ticks): %.1f µs at the run's start%s\n",
			wakeWork.Microseconds(), wakeTrials, m.WakeUs, end)
	}
	fmt.Fprintf(&b, "- command: `make bench-compare`, i.e. `%s` (%d repetitions%s)\n", r.Command, r.Reps, map[bool]string{true: ", -quick: development numbers", false: ""}[r.Quick])
	var parts []string
	for _, s := range sectionOrder {
		if w, ok := r.Wall[s]; ok {
			parts = append(parts, s+" "+w)
		}
	}
	fmt.Fprintf(&b, "- wall time: %s (%s)\n", r.Wall["total"], strings.Join(parts, ", "))
	var busy []string
	for _, s := range sectionOrder {
		if v, ok := r.Foreign[s]; ok {
			busy = append(busy, fmt.Sprintf("%s %.0f%% (load average %s at its end)", s, v, r.Load[s]))
		}
	}
	if len(busy) > 0 {
		fmt.Fprintf(&b, "- the machine is shared: other processes used, of its %d CPUs, %s\n", m.NumCPU, strings.Join(busy, "; "))
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

// joinInts joins xs with sep.
func joinInts(xs []int, sep string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, sep)
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
