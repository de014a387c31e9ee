package decide

import (
	"maps"
	"slices"
	"time"
)

// StartupReason is the emergency reason given when startup times out.
const StartupReason = "startup_timeout"

// Startup is the startup state machine's state: while Starting, the cycle is "starting"
// (only the safety tier runs, no emergency is raised) until every safety module has
// succeeded once. The zero value is a cycle past startup (or without one). While starting,
// the failures of safety modules open no breaker (Outcome.Starting): startup ends at the
// first success of every safety module, or at the timeout, never by a breaker that the
// failures of the first ticks opened.
type Startup struct {
	Starting bool
	Begin    time.Time // when the first tick of startup began (zero: none yet)
	Seen     []string  // the safety modules that succeeded at least once, sorted
	TimedOut bool      // startup ended by its timeout, not by the safety modules
	// Failures counts, per safety module, the ticks of startup it failed in (its breaker
	// records none of them: see Outcome.Starting).
	Failures map[string]int
}

// StartupTick is what one tick's safety tier says to the startup state machine.
type StartupTick struct {
	Now       time.Time // the tick's start
	Safety    []string  // the safety modules of the configuration in force (not emergency-only)
	Succeeded []string  // the safety modules that produced a value this tick
	Failed    []string  // the safety modules that failed this tick
}

// StartupChange is a startup transition, or NoStartupChange.
type StartupChange uint8

// The transitions.
const (
	NoStartupChange StartupChange = iota
	// Ready: every safety module succeeded once; the cycle runs every tier from the next tick.
	Ready
	// StartupTimedOut: the timeout passed first; the engine enters emergency mode with
	// StartupReason.
	StartupTimedOut
)

// Next returns the state after tick t. timeout is startup's limit from the first tick of
// startup (zero: none). Startup ends once every safety module in t.Safety is in Seen
// (then Ready, also in the tick the timeout passes), else when the timeout has passed
// (StartupTimedOut). Outside startup it changes nothing.
func (s Startup) Next(t StartupTick, timeout time.Duration) (Startup, StartupChange) {
	if !s.Starting {
		return s, NoStartupChange
	}
	if s.Begin.IsZero() {
		s.Begin = t.Now
	}
	seen := slices.Clone(s.Seen)
	for _, m := range t.Succeeded {
		if i, found := slices.BinarySearch(seen, m); !found {
			seen = slices.Insert(seen, i, m)
		}
	}
	s.Seen = seen
	if len(t.Failed) > 0 {
		f := make(map[string]int, len(s.Failures)+len(t.Failed))
		maps.Copy(f, s.Failures)
		for _, m := range t.Failed {
			f[m]++
		}
		s.Failures = f
	}
	if len(s.Pending(t.Safety)) == 0 {
		s.Starting = false
		return s, Ready
	}
	if timeout > 0 && t.Now.Sub(s.Begin) >= timeout {
		s.Starting, s.TimedOut = false, true
		return s, StartupTimedOut
	}
	return s, NoStartupChange
}

// Pending returns the safety modules of safety that have not succeeded yet, in order.
func (s Startup) Pending(safety []string) []string {
	var p []string
	for _, m := range safety {
		if _, found := slices.BinarySearch(s.Seen, m); !found {
			p = append(p, m)
		}
	}
	return p
}
