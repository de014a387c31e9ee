package decide

import (
	"slices"
	"strconv"
	"time"
)

// SheddingConfig configures load shedding on overrun, defaults applied.
type SheddingConfig struct {
	// AfterOverruns is how many consecutive overrunning ticks shed one more step (≥ 1).
	AfterOverruns int
	// RestoreAfter is how many consecutive ticks that fit restore one step (≥ 1).
	RestoreAfter int
}

// ShedTick is what one tick says to the load-shedding state machine: whether it overran
// its target (the period, or the configured target), and by how much.
type ShedTick struct {
	Tick    uint64
	Overrun bool
	Wall    time.Duration // the tick's wall time
	Target  time.Duration // the wall time it had to fit in
}

// Shedding is the load-shedding state machine's state: how many steps are shed and the
// counts towards the next step either way. The zero value sheds nothing.
type Shedding struct {
	Level    int    // steps shed now; step k sheds the k lowest priority classes (see ShedClasses)
	Overruns int    // consecutive overrunning ticks since the last step
	Fits     int    // consecutive ticks that fit since the last step, while Level > 0
	Since    uint64 // the tick shedding began (Level went from 0 to 1)
	Reason   string // why the latest step was shed; kept while Level > 0
}

// ShedChange is a load-shedding transition, or NoShedChange.
type ShedChange uint8

// The transitions that are events.
const (
	NoShedChange ShedChange = iota
	ShedStep                // one more step shed
	RestoreStep             // one step restored
)

// Next returns the state after tick t and whether a step was shed or restored. maxLevel
// is the number of steps there are to shed (len of ShedClasses): AfterOverruns
// overrunning ticks in a row shed one more step while one is left; RestoreAfter ticks in
// a row that fit restore one. Either count starts again after a step and after a tick of
// the other kind, so the level moves at most one step per AfterOverruns or RestoreAfter
// ticks (hysteresis).
func (s Shedding) Next(t ShedTick, c SheddingConfig, maxLevel int) (Shedding, ShedChange) {
	if s.Level > maxLevel { // a reload left fewer steps: the surplus is gone
		s.Level = maxLevel
	}
	if !t.Overrun {
		s.Overruns = 0
		if s.Level == 0 {
			s.Fits = 0
			return s, NoShedChange
		}
		s.Fits++
		if s.Fits < c.RestoreAfter {
			return s, NoShedChange
		}
		s.Level, s.Fits = s.Level-1, 0
		if s.Level == 0 {
			s.Reason = ""
		}
		return s, RestoreStep
	}
	s.Fits = 0
	s.Overruns++
	if s.Overruns < c.AfterOverruns || s.Level >= maxLevel {
		s.Overruns = min(s.Overruns, c.AfterOverruns)
		return s, NoShedChange
	}
	if s.Level == 0 {
		s.Since = t.Tick
	}
	s.Level, s.Overruns = s.Level+1, 0
	s.Reason = strconv.Itoa(c.AfterOverruns) + " consecutive overruns (tick " + strconv.FormatUint(t.Tick, 10) +
		": wall " + t.Wall.String() + " > " + t.Target.String() + ")"
	return s, ShedStep
}

// ShedCandidate is what decides whether a module may be shed: its tier, its priority and
// whether it is critical or emergency-only.
type ShedCandidate struct {
	Tier          int
	Priority      int
	Critical      bool
	EmergencyOnly bool
}

// Sheddable reports whether c may ever be shed: never the safety tier (tier 0), a
// critical module, one whose priority is at or above the floor (floor nil: no floor), or
// an emergency-only module (it runs only in emergency mode, when shedding has nothing to
// relieve).
func (c ShedCandidate) Sheddable(floor *int) bool {
	return c.Tier > 0 && !c.Critical && !c.EmergencyOnly && (floor == nil || c.Priority < *floor)
}

// ShedClasses returns the priority classes of the sheddable candidates, lowest first: the
// distinct priorities of those cs for which Sheddable holds. Step k (Shedding.Level) sheds
// every sheddable module whose priority is at most the k-th class (Sheds).
func ShedClasses(cs []ShedCandidate, floor *int) []int {
	var ps []int
	for _, c := range cs {
		if c.Sheddable(floor) {
			ps = append(ps, c.Priority)
		}
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

// Sheds reports whether candidate c is shed at level with classes (from ShedClasses).
func Sheds(c ShedCandidate, classes []int, level int, floor *int) bool {
	if level <= 0 || len(classes) == 0 || !c.Sheddable(floor) {
		return false
	}
	return c.Priority <= classes[min(level, len(classes))-1]
}
