// Package breaker is a tick-granular circuit breaker.
//
// One tick whose module failed after all its attempts is one failure. A consecutive
// breaker (the default Kind) opens after FailureThreshold consecutive failures; a rate
// breaker opens when, over its last Window counted ticks and at least MinTicks of them,
// the share of failures reaches FailureRate (RateTrips). Either way it then stays open; after Cooldown it half-opens and
// admits at most HalfOpenProbes concurrent probes; HalfOpenSuccesses successful probes close
// it, any failed probe re-opens it with a fresh cooldown. Kinds outside TripOn never count
// and never change state.
//
// Acquire hands out a Permit; the outcome is recorded against that permit, so a late
// record from an earlier generation cannot move a breaker that has moved on.
package breaker

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/fault"
)

// ErrOpen is returned (wrapped) by callers when a breaker refuses a call.
var ErrOpen = errors.New("circuit breaker is open")

// ErrConflict is returned by Registry.GetOrCreate when a name is registered again with
// different settings; the first registration stays in force.
var ErrConflict = errors.New("breaker already registered with different settings")

// State is a breaker state.
type State uint8

// The breaker states.
const (
	// Closed: calls pass; consecutive failures are counted.
	Closed State = iota
	// Open: calls are refused until the cooldown has passed.
	Open
	// HalfOpen: a limited number of probes are admitted.
	HalfOpen
)

// String returns "closed", "open" or "half_open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Settings configures a breaker. Each zero value takes the default stated on the field.
type Settings struct {
	// Name identifies the breaker (a module name or a named downstream).
	Name string
	// FailureThreshold is the number of consecutive failed ticks that opens the breaker. Zero means 5.
	FailureThreshold int
	// Cooldown is how long the breaker stays open before half-opening. Zero means 30s.
	Cooldown time.Duration
	// HalfOpenProbes caps the probes admitted at once while half-open. Zero means 1.
	HalfOpenProbes int
	// HalfOpenSuccesses is the number of successful probes that closes the breaker. Zero means 1.
	HalfOpenSuccesses int
	// TripOn is the set of kinds that count as failures. The empty set means fault.AllFaults.
	TripOn fault.Set
	// Kind selects the rule that opens a closed breaker: Consecutive (the zero value) or
	// Rate. The states, probes and TripOn are the same for both.
	Kind Kind
	// Window (Rate only) is the number of most recent counted ticks (a success, or a
	// failure of a kind in TripOn) the failure rate is taken over. Zero means 20.
	Window int
	// MinTicks (Rate only) is the number of counted ticks the window must hold before the
	// rate can open the breaker. Zero means Window.
	MinTicks int
	// FailureRate (Rate only) is the share of failures in the window, in (0, 1], that
	// opens the breaker. Zero means 0.5.
	FailureRate float64
}

// Kind is the rule that opens a closed breaker.
type Kind uint8

// The breaker kinds.
const (
	// Consecutive opens after FailureThreshold consecutive counted failures.
	Consecutive Kind = iota
	// Rate opens when the share of failures over the last Window counted ticks reaches
	// FailureRate, once at least MinTicks are counted.
	Rate
)

