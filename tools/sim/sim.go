package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
)

// Epoch is the virtual time at which a simulation starts unless told otherwise: a fixed
// instant, so that the same inputs give the same timestamps.
var Epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultTicks is the length of a simulation given neither Ticks nor For.
const DefaultTicks = 1000

// Options configures a simulation.
type Options struct {
	// Config is the configuration simulated (required).
	Config *config.Config
	// Scenario is played against it (nil: none; it must have passed Check against Config).
	Scenario *Scenario
	// Ticks stops the simulation after this many ticks.
	Ticks int
	// For stops it once this much virtual time has passed (the tick running then finishes).
	For time.Duration
	// Seed selects the random streams (modules' latencies and failures, backoff jitter).
	Seed uint64
	// Start is the virtual time of the start (zero: Epoch).
	Start time.Time
	// Attach, if set, is called with the virtual clock before the engine is made, and
	// returns more observers of the engine and its identity (a flight recorder gives both:
	// its hooks, and the first tick id and run id of the run it records).
	Attach func(c clock.Clock) (cycle.Hooks, cycle.Identity, error)
	// Summaries, if set, receives every summary as it is published, on the engine's tick
	// goroutine. It must not make system calls (write to a file): buffer in memory and
	// write out in Idle. An error stops the simulation.
	Summaries func(*faultsummary.Summary) error
	// Idle, if set, is called on the driver's goroutine whenever every goroutine of the
	// simulation is blocked, and once at the end: the place for I/O. An error stops the
	// simulation.
	Idle func() error
}

// ErrStalled is returned when the simulated engine waits for nothing that virtual time
// can bring: no timer is armed and the run has not finished.
var ErrStalled = errors.New("simulation stalled: nothing left to wait for")

// Run simulates o.Config on virtual time and returns the report of the run. It holds the
// process at one P for its duration (see quiesce.go); simulations in one process run one
// at a time.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Config == nil {
		return nil, errors.New("sim: no configuration")
	}
	if o.Ticks < 0 || o.For < 0 {
		return nil, errors.New("sim: ticks and for must be >= 0")
	}
	if o.Ticks == 0 && o.For == 0 {
		o.Ticks = DefaultTicks
	}
	if o.Start.IsZero() {
		o.Start = Epoch
	}
	end := onePSession()
	defer end()
	r, err := newRunner(o)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if err := r.drive(ctx); err != nil {
		return nil, err
	}
	return r.col.report(r.sc), nil
}

// runner is one simulation in progress.
type runner struct {
	o    Options
	sc   *Scenario
	fake *clock.Fake
	q    *quiescence
	eng  *cycle.Engine
	mods *standIns
	col  *collector
	cfg  *config.Config // the configuration in force (a reload or period event replaces it)
	plan *plan

	evMu     sync.Mutex         // guards the fields below and the scenario's state (standIns, plan)
	stop     context.CancelFunc // ends the scheduler (set while it runs)
	stopped  bool
	ticks    int
	errMu    sync.Mutex
	err      error // the first error of a hook or an event
	stepMode bool
}

func newRunner(o Options) (*runner, error) {
	sc := o.Scenario
	if sc == nil {
		sc = &Scenario{dir: "."}
	}
	r := &runner{o: o, sc: sc, fake: clock.NewFake(o.Start), q: newQuiescence(), cfg: o.Config}
	r.mods = newStandIns(o.Seed, r.fake, sc.StandIn, sc.Replace)
	ec, regs, err := r.build(o.Config)
	if err != nil {
		return nil, err
	}
	r.stepMode = ec.Period == 0
	r.col = newCollector(o.Start)
	r.plan = newPlan(sc, o.Start)
	jitter := newRand(o.Seed, "\x00engine-jitter")
	var jmu sync.Mutex
	hooks := cycle.Hooks{
		OnTick:    r.onTick,
		OnBreaker: func(t breaker.Transition) { r.col.breaker(t) },
	}
	opts := []cycle.Option{cycle.WithClock(r.fake), cycle.WithHooks(hooks),
		cycle.WithRand(func() float64 { jmu.Lock(); defer jmu.Unlock(); return jitter.Float64() })}
	if o.Attach != nil {
		h, id, err := o.Attach(r.fake)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		opts = append(opts, cycle.WithHooks(h), cycle.WithIdentity(id))
	}
	r.eng, err = cycle.New(ec, regs, opts...)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return r, nil
}

// build converts cfg into the engine's configuration with simulated modules.
func (r *runner) build(cfg *config.Config) (cycle.Config, []cycle.Registration, error) {
	ec, regs, ps := cfg.Engine(config.WithClock(r.fake))
	if err := ps.Err(); err != nil {
		return ec, nil, fmt.Errorf("sim: %w", err)
	}
	if err := r.mods.wrap(regs); err != nil {
		return ec, nil, fmt.Errorf("sim: %w", err)
	}
	return ec, regs, nil
}

func (r *runner) fail(err error) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

func (r *runner) firstErr() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}

// onTick records a published summary, ends a run of o.Ticks ticks, and applies the events
// due before the next tick (on the tick's goroutine: before the scheduler starts it).
func (r *runner) onTick(s *faultsummary.Summary) {
	r.col.add(s)
	r.evMu.Lock()
	r.ticks++
	n := r.ticks
	r.evMu.Unlock()
	if r.o.Summaries != nil {
		if err := r.o.Summaries(s); err != nil {
			r.fail(err)
		}
	}
	if (r.o.Ticks > 0 && n >= r.o.Ticks) || r.firstErr() != nil {
		r.halt()
		return
	}
	r.applyTickEvents(uint64(n) + 1)
}

// halt stops the run after the tick in progress.
func (r *runner) halt() {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	r.stopped = true
	if r.stop != nil {
		r.stop()
	}
}

func (r *runner) close() {
	r.eng.Close()
	// Release modules still hanging on the virtual clock, so that their goroutines end.
	for i := 0; i < 1_000_000; i++ {
		next, ok := r.fake.Next()
		if !ok {
			break
		}
		r.fake.Set(next)
		r.q.settle()
	}
}
