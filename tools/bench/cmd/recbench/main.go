// Command recbench measures the flight recorder against the same engine with the
// recorder off, in the same run, alternating: CPU and start lag at 100 Hz, database
// growth, GET /ticks/latest throughput against a fixed-byte handler, and reads of old
// tick ids through the cache, cold and warm (BENCHMARKS.md, "Flight recorder").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/daemon/recorder/sqlite"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

func main() {
	secs := flag.Duration("run", 10*time.Second, "length of one period-keeping run")
	reps := flag.Int("reps", 3, "repetitions (recorder off and on alternate in each)")
	httpFor := flag.Duration("http", 5*time.Second, "length of one HTTP load run")
	only := flag.String("only", "period,http,read", "the parts to run")
	flag.Parse()
	defer startProfile()()
	if strings.Contains(*only, "period") {
		periodBench(*reps, *secs)
	}
	if strings.Contains(*only, "http") {
		if err := httpBench(*reps, *httpFor); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if strings.Contains(*only, "read") {
		if err := readBench(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// periodBench runs the scheduler at 100 Hz with 500 and 50 modules, recorder off and on.
func periodBench(reps int, secs time.Duration) {
	for _, n := range modulesCounts() {
		for rep := range reps {
			for _, on := range order(rep) {
				r, err := periodRun(n, on, secs)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				fmt.Printf("period modules=%d recorder=%v rep=%d cpu=%.1f%% lag_p50=%.3fms lag_p99=%.3fms ticks=%d db_used=%d growth_per_hour=%.0fMB dropped=%d\n",
					n, on, rep, r.cpu*100, r.p50, r.p99, r.ticks, r.dbBytes, r.growthPerHour/1e6, r.dropped)
			}
		}
	}
}

// order alternates which variant runs first.
func order(rep int) []bool {
	if rep%2 == 0 {
		return []bool{false, true}
	}
	return []bool{true, false}
}

// modules returns n trivial modules spread over the seed tiers, 2% of them failing one
// attempt in three (so that some lines are not nominal, as in a real cycle).
func modules(n int) []cycle.Registration {
	seed := tiers.SeedTiers()
	regs := make([]cycle.Registration, n)
	for i := range regs {
		flaky := i%50 == 7
		var calls int
		var mu sync.Mutex
		regs[i] = cycle.Registration{
			Spec: tiers.ModuleSpec{Name: fmt.Sprintf("m%03d", i), Tier: seed[i%len(seed)].Name},
			Module: &fn{f: func(context.Context, *tiers.Input) (any, error) {
				if flaky {
					mu.Lock()
					calls++
					c := calls
					mu.Unlock()
					if c%3 == 0 {
						return nil, fault.Transient(errors.New("flaky"))
					}
				}
				return i, nil
			}},
		}
	}
	return regs
}

type fn struct {
	f func(context.Context, *tiers.Input) (any, error)
}

func (m *fn) Run(ctx context.Context, in *tiers.Input) (any, error) { return m.f(ctx, in) }

type periodResult struct {
	cpu, p50, p99 float64
	ticks         int
	dbBytes       int64
	growthPerHour float64
	dropped       uint64
}

// periodRun runs the scheduler at 100 Hz for d with n modules, recorded or not.
func periodRun(n int, on bool, d time.Duration) (periodResult, error) {
	var res periodResult
	var lags []float64
	var mu sync.Mutex
	opts := []cycle.Option{cycle.WithHooks(cycle.Hooks{OnTick: func(s *faultsummary.Summary) {
		mu.Lock()
		lags = append(lags, s.StartLagMs)
		mu.Unlock()
	}})}
	var rec *sqlite.Recorder
	dir, err := os.MkdirTemp("", "recbench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	if on {
		rec, err = sqlite.Open(context.Background(), sqlite.Options{Dir: dir, MaxBytes: 0})
		if err != nil {
			return res, err
		}
		opts = append(opts, cycle.WithIdentity(rec.Identity()), cycle.WithHooks(rec.Hooks()))
	}
	e, err := cycle.New(cycle.Config{Period: 10 * time.Millisecond}, modules(n), opts...)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cpu0, t0 := cpuTime(), time.Now()
	_ = e.Run(ctx)
	cpu1, t1 := cpuTime(), time.Now()
	_ = e.Close()
	res.cpu = (cpu1 - cpu0).Seconds() / t1.Sub(t0).Seconds()
	if rec != nil {
		if err := rec.Close(); err != nil {
			return res, err
		}
		rd, err := sqlite.OpenReader(context.Background(), dir)
		if err != nil {
			return res, err
		}
		rp, err := rd.Check(context.Background())
		rd.Close()
		if err != nil {
			return res, err
		}
		res.dbBytes, res.dropped = rp.UsedBytes, rec.Dropped()
		res.growthPerHour = float64(rp.UsedBytes) / t1.Sub(t0).Hours()
	}
	mu.Lock()
	defer mu.Unlock()
	res.ticks = len(lags)
	slices.Sort(lags)
	if len(lags) > 0 {
		res.p50 = lags[len(lags)/2]
		res.p99 = lags[min(len(lags)-1, (len(lags)*99+99)/100-1)]
	}
	return res, nil
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var sizes = flag.String("modules", "500,50", "module counts of the period runs")

func modulesCounts() []int {
	var out []int
	for _, f := range strings.Split(*sizes, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}
