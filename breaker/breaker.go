// Package breaker is a tick-granular circuit breaker.
//
// One tick whose module failed after all its attempts is one failure. After
// FailureThreshold consecutive failures the breaker opens; after Cooldown it half-opens and
// admits at most HalfOpenProbes concurrent probes; HalfOpenSuccesses successful probes close
// it, any failed probe re-opens it with a fresh cooldown. Kinds outside TripOn never count
// and never change state.
//
// Acquire hands out a Permit; the outcome is recorded against that permit, so a late
// record from an earlier generation cannot move a breaker that has moved on.
package breaker

import (
	"errors"
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
func (s State) String() string { panic("todo") }

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

// Permit is what Acquire hands out. It is a small value; copying it is free.
type Permit struct {
	kind PermitKind
	gen  uint64
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
	Name                string
	State               State
	ConsecutiveFailures int
	ProbesInFlight      int
	ProbeSuccesses      int
	TotalFailures       uint64
	TotalSuccesses      uint64
	Transitions         uint64
	OpenedAt            time.Time // zero unless open or half-open
	Settings            Settings  // with defaults applied
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

// Breaker is one circuit breaker. It is safe for concurrent use.
type Breaker struct{}

// New returns a closed breaker.
func New(s Settings, opts ...Option) *Breaker { panic("todo") }

// Name returns the breaker's name.
func (b *Breaker) Name() string { panic("todo") }

// Settings returns the settings with defaults applied.
func (b *Breaker) Settings() Settings { panic("todo") }

// Acquire asks to run once. An open breaker whose cooldown has elapsed half-opens here.
func (b *Breaker) Acquire() Permit { panic("todo") }

// Success records a successful run under p.
func (b *Breaker) Success(p Permit) { panic("todo") }

// Failure records a failed run of kind k under p. Kinds outside TripOn release a probe slot
// but neither count nor change state.
func (b *Breaker) Failure(p Permit, k fault.Kind) { panic("todo") }

// Release gives back p without an outcome (the call was not made or its outcome does not count).
func (b *Breaker) Release(p Permit) { panic("todo") }

// State returns the current state, half-opening an open breaker whose cooldown has elapsed.
func (b *Breaker) State() State { panic("todo") }

// Snapshot returns the breaker's observable state.
func (b *Breaker) Snapshot() Snapshot { panic("todo") }

// Reset closes the breaker and clears its counters (operator action).
func (b *Breaker) Reset() { panic("todo") }

// Registry holds named breakers. The first registration of a name wins.
type Registry struct{}

// NewRegistry returns an empty registry; opts apply to every breaker it creates.
func NewRegistry(opts ...Option) *Registry { panic("todo") }

// GetOrCreate returns the breaker named s.Name, creating it with s if absent. When it exists
// with different settings it is returned with an error wrapping ErrConflict that describes the
// difference; the existing settings stay.
func (r *Registry) GetOrCreate(s Settings) (*Breaker, error) { panic("todo") }

// Get returns the breaker with that name.
func (r *Registry) Get(name string) (*Breaker, bool) { panic("todo") }

// Remove deletes a breaker from the registry.
func (r *Registry) Remove(name string) { panic("todo") }

// List returns a snapshot of every breaker, sorted by name.
func (r *Registry) List() []Snapshot { panic("todo") }
