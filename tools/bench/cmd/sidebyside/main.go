// Command sidebyside measures one steady state of the tick engine and compares two commits
// of the engine on it, built from the same source (this file) and alternated inside every
// repetition.
//
// The steady state: ticks called back to back in step mode; five tiers (budget 1 s, one
// attempt, breakers with threshold 5 and cooldown 30 s); N trivial modules spread evenly
// over the tiers (module i in tier i mod 5). In the open case every tenth module (i mod 10
// = 3, so never the safety tier) returns a transient error on every call from the first
// tick on: its breaker opens after five ticks and stays open, and it never had a value.
// The first 10 ticks and 250 ms are warm-up; the figure is the mean tick over about 1 s,
// with the allocations per tick over the same ticks.
//
// This file uses only the engine's public API present in every commit it is meant to
// compare (cycle.New, Config, Registration, Tick, Close; tiers; breaker; fault), so that
// the same program builds at both.
//
// One measurement (a child process; what the side-by-side mode runs):
//
//	go run ./cmd/sidebyside -n 500 -case clean [-cpuprofile cpu.out -memprofile mem.out]
//
// Side by side (from tools/bench; -b . is the working tree):
//
//	go run ./cmd/sidebyside -a 0fc3e7e -b . -reps 15
//
// builds this program against the engine at each commit (a git worktree of the commit in a
// temporary directory, a module that replaces the engine's by it), then runs, in every
// repetition, both builds for every size and case in an order that alternates between
// repetitions, each measurement in a fresh process. It reports the medians of the
// per-repetition ratios b ÷ a and open ÷ clean, and the load average before and after.
package main

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/tiers"
)

//go:embed main.go more.go
var source embed.FS

const (
	numTiers      = 5
	threshold     = 5
	cooldown      = 30 * time.Second
	warmTicks     = 10
	warmTime      = 250 * time.Millisecond
	failEvery     = 10
	failRemainder = 3
)

// sample is one measurement of one build.
type sample struct {
	N          int     `json:"n"`
	Case       string  `json:"case"`
	Ticks      int     `json:"ticks"`
	MeanUs     float64 `json:"mean_us"`
	Allocs     float64 `json:"allocs_per_tick"`
	Bytes      float64 `json:"bytes_per_tick"`
	Open       int     `json:"open_last_tick"`
	P50        float64 `json:"p50_ms,omitempty"` // deadline overshoot or start lag
	P99        float64 `json:"p99_ms,omitempty"`
	PerModule  float64 `json:"heap_bytes_per_module,omitempty"`
	NotOK      int     `json:"not_ok_last_tick"`
	ModuleLine int     `json:"lines"`
}

var errInjected = fault.Transient(errors.New("injected transient failure"))

func ok(context.Context, *tiers.Input) (any, error)   { return 1, nil }
func fail(context.Context, *tiers.Input) (any, error) { return nil, errInjected }

// engine builds the steady state's engine for n modules; open makes every tenth fail.
func engine(n int, open bool) (*cycle.Engine, error) { return engineWith(n, open, 0) }

// budget is every tier's budget in the steady state. Under callgrind (-ticks) a tick of
// thousands of modules runs a hundred times slower and may pass a second: -ticks makes it
// a minute, so that the instructions counted are those of the same steady state.
var budget = time.Second

// engineWith is engine on a period (0: step mode).
func engineWith(n int, open bool, period time.Duration) (*cycle.Engine, error) {
	ts := make([]tiers.Tier, numTiers)
	for i := range ts {
		ts[i] = tiers.Tier{Name: fmt.Sprintf("t%d", i), Budget: budget, MaxAttempts: 1,
			Breaker: breaker.Settings{FailureThreshold: threshold, Cooldown: cooldown, HalfOpenProbes: 1, HalfOpenSuccesses: 1}}
	}
	regs := make([]cycle.Registration, n)
	for i := range regs {
		f := tiers.ModuleFunc(ok)
		if open && i%failEvery == failRemainder {
			f = fail
		}
		regs[i] = cycle.Registration{Spec: tiers.ModuleSpec{Name: fmt.Sprintf("m%d", i), Tier: ts[i%numTiers].Name}, Module: f}
	}
	return cycle.New(cycle.Config{Tiers: ts, Period: period}, regs)
}

