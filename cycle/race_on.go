//go:build race

package cycle

// raceEnabled reports whether the race detector is on.
const raceEnabled = true
