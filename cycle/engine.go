package cycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/internal/ktimer"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/retrybudget"
	"github.com/cycled/cycled/tiers"
)

// Sentinel errors of the engine, checked with errors.Is.
var (
	// ErrNotStepMode: Tick was called while the scheduler runs on a period.
	ErrNotStepMode = errors.New("engine is not in step mode")
	// ErrClosed: the engine was closed.
	ErrClosed = errors.New("engine closed")
	// ErrDuplicate: a module with that name is already registered.
	ErrDuplicate = errors.New("module already registered")
	// ErrNotFound: no module or breaker with that name.
	ErrNotFound = errors.New("not found")
	// ErrNotRuntime: the module comes from the configuration file; only a reload removes it.
	ErrNotRuntime = errors.New("module is declared in the configuration, not registered at runtime")
	// ErrRunning: Run was called while the scheduler already runs.
	ErrRunning = errors.New("scheduler already running")
)

// ModuleEvent is one module's outcome in one tick, delivered to Hooks.OnModule.
type ModuleEvent struct {
	TickID   uint64
	Module   string
	Tier     string
	Status   faultsummary.Status
	Attempts int
	Latency  time.Duration
	Kind     fault.Kind
	Err      error
}

// Hooks are observer callbacks. Nil fields are not called. They run synchronously on the
// engine's goroutines (OnBreaker also on whichever goroutine moved the breaker, which can
// be an API reader half-opening it lazily) and must not block: a consumer that does I/O
// hands the event to its own queue.
type Hooks struct {
	// OnTick receives every summary once it is published.
	OnTick func(*faultsummary.Summary)
	// OnModule receives every module outcome of a tick, before OnTick.
	OnModule func(ModuleEvent)
	// OnBreaker receives breaker transitions.
	OnBreaker func(breaker.Transition)
	// OnEmergency receives emergency enter and leave events.
	OnEmergency func(faultsummary.EmergencyEvent)
	// OnAbandon is called when a module is abandoned at its tier deadline.
	OnAbandon func(module string, tick uint64)
	// OnApply is called at the tick boundary where a configuration change takes effect.
	OnApply func(version uint64)
	// OnBreakerConfig is called when a breaker's settings change hands: a reload replaced
	// it (at the tick boundary where it applies), or a runtime registration with other
	// settings was ignored (see Engine.RegisterBreaker).
	OnBreakerConfig func(BreakerConfigEvent)

	// OnShed is called at every step of load shedding, shed or restored.
	OnShed func(ShedEvent)
	// OnStartup is called when startup ends.
	OnStartup func(StartupEvent)
	// OnAsync is called when an asynchronous module's runs change state (ok to failing,
	// failing to ok), once per change.
	OnAsync func(AsyncEvent)
}

// Option configures an Engine.
type Option interface{ apply(*engineOptions) }

type engineOptions struct {
	clock clock.Clock
	rand  func() float64
	hooks []Hooks
	ident Identity
	gate  Gate // see gate.go
}

// Identity is what an engine stamps on its ticks besides their content (WithIdentity).
type Identity struct {
	// FirstTick is the id of the first tick (0 means 1): a daemon that records its ticks
	// continues after the last recorded one, so that ids never repeat.
	FirstTick uint64
	// RunID is copied into every summary's run_id.
	RunID string
	// Annotate, if set, is called with every summary just before it is published, on the
	// tick's goroutine; it may set the summary's fields that the engine does not (such
	// as Recorder) and must not block.
	Annotate func(*faultsummary.Summary)
}

// WithIdentity sets the first tick id, the run id and the annotation of summaries.
func WithIdentity(id Identity) Option {
	return optionFunc(func(o *engineOptions) { o.ident = id })
}

type optionFunc func(*engineOptions)

func (f optionFunc) apply(o *engineOptions) { f(o) }

// WithClock sets the engine's clock. Default clock.Real().
func WithClock(c clock.Clock) Option {
	return optionFunc(func(o *engineOptions) { o.clock = clock.Or(c) })
}

// WithRand sets the jitter source of the retry backoff (uniform in [0, 1)).
func WithRand(f func() float64) Option { return optionFunc(func(o *engineOptions) { o.rand = f }) }

