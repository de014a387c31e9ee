package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tools/bench/peers"
	"github.com/cycled/cycled/tools/bench/stats"
)

// periodResult is one period-keeping run (a child process).
type periodResult struct {
	Contender string        `json:"contender"`
	Hz        int           `json:"hz"`
	Rep       int           `json:"rep"`
	Lag       stats.Summary `json:"lag_us"`
	Ticks     int           `json:"ticks"`
	Missed    int           `json:"missed"`
	Expected  int           `json:"expected"`
	Overruns  int           `json:"overruns"`
	CPUPct    float64       `json:"cpu_pct"`
}

// preciseOneP is cycled's precise timing in a process limited to one P (GOMAXPROCS=1 in
// its environment, as an operator would set it): what the README recommends for fast
// loops of light modules, lightly polled, on a machine with few cores.
const preciseOneP = "precise-1p"

// childPeriod runs the scheduler at hz with n trivial modules for dur (after warm) and
// prints a periodResult. contender is "coarse", "precise", preciseOneP (cycled), "ticker"
// (peer A's tick in a time.Ticker loop) or "spin" (the machine's floor: no work, see
// spinPeriod).
func childPeriod(contender string, hz, n int, warm, dur time.Duration) {
	if contender == preciseOneP && runtime.GOMAXPROCS(0) != 1 {
		fatalf("%s: GOMAXPROCS is %d, want 1 (set in the child's environment)", contender, runtime.GOMAXPROCS(0))
	}
	period := time.Second / time.Duration(hz)
	var on atomic.Bool
	spec := peers.TrivialSpec(n, false, &on, peers.FiveTiers(50*time.Millisecond, 1, 10*time.Millisecond, 100*time.Millisecond, 1<<30))
	var res periodResult
	switch contender {
	case "ticker":
		res = tickerPeriod(spec, period, warm, dur)
	case "spin":
		res = spinPeriod(period, warm, dur)
	default:
		res = enginePeriod(spec, contender, period, warm, dur)
	}
	res.Contender, res.Hz = contender, hz
	_ = json.NewEncoder(os.Stdout).Encode(res)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func enginePeriod(spec peers.Spec, timing string, period, warm, dur time.Duration) periodResult {
	var (
		mu        sync.Mutex
		recording bool
		lags      []float64
		missed    int
		overruns  int
	)
	hooks := cycle.Hooks{OnTick: func(s *faultsummary.Summary) {
		mu.Lock()
		if recording {
			lags = append(lags, float64(s.StartedAt.Sub(s.ScheduledAt).Nanoseconds())/1e3)
			missed += s.SkippedGridPoints
			if s.Overrun {
				overruns++
			}
		}
		mu.Unlock()
	}}
	cfg, regs := peers.EngineConfig(spec, cycle.Coarse)
	if timing == "precise" || timing == preciseOneP {
		cfg.Timing = cycle.Precise
	}
	cfg.Period = period
	cfg.History = 1000 // the default
	e, err := cycle.New(cfg, regs, cycle.WithHooks(hooks))
	if err != nil {
		fatalf("engine: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	time.Sleep(warm)
	c0, w0 := cpuTime(), time.Now()
	mu.Lock()
	recording = true
	mu.Unlock()
	time.Sleep(dur)
	mu.Lock()
	recording = false
	mu.Unlock()
	c1, w1 := cpuTime(), time.Now()
	cancel()
	<-done
	_ = e.Close()
	mu.Lock()
	defer mu.Unlock()
	return periodResult{Lag: stats.Summarize(lags), Ticks: len(lags), Missed: missed, Expected: len(lags) + missed,
		Overruns: overruns, CPUPct: 100 * float64(c1-c0) / float64(w1.Sub(w0))}
}

// spinPeriod is the floor of period keeping on this machine: a goroutine that does no
// work and never sleeps or yields, reading the clock until each grid point. Whatever
// delays it is not a scheduler's doing: the virtual machine's vCPU not running (the host's
// stalls), or the Go runtime preempting it (it allocates nothing, so no collection runs).
// A grid point is missed when the loop sees it a whole period or more late, as a scheduler
// skipping to the next grid point would.
func spinPeriod(period, warm, dur time.Duration) periodResult {
	var lags []float64
	missed := 0
	start := time.Now()
	warmEnd := start.Add(warm)
	end := warmEnd.Add(dur)
	next := start.Add(period)
	var c0 time.Duration
	var w0 time.Time
	for {
		now := time.Now()
		if now.Before(next) {
			continue
		}
		if now.After(end) {
			break
		}
		lag := now.Sub(next)
		skipped := int(lag / period)
		if next.After(warmEnd) {
			if w0.IsZero() {
				c0, w0 = cpuTime(), now
			}
			lags = append(lags, float64(lag.Nanoseconds())/1e3)
			missed += skipped
		}
		next = next.Add(time.Duration(skipped+1) * period)
	}
	c1, w1 := cpuTime(), time.Now()
	return periodResult{Lag: stats.Summarize(lags), Ticks: len(lags), Missed: missed, Expected: len(lags) + missed,
		CPUPct: 100 * float64(c1-c0) / float64(w1.Sub(w0))}
}

func tickerPeriod(spec peers.Spec, period, warm, dur time.Duration) periodResult {
	p := peers.NewPlain(spec)
	ctx := context.Background()
	tk := time.NewTicker(period)
	defer tk.Stop()
	var lags []float64
	var first, last time.Time
	warmEnd := time.Now().Add(warm)
	var c0 time.Duration
	var w0 time.Time
	end := warmEnd.Add(dur)
	for {
		sched := <-tk.C
		now := time.Now()
		if now.After(end) {
			break
		}
		if now.After(warmEnd) {
			if first.IsZero() {
				first, c0, w0 = sched, cpuTime(), now
			}
			last = sched
			lags = append(lags, float64(now.Sub(sched).Nanoseconds())/1e3)
		}
		_ = p.Tick(ctx)
	}
	c1, w1 := cpuTime(), time.Now()
	expected := int(last.Sub(first).Round(period)/period) + 1
	return periodResult{Lag: stats.Summarize(lags), Ticks: len(lags), Missed: expected - len(lags), Expected: expected,
		CPUPct: 100 * float64(c1-c0) / float64(w1.Sub(w0))}
}

// runChild runs this binary with args, and env added to its environment, and decodes its
// JSON output into out.
func runChild(out any, env []string, args ...string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("child %v: %w", args, err)
	}
	return json.Unmarshal(b, out)
}

func runPeriod(o *opts) []periodResult {
	dur, warm := 5*time.Second, 500*time.Millisecond
	if o.quick {
		dur, warm = time.Second, 300*time.Millisecond
	}
	type cfg struct {
		contender string
		hz        int
	}
	cfgs := []cfg{{"coarse", 100}, {"precise", 100}, {preciseOneP, 100}, {"coarse", 1000}, {"precise", 1000}, {preciseOneP, 1000},
		{"ticker", 100}, {"ticker", 1000}, {"spin", 1000}}
	var out []periodResult
	for rep := 1; rep <= o.reps; rep++ {
		k := (rep - 1) % len(cfgs)
		order := append(append([]cfg{}, cfgs[k:]...), cfgs[:k]...)
		for _, c := range order {
			if rep > 1 && (c.contender == "ticker" || c.contender == "coarse" && c.hz == 1000) {
				continue // context for the reader, not a target: one repetition
			}
			var env []string
			if c.contender == preciseOneP {
				env = []string{"GOMAXPROCS=1"}
			}
			var r periodResult
			if err := runChild(&r, env, "-child", "period", "-contender", c.contender, "-hz", fmt.Sprint(c.hz),
				"-n", "500", "-warm", warm.String(), "-dur", dur.String()); err != nil {
				fatalf("%v", err)
			}
			r.Rep = rep
			logf("period rep %d %-10s %4d Hz: lag p50 %7.1f p99 %7.1f max %8.1f µs, %d ticks, missed %d/%d, overruns %d, cpu %.0f%%",
				rep, c.contender, c.hz, r.Lag.P50, r.Lag.P99, r.Lag.Max, r.Ticks, r.Missed, r.Expected, r.Overruns, r.CPUPct)
			out = append(out, r)
		}
	}
	return out
}
