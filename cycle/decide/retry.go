package decide

import "github.com/cycled/cycled/retrybudget"

// RatioWindow is what a retry budget knows when a retry is asked for: the first attempts
// and retries in the window (the tick in progress included), and the retries of the tick
// in progress. RetryAllowed decides on it.
type RatioWindow struct {
	Firsts, Retries, TickRetries int64
}

// RetryAllowed reports whether one more retry is allowed: while the tick has made fewer
// than MinPerTick retries, or when the window's retries with this one are at most Ratio
// times its first attempts. It is the budget's whole rule, a pure function.
func RetryAllowed(s retrybudget.RatioSettings, w RatioWindow) bool {
	if w.TickRetries < int64(s.MinPerTick) {
		return true
	}
	return float64(w.Retries+1) <= s.Ratio*float64(w.Firsts)
}
