package decide

import (
	"fmt"
	"time"
)

// Overrun is what the scheduler does when a tick runs past one or more grid points.
type Overrun uint8

// The overrun policies, in the order of overrunPolicies.
const (
	// OverrunSkip starts the next tick at the next grid point; skipped points are counted.
	OverrunSkip Overrun = iota
	// OverrunCatchUp runs the missed ticks back to back, at most CatchUpMax of them.
	OverrunCatchUp
	// OverrunDelay starts the next tick one period after the end of the last one.
	OverrunDelay
)

// overrunPolicy is one overrun policy: its name in the configuration and its rule.
type overrunPolicy struct {
	name string
	next func(g Grid, end time.Time, catchUpMax int) (Grid, int)
}

// overrunPolicies holds every policy, indexed by its Overrun value. Adding a policy is a
// constant, a rule (a method of Grid) and a row here.
var overrunPolicies = [...]overrunPolicy{
	OverrunSkip:    {"skip", Grid.skip},
	OverrunCatchUp: {"catch_up", Grid.catchUp},
	OverrunDelay:   {"delay", Grid.delay},
}

// Valid reports whether o is a known policy.
func (o Overrun) Valid() bool { return int(o) < len(overrunPolicies) }

// String returns the policy's name ("skip", "catch_up", "delay").
func (o Overrun) String() string {
	if o.Valid() {
		return overrunPolicies[o].name
	}
	return fmt.Sprintf("overrun(%d)", uint8(o))
}

// MarshalText encodes o as its name.
func (o Overrun) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText parses a policy's name ("" is skip).
func (o *Overrun) UnmarshalText(b []byte) error {
	s := string(b)
	if s == "" {
		*o = OverrunSkip
		return nil
	}
	for i, p := range overrunPolicies {
		if p.name == s {
			*o = Overrun(i)
			return nil
		}
	}
	return fmt.Errorf("unknown overrun policy %q (want skip, catch_up or delay)", s)
}

// Grid is the scheduler's grid: tick K starts at Origin + K·Period.
type Grid struct {
	Origin time.Time
	Period time.Duration
	K      int64
}

// At returns the grid point of the next tick.
func (g Grid) At() time.Time { return g.Origin.Add(time.Duration(g.K) * g.Period) }

// Next returns the grid after a tick that ended at end, and how many grid points it
// skipped (reported in the next tick's summary).
func (o Overrun) Next(g Grid, end time.Time, catchUpMax int) (Grid, int) {
	return overrunPolicies[o].next(g, end, catchUpMax)
}

// skip moves to the first grid point after end.
func (g Grid) skip(end time.Time, _ int) (Grid, int) {
	g.K++
	if end.After(g.At()) {
		nk := int64(end.Sub(g.Origin)/g.Period) + 1
		skipped := int(nk - g.K)
		g.K = nk
		return g, skipped
	}
	return g, 0
}

// catchUp moves to the next grid point, due or not, dropping all but catchUpMax of those
// already due.
func (g Grid) catchUp(end time.Time, catchUpMax int) (Grid, int) {
	g.K++
	behind := int64(end.Sub(g.Origin)/g.Period) - g.K + 1 // grid points already due
	if behind > int64(catchUpMax) {
		drop := behind - int64(catchUpMax)
		g.K += drop
		return g, int(drop)
	}
	return g, 0
}

// delay starts a new grid one period after end.
func (g Grid) delay(end time.Time, _ int) (Grid, int) {
	return Grid{Origin: end.Add(g.Period), Period: g.Period}, 0
}
