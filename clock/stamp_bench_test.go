package clock

import (
	"testing"
	"time"

	"github.com/cycled/cycled/clock/tsc"
)

// BenchmarkElapsed is one link of a chain of stamps (a module's run timed by the engine):
// from the processor's counter where it is used, and from the monotonic clock (a stamp
// without the counter, as before the counter was used, and wherever it is not).
func BenchmarkElapsed(b *testing.B) {
	b.Run("monotonic", func(b *testing.B) {
		b.ReportAllocs()
		s := StampAt(time.Now())
		for b.Loop() {
			_, s = Elapsed(Real(), s)
		}
	})
	b.Run("counter", func(b *testing.B) {
		if !tsc.Used() {
			b.Skip("the kernel does not keep time with the processor's counter here")
		}
		s := NewStamp(Real())
		for start := time.Now(); s.c == 0 && time.Since(start) < time.Second; { // calibration: 100 ms
			s = NewStamp(Real())
		}
		if s.c == 0 {
			b.Fatal("not calibrated after a second")
		}
		b.ReportAllocs()
		for b.Loop() {
			_, s = Elapsed(Real(), s)
		}
	})
}
