package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

// errSimulated is wrapped by every failure the scenario injects.
var errSimulated = errors.New("simulated fault")

// standInValue is what an http module's stand-in returns on success.
var standInValue = map[string]any{"simulated": true}

// behaviour is a module's scenario state: what it does besides its configuration.
type behaviour struct {
	latency  *Dist
	failRate float64
	failKind fault.Kind
	hang     int64 // nanoseconds
	panics   bool
	outage   fault.Kind // KindNone: no outage of its downstream
}

// modState is one module's simulation state, shared by every instance built for the
// module's name (a reload rebuilds modules; their randomness and behaviour go on).
type modState struct {
	name string
	mu   sync.Mutex // guards rng: an abandoned run may still draw while a new instance runs
	rng  *rand.Rand
	beh  atomic.Pointer[behaviour]
}

func (m *modState) float() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rng.Float64()
}

func (m *modState) latency(d *Dist) (v int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(d.sample(m.rng))
}

// newRand returns the random source of stream name under seed: every module draws from
// its own, so the order in which goroutines run at one virtual instant changes no draw.
func newRand(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// simModule is a module of the simulated configuration: a builtin module (inner) under
// the scenario's behaviour, or the stand-in of an http module (inner nil).
type simModule struct {
	st    *modState
	inner tiers.Module
	clk   clock.Clock
}

// Run applies the scenario's behaviour (hang, latency, panic, outage, failure rate), then
// runs the builtin module, or succeeds for a stand-in.
func (m *simModule) Run(ctx context.Context, in *tiers.Input) (any, error) {
	b := m.st.beh.Load()
	if b != nil {
		if err := m.apply(ctx, b); err != nil {
			return nil, err
		}
	}
	if m.inner != nil {
		return m.inner.Run(ctx, in)
	}
	return standInValue, nil
}

func (m *simModule) apply(ctx context.Context, b *behaviour) error {
	if b.hang > 0 {
		<-m.clk.NewTimer(durationOf(b.hang)).C()
	}
	if b.latency != nil {
		if err := clock.Sleep(ctx, m.clk, durationOf(m.st.latency(b.latency))); err != nil {
			return err
		}
	}
	if b.panics {
		panic(fmt.Errorf("%w: panic", errSimulated))
	}
	if b.outage != fault.KindNone {
		return fault.Wrap(b.outage, fmt.Errorf("%w: downstream outage", errSimulated))
	}
	if b.failRate > 0 && m.st.float() < b.failRate {
		return fault.Wrap(b.failKind, fmt.Errorf("%w: fail_rate %g", errSimulated, b.failRate))
	}
	return nil
}

// standIns builds the simulated modules of a configuration and keeps their state.
type standIns struct {
	seed   uint64
	clk    clock.Clock
	states map[string]*modState
	// builtins are the builtin modules of the configuration in force, by name, for the
	// scenario to patch their latency when it replaces it.
	builtins map[string]*modules.Builtin
	specs    map[string]tiers.ModuleSpec
	base     Behaviour // the stand-ins' default behaviour (Scenario.StandIn)
	replace  bool      // every module is a stand-in (Scenario.Replace)
}

func newStandIns(seed uint64, clk clock.Clock, base Behaviour, replace bool) *standIns {
	return &standIns{seed: seed, clk: clk, states: map[string]*modState{}, base: base, replace: replace}
}

func (s *standIns) state(name string) *modState {
	st := s.states[name]
	if st == nil {
		st = &modState{name: name, rng: newRand(s.seed, name)}
		s.states[name] = st
	}
	return st
}

// wrap replaces every registration's module by its simulated counterpart: builtin modules
// are rebuilt on the virtual clock with the module's own random stream; http modules get a
// stand-in with the scenario's default behaviour.
func (s *standIns) wrap(regs []cycle.Registration) error {
	s.builtins = map[string]*modules.Builtin{}
	s.specs = map[string]tiers.ModuleSpec{}
	for i, r := range regs {
		st := s.state(r.Spec.Name)
		m := &simModule{st: st, clk: s.clk}
		switch b := r.Module.(type) {
		case *modules.Builtin:
			if s.replace {
				if st.beh.Load() == nil {
					s.setBehaviour(st, s.base, false)
				}
				break
			}
			nb, err := modules.NewBuiltin(b.Settings(), modules.WithClock(s.clk), modules.WithRand(st.float))
			if err != nil {
				return fmt.Errorf("module %q: %w", r.Spec.Name, err)
			}
			m.inner = nb
			s.builtins[r.Spec.Name] = nb
		default:
			if st.beh.Load() == nil {
				s.setBehaviour(st, s.base, false)
			}
		}
		regs[i].Module = m
		s.specs[r.Spec.Name] = r.Spec
	}
	return nil
}

// setBehaviour sets st's behaviour from b over the current one (or over none with reset).
func (s *standIns) setBehaviour(st *modState, b Behaviour, reset bool) {
	var nb behaviour
	if old := st.beh.Load(); old != nil && !reset {
		nb = *old
	}
	if b.Latency != nil {
		nb.latency = b.Latency
		if bi := s.builtins[st.name]; bi != nil {
			zero := modules.Latency{}
			_, _ = bi.PatchFaults(modules.FaultsPatch{Latency: &zero}) // the scenario's latency replaces it
		}
	}
	if b.FailRate != nil {
		nb.failRate = *b.FailRate
	}
	if b.FailKind != nil {
		nb.failKind = *b.FailKind
	}
	if nb.failKind == fault.KindNone {
		nb.failKind = fault.KindTransient
	}
	if b.Hang != nil {
		nb.hang = int64(*b.Hang)
	}
	if b.Panic != nil {
		nb.panics = *b.Panic
	}
	st.beh.Store(&nb)
}

// restore returns the module to its configured behaviour.
func (s *standIns) restore(name string) {
	st := s.state(name)
	if bi := s.builtins[name]; bi != nil {
		bi.ResetFaults()
		st.beh.Store(nil)
		return
	}
	st.beh.Store(nil)
	s.setBehaviour(st, s.base, true)
}

// outage starts (kind set) or ends (KindNone) the outage of breaker's downstream.
func (s *standIns) outage(breaker string, kind fault.Kind) {
	for name, spec := range s.specs {
		if spec.Breaker == breaker || (spec.Breaker == "" && name == breaker) {
			st := s.state(name)
			var nb behaviour
			if old := st.beh.Load(); old != nil {
				nb = *old
			}
			nb.outage = kind
			if nb.failKind == fault.KindNone {
				nb.failKind = fault.KindTransient
			}
			st.beh.Store(&nb)
		}
	}
}
