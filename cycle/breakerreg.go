package cycle

import (
	"errors"
	"fmt"
	"maps"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/fault"
)

// BreakerConfigEvent says that a named breaker's settings did not simply stay: a reload
// replaced the breaker (Replaced), or a registration at runtime asked for other settings
// than the breaker in force and was ignored (Conflict). Diff names the fields that differ
// with the configuration's names ("cooldown: registered 10s, requested 5s").
type BreakerConfigEvent struct {
	// Name is the breaker's name.
	Name string
	// Replaced: a configuration change gave the breaker other settings; the breaker was
	// replaced by a new, closed one at the tick boundary where the change applied.
	Replaced bool
	// Conflict: a runtime registration with other settings was ignored; the first stays.
	Conflict bool
	// Diff describes the difference.
	Diff string
	// Version is the configuration version the event belongs to (0 for a conflict, which
	// changes nothing).
	Version uint64
}

// errNoName: a breaker registered without a name.
var errNoName = errors.New("a named breaker needs a name")

// namedDefaults returns s as the engine runs a named breaker: its name set, an empty
// TripOn meaning {transient, downstream}, and the breaker package's defaults.
func namedDefaults(name string, s breaker.Settings) breaker.Settings {
	s.Name = name
	if s.TripOn.Empty() {
		s.TripOn = fault.SetOf(fault.KindTransient, fault.KindDownstream)
	}
	return s.WithDefaults()
}

// RegisterBreaker adds the named shared breaker s at runtime; modules registered after it
// may name it. It applies at the next tick boundary and lasts until the engine is closed
// (a reload keeps it, unless the new configuration declares a breaker of that name, which
// then replaces it). The first registration of a name wins: if a breaker of that name is
// already declared or registered with other settings, nothing changes, the conflict is
// published (Hooks.OnBreakerConfig, Conflict) and the error wraps breaker.ErrConflict.
// Registering the same settings again is a no-op.
func (e *Engine) RegisterBreaker(s breaker.Settings) error {
	if e.closed.Load() {
		return ErrClosed
	}
	name := s.Name
	if name == "" {
		return fmt.Errorf("register breaker: %w", errNoName)
	}
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	if have, ok := e.desired.cfg.Breakers[name]; ok {
		diff := breaker.Diff(namedDefaults(name, have), namedDefaults(name, s))
		if diff == "" {
			return nil
		}
		e.emit(event{kind: evBreakerConfig, brConfig: &BreakerConfigEvent{Name: name, Conflict: true, Diff: diff}})
		return fmt.Errorf("register breaker %q: %w: %s", name, breaker.ErrConflict, diff)
	}
	if _, own := e.desired.regs[name]; own {
		return fmt.Errorf("register breaker %q: %w (a module's own breaker carries that name)", name, ErrDuplicate)
	}
	if e.rtBreakers == nil {
		e.rtBreakers = make(map[string]breaker.Settings)
	}
	e.rtBreakers[name] = s
	cfg := e.desired.cfg
	cfg.Breakers = maps.Clone(cfg.Breakers)
	if cfg.Breakers == nil {
		cfg.Breakers = make(map[string]breaker.Settings)
	}
	cfg.Breakers[name] = s
	st, err := e.buildState(cfg, e.desired.registrations())
	if err != nil {
		delete(e.rtBreakers, name)
		return fmt.Errorf("register breaker %q: %w", name, err)
	}
	e.publish(st)
	return nil
}

// withRuntimeBreakers returns cfg with the breakers registered at runtime that it does
// not declare itself. Called with cfgMu held.
func (e *Engine) withRuntimeBreakers(cfg Config) Config {
	added := false
	for name, s := range e.rtBreakers {
		if _, ok := cfg.Breakers[name]; ok {
			continue // declared by cfg: the configuration's settings rule
		}
		if !added {
			cfg.Breakers, added = maps.Clone(cfg.Breakers), true
			if cfg.Breakers == nil {
				cfg.Breakers = make(map[string]breaker.Settings)
			}
		}
		cfg.Breakers[name] = s
	}
	return cfg
}
