package clock_test

import (
	"fmt"
	"time"

	"github.com/cycled/cycled/clock"
)

// A chain of stamps times steps one after another with one clock read each: the end of
// one step is the start of the next.
func ExampleElapsed() {
	f := clock.NewFake(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	at := clock.NewStamp(f)
	for _, step := range []time.Duration{3 * time.Millisecond, 500 * time.Microsecond} {
		f.Advance(step) // the step's work
		var d time.Duration
		d, at = clock.Elapsed(f, at)
		fmt.Println(d, "ending at", at.Time().Format("15:04:05.000000"))
	}
	// Output:
	// 3ms ending at 12:00:00.003000
	// 500µs ending at 12:00:00.003500
}
