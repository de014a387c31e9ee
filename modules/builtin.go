package modules

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/tiers"
)

// ErrInjected is wrapped by every failure and panic a Builtin injects, so a test or an
// operator can tell an injected fault from a real one with errors.Is.
var ErrInjected = errors.New("injected fault")

// Option configures a module built by this package (NewBuiltin, NewHTTP). An option that
// does not concern a kind is ignored by it.
type Option interface{ apply(*options) }

type options struct {
	clock  clock.Clock
	rand   func() float64
	client *http.Client
	replay bool
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithClock sets the clock on which latency and hang are waited. Give the engine's clock.
// Default clock.Real().
func WithClock(c clock.Clock) Option { return optionFunc(func(o *options) { o.clock = clock.Or(c) }) }

// WithRand sets the source of randomness for fail_rate and latency ranges: a function
// returning numbers uniform in [0, 1). It is called from the engine's worker goroutine, so
// a source shared between modules must be safe for concurrent use. Default math/rand/v2.
func WithRand(f func() float64) Option {
	return optionFunc(func(o *options) {
		if f != nil {
			o.rand = f
		}
	})
}

// Builtin is the builtin module kind: it returns a configured value after a latency and
// fails as its Faults say. It is safe for concurrent use: Run reads the faults through an
// atomic pointer to an immutable value, so SetFaults never races with a running attempt
// (an attempt in progress finishes with the faults it started with).
type Builtin struct {
	settings Settings
	clock    clock.Clock
	rand     func() float64

	mu     sync.Mutex             // serialises writers of faults
	faults atomic.Pointer[Faults] // the faults in force; never mutated after being stored
}

// NewBuiltin returns a builtin module with settings s. Invalid faults are reported as a
// *tiers.ValidationError whose paths are relative to the settings ("fail_rate").
func NewBuiltin(s Settings, opts ...Option) (*Builtin, error) {
	o := options{clock: clock.Real(), rand: rand.Float64}
	for _, op := range opts {
		op.apply(&o)
	}
	if err := s.Faults.Validate().Err(); err != nil {
		return nil, err
	}
	s.Faults = s.Faults.clone()
	b := &Builtin{settings: s, clock: o.clock, rand: o.rand}
	f := s.Faults.clone()
	b.faults.Store(&f)
	return b, nil
}

// Settings returns the configured settings (not the faults injected at runtime).
func (b *Builtin) Settings() Settings {
	s := b.settings
	s.Faults = s.Faults.clone()
	return s
}

// Faults returns the faults in force.
func (b *Builtin) Faults() Faults { return b.faults.Load().clone() }

// SetFaults replaces the faults in force from the next attempt on. Invalid faults are
// refused with a *tiers.ValidationError and change nothing.
func (b *Builtin) SetFaults(f Faults) error {
	if err := f.Validate().Err(); err != nil {
		return err
	}
	f = f.clone()
	b.mu.Lock()
	b.faults.Store(&f)
	b.mu.Unlock()
	return nil
}

// ResetFaults restores the configured faults and returns them.
func (b *Builtin) ResetFaults() Faults {
	f := b.settings.Faults.clone()
	b.mu.Lock()
	b.faults.Store(&f)
	b.mu.Unlock()
	return f.clone()
}

// PatchFaults applies p to the faults in force (or to the configured ones when p.Reset is
// set) atomically with respect to other writers, and returns the faults now in force.
// Invalid results are refused with a *tiers.ValidationError and change nothing.
func (b *Builtin) PatchFaults(p FaultsPatch) (Faults, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	base := *b.faults.Load()
	if p.Reset {
		base = b.settings.Faults
	}
	f := p.apply(base).clone()
	if err := f.Validate().Err(); err != nil {
		return Faults{}, err
	}
	b.faults.Store(&f)
	return f.clone(), nil
}

// Run performs one attempt: it hangs (ignoring ctx) if told to, waits the latency (an
// ended ctx returns ctx.Err()), panics if told to, then fails if the tick is in a
// fail_ticks window, if the attempt is among the first fail_attempts, or with probability
// fail_rate; otherwise it returns the configured value. Injected failures are marked with
// the configured fault kind and wrap ErrInjected. in may be nil (tick 0, attempt 1).
//
// It reads every key of its reads first, as a remote module's request does, so that its
// output is tagged derived_from_stale when one of them is degraded, like that of every
// other module kind: the value it returns stands for a computation on those inputs.
func (b *Builtin) Run(ctx context.Context, in *tiers.Input) (any, error) {
	f := b.faults.Load()
	var tick uint64
	attempt := 1
	if in != nil {
		tick = in.TickID()
		if a := in.Attempt(); a > 0 {
			attempt = a
		}
		for _, k := range in.Reads() {
			in.Get(k)
		}
	}
	if f.Hang > 0 {
		t := b.clock.NewTimer(f.Hang)
		<-t.C()
	}
	if !f.Latency.IsZero() {
		u := 0.0
		if f.Latency.Max > f.Latency.Min {
			u = b.rand()
		}
		if err := clock.Sleep(ctx, b.clock, f.Latency.pick(u)); err != nil {
			return nil, err
		}
	}
	if f.Panic {
		panic(fmt.Errorf("%w: panic: true", ErrInjected))
	}
	for _, w := range f.FailTicks {
		if w.Contains(tick) {
			return nil, fault.Wrap(f.Kind(), fmt.Errorf("%w: tick %d is in fail_ticks window [%d, %d]", ErrInjected, tick, w[0], w[1]))
		}
	}
	if attempt <= f.FailAttempts {
		return nil, fault.Wrap(f.Kind(), fmt.Errorf("%w: attempt %d of the first %d (fail_attempts)", ErrInjected, attempt, f.FailAttempts))
	}
	if f.FailRate > 0 && b.rand() < f.FailRate {
		return nil, fault.Wrap(f.Kind(), fmt.Errorf("%w: fail_rate %g", ErrInjected, f.FailRate))
	}
	return b.settings.Value, nil
}