// measure runs the steady state once and returns its sample.
// With fixed > 0 it runs exactly warmTicks+fixed ticks, for instruction counts (callgrind),
// whose differences between two values of fixed are the cost of the extra ticks.
func measure(n int, kase string, dur time.Duration, fixed int, cpuProf, memProf string) (sample, error) {
	e, err := engine(n, kase == "open")
	if err != nil {
		return sample{}, err
	}
	defer e.Close()
	ctx := context.Background()
	for i, t0 := 0, time.Now(); i < warmTicks || (fixed == 0 && time.Since(t0) < warmTime); i++ {
		if _, err := e.Tick(ctx); err != nil {
			return sample{}, fmt.Errorf("warm-up tick: %w", err)
		}
	}
	if cpuProf != "" {
		f, err := os.Create(cpuProf)
		if err != nil {
			return sample{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return sample{}, err
		}
	}
	if memProf != "" {
		runtime.MemProfileRate = 1
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	ticks, start := 0, time.Now()
	for ticks == 0 || (fixed == 0 && time.Since(start) < dur) || ticks < fixed {
		if _, err := e.Tick(ctx); err != nil {
			return sample{}, fmt.Errorf("tick: %w", err)
		}
		ticks++
	}
	el := time.Since(start)
	runtime.ReadMemStats(&m1)
	if cpuProf != "" {
		pprof.StopCPUProfile()
	}
	if memProf != "" {
		if err := writeHeap(memProf); err != nil {
			return sample{}, err
		}
	}
	s := sample{N: n, Case: kase, Ticks: ticks, MeanUs: float64(el.Nanoseconds()) / 1e3 / float64(ticks),
		Allocs: float64(m1.Mallocs-m0.Mallocs) / float64(ticks), Bytes: float64(m1.TotalAlloc-m0.TotalAlloc) / float64(ticks)}
	last := e.Latest()
	s.ModuleLine = last.NumModules()
	for i := range s.ModuleLine {
		switch st := string(last.ModuleAt(i).Status); st {
		case "ok":
		case "open":
			s.Open++
			s.NotOK++
		default:
			s.NotOK++
		}
	}
	return s, nil
}

func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}

func main() {
	var (
		n               int
		kase            string
		dur             time.Duration
		cpuProf, memPro string
		a, b, root      string
		reps            int
		sizes, cases    string
		more            string
		keep            bool
		fixed           int
	)
	flag.IntVar(&n, "n", 500, "one measurement: the number of modules")
	flag.StringVar(&kase, "case", "clean", "one measurement: clean or open (the steady state), deadline, lag or memory (see more.go)")
	flag.DurationVar(&dur, "dur", time.Second, "one measurement: measuring time after the warm-up")
	flag.IntVar(&fixed, "ticks", 0, "one measurement: run exactly this many ticks after 10 warm-up ticks (for callgrind), not -dur")
	flag.StringVar(&cpuProf, "cpuprofile", "", "one measurement: write a CPU profile of the measured ticks here")
	flag.StringVar(&memPro, "memprofile", "", "one measurement: write an allocation profile (every allocation) here")
	flag.StringVar(&a, "a", "", "side by side: the base commit (e.g. 0fc3e7e)")
	flag.StringVar(&b, "b", ".", "side by side: the commit compared with it (. is the working tree)")
	flag.StringVar(&root, "root", "../..", "side by side: the repository root")
	flag.IntVar(&reps, "reps", 10, "side by side: repetitions")
	flag.StringVar(&sizes, "sizes", "500,5000", "side by side: module counts")
	flag.StringVar(&cases, "cases", "clean,open", "side by side: cases of the steady state")
	flag.StringVar(&more, "more", "deadline,lag,memory", "side by side: secondary cases (empty: none)")
	flag.BoolVar(&keep, "keep", false, "side by side: keep the temporary builds")
	flag.Parse()

	if a == "" {
		var s sample
		var err error
		switch kase {
		case "clean", "open":
			if fixed > 0 {
				budget = time.Minute
			}
			s, err = measure(n, kase, dur, fixed, cpuProf, memPro)
		default:
			s, err = secondary(n, kase, dur, memPro)
		}
		if err != nil {
			fatalf("%v", err)
		}
		if err := json.NewEncoder(os.Stdout).Encode(s); err != nil {
			fatalf("%v", err)
		}
		return
	}
	var ns []int
	for _, x := range strings.Split(sizes, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(x))
		if err != nil {
			fatalf("-sizes: %v", err)
		}
		ns = append(ns, v)
	}
	var extra []string
	if more != "" {
		extra = strings.Split(more, ",")
	}
	sideBySide(root, a, b, reps, ns, strings.Split(cases, ","), extra, dur, keep)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "sidebyside: %s\n", fmt.Sprintf(format, args...))
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// build builds this program against the engine at commit (. for the working tree at
// root) in dir and returns the binary's path and a short name of the commit.
func build(root, commit, dir string) (string, string) {
	abs, err := filepath.Abs(root)
	if err != nil {
		fatalf("%v", err)
	}
	src, name := abs, "working tree"
	if commit != "." {
		src = filepath.Join(dir, "src")
		if out, err := exec.Command("git", "-C", abs, "worktree", "add", "--detach", src, commit).CombinedOutput(); err != nil {
			fatalf("git worktree add %s: %v\n%s", commit, err, out)
		}
		out, err := exec.Command("git", "-C", src, "rev-parse", "--short", "HEAD").Output()
		if err != nil {
			fatalf("git rev-parse: %v", err)
		}
		name = strings.TrimSpace(string(out))
	}
	h := filepath.Join(dir, "harness")
	if err := os.MkdirAll(h, 0o755); err != nil {
		fatalf("%v", err)
	}
	mod := "module sidebyside\n\ngo 1.26.0\n\nrequire github.com/cycled/cycled v0.0.0-00010101000000-000000000000\n\nreplace github.com/cycled/cycled => " + src + "\n"
	must(os.WriteFile(filepath.Join(h, "go.mod"), []byte(mod), 0o644))
	files, err := source.ReadDir(".")
	must(err)
	for _, f := range files {
		b, err := source.ReadFile(f.Name())
		must(err)
		must(os.WriteFile(filepath.Join(h, f.Name()), b, 0o644))
	}
	if sum, err := os.ReadFile(filepath.Join(src, "go.sum")); err == nil {
		must(os.WriteFile(filepath.Join(h, "go.sum"), sum, 0o644))
	}
	bin := filepath.Join(dir, "sidebyside")
	cmd := exec.Command("go", "build", "-mod=mod", "-o", bin, ".")
	cmd.Dir = h
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		fatalf("building against %s: %v\n%s", commit, err, out)
	}
	return bin, name
}