// WithHooks adds observer hooks.
func WithHooks(h Hooks) Option {
	return optionFunc(func(o *engineOptions) { o.hooks = append(o.hooks, h) })
}

// state is one applied configuration.
type state struct {
	version  uint64
	cfg      Config // defaults applied
	plan     *tiers.Plan
	regs     map[string]regRef
	order    []string // registration order, for validation paths
	skip     []bool   // per tier: skipped in emergency mode
	tierMods [][]*modRT
	lines    []*modRT // every module in summary order
	// async are the asynchronous modules: planned, but outside the tiers and the summary's
	// lines (see asyncBook).
	async []*tiers.PlannedModule

	// named holds the named breakers of st's configuration, used by a module or not; the
	// other breakers st holds are its modules' own (see breakers).
	named map[string]*breaker.Breaker

	// What installing st at a tick boundary still changes in the engine's shared stores, as
	// prepared off the tick path (Engine.prepare); nil once st is installed.
	carry *carry
	resil *resilience // bulkheads and retry budgets; nil: none configured

	// The keys as listed in degraded_keys when nothing (2i) or an expired value (2i+1)
	// is served for line i, made on first need by whoever settles a tier (one at a time):
	// a module that keeps failing costs no new string per tick, and only modules that
	// degraded cost memory.
	degraded map[int]string

	// exc holds, per tier, the list of exceptions its tier runs reuse tick after tick (see
	// tierRun.exception); made on a tier's first exception.
	exc []atomic.Pointer[excList]
	// kept holds, per summary line, how the module's last settling went if the next may
	// repeat it (see keptLine); made on the first, written by whoever settles the
	// module's tier (one at a time, tick after tick). Not on the worker: a worker of
	// 288 bytes is a size class, and one more word would make it 320.
	kept []*keptLine
	// keptVer counts the changes to what kept says (see keptLine); written by whoever
	// settles a tier, read by the engine at the tick's end.
	keptVer uint64
	// keptTiers holds, per tier, what settling its kept exceptions found (see keptTier);
	// made on the first, written by whoever settles the tier.
	keptTiers []keptTier
}

// degradedKey returns the key of rt with " (none)", or " (expired)", for degraded_keys.
func (st *state) degradedKey(rt *modRT, expired bool) string {
	i, suffix := 2*int(rt.idx), " (none)"
	if expired {
		i, suffix = i+1, " (expired)"
	}
	k, ok := st.degraded[i]
	if !ok {
		if st.degraded == nil {
			st.degraded = make(map[int]string)
		}
		k = rt.key + suffix
		st.degraded[i] = k
	}
	return k
}

// regRef is what a state keeps of a registration besides its spec, which it keeps once,
// in the plan (a second copy is memory per module that large cycles feel): the plan fills in the tier
// of a module placed by depends_on, so whether it was registered without one is kept apart.
type regRef struct {
	plan   int32 // index in plan.Modules
	noTier bool  // registered without a tier (placed by depends_on)
	id     uint64
	module tiers.Module
	origin Origin
}

// registration returns the registration of module name as it was registered.
func (st *state) registration(name string) (Registration, bool) {
	ref, ok := st.regs[name]
	if !ok {
		return Registration{}, false
	}
	spec := st.plan.Modules[ref.plan].Spec
	if ref.noTier {
		spec.Tier = ""
	}
	return Registration{Spec: spec, Module: ref.module, Origin: ref.origin, id: ref.id}, true
}

// modRT is a module's runtime: its worker, breaker and last outcome.
//
// It fits 128 bytes, a size class of two whole cache lines, which every admission and
// verdict of the module reads (TestModRTSize): what can be derived from the spec (the
// breaker's name) is not kept.
type modRT struct {
	id      uint64 // the registration's identity
	name    string
	spec    *tiers.ModuleSpec // points into the plan
	planned *tiers.PlannedModule
	key     string
	mod     tiers.Module
	br      *breaker.Breaker
	w       *worker
	idx     int32 // index of the module's line in the summary
	tierPos int32 // index of the module in its tier
	bslot   *blackboard.Slot
	lslot   *lastgood.Slot
	res     *rtExtra      // its bulkhead and retry budget; nil: neither (the common case)
	policy  decide.Policy // what the verdict on its outcome looks at
	// gated: a fact of its admission gate is set by its spec (it runs every few ticks, or
	// only in emergency mode); read instead of the spec for every module of every tick.
	gated bool
}

