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
	gap   uint64 // counts that pass during a clock read (the thread interrupted there)
	nows  int    // clock reads
}

func (f *fakeCounter) read() uint64 { return f.c }

func (f *fakeCounter) now() time.Time {
	f.nows++
	f.c += f.gap
	return f.t
}

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
	if f.nows != pairTries {
		t.Fatalf("%d pairs tried, want %d", f.nows, pairTries)
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
// it is used: calibrated after 100 ms of samples, it times a 50 ms interval of the clock,
// read between two counter reads, to within 1% (plus 5 ms for a stall of the thread
// between a counter read and a clock read, which only lengthens the counter's interval).
func TestProcessorCounter(t *testing.T) {
	if !Used() {
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
	c0 := rdtsc()
	t0 := time.Now()
	for time.Since(t0) < 50*time.Millisecond {
	}
	want := time.Since(t0)
	got := k.Duration(c0, rdtsc())
	if got < want-want/100 || got > want+want/100+5*time.Millisecond {
		t.Fatalf("counter says %v for an interval within which the clock measured %v", got, want)
	}
}

// The counter a Sample returns is read with the time given, before the calibration that
// Sample may do (whose pairs take time: here, each clock read lets 100 counts pass).
func TestSampleReadsWithTheTime(t *testing.T) {
	f, k := newFake()
	f.gap = 100
	k.Sample(f.t)
	f.advance(firstSpan)
	before := f.c
	if c := k.Sample(f.t); c != before {
		t.Fatalf("Sample = %d after calibrating, want the counter as it was when called: %d", c, before)
	}
}