func must(err error) {
	if err != nil {
		fatalf("%v", err)
	}
}

// run runs one measurement in a fresh process of bin.
func run(bin string, n int, kase string, dur time.Duration) sample {
	out, err := exec.Command(bin, "-n", strconv.Itoa(n), "-case", kase, "-dur", dur.String()).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			fatalf("%s -n %d -case %s: %v\n%s", bin, n, kase, err, ee.Stderr)
		}
		fatalf("%v", err)
	}
	var s sample
	must(json.Unmarshal(out, &s))
	return s
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// key names one case of one size.
type key struct {
	n    int
	kase string
}

func sideBySide(root, a, b string, reps int, ns []int, cases, more []string, dur time.Duration, keep bool) {
	tmp, err := os.MkdirTemp("", "sidebyside")
	must(err)
	dirs := []string{filepath.Join(tmp, "a"), filepath.Join(tmp, "b")}
	defer func() {
		if keep {
			logf("builds kept in %s", tmp)
			return
		}
		for i, c := range []string{a, b} {
			if c != "." {
				_ = exec.Command("git", "-C", root, "worktree", "remove", "--force", filepath.Join(dirs[i], "src")).Run()
			}
		}
		_ = os.RemoveAll(tmp)
	}()
	binA, nameA := build(root, a, dirs[0])
	binB, nameB := build(root, b, dirs[1])
	load0 := loadavg()
	logf("a = %s, b = %s; load average %s", nameA, nameB, load0)
	// per[side][key] is one sample per repetition.
	per := [2]map[key][]sample{{}, {}}
	bins := [2]string{binA, binB}
	var jobs []key
	for _, n := range ns {
		for _, c := range cases {
			jobs = append(jobs, key{n, c})
		}
	}
	for _, c := range more {
		jobs = append(jobs, key{moreN[c], c})
	}
	for rep := range reps {
		for _, k := range jobs {
			order := []int{0, 1}
			if rep%2 == 1 {
				order = []int{1, 0}
			}
			for _, side := range order {
				s := run(bins[side], k.n, k.kase, dur)
				per[side][k] = append(per[side][k], s)
				logf("rep %2d %s N=%-6d %-8s %8.1f µs/tick %7.1f allocs %9.0f B (%d ticks, %d open) p50 %.3f p99 %.3f ms, %.0f B/module; load %s",
					rep+1, [2]string{"a", "b"}[side], k.n, k.kase, s.MeanUs, s.Allocs, s.Bytes, s.Ticks, s.Open, s.P50, s.P99, s.PerModule, loadavg())
			}
		}
	}
	load1 := loadavg()
	fmt.Printf("a = %s, b = %s; %d repetitions, each measurement a fresh process (%v after %d ticks and %v of warm-up); load average %s before, %s after\n\n",
		nameA, nameB, reps, dur, warmTicks, warmTime, load0, load1)
	fmt.Println("| N | case | a µs/tick | b µs/tick | b ÷ a (median of per-rep ratios, [min, max]) | a allocs/tick | b allocs/tick | a open ÷ clean | b open ÷ clean |")
	fmt.Println("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range ns {
		for _, c := range cases {
			k := key{n, c}
			sa, sb := per[0][k], per[1][k]
			ratio := ratios(sb, sa)
			oc := [2]string{"", ""}
			if c == "open" {
				for side := range 2 {
					oc[side] = fmt.Sprintf("%.2f", median(ratios(per[side][k], per[side][key{n, "clean"}])))
				}
			}
			fmt.Printf("| %d | %s | %.1f | %.1f | **%.2f** [%.2f, %.2f] | %.1f | %.1f | %s | %s |\n", n, c,
				median(means(sa)), median(means(sb)), median(ratio), slices.Min(ratio), slices.Max(ratio),
				median(allocs(sa)), median(allocs(sb)), oc[0], oc[1])
		}
	}
	printMore(per, more)
}

