// Package peers holds the contenders of the comparison harness: cycled's engine and two
// Go implementations of the same tick semantics — (A) plain Go with a goroutine per module
// and (B) failsafe-go policies per module — behind one interface, plus the module
// behaviours the benchmarks use (trivial, failing transiently, hung, honouring its context).
//
// The shared semantics: tiers run in order; inside a tier every admitted module runs
// concurrently under the tier's wall-clock budget (tier start + budget); a transient failure
// is retried with exponential backoff while attempts and time remain; a module that ignores
// its context is abandoned at the deadline (timed_out) and not started again until it has
// returned (busy); each module has a tick-granular breaker; a module that produced no value
// is served from last-known-good (stale) or nothing (none); a summary is built per tick and
// kept in a bounded history.
package peers

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/fault"
)

// Module statuses (the engine's names).
const (
	StatusOK       = "ok"
	StatusRetried  = "retried"
	StatusFailed   = "failed"
	StatusTimedOut = "timed_out"
	StatusBusy     = "busy"
	StatusOpen     = "open"
)

// Sources of a served value.
const (
	SourceLive     = "live"
	SourceLastGood = "last_good"
	SourceNone     = "none"
)

// TierSpec is one tier.
type TierSpec struct {
	Name          string
	Budget        time.Duration
	MaxAttempts   int
	BackoffBase   time.Duration
	BackoffFactor float64
	BackoffMax    time.Duration
	BackoffJitter float64
	// Breaker of each module of the tier: consecutive failed ticks that open it, how long
	// it stays open, and successful probes that close it again.
	FailureThreshold  int
	Cooldown          time.Duration
	HalfOpenSuccesses int
}

// Delay is the backoff after attempt n (n ≥ 1): base·factor^(n-1), capped, ± jitter·u
// (u uniform in [0, 1)).
func (t *TierSpec) Delay(n int, u float64) time.Duration {
	d := float64(t.BackoffBase)
	f := t.BackoffFactor
	if f <= 0 {
		f = 2
	}
	for i := 1; i < n; i++ {
		d *= f
	}
	if m := float64(t.BackoffMax); m > 0 && d > m {
		d = m
	}
	if t.BackoffJitter > 0 {
		d += d * t.BackoffJitter * (2*u - 1)
	}
	return time.Duration(max(d, 0))
}

// Module is a module: a name, a tier index and a function that honours (or not) its context.
type Module struct {
	Name string
	Tier int
	Fn   func(ctx context.Context) (any, error)
}

// Spec is a configuration shared by every contender.
type Spec struct {
	Tiers   []TierSpec
	Modules []Module
	// History is the number of summaries kept (default 16).
	History int
}

// TierLine is a tier's line of a summary.
type TierLine struct {
	Name            string
	Status          string // ok, degraded
	Elapsed         time.Duration
	BudgetExhausted bool
}

// Line is a module's line of a summary.
type Line struct {
	Name     string
	Tier     int
	Status   string
	Attempts int
	Latency  time.Duration
	Kind     string
	Err      string
	Circuit  string
	Source   string
	Stale    bool
	Age      time.Duration
}

// View is what the harness checks of a summary.
type View struct {
	TickID uint64
	Tiers  []TierLine
	Lines  []Line
}

// Contender runs ticks on demand.
type Contender interface {
	// Tick runs one tick now.
	Tick(ctx context.Context) error
	// Last returns a view of the latest summary.
	Last() View
	// Close releases the contender (abandoned modules are not waited for).
	Close()
}

// ErrTransient is the error of a module failing transiently.
var ErrTransient = fault.Transient(errors.New("injected transient failure"))

// Trivial returns 1.
func Trivial(context.Context) (any, error) { return 1, nil }

// Failing fails transiently while on is set, and returns 1 otherwise.
func Failing(on *atomic.Bool) func(context.Context) (any, error) {
	return func(context.Context) (any, error) {
		if on.Load() {
			return nil, ErrTransient
		}
		return 1, nil
	}
}

// Concurrency counts the concurrent runs of a module.
type Concurrency struct {
	cur, max, runs atomic.Int64
}

func (c *Concurrency) enter() {
	c.runs.Add(1)
	n := c.cur.Add(1)
	for {
		m := c.max.Load()
		if n <= m || c.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (c *Concurrency) leave() { c.cur.Add(-1) }

// Max returns the largest number of concurrent runs seen.
func (c *Concurrency) Max() int64 { return c.max.Load() }

// Runs returns the number of runs started.
func (c *Concurrency) Runs() int64 { return c.runs.Load() }

// Hung blocks for d ignoring its context, then returns 1.
func Hung(d time.Duration, c *Concurrency) func(context.Context) (any, error) {
	return func(context.Context) (any, error) {
		c.enter()
		defer c.leave()
		time.Sleep(d)
		return 1, nil
	}
}

// Honour blocks for d or until its context ends, whichever is first.
func Honour(d time.Duration) func(context.Context) (any, error) {
	return func(ctx context.Context) (any, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return 1, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// classify is the fault kind of a module error (cycled's taxonomy, shared by every peer).
func classify(err error) fault.Kind { return fault.Classify(err) }

// keyOf is a module's blackboard key.
func keyOf(name string) string { return name + ".result" }

// TrivialSpec spreads n trivial modules over the five tiers; with failing set, every tenth
// module (i%10 == 3) fails transiently while on is set and no module sits in the safety tier
// (so that the safety tier never fails). It mirrors cycle/bench_test.go.
func TrivialSpec(n int, failing bool, on *atomic.Bool, ts []TierSpec) Spec {
	mods := make([]Module, n)
	for i := range mods {
		tier := i % len(ts)
		if failing && tier == 0 {
			tier = 1
		}
		fn := Trivial
		if failing && i%10 == 3 {
			fn = Failing(on)
		}
		mods[i] = Module{Name: fmt.Sprintf("m%d", i), Tier: tier, Fn: fn}
	}
	return Spec{Tiers: ts, Modules: mods}
}

// FiveTiers are the seed tiers' names with the given budget, attempts and backoff, and
// breakers that open after threshold consecutive failed ticks.
func FiveTiers(budget time.Duration, attempts int, base, maxDelay time.Duration, threshold int) []TierSpec {
	names := []string{"safety", "knowledge", "perception", "planning", "execution"}
	out := make([]TierSpec, len(names))
	for i, n := range names {
		out[i] = TierSpec{Name: n, Budget: budget, MaxAttempts: attempts, BackoffBase: base, BackoffFactor: 2,
			BackoffMax: maxDelay, FailureThreshold: threshold, Cooldown: 30 * time.Second, HalfOpenSuccesses: 1}
	}
	return out
}