// gatedBy reports whether spec sets a fact of a module's admission gate (decide.Gate):
// it runs every few ticks, or only in emergency mode.
func gatedBy(spec *tiers.ModuleSpec) bool { return spec.Every > 1 || spec.Emergency }

// breakerName returns the name of rt's breaker: the named breaker of its spec, or its own,
// which carries the module's name.
func (rt *modRT) breakerName() string {
	if rt.spec.Breaker != "" {
		return rt.spec.Breaker
	}
	return rt.name
}

// sameModule reports whether a and b are the same module implementation: equal interface
// values. Two values of a type that == cannot compare (a func, such as tiers.ModuleFunc)
// are never the same: comparing them panics, and the panic is the answer. It is asked
// only when a registration comes without an identity (see Registration.id), on a reload
// or registration, never per tick.
func sameModule(a, b tiers.Module) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// Engine runs ticks. It is safe for concurrent use; ticks are serialised.
type Engine struct {
	clock  clock.Clock
	runner *retrybudget.Runner
	pool   *pool
	subs   []subscriber // every event goes to each, once (see event)
	ident  Identity
	gate   Gate // nil: every tick starts (see gate.go)

	lg       *lastgood.Store
	board    *blackboard.Board
	breakers *breaker.Registry
	history  *faultsummary.History
	hub      *faultsummary.Hub

	cfgMu   sync.Mutex
	desired *state // guarded by cfgMu; the state the next tick boundary applies
	version uint64 // guarded by cfgMu
	lastReg uint64 // the last registration identity given; guarded by cfgMu
	// rtBreakers are the named breakers registered at runtime (RegisterBreaker), kept
	// across reloads that do not declare them; guarded by cfgMu.
	rtBreakers map[string]breaker.Settings

	pending atomic.Pointer[state] // desired, for the tick boundary, which reads it without cfgMu
	wake    chan struct{}         // capacity 1: a configuration change or Close for a sleeping Run (see wakeup)
	// pendingSince is when the desired state last became different from the one in force
	// (UnixNano on the engine's clock; 0: none pending), for PendingFor.
	pendingSince atomic.Int64

	tickMu     sync.Mutex
	active     *state           // guarded by tickMu
	rebuilt    int              // guarded by tickMu: states the boundary had to prepare itself (applyPending)
	from       *state           // guarded by tickMu: the desired state active was installed from (itself, or its copy's original)
	nextID     uint64           // guarded by tickMu
	em         decide.Emergency // guarded by tickMu
	pendingGap int              // guarded by tickMu: grid points skipped before the next tick
	timer      clock.Timer      // guarded by tickMu
	spinNet    clock.Timer      // guarded by tickMu; see Engine.spinWait
	kt         *ktimer.Timer    // guarded by tickMu; finishes coarse deadline waits (see kernelTimer)
	ktNone     bool             // guarded by tickMu; there is no kernel timer to be had
	stall      stallWatch
	curTick    atomic.Uint64

	running   atomic.Bool // the scheduler runs
	closed    atomic.Bool
	workersWG sync.WaitGroup
	lines     *linePrep

	activeView atomic.Pointer[state] // for readers outside the tick
	resetReq   atomic.Bool           // operator reset of a latched emergency, consumed at the next tick
	emView     atomic.Pointer[faultsummary.EmergencyStatus]
	emPrev     *faultsummary.EmergencyEpisode // the episode before the current or last one; under tickMu
	realClock  bool
	grid       gridTimer // Run's kernel timer for grid points; used by Run's goroutine only

	circ circuitBook // the breakers not closed, for the summaries

	// What the last tick needed, to size the next one's lists at once; guarded by tickMu.
	lastExtras, lastServed, lastDegraded int
	// The lists a steady state of failures or refusals repeats tick after tick, guarded by
	// tickMu (see repeated).
	extras repeated[lineEx]
	keys   repeated[string]
	// How long the engine last waited for a spinning segment (see Engine.wait); guarded by tickMu.
	lastWait time.Duration

	guard guards    // load shedding and startup (guards.go)
	async asyncBook // asynchronous modules (async.go)
}