// moreN is the module count of each secondary case.
var moreN = map[string]int{"deadline": 51, "lag": 500, "memory": 100000}

// printMore prints the table of the secondary cases: medians over the repetitions.
func printMore(per [2]map[key][]sample, more []string) {
	if len(more) == 0 {
		return
	}
	fmt.Println()
	fmt.Println("| case | N | figure | a (median) | b (median) |")
	fmt.Println("|---|---:|---|---:|---:|")
	for _, c := range more {
		k := key{moreN[c], c}
		sa, sb := per[0][k], per[1][k]
		col := func(ss []sample, f func(sample) float64) float64 {
			var xs []float64
			for _, s := range ss {
				xs = append(xs, f(s))
			}
			return median(xs)
		}
		switch c {
		case "memory":
			f := func(s sample) float64 { return s.PerModule }
			fmt.Printf("| memory | %d | heap bytes per module | %.0f | %.0f |\n", k.n, col(sa, f), col(sb, f))
		default:
			name := map[string]string{"deadline": "overshoot of a 50 ms tier", "lag": "start lag at 100 Hz"}[c]
			p50 := func(s sample) float64 { return s.P50 }
			p99 := func(s sample) float64 { return s.P99 }
			fmt.Printf("| %s | %d | %s, p50 ms | %.3f | %.3f |\n", c, k.n, name, col(sa, p50), col(sb, p50))
			fmt.Printf("| %s | %d | %s, p99 ms | %.3f | %.3f |\n", c, k.n, name, col(sa, p99), col(sb, p99))
		}
	}
}

// ratios are x[i] ÷ y[i] of the means, repetition by repetition.
func ratios(x, y []sample) []float64 {
	var r []float64
	for i := range min(len(x), len(y)) {
		r = append(r, x[i].MeanUs/y[i].MeanUs)
	}
	if len(r) == 0 {
		return []float64{math.NaN()}
	}
	return r
}

func means(ss []sample) []float64 {
	var r []float64
	for _, s := range ss {
		r = append(r, s.MeanUs)
	}
	return r
}

func allocs(ss []sample) []float64 {
	var r []float64
	for _, s := range ss {
		r = append(r, s.Allocs)
	}
	return r
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
