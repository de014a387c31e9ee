package clock

import "time"

// Next returns the time at which the earliest armed timer falls due, and false when no
// timer is armed. A simulation that drives the fake clock jumps to it instead of stepping
// through time in small increments.
func (f *Fake) Next() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timers) == 0 {
		return time.Time{}, false
	}
	return f.timers[0].when, true
}
