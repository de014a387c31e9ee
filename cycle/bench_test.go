package cycle

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/tiers"
)

// benchTiers are five tiers with one attempt each (so that a failing module costs the
// fault path, not a backoff sleep) and breakers that never open.
func benchTiers() []tiers.Tier {
	names := []string{"safety", "knowledge", "perception", "planning", "execution"}
	out := make([]tiers.Tier, len(names))
	for i, n := range names {
		out[i] = tiers.Tier{Name: n, Budget: time.Second, MaxAttempts: 1,
			Breaker: breaker.Settings{FailureThreshold: 1 << 30, Cooldown: time.Second}}
	}
	return out
}

var errBench = fault.Transient(errors.New("transient"))

type trivial struct{ fail bool }

func (m trivial) Run(context.Context, *tiers.Input) (any, error) {
	if m.fail {
		return nil, errBench
	}
	return 1, nil
}

// benchModules spreads n trivial modules over the five tiers (none in safety when failing,
// so that emergency mode does not skip the others); every tenth fails when failing is set.
func benchModules(n int, failing bool) []Registration {
	regs := make([]Registration, n)
	ts := benchTiers()
	for i := range regs {
		tier := ts[i%len(ts)].Name
		if failing && i%len(ts) == 0 {
			tier = ts[1].Name
		}
		regs[i] = Registration{Spec: tiers.ModuleSpec{Name: fmt.Sprintf("m%d", i), Tier: tier},
			Module: trivial{fail: failing && i%10 == 3}}
	}
	return regs
}

var benchSizes = []int{5, 50, 500, 5000}

// BenchmarkTick is one tick of the engine with N trivial modules over five tiers, with
// every feature on (breakers, last-known-good, blackboard, summary, history).
func BenchmarkTick(b *testing.B) { benchTick(b, Coarse, benchSizes) }

// BenchmarkTickPrecise is BenchmarkTick with precise timing, whose hand-offs spin with
// more than one P (see Engine.spinWait); compare them with -cpu 1,2.
func BenchmarkTickPrecise(b *testing.B) { benchTick(b, Precise, []int{500, 5000}) }

// benchCase is one steady state of BenchmarkTick: clean, 10% failing with breakers that
// never open, or 10% failing with breakers that open (threshold 5, cooldown 30s) and so,
// in the steady state, refuse those modules (which never had a value) every tick.
type benchCase struct {
	suffix  string
	failing bool
	opens   bool
}

var benchCases = []benchCase{{"", false, false}, {"/fail10pct", true, false}, {"/open10pct", true, true}}

func benchTick(b *testing.B, timing Timing, sizes []int) {
	for _, bc := range benchCases {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("N=%d", n)+bc.suffix, func(b *testing.B) {
				ts := benchTiers()
				if bc.opens {
					for i := range ts {
						ts[i].Breaker = breaker.Settings{FailureThreshold: 5, Cooldown: 30 * time.Second}
					}
				}
				benchTicks(b, Config{Tiers: ts, History: 16, Timing: timing}, benchModules(n, bc.failing), n)
			})
		}
	}
}

// baseline is the plain-Go tick the engine is compared with: a goroutine per module per
// tick, a WaitGroup and a context.WithTimeout per tier, a mutex breaker per module and a
// map for last-known-good, and a summary line per module.
type baseline struct {
	tiers   []tiers.Tier
	byTier  [][]int
	mods    []trivial
	names   []string
	mu      sync.Mutex
	fails   []int
	open    []bool
	lastVal map[string]any
	lastAt  map[string]time.Time
}

type baseLine struct {
	name    string
	status  string
	kind    string
	err     string
	latency time.Duration
}

func newBaseline(regs []Registration) *baseline {
	bl := &baseline{tiers: benchTiers(), lastVal: map[string]any{}, lastAt: map[string]time.Time{}}
	idx := map[string]int{}
	for i, t := range bl.tiers {
		idx[t.Name] = i
	}
	bl.byTier = make([][]int, len(bl.tiers))
	for i, r := range regs {
		bl.byTier[idx[r.Spec.Tier]] = append(bl.byTier[idx[r.Spec.Tier]], i)
		bl.mods = append(bl.mods, r.Module.(trivial))
		bl.names = append(bl.names, r.Spec.Name)
	}
	bl.fails = make([]int, len(regs))
	bl.open = make([]bool, len(regs))
	return bl
}

func (bl *baseline) tick(ctx context.Context) []baseLine {
	lines := make([]baseLine, 0, len(bl.mods))
	for ti, t := range bl.tiers {
		tctx, cancel := context.WithTimeout(ctx, t.Budget)
		ids := bl.byTier[ti]
		res := make([]baseLine, len(ids))
		vals := make([]any, len(ids))
		var wg sync.WaitGroup
		for j, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					if p := recover(); p != nil {
						res[j] = baseLine{status: "failed", kind: "internal", err: fmt.Sprint(p, string(debug.Stack()))}
					}
				}()
				start := time.Now()
				v, err := bl.mods[id].Run(tctx, nil)
				res[j] = baseLine{name: bl.names[id], status: "ok", latency: time.Since(start)}
				if err != nil {
					res[j].status, res[j].kind, res[j].err = "failed", fault.Classify(err).String(), err.Error()
				}
				vals[j] = v
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-tctx.Done():
		}
		cancel()
		now := time.Now()
		bl.mu.Lock()
		for j, id := range ids {
			if res[j].status == "ok" {
				bl.fails[id] = 0
				bl.lastVal[bl.names[id]] = vals[j]
				bl.lastAt[bl.names[id]] = now
			} else {
				bl.fails[id]++
				bl.open[id] = bl.fails[id] >= 1<<30
			}
		}
		bl.mu.Unlock()
		lines = append(lines, res...)
	}
	return lines
}

// BenchmarkBaselineGoroutinePerModule is the plain-Go comparison for BenchmarkTick.
func BenchmarkBaselineGoroutinePerModule(b *testing.B) {
	for _, failing := range []bool{false, true} {
		for _, n := range benchSizes {
			name := fmt.Sprintf("N=%d", n)
			if failing {
				name += "/fail10pct"
			}
			b.Run(name, func(b *testing.B) {
				bl := newBaseline(benchModules(n, failing))
				ctx := context.Background()
				bl.tick(ctx)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					bl.tick(ctx)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/module")
			})
		}
	}
}

// BenchmarkTickEmergency is BenchmarkTick in emergency mode: a module of the safety tier,
// which ran before, fails on every tick, and the other four tiers, skipped, serve their
// modules' last values: a steady state that lasts as long as emergency mode does.
func BenchmarkTickEmergency(b *testing.B) {
	for _, n := range []int{500, 5000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			var fail atomic.Bool
			regs := benchModules(n, false)
			regs[0].Module = tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) {
				if fail.Load() {
					return nil, errBench
				}
				return 1, nil
			})
			e, err := New(Config{Tiers: benchTiers(), History: 16}, regs)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			for i := range 20 {
				fail.Store(i >= 10)
				if _, err := e.Tick(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if !e.Emergency().Active {
				b.Fatal("not in emergency mode")
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				if _, err := e.Tick(ctx); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu0, n)
		})
	}
}