// String returns "consecutive" or "rate".
func (k Kind) String() string {
	switch k {
	case Consecutive:
		return "consecutive"
	case Rate:
		return "rate"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// ParseKind parses "consecutive" (or "") or "rate".
func ParseKind(s string) (Kind, error) {
	switch s {
	case "", "consecutive":
		return Consecutive, nil
	case "rate":
		return Rate, nil
	}
	return 0, fmt.Errorf("unknown breaker kind %q (want consecutive or rate)", s)
}

// MarshalText encodes k as its name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText parses k from its name (see ParseKind).
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := ParseKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// MaxWindow is the largest Window of a rate breaker: its ring holds one slot per tick.
const MaxWindow = 100_000

// RateTrips reports whether a rate breaker whose window holds ticks counted ticks, failures
// of them failed, opens: at least minTicks (and one) counted, and failures at least rate
// of them. It is the rate kind's whole rule, a pure function of its inputs.
func RateTrips(failures, ticks, minTicks int, rate float64) bool {
	return ticks > 0 && ticks >= minTicks && float64(failures) >= rate*float64(ticks)
}

// PermitKind says what Acquire granted.
type PermitKind uint8

// The permit kinds.
const (
	// Refused: the breaker is open (or half-open with every probe slot taken); do not run.
	Refused PermitKind = iota
	// Pass: the breaker is closed; run normally.
	Pass
	// Probe: the breaker is half-open and this run is one of its probes.
	Probe
)

// String returns "refused", "pass" or "probe".
func (k PermitKind) String() string {
	switch k {
	case Refused:
		return "refused"
	case Pass:
		return "pass"
	case Probe:
		return "probe"
	}
	return "permit_kind(" + strconv.Itoa(int(k)) + ")"
}

// Permit is what Acquire hands out. It is a small value; copying it is free.
type Permit struct {
	kind PermitKind
	gen  uint64 // the breaker's generation at Acquire
	seq  uint64 // probe sequence number within the generation; 0 for Pass and Refused
}

// Kind returns what was granted.
func (p Permit) Kind() PermitKind { return p.kind }

// Allowed reports whether the call may run (Pass or Probe).
func (p Permit) Allowed() bool { return p.kind != Refused }

// Transition is a state change, delivered to listeners.
type Transition struct {
	// Name is the breaker's name.
	Name string
	// From and To are the states before and after.
	From, To State
	// Reason says why ("failure threshold reached", "cooldown elapsed", "probe failed",
	// "probes succeeded", "reset").
	Reason string
	// At is the clock time of the change.
	At time.Time
}

// Listener receives transitions. It is called synchronously after the breaker's lock is
// released, in the order the transitions happened; it must not block.
type Listener func(Transition)

// Snapshot is a breaker's observable state.
type Snapshot struct {
	// Name is the breaker's name.
	Name string
	// State is the current state.
	State State
	// ConsecutiveFailures is the length of the current run of counted failures (kinds in
	// TripOn); any counted success, closing and Reset clear it.
	ConsecutiveFailures int
	// WindowTicks and WindowFailures (rate breakers) are the counted ticks in the window
	// and the failures among them; opening, closing and Reset clear them.
	WindowTicks, WindowFailures int
	// ProbesInFlight is the number of probe permits handed out and not yet recorded.
	ProbesInFlight int
	// ProbeSuccesses is the number of successful probes in the current half-open period.
	ProbeSuccesses int
	// TotalFailures is the lifetime number of counted failures (Reset keeps it).
	TotalFailures uint64
	// TotalSuccesses is the lifetime number of recorded successes (Reset keeps it).
	TotalSuccesses uint64
	// Transitions is the lifetime number of state changes (Reset keeps it).
	Transitions uint64
	// OpenedAt is when the breaker last opened; zero unless open or half-open.
	OpenedAt time.Time
	// Settings are the breaker's settings with defaults applied.
	Settings Settings
}

// Option configures a Breaker or a Registry.
type Option interface{ apply(*options) }

type options struct {
	clock     clock.Clock
	listeners []Listener
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithClock sets the clock for cooldowns. Default: clock.Real().
func WithClock(c clock.Clock) Option { return optionFunc(func(o *options) { o.clock = clock.Or(c) }) }

// WithListener adds a transition listener.
func WithListener(l Listener) Option {
	return optionFunc(func(o *options) { o.listeners = append(o.listeners, l) })
}

// The setting defaults applied to zero fields.
const (
	defaultFailureThreshold  = 5
	defaultCooldown          = 30 * time.Second
	defaultHalfOpenProbes    = 1
	defaultHalfOpenSuccesses = 1
	defaultWindow            = 20
	defaultFailureRate       = 0.5
)

// Transition reasons.
const (
	reasonThreshold = "failure threshold reached"
	reasonRate      = "failure rate reached"
	reasonCooldown  = "cooldown elapsed"
	reasonProbeFail = "probe failed"
	reasonProbesOK  = "probes succeeded"
	reasonReset     = "reset"
)

// WithDefaults returns s with every zero (or negative) field replaced by its default, as
// New applies them.
func (s Settings) WithDefaults() Settings {
	if s.FailureThreshold <= 0 {
		s.FailureThreshold = defaultFailureThreshold
	}
	if s.Cooldown <= 0 {
		s.Cooldown = defaultCooldown
	}
	if s.HalfOpenProbes <= 0 {
		s.HalfOpenProbes = defaultHalfOpenProbes
	}
	if s.HalfOpenSuccesses <= 0 {
		s.HalfOpenSuccesses = defaultHalfOpenSuccesses
	}
	if s.TripOn.Empty() {
		s.TripOn = fault.AllFaults
	}
	if s.Kind == Rate {
		if s.Window <= 0 {
			s.Window = defaultWindow
		}
		if s.MinTicks <= 0 {
			s.MinTicks = s.Window
		}
		if !(s.FailureRate > 0) { // also catches NaN
			s.FailureRate = defaultFailureRate
		}
	}
	return s
}

// Breaker is one circuit breaker. It is safe for concurrent use. The zero value is not
// usable; call New.
type Breaker struct {
	// The lock-free words come first, together: a caller that peeks, acquires and
	// records a success on a closed breaker touches one cache line.

	// fast is gen<<1|1 while the breaker is closed with no failure counted, 0 otherwise:
	// the common case (a closed breaker and a success) then takes no lock at all.
	fast     atomic.Uint64
	fastSucc atomic.Uint64 // successes recorded on the fast path
	peek     atomic.Uint32 // mirrors state for lock-free readers

	// open is gen<<1|1 while the breaker is open, 0 otherwise, and openUntil the end of
	// that cooldown as a duration since epoch: AcquireAt refuses an open breaker before its
	// cooldown ends without the lock. openUntil is written before open, and open changes
	// with every generation, so a reader that sees the same open word before and after
	// reading openUntil read that generation's.
	open      atomic.Uint64
	openUntil atomic.Int64

	// Two small locked fields fill the padding after peek (a breaker per module: at 100 000
	// modules, 16 bytes less per breaker moves it into a smaller size class).
	state      State // guarded by mu
	delivering bool  // guarded by mu; a goroutine is delivering pending transitions

	settings  Settings    // immutable after New; defaults applied
	clock     clock.Clock // immutable after New
	epoch     time.Time   // immutable after New; the origin of openUntil
	listeners []Listener  // immutable after New

	mu             sync.Mutex
	gen            uint64        // guarded by mu; bumped on every transition and on Reset
	consecutive    int           // guarded by mu
	probeSeq       uint64        // guarded by mu; last probe sequence number handed out
	probes         *[]uint64     // guarded by mu; sequence numbers of the probes in flight (nil: none yet)
	probeSuccesses int           // guarded by mu
	totalFailures  uint64        // guarded by mu
	totalSuccesses uint64        // guarded by mu
	transitions    uint64        // guarded by mu
	openedAt       int64         // guarded by mu; when it last opened, as a duration since epoch; set while not closed
	pending        *[]Transition // guarded by mu; transitions not yet delivered to listeners (nil: none)
	win            *window       // guarded by mu; the rate kind's window, nil for Consecutive
}

// window is a rate breaker's ring of the outcomes of its last counted ticks.
type window struct {
	failed   []bool // ring of Window outcomes, true for a counted failure
	next, n  int    // the slot written next; the slots in use
	failures int    // the true slots among those in use
}

// add records one counted tick.
func (w *window) add(failed bool) {
	if w.n == len(w.failed) {
		if w.failed[w.next] {
			w.failures--
		}
	} else {
		w.n++
	}
	w.failed[w.next] = failed
	if failed {
		w.failures++
	}
	w.next = (w.next + 1) % len(w.failed)
}

// clear empties the window.
func (w *window) clear() { w.next, w.n, w.failures = 0, 0, 0 }

// New returns a closed breaker.
func New(s Settings, opts ...Option) *Breaker {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	b := &Breaker{
		settings:  s.WithDefaults(),
		clock:     clock.Or(o.clock),
		listeners: slices.Clip(o.listeners),
	}
	b.epoch = b.clock.Now()
	if b.settings.Kind == Rate {
		// Every success of a rate breaker is recorded in its window: no lock-free path.
		b.win = &window{failed: make([]bool, b.settings.Window)}
		return b
	}
	b.fast.Store(1) // generation 0, closed, no failure
	return b
}

// syncFastLocked refreshes the fast word after a change of state, generation or count.
func (b *Breaker) syncFastLocked() {
	if b.state == Closed && b.consecutive == 0 && b.win == nil {
		b.fast.Store(b.gen<<1 | 1)
	} else {
		b.fast.Store(0)
	}
}

// Name returns the breaker's name.
func (b *Breaker) Name() string { return b.settings.Name }

// Settings returns the settings with defaults applied.
func (b *Breaker) Settings() Settings { return b.settings }

// Passing returns the permit Acquire would give while the breaker is closed with nothing
// counted (ok true), without a lock or a call: the caller asks Acquire or AcquireAt
// otherwise. An engine that admits many modules a tick asks it first.
func (b *Breaker) Passing() (p Permit, ok bool) {
	f := b.fast.Load()
	return Permit{kind: Pass, gen: f >> 1}, f&1 == 1
}

// AcquireAt is Acquire for a caller that knows the time (now, from the breaker's clock,
// not after the present): an open breaker whose cooldown has not ended by now refuses
// without taking its lock or reading the clock. Otherwise it is Acquire.
func (b *Breaker) AcquireAt(now time.Time) Permit {
	if o := b.open.Load(); o&1 == 1 && int64(now.Sub(b.epoch)) < b.openUntil.Load() && b.open.Load() == o {
		return Permit{kind: Refused, gen: o >> 1}
	}
	return b.Acquire()
}

// Acquire asks to run once. An open breaker whose cooldown has elapsed half-opens here.
func (b *Breaker) Acquire() Permit {
	if f := b.fast.Load(); f&1 == 1 {
		return Permit{kind: Pass, gen: f >> 1}
	}
	b.mu.Lock()
	var p Permit
	switch b.state {
	case Closed:
		p = Permit{kind: Pass, gen: b.gen}
	case Open:
		if !b.halfOpenIfDueLocked() {
			p = Permit{kind: Refused, gen: b.gen}
			break
		}
		fallthrough
	case HalfOpen:
		if b.probesInFlight() >= b.settings.HalfOpenProbes {
			p = Permit{kind: Refused, gen: b.gen}
			break
		}
		b.probeSeq++
		if b.probes == nil {
			// Behind a pointer, made at the first probe: most breakers never half-open,
			// and a slice's three words would take a breaker past its size class.
			b.probes = new([]uint64)
		}
		*b.probes = append(*b.probes, b.probeSeq)
		p = Permit{kind: Probe, gen: b.gen, seq: b.probeSeq}
	}
	b.unlock()
	return p
}

// Success records a successful run under p.
func (b *Breaker) Success(p Permit) {
	if p.kind == Refused {
		return
	}
	if p.kind == Pass && b.fast.Load() == p.gen<<1|1 {
		b.fastSucc.Add(1) // closed, nothing counted: a success changes nothing else
		return
	}
	b.mu.Lock()
	if !b.currentLocked(p) {
		b.mu.Unlock()
		return
	}
	b.totalSuccesses++
	b.consecutive = 0
	if b.win != nil && p.kind == Pass {
		b.win.add(false)
	}
	b.syncFastLocked()
	if p.kind == Probe {
		b.probeSuccesses++
		if b.probeSuccesses >= b.settings.HalfOpenSuccesses {
			b.transitionLocked(Closed, reasonProbesOK, b.clock.Now())
		}
	}
	b.unlock()
}

// Failure records a failed run of kind k under p. Kinds outside TripOn release a probe slot
// but neither count nor change state.
func (b *Breaker) Failure(p Permit, k fault.Kind) {
	if p.kind == Refused {
		return
	}
	b.mu.Lock()
	if !b.currentLocked(p) {
		b.mu.Unlock()
		return
	}
	if !b.settings.TripOn.Has(k) {
		b.mu.Unlock()
		return
	}
	b.totalFailures++
	b.consecutive++
	b.syncFastLocked()
	switch p.kind {
	case Pass:
		if b.tripsLocked() {
			b.transitionLocked(Open, b.tripReason(), b.clock.Now())
		}
	case Probe:
		b.transitionLocked(Open, reasonProbeFail, b.clock.Now())
	}
	b.unlock()
}

// tripsLocked records a counted failure under a Pass permit in the window of a rate
// breaker, and reports whether the breaker opens by its kind's rule.
func (b *Breaker) tripsLocked() bool {
	if b.win == nil {
		return b.consecutive >= b.settings.FailureThreshold
	}
	b.win.add(true)
	return RateTrips(b.win.failures, b.win.n, b.settings.MinTicks, b.settings.FailureRate)
}

// tripReason is the reason of a transition to Open by the kind's rule.
func (b *Breaker) tripReason() string {
	if b.win != nil {
		return reasonRate
	}
	return reasonThreshold
}

// Release gives back p without an outcome (the call was not made or its outcome does not count).
func (b *Breaker) Release(p Permit) {
	if p.kind == Refused {
		return
	}
	b.mu.Lock()
	b.currentLocked(p)
	b.mu.Unlock()
}

// Peek returns the state as of the last transition without taking the lock. Unlike
// State it does not half-open an open breaker whose cooldown has elapsed.
func (b *Breaker) Peek() State { return State(b.peek.Load()) }

// State returns the current state, half-opening an open breaker whose cooldown has elapsed.
func (b *Breaker) State() State {
	b.mu.Lock()
	if b.state == Open {
		b.halfOpenIfDueLocked()
	}
	s := b.state
	b.unlock()
	return s
}

// Snapshot returns the breaker's observable state.
func (b *Breaker) Snapshot() Snapshot {
	b.mu.Lock()
	if b.state == Open {
		b.halfOpenIfDueLocked()
	}
	s := Snapshot{
		Name:                b.settings.Name,
		State:               b.state,
		ConsecutiveFailures: b.consecutive,
		ProbesInFlight:      b.probesInFlight(),
		ProbeSuccesses:      b.probeSuccesses,
		TotalFailures:       b.totalFailures,
		TotalSuccesses:      b.totalSuccesses + b.fastSucc.Load(),
		Transitions:         b.transitions,
		Settings:            b.settings,
	}
	if b.state != Closed { // half-open only after open
		s.OpenedAt = b.epoch.Add(time.Duration(b.openedAt))
	}
	if b.win != nil {
		s.WindowTicks, s.WindowFailures = b.win.n, b.win.failures
	}
	b.unlock()
	return s
}

// Reset closes the breaker and clears its counters (operator action). It always starts a
// new generation, so permits handed out before it are ignored; a transition (reason
// "reset") is emitted only when the breaker was not already closed. The lifetime totals
// of Snapshot are kept.
func (b *Breaker) Reset() {
	b.mu.Lock()
	if b.state != Closed {
		b.transitionLocked(Closed, reasonReset, b.clock.Now())
	} else {
		b.gen++
		b.consecutive = 0
		b.clearProbes()
		b.probeSuccesses = 0
		if b.win != nil {
			b.win.clear()
		}
		b.syncFastLocked()
	}
	b.unlock()
}

// currentLocked reports whether p belongs to the current generation. For a probe of the
// current generation it also releases the probe's slot, and reports false when that probe
// was already recorded (so a permit recorded twice cannot free a slot twice).
func (b *Breaker) currentLocked(p Permit) bool {
	if p.gen != b.gen {
		return false
	}
	if p.kind != Probe {
		return true
	}
	if b.probes == nil {
		return false
	}
	ps := *b.probes
	i := slices.Index(ps, p.seq)
	if i < 0 {
		return false
	}
	last := len(ps) - 1
	ps[i] = ps[last]
	*b.probes = ps[:last]
	return true
}

// probesInFlight returns how many probes are in flight; the caller holds mu.
func (b *Breaker) probesInFlight() int {
	if b.probes == nil {
		return 0
	}
	return len(*b.probes)
}

// clearProbes forgets the probes in flight; the caller holds mu.
func (b *Breaker) clearProbes() {
	if b.probes != nil {
		*b.probes = (*b.probes)[:0]
	}
}

// halfOpenIfDueLocked half-opens an open breaker whose cooldown has elapsed and reports
// whether it did.
func (b *Breaker) halfOpenIfDueLocked() bool {
	now := b.clock.Now()
	if now.Sub(b.epoch)-time.Duration(b.openedAt) < b.settings.Cooldown {
		return false
	}
	b.transitionLocked(HalfOpen, reasonCooldown, now)
	return true
}

// transitionLocked moves the breaker to state to, starting a new generation, and queues
// the transition for the listeners.
func (b *Breaker) transitionLocked(to State, reason string, now time.Time) {
	from := b.state
	b.state = to
	b.peek.Store(uint32(to))
	defer b.syncFastLocked()
	b.gen++
	b.transitions++
	b.clearProbes()
	b.probeSuccesses = 0
	b.open.Store(0)
	if b.win != nil {
		b.win.clear() // a closed rate breaker starts from an empty window
	}
	switch to {
	case Open:
		b.openedAt = int64(now.Sub(b.epoch))
		b.openUntil.Store(b.openedAt + int64(b.settings.Cooldown))
		b.open.Store(b.gen<<1 | 1)
	case Closed:
		b.openedAt = 0
		b.consecutive = 0
	}
	if len(b.listeners) > 0 {
		if b.pending == nil {
			// Behind a pointer: there is a breaker per module, and a slice's three words
			// in every one, for what only transitions use, would take it past the
			// 320-byte size class (TestBreakerSize).
			b.pending = new([]Transition)
		}
		*b.pending = append(*b.pending, Transition{Name: b.settings.Name, From: from, To: to, Reason: reason, At: now})
	}
}

// takePending returns the transitions not yet delivered and forgets them. The caller
// holds b.mu.
func (b *Breaker) takePending() []Transition {
	if b.pending == nil {
		return nil
	}
	p := *b.pending
	b.pending = nil
	return p
}

// unlock releases b.mu and then delivers the pending transitions, unless another goroutine
// is already delivering: that one picks them up before it stops, which keeps every listener
// seeing the transitions in the order they happened.
func (b *Breaker) unlock() {
	if b.pending == nil || b.delivering {
		b.mu.Unlock()
		return
	}
	b.delivering = true
	batch := b.takePending()
	b.mu.Unlock()
	b.deliver(batch)
}

// deliver calls the listeners with batch, then with whatever was queued meanwhile, until
// nothing is pending. A panicking listener gives up delivery so a later caller can resume it.
func (b *Breaker) deliver(batch []Transition) {
	done := false
	defer func() {
		if !done {
			b.mu.Lock()
			b.delivering = false
			b.mu.Unlock()
		}
	}()
	for {
		for _, t := range batch {
			for _, l := range b.listeners {
				l(t)
			}
		}
		b.mu.Lock()
		if b.pending == nil {
			b.delivering = false
			b.mu.Unlock()
			done = true
			return
		}
		batch = b.takePending()
		b.mu.Unlock()
	}
}

// Registry holds named breakers. The first registration of a name wins. It is safe for
// concurrent use.
type Registry struct {
	opts []Option // immutable after NewRegistry

	mu       sync.Mutex
	breakers map[string]*Breaker // guarded by mu
}

// NewRegistry returns an empty registry; opts apply to every breaker it creates.
func NewRegistry(opts ...Option) *Registry {
	return &Registry{opts: slices.Clip(opts), breakers: make(map[string]*Breaker)}
}

// GetOrCreate returns the breaker named s.Name, creating it with s if absent. When it exists
// with different settings it is returned with an error wrapping ErrConflict that describes the
// difference; the existing settings stay.
func (r *Registry) GetOrCreate(s Settings) (*Breaker, error) {
	r.mu.Lock()
	b, ok := r.breakers[s.Name]
	if !ok {
		b = New(s, r.opts...)
		r.breakers[s.Name] = b
	}
	r.mu.Unlock()
	if !ok {
		return b, nil
	}
	if diff := Diff(b.settings, s.WithDefaults()); diff != "" {
		return b, fmt.Errorf("breaker %q: %w: %s", s.Name, ErrConflict, diff)
	}
	return b, nil
}

// Get returns the breaker with that name.
func (r *Registry) Get(name string) (*Breaker, bool) {
	r.mu.Lock()
	b, ok := r.breakers[name]
	r.mu.Unlock()
	return b, ok
}

// Remove deletes a breaker from the registry.
func (r *Registry) Remove(name string) {
	r.mu.Lock()
	delete(r.breakers, name)
	r.mu.Unlock()
}

// Prepare returns the breaker that the registry would hold for s once it is brought in
// line with s: the registered breaker named s.Name when its settings are s's, else a new
// closed breaker made with the registry's options and not registered (fresh is true), for
// Put to register later. It lets a caller make breakers ahead of the moment they take
// effect.
func (r *Registry) Prepare(s Settings) (b *Breaker, fresh bool) {
	r.mu.Lock()
	b, ok := r.breakers[s.Name]
	r.mu.Unlock()
	if ok && Diff(b.settings, s.WithDefaults()) == "" {
		return b, false
	}
	return New(s, r.opts...), true
}

// Put registers b under its name, replacing any breaker of that name.
func (r *Registry) Put(b *Breaker) {
	r.mu.Lock()
	r.breakers[b.settings.Name] = b
	r.mu.Unlock()
}

// List returns a snapshot of every breaker, sorted by name.
func (r *Registry) List() []Snapshot {
	r.mu.Lock()
	bs := make([]*Breaker, 0, len(r.breakers))
	for _, b := range r.breakers {
		bs = append(bs, b)
	}
	r.mu.Unlock()
	slices.SortFunc(bs, func(a, b *Breaker) int { return strings.Compare(a.settings.Name, b.settings.Name) })
	out := make([]Snapshot, len(bs))
	for i, b := range bs {
		out[i] = b.Snapshot()
	}
	return out
}

// Diff describes how want differs from have (both with defaults applied), using the
// configuration's field names ("cooldown: registered 10s, requested 5s"); it returns ""
// when they are equal. Names are not compared.
func Diff(have, want Settings) string {
	var parts []string
	add := func(field string, h, w any) {
		parts = append(parts, fmt.Sprintf("%s: registered %v, requested %v", field, h, w))
	}
	if have.FailureThreshold != want.FailureThreshold {
		add("failure_threshold", have.FailureThreshold, want.FailureThreshold)
	}
	if have.Cooldown != want.Cooldown {
		add("cooldown", have.Cooldown, want.Cooldown)
	}
	if have.HalfOpenProbes != want.HalfOpenProbes {
		add("half_open_probes", have.HalfOpenProbes, want.HalfOpenProbes)
	}
	if have.HalfOpenSuccesses != want.HalfOpenSuccesses {
		add("half_open_successes", have.HalfOpenSuccesses, want.HalfOpenSuccesses)
	}
	if have.TripOn != want.TripOn {
		add("trip_on", "["+have.TripOn.String()+"]", "["+want.TripOn.String()+"]")
	}
	if have.Kind != want.Kind {
		add("kind", have.Kind, want.Kind)
	}
	if have.Window != want.Window {
		add("window", have.Window, want.Window)
	}
	if have.MinTicks != want.MinTicks {
		add("min_ticks", have.MinTicks, want.MinTicks)
	}
	if have.FailureRate != want.FailureRate {
		add("failure_rate", have.FailureRate, want.FailureRate)
	}
	return strings.Join(parts, "; ")
}