// New validates cfg and mods and returns an engine. Modules start in the first tick.
func New(cfg Config, mods []Registration, opts ...Option) (*Engine, error) {
	o := engineOptions{clock: clock.Real()}
	for _, op := range opts {
		op.apply(&o)
	}
	c := cfg.withDefaults()
	e := &Engine{
		clock:  o.clock,
		ident:  o.ident,
		gate:   o.gate,
		nextID: max(o.ident.FirstTick, 1) - 1,
		lg:     lastgood.New(lastgood.WithDefaultTTL(c.DefaultTTL)),
		hub:    faultsummary.NewHub(),
		wake:   make(chan struct{}, 1),
	}
	e.guard.starting.Store(cfg.Startup != nil) // not ready before the first tick either
	e.subs = append(e.subs, hubSubscriber(e.hub))
	for _, h := range o.hooks {
		e.subs = append(e.subs, hooksSubscriber(h))
	}
	e.realClock = clock.IsReal(o.clock)
	e.lines = newLinePrep(&e.workersWG)
	ropts := []retrybudget.Option{retrybudget.WithClock(o.clock)}
	if o.rand != nil {
		ropts = append(ropts, retrybudget.WithRand(o.rand))
	}
	e.runner = retrybudget.New(ropts...)
	e.pool = newPool(e)
	e.board = blackboard.New(e.lg)
	e.history = faultsummary.NewHistory(c.History)
	e.breakers = breaker.NewRegistry(breaker.WithClock(o.clock), breaker.WithListener(e.onBreaker))
	for i := range mods {
		if mods[i].Origin == "" {
			mods[i].Origin = FromConfig
		}
	}
	st, err := e.buildState(cfg, mods)
	if err != nil {
		return nil, err
	}
	e.version = st.version
	e.active = &state{cfg: st.cfg, plan: &tiers.Plan{}, regs: map[string]regRef{}}
	e.prepare(st, e.active)
	e.desired = st
	e.pending.Store(st)
	e.install(st)
	e.from = st
	return e, nil
}

