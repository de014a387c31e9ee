package clock

import (
	"testing"
	"testing/synctest"
	"time"
)

// In a synctest bubble the real clock is virtual: a Stamp carries no counter, and Elapsed
// is the virtual time, to the nanosecond, link after link of a chain.
func TestStampVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewStamp(Real())
		if s.c != 0 {
			t.Fatal("a stamp of virtual time holds the processor's counter")
		}
		time.Sleep(2 * time.Millisecond) // virtual time (synctest bubble)
		d, end := Elapsed(Real(), s)
		if d != 2*time.Millisecond || !end.Time().Equal(s.Time().Add(d)) {
			t.Fatalf("Elapsed = %v ending at %v, want 2ms ending at %v", d, end.Time(), s.Time().Add(2*time.Millisecond))
		}
		time.Sleep(time.Millisecond) // virtual
		if d, _ := Elapsed(Real(), end); d != time.Millisecond {
			t.Fatalf("the next link: Elapsed = %v, want 1ms", d)
		}
	})
}

func TestStampFake(t *testing.T) {
	f := NewFake(time.Unix(100, 0))
	s := NewStamp(f)
	if s.c != 0 || !s.Time().Equal(time.Unix(100, 0)) {
		t.Fatalf("stamp of a fake clock: %+v", s)
	}
	f.Advance(5 * time.Second)
	if d, end := Elapsed(f, s); d != 5*time.Second || !end.Time().Equal(time.Unix(105, 0)) {
		t.Fatalf("Elapsed = %v ending at %v, want 5s ending at 105s", d, end.Time())
	}
	at := StampAt(time.Unix(104, 0))
	if at.c != 0 || at.IsZero() || !(Stamp{}).IsZero() {
		t.Fatal("StampAt or IsZero")
	}
	if d, _ := Elapsed(f, at); d != time.Second {
		t.Fatalf("Elapsed from StampAt = %v, want 1s", d)
	}
}

// On the real clock outside a bubble, a stamp holds the counter once it converts to time
// (Sample returns it), and Elapsed then times from the counter, not the clock: the clock
// here stands still (a virtual one would not be stamped with the counter at all, so the
// real one is used, with a counter that says 1 µs went by).
func TestStampCounter(t *testing.T) {
	defer func(sample func(time.Time) uint64, since func(uint64) (time.Duration, uint64)) {
		counterSample, counterSince = sample, since
	}(counterSample, counterSince)
	var next uint64 // the counter's reading; 0: not calibrated yet
	counterSample = func(time.Time) uint64 { return next }
	counterSince = func(c uint64) (time.Duration, uint64) {
		return time.Duration(next-c) * time.Nanosecond / 3, next // 3 counts a ns
	}

	if s := NewStamp(Real()); s.c != 0 {
		t.Fatalf("stamp %+v holds a counter before it is calibrated", s)
	}
	next = 3000
	s := NewStamp(Real())
	if s.c != 3000 {
		t.Fatalf("stamp %+v, want the counter 3000", s)
	}
	next = 6000
	d, end := Elapsed(Real(), s)
	if d != time.Microsecond || end.c != 6000 || !end.Time().Equal(s.Time().Add(time.Microsecond)) {
		t.Fatalf("Elapsed = %v, end %+v; want 1µs from the counter, ending at counter 6000 and %v", d, end, s.Time().Add(time.Microsecond))
	}
	// A stamp without the counter (StampAt) is timed by the clock, whatever the counter says.
	at := StampAt(time.Now())
	if d, end := Elapsed(Real(), at); end.c != 0 || d > time.Second {
		t.Fatalf("Elapsed from StampAt = %v, end %+v: timed from the counter", d, end)
	}
}
