package tsc

import (
	"testing"
	"time"
)

// fakeCounter is a counter and a clock that move together at perNs counts a nanosecond,
// unless a test moves one alone.
type fakeCounter struct {
	c     uint64
	t     time.Time
	perNs uint64
	gap   uint64 // counts added between the two reads of a pair (an interrupted pair)
	reads int
}

func (f *fakeCounter) read() uint64 {
	f.reads++
	if f.reads%2 == 0 {
		f.c += f.gap
	}
	return f.c
}

func (f *fakeCounter) now() time.Time { return f.t }

func (f *fakeCounter) advance(d time.Duration) {
	f.t = f.t.Add(d)
	f.c += uint64(d) * f.perNs
}

func newFake() (*fakeCounter, *Calibrator) {
	f := &fakeCounter{c: 1 << 40, t: time.Now(), perNs: 3}
	return f, New(f.read, f.now)
}

func TestCalibration(t *testing.T) {
	type step struct {
		advance time.Duration // the clock and counter move together by this first
		want    bool          // Sample returns a counter reading
		next    time.Duration // when the rate is measured next, from the anchor (0: never)
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"anchored first, measured at 100 ms", []step{
			{0, false, firstSpan},
			{50 * time.Millisecond, false, firstSpan},
			{50 * time.Millisecond, true, time.Second},
			{time.Millisecond, true, time.Second},
		}},
		{"measured again at 1 s and 10 s, then no more", []step{
			{0, false, firstSpan},
			{firstSpan, true, time.Second},
			{900 * time.Millisecond, true, 10 * time.Second},
			{9 * time.Second, true, 0},
			{time.Hour, true, 0},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, k := newFake()
			for i, s := range c.steps {
				f.advance(s.advance)
				got := k.Sample(f.t)
				if (got != 0) != s.want {
					t.Fatalf("step %d: Sample = %d, want a reading: %v", i, got, s.want)
				}
				if r := k.r.Load(); r.next != s.next {
					t.Fatalf("step %d: next measurement after %v, want %v", i, r.next, s.next)
				}
				if s.want {
					if d := k.Duration(got, got+3000); d != time.Microsecond {
						t.Fatalf("step %d: 3000 counts = %v, want 1µs", i, d)
					}
				}
			}
		})
	}
}

func TestCalibrationWholeSpan(t *testing.T) {
	// The rate is measured over the whole span from the anchor, so a rate that was off at
	// 100 ms (the first 100 ms at 4 counts a ns, then 2) is mended at 1 s.
	f, k := newFake()
	f.perNs = 4
	k.Sample(f.t)
	f.advance(firstSpan)
	c := k.Sample(f.t)
	if d := k.Duration(c, c+4000); d != time.Microsecond {
		t.Fatalf("at 100 ms: 4000 counts = %v, want 1µs", d)
	}
	f.perNs = 2
	f.advance(900 * time.Millisecond)
	c = k.Sample(f.t)
	// 1 s over 400e6 + 1800e6 counts.
	want := time.Duration(float64(2200) * float64(time.Second) / 2200e6)
	if d := k.Duration(c, c+2200); d != want {
		t.Fatalf("at 1 s: 2200 counts = %v, want %v", d, want)
	}
}

func TestCounterBehindClock(t *testing.T) {
	// A counter that does not move while the clock does is not used again.
	f, k := newFake()
	k.Sample(f.t)
	f.t = f.t.Add(firstSpan)
	if c := k.Sample(f.t); c != 0 {
		t.Fatalf("Sample = %d for a counter that stood still, want 0", c)
	}
	f.advance(time.Second)
	if c := k.Sample(f.t); c != 0 {
		t.Fatalf("Sample = %d after the counter was found wanting, want 0", c)
	}
}

func TestInterruptedPairs(t *testing.T) {
	// Pairs whose two counter reads lie far apart (the thread was preempted around the
	// clock read) are not used: no anchor is set until a pair is whole.
	f, k := newFake()
	f.gap = maxPairGap + 1
	if c := k.Sample(f.t); c != 0 || k.r.Load() != nil {
		t.Fatalf("Sample = %d, anchor %v from interrupted pairs; want 0 and none", c, k.r.Load())
	}
	if f.reads != 2*pairTries {
		t.Fatalf("%d counter reads, want %d (every try)", f.reads, 2*pairTries)
	}
	f.gap = 2
	k.Sample(f.t)
	if r := k.r.Load(); r == nil || r.c != f.c-1 {
		t.Fatalf("anchor %+v, want the midpoint %d of a whole pair", r, f.c-1)
	}
}

func TestDurationBackwards(t *testing.T) {
	f, k := newFake()
	k.Sample(f.t)
	f.advance(firstSpan)
	c := k.Sample(f.t)
	if d := k.Duration(c, c-10); d != 0 {
		t.Fatalf("a counter read behind the start gives %v, want 0", d)
	}
	if d := k.Duration(c, c); d != 0 {
		t.Fatalf("the same reading gives %v, want 0", d)
	}
}

// TestProcessorCounter checks the processor's counter against the monotonic clock where
// it is used: calibrated after 100 ms of samples, it times a 50 ms interval within 5%
// (a stall of the thread between a counter read and a clock read counts against it).
func TestProcessorCounter(t *testing.T) {
	if counter == nil {
		t.Skip("the kernel does not keep time with the counter here")
	}
	if testing.Short() {
		t.Skip("spends 150 ms of real time")
	}
	k := New(rdtsc, time.Now)
	start := time.Now()
	var c uint64
	for c == 0 && time.Since(start) < time.Second {
		c = k.Sample(time.Now())
	}
	if c == 0 {
		t.Fatal("not calibrated after a second of samples")
	}
	t0 := time.Now()
	c0 := rdtsc()
	for time.Since(t0) < 50*time.Millisecond {
	}
	c1 := rdtsc()
	want := time.Since(t0)
	got := k.Duration(c0, c1)
	if diff := got - want; diff < -want/20 || diff > want/20 {
		t.Fatalf("counter says %v for an interval the clock says is %v", got, want)
	}
}