func (e *Engine) buildState(cfg Config, mods []Registration) (*state, error) {
	plan, ps := Validate(cfg, mods)
	if err := ps.Err(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	// Sized once, as the slices below: a state is held while it is in force, and a slice
	// grown by appending keeps up to a quarter more than its length.
	st := &state{cfg: c, plan: plan, regs: make(map[string]regRef, len(mods)), order: make([]string, 0, len(mods))}
	for _, m := range mods {
		st.regs[m.Spec.Name] = regRef{id: e.identify(m), module: m.Module, origin: m.Origin, noTier: m.Spec.Tier == ""}
		st.order = append(st.order, m.Spec.Name)
	}
	for i := range plan.Modules {
		ref := st.regs[plan.Modules[i].Spec.Name]
		ref.plan = int32(i)
		st.regs[plan.Modules[i].Spec.Name] = ref
	}
	st.skip = make([]bool, len(c.Tiers))
	if cfg.Emergency.SkipTiers == nil {
		for i := 1; i < len(st.skip); i++ {
			st.skip[i] = true
		}
	} else {
		idx := make(map[string]int)
		for i, t := range c.Tiers {
			idx[t.Name] = i
		}
		for _, n := range cfg.Emergency.SkipTiers {
			st.skip[idx[n]] = true
		}
	}
	e.version++
	st.version = e.version
	return st, nil
}

// identify returns the identity of registration m in the state being built: its own if
// it has one; else that of the registration of the same name in the desired state when
// the module is the same implementation (a reload passing the module in force again, as
// the configuration's reload does for an unchanged module), which keeps its worker; else a
// new one. Called with cfgMu held (or from New).
func (e *Engine) identify(m Registration) uint64 {
	if m.id != 0 {
		return m.id
	}
	if e.desired != nil {
		if old, ok := e.desired.regs[m.Spec.Name]; ok && sameModule(old.module, m.Module) {
			return old.id
		}
	}
	e.lastReg++
	return e.lastReg
}

// registrations returns the registrations of st in registration order.
func (st *state) registrations() []Registration {
	out := make([]Registration, 0, len(st.order))
	for _, n := range st.order {
		r, _ := st.registration(n)
		out = append(out, r)
	}
	return out
}

// Reload replaces the configuration and the configuration's modules; modules registered at
// runtime are kept. The whole change is validated first and rejected whole if invalid
// (the error is a *tiers.ValidationError); it takes effect at the next tick boundary.
//
// A reload that would take a module out of the safety tier (see ErrSafetyRemoval) is
// refused unless opts allow it.
func (e *Engine) Reload(cfg Config, mods []Registration, opts ...ChangeOption) error {
	if e.closed.Load() {
		return ErrClosed
	}
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	all := make([]Registration, 0, len(mods))
	for _, m := range mods {
		if m.Origin == "" {
			m.Origin = FromConfig
		}
		all = append(all, m)
	}
	for _, r := range e.desired.registrations() {
		if r.Origin == FromRuntime {
			all = append(all, r)
		}
	}
	st, err := e.buildState(e.withRuntimeBreakers(cfg), all)
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	if err := checkSafety(e.desired, st, opts); err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	for name := range cfg.Breakers {
		delete(e.rtBreakers, name) // declared now: a later reload without it drops it
	}
	e.publish(st)
	return nil
}

// Register adds a module at runtime (Origin FromRuntime unless set). It is validated
// together with the current configuration (a *tiers.ValidationError names the fields) and
// runs from the next tick on.
func (e *Engine) Register(r Registration) error {
	if e.closed.Load() {
		return ErrClosed
	}
	if r.Origin == "" {
		r.Origin = FromRuntime
	}
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	if _, dup := e.desired.regs[r.Spec.Name]; dup {
		return fmt.Errorf("register %q: %w", r.Spec.Name, ErrDuplicate)
	}
	all := append(e.desired.registrations(), r)
	st, err := e.buildState(e.desired.cfg, all)
	if err != nil {
		return fmt.Errorf("register %q: %w", r.Spec.Name, err)
	}
	e.publish(st)
	return nil
}

// Deregister removes a runtime-registered module at the next tick boundary. A module of
// the safety tier is removed only if opts allow it (see ErrSafetyRemoval).
func (e *Engine) Deregister(name string, opts ...ChangeOption) error {
	if e.closed.Load() {
		return ErrClosed
	}
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	r, ok := e.desired.regs[name]
	if !ok {
		return fmt.Errorf("deregister %q: %w", name, ErrNotFound)
	}
	if r.origin != FromRuntime {
		return fmt.Errorf("deregister %q: %w", name, ErrNotRuntime)
	}
	var rest []Registration
	for _, x := range e.desired.registrations() {
		if x.Spec.Name != name {
			rest = append(rest, x)
		}
	}
	st, err := e.buildState(e.desired.cfg, rest)
	if err != nil {
		return fmt.Errorf("deregister %q: %w", name, err)
	}
	if err := checkSafety(e.desired, st, opts); err != nil {
		return fmt.Errorf("deregister %q: %w", name, err)
	}
	e.publish(st)
	return nil
}

// applyPending installs the desired state if it changed. Called with tickMu held, at a tick
// boundary. The state was prepared off the tick path against the state then in force;
// only if another one was installed since does the boundary prepare it again itself.
func (e *Engine) applyPending() {
	st := e.pending.Load()
	if st == e.from { // the common case: one pointer compared, no state read
		return
	}
	from := st
	if st.version == e.active.version {
		e.from = from // a copy of the same state (see publish)
		return
	}
	if c := st.carry; c == nil || c.base != e.active {
		st = st.unprepared()
		e.prepare(st, e.active)
		e.rebuilt++
	}
	e.install(st)
	e.from = from
}

// newRuntimes makes the runtimes of st's modules, tier by tier; a module whose
// registration has the same identity as in oldRT keeps its worker (a run still
// outstanding keeps it busy) and is removed from oldRT. It returns the breakers st needs
// and their names in the order the runners visit them, named breakers no module uses last.
// A module's own breaker carries the module's name and its tier's settings.
func (st *state) newRuntimes(oldRT map[string]*modRT) (map[string]breaker.Settings, []string) {
	want := map[string]breaker.Settings{}
	var order []string
	for name, s := range st.cfg.Breakers {
		s.Name = name
		if s.TripOn.Empty() {
			s.TripOn = fault.SetOf(fault.KindTransient, fault.KindDownstream)
		}
		want[name] = s
	}
	st.tierMods = make([][]*modRT, len(st.cfg.Tiers))
	perTier := make([]int, len(st.cfg.Tiers))
	for i := range st.plan.Modules {
		if pm := &st.plan.Modules[i]; !pm.Spec.Async {
			perTier[pm.TierIndex]++
		}
	}
	for ti, n := range perTier {
		st.tierMods[ti] = make([]*modRT, 0, n)
	}
	st.exc = make([]atomic.Pointer[excList], len(st.cfg.Tiers))
	for i := range st.plan.Modules { // sorted by tier: the order the runners visit them
		pm := &st.plan.Modules[i]
		if pm.Spec.Async {
			st.async = append(st.async, pm) // no runtime in the tiers, no breaker
			continue
		}
		reg := st.regs[pm.Spec.Name]
		rt := &modRT{id: reg.id, name: pm.Spec.Name, spec: &pm.Spec, planned: pm, key: pm.Spec.Key(), mod: reg.module,
			policy: decide.Policy{Policy: pm.Policy,
				OnOpen: pm.Spec.OnOpen, Safety: pm.TierIndex == 0, EmergencyOnly: pm.Spec.Emergency, OnReject: pm.Spec.OnReject},
			gated: gatedBy(&pm.Spec)}
		if pm.Spec.Breaker == "" {
			s := st.cfg.Tiers[pm.TierIndex].Breaker
			s.Name = pm.Spec.Name
			want[pm.Spec.Name] = s
		}
		order = append(order, rt.breakerName())
		if prev, ok := oldRT[rt.name]; ok && prev.id == rt.id {
			rt.w = prev.w
			delete(oldRT, rt.name)
		}
		st.tierMods[pm.TierIndex] = append(st.tierMods[pm.TierIndex], rt)
	}
	for name := range st.cfg.Breakers {
		order = append(order, name) // named breakers no module uses still exist
	}
	return want, order
}

// prepareBreakers finds or makes the breakers st needs (want), in order, without
// registering them: a breaker whose settings changed is made anew (the operator changed it)
// and replaces the old one when st is installed, as a new one is added then; the breakers
// of base that st does not want are removed then. Made in the order the runners visit
// them, a tier's breakers (like its runtimes, workers and slots) lie mostly in the order of
// its modules in memory, which the CPU can prefetch when a large tick does not fit in its
// cache.
func (e *Engine) prepareBreakers(st, base *state, want map[string]breaker.Settings, order []string) map[string]*breaker.Breaker {
	brs, had := make(map[string]*breaker.Breaker, len(want)), base.breakers()
	for _, name := range order {
		s, ok := want[name]
		if !ok || brs[name] != nil {
			continue
		}
		b, fresh := e.breakers.Prepare(s)
		brs[name] = b
		if _, named := st.cfg.Breakers[name]; named {
			if st.named == nil {
				st.named = make(map[string]*breaker.Breaker, len(st.cfg.Breakers))
			}
			st.named[name] = b
		}
		if fresh {
			st.carry.breakers = append(st.carry.breakers, b)
			if old := had[name]; old != nil { // the operator changed its settings
				st.carry.replaced = append(st.carry.replaced, BreakerConfigEvent{Name: name, Replaced: true,
					Diff: breaker.Diff(old.Settings(), s.WithDefaults()), Version: st.version})
			}
		}
	}
	for name := range had {
		if _, ok := want[name]; !ok {
			st.carry.dropBreakers = append(st.carry.dropBreakers, name)
		}
	}
	return brs
}

// breakers returns the breakers the registry holds while st is in force, by name: its
// modules' and its named ones. Asked when preparing the state that follows st, it is not
// kept: a map of every module's breaker would be memory per module held all along.
func (st *state) breakers() map[string]*breaker.Breaker {
	m := make(map[string]*breaker.Breaker, len(st.lines)+len(st.named))
	for _, rt := range st.lines {
		m[rt.breakerName()] = rt.br
	}
	maps.Copy(m, st.named)
	return m
}

// placeRuntimes numbers st's runtimes in summary order and attaches each to its breaker,
// last-known-good and blackboard slots and worker (a new one if it kept none). A key whose
// TTL differs from base's is left for installing st to set.
func (e *Engine) placeRuntimes(st, base *state, brs map[string]*breaker.Breaker) {
	ttls := make(map[string]lastgood.TTL, len(base.lines))
	for _, rt := range base.lines {
		ttls[rt.key] = rt.spec.TTL
	}
	c, n := st.carry, 0
	total := 0
	for _, ms := range st.tierMods {
		total += len(ms)
	}
	st.lines = make([]*modRT, 0, total)
	for _, ms := range st.tierMods {
		for pos, rt := range ms {
			rt.tierPos = int32(pos)
			rt.idx = int32(n)
			n++
			st.lines = append(st.lines, rt)
			rt.br = brs[rt.breakerName()]
			if t, ok := ttls[rt.key]; !ok || t != rt.spec.TTL {
				c.ttls = append(c.ttls, rt)
			}
			rt.lslot = e.lg.Slot(rt.key)
			rt.bslot = e.board.Slot(rt.key)
			if rt.w == nil {
				rt.w = e.newWorker(rt)
			}
		}
	}
}

// removeBreaker removes the breaker called name, and its state from the circuits the
// summary lists: a breaker created again in its place (a reload that changed its settings)
// starts closed, and no transition of the old one will say so.
func (e *Engine) removeBreaker(name string) {
	e.breakers.Remove(name)
	e.circ.remove(name)
}

// onBreaker is the breakers' listener: it records the transition for the summaries and
// publishes it.
func (e *Engine) onBreaker(t breaker.Transition) {
	e.circ.moved(t)
	e.emit(event{kind: evBreaker, tick: e.curTick.Load(), breaker: t})
}

// History returns the bounded history of summaries.
func (e *Engine) History() *faultsummary.History { return e.history }

// Events returns the hub on which ticks, breaker transitions and emergency changes are published.
func (e *Engine) Events() *faultsummary.Hub { return e.hub }

// Latest returns the newest summary, or nil before the first tick.
func (e *Engine) Latest() *faultsummary.Summary { return e.history.Latest() }

// Clock returns the engine's clock.
func (e *Engine) Clock() clock.Clock { return e.clock }

// Config returns the configuration in force (defaults applied).
func (e *Engine) Config() Config { return e.activeView.Load().cfg }

// StepMode reports whether the engine runs ticks only on demand (period 0).
func (e *Engine) StepMode() bool { return e.activeView.Load().cfg.Period == 0 }

// Pending returns the configuration that the next tick boundary puts in force, and how
// long it has been waiting on the engine's clock; ok is false when the configuration in
// force is the latest (nothing waits). The scheduler applies a pending configuration at
// its next grid point, or one new period after the last tick if the new period is shorter
// (see Run), so a wait much longer than that means that the scheduler is stuck.
func (e *Engine) Pending() (cfg Config, waited time.Duration, ok bool) {
	p := e.pending.Load()
	if p.version == e.activeView.Load().version {
		return Config{}, 0, false
	}
	return p.cfg, max(e.clock.Now().Sub(time.Unix(0, e.pendingSince.Load())), 0), true
}

// Breakers returns a snapshot of every breaker, sorted by name.
func (e *Engine) Breakers() []breaker.Snapshot { return e.breakers.List() }

// ResetBreaker closes the named breaker and clears its counters (operator action).
func (e *Engine) ResetBreaker(name string) error {
	b, ok := e.breakers.Get(name)
	if !ok {
		return fmt.Errorf("breaker %q: %w", name, ErrNotFound)
	}
	b.Reset()
	return nil
}

// Blackboard returns the entries served after the latest completed tick (live values and
// tagged fallbacks), one per module, in summary order. It is built from the latest summary,
// so a reader never sees a half-written tick.
func (e *Engine) Blackboard() []blackboard.Entry {
	s := e.history.Latest()
	if s == nil {
		return nil
	}
	out := make([]blackboard.Entry, 0, len(s.Modules()))
	for _, m := range s.Modules() {
		sv := m.Served
		out = append(out, blackboard.Entry{Key: sv.Key, Value: sv.Value, Module: m.Name, TickID: sv.WrittenTick,
			Seq: sv.Seq, Written: sv.Written, Source: sv.Source, Stale: sv.Stale, Expired: sv.Expired,
			Age: time.Duration(sv.AgeMs * float64(time.Millisecond)), DerivedFromStale: sv.DerivedFromStale})
	}
	return e.asyncEntries(s, out)
}

// ModuleInfo is what the engine knows about a module.
type ModuleInfo struct {
	Spec      tiers.ModuleSpec
	TierIndex int
	Attempts  int
	Policy    tiers.Policy
	Origin    Origin
	Module    tiers.Module
	Breaker   breaker.Snapshot
	Busy      bool
	Last      *faultsummary.Module
	LastGood  lastgood.Lookup
	// Pending reports a module registered but not yet applied at a tick boundary.
	Pending bool
}

// Modules returns every module of the configuration in force, then pending registrations.
func (e *Engine) Modules() []ModuleInfo {
	st := e.activeView.Load()
	now := e.clock.Now()
	latest := e.history.Latest()
	var out []ModuleInfo
	seen := map[string]bool{}
	for _, ms := range st.tierMods {
		for _, rt := range ms {
			seen[rt.name] = true
			mi := ModuleInfo{Spec: *rt.spec, TierIndex: rt.planned.TierIndex, Attempts: rt.planned.Attempts,
				Policy: rt.planned.Policy, Origin: st.regs[rt.name].origin, Module: rt.mod, Busy: rt.w.busy(),
				LastGood: e.lg.Get(rt.key, now)}
			if s := latest; s != nil {
				if int(rt.idx) < s.NumModules() {
					if m := s.ModuleAt(int(rt.idx)); m.Name == rt.name {
						mi.Last = &m
					}
				}
				if mi.Last == nil { // the plan changed since: look it up by name
					if m, ok := s.Module(rt.name); ok {
						mi.Last = &m
					}
				}
			}
			if rt.br != nil {
				mi.Breaker = rt.br.Snapshot()
			}
			out = append(out, mi)
		}
	}
	out = e.asyncInfos(st, now, seen, out)
	e.cfgMu.Lock()
	d := e.desired
	e.cfgMu.Unlock()
	if d != st {
		for _, pm := range d.plan.Modules {
			if !seen[pm.Spec.Name] {
				r := d.regs[pm.Spec.Name]
				out = append(out, ModuleInfo{Spec: pm.Spec, TierIndex: pm.TierIndex, Attempts: pm.Attempts,
					Policy: pm.Policy, Origin: r.origin, Module: r.module, Pending: true})
			}
		}
	}
	return out
}

// Module returns one module's information (including a pending registration).
func (e *Engine) Module(name string) (ModuleInfo, bool) {
	for _, m := range e.Modules() {
		if m.Spec.Name == name {
			return m, true
		}
	}
	return ModuleInfo{}, false
}

// Registrations returns the registrations that the next tick boundary applies (the
// desired configuration), in registration order.
func (e *Engine) Registrations() []Registration {
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	return e.desired.registrations()
}

// Close stops every idle worker and refuses further ticks, registrations and reloads
// (ErrClosed). Workers of abandoned modules exit as soon as their module returns; Close
// does not wait for them (WaitWorkers does). A running scheduler returns ErrClosed instead
// of starting its next tick (in step mode within 50 ms); it does not end a tick in
// progress, which Close waits for.
func (e *Engine) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	e.wakeup() // a scheduler waiting on a long period returns now, not at its next grid point
	e.tickMu.Lock()
	defer e.tickMu.Unlock()
	for _, ms := range e.active.tierMods {
		for _, rt := range ms {
			rt.w.stop()
		}
	}
	e.pool.close()
	e.async.stop()
	e.lines.stop()
	if e.timer != nil {
		e.timer.Stop()
	}
	if e.spinNet != nil {
		e.spinNet.Stop()
	}
	if e.kt != nil {
		e.dropKernelTimer() // ends its reading goroutine before Close returns
	}
	e.stall.halt()
	return nil
}

// WaitWorkers waits until every worker goroutine has exited (after Close), or ctx ends.
func (e *Engine) WaitWorkers(ctx context.Context) error {
	done := make(chan struct{})
	go func() { e.workersWG.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
