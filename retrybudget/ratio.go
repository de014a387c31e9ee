package retrybudget

import "time"

// RatioSettings configures a retry-amplification budget: over a sliding window, retries
// may be at most Ratio times the first attempts, and MinPerTick retries per tick are
// always allowed. The window is Window ticks, or WindowTime when that is set.
type RatioSettings struct {
	// Ratio is the most retries per first attempt over the window (0.2: one retry for
	// five first attempts).
	Ratio float64
	// Window is the window's length in ticks (the tick in progress and the Window-1
	// before it). Zero means 10 unless WindowTime is set.
	Window int
	// WindowTime is the window's length in time: the ticks that started less than
	// WindowTime before the tick in progress, and that one. It replaces Window.
	WindowTime time.Duration
	// MinPerTick is the number of retries per tick allowed whatever the ratio.
	MinPerTick int
}

// DefaultWindow is the window in ticks of settings that give neither Window nor WindowTime.
const DefaultWindow = 10

// MaxWindowTicks bounds the ticks a window keeps (a time window at a high tick rate
// drops its oldest ticks beyond it).
const MaxWindowTicks = 100_000

// WindowTicks returns the window in ticks, defaults applied (0: a time window).
func (s RatioSettings) WindowTicks() int {
	switch {
	case s.WindowTime > 0:
		return 0
	case s.Window <= 0:
		return DefaultWindow
	}
	return s.Window
}
