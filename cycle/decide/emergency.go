package decide

// Emergency is the emergency state machine's state. The zero value is "never in
// emergency mode".
type Emergency struct {
	Active    bool
	Since     uint64 // the tick the current (or last) emergency began
	Reason    string // why it began; kept after recovery
	Latched   bool   // waits for an operator reset
	Healthy   int    // consecutive healthy safety ticks while active
	EndedTick uint64 // the tick the last emergency ended
}

// SafetyTick is what one tick's safety tier says to the state machine.
type SafetyTick struct {
	Tick    uint64
	Failed  bool   // a safety module failed (see Verdict.SafetyFailure)
	Healthy bool   // every safety module was nominal
	Reason  string // the first failure, when Failed
}

// EmergencyConfig is the emergency mode's configuration, defaults applied.
type EmergencyConfig struct {
	Latch        bool
	RecoverAfter int // ≥ 1
}

// Change is an emergency transition, or NoChange.
type Change uint8

// The transitions that are events.
const (
	NoChange Change = iota
	Entered
	Left
)

// Next returns the state after safety tick t, and whether emergency mode was entered or
// left. A failure enters it; while active, a failure (latching it again with latch on)
// or an unhealthy tick restarts the count of healthy ticks, and RecoverAfter healthy
// ticks in a row end it unless it is latched.
func (s Emergency) Next(t SafetyTick, c EmergencyConfig) (Emergency, Change) {
	switch {
	case !s.Active && t.Failed:
		return Emergency{Active: true, Since: t.Tick, Reason: t.Reason, Latched: c.Latch, EndedTick: s.EndedTick}, Entered
	case !s.Active:
		return s, NoChange
	case t.Failed || !t.Healthy:
		s.Healthy = 0
		if t.Failed && c.Latch {
			// A reset acknowledges the emergency only for a safety tier that then stays
			// healthy: a failure after it latches the emergency again.
			s.Latched = true
		}
		return s, NoChange
	}
	s.Healthy++
	if !s.Latched && s.Healthy >= c.RecoverAfter {
		s.Active, s.EndedTick = false, t.Tick
		return s, Left
	}
	return s, NoChange
}

// Reset is the operator's reset: a latched emergency unlatches, and ends after
// RecoverAfter healthy ticks from now. Any other state is left as it is.
func (s Emergency) Reset() Emergency {
	if s.Active && s.Latched {
		s.Latched, s.Healthy = false, 0
	}
	return s
}
