package clock

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/internal/tsc"
)

// In a synctest bubble the real clock is virtual: a Stamp carries no counter, and Elapsed
// is the virtual time, to the nanosecond, link after link of a chain.
func TestStampVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewStamp(Real())
		if s.c != 0 {
			t.Fatal("a stamp of virtual time holds the processor's counter")
		}
		time.Sleep(2 * time.Millisecond)
		d, end := Elapsed(Real(), s)
		if d != 2*time.Millisecond || !end.Time().Equal(s.Time().Add(d)) {
			t.Fatalf("Elapsed = %v ending at %v, want 2ms ending at %v", d, end.Time(), s.Time().Add(2*time.Millisecond))
		}
		time.Sleep(time.Millisecond)
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

// On the real clock, where the kernel keeps time with the processor's counter, stamps
// hold the counter once it is calibrated (100 ms after the first stamp), and Elapsed
// lies between the monotonic clock's readings just before and just after it.
func TestStampRealCounter(t *testing.T) {
	if !tsc.Used() {
		t.Skip("the kernel does not keep time with the processor's counter here")
	}
	if testing.Short() {
		t.Skip("spends up to 150 ms of real time")
	}
	start := time.Now()
	s := NewStamp(Real())
	for s.c == 0 && time.Since(start) < time.Second {
		s = NewStamp(Real())
	}
	if s.c == 0 {
		t.Fatal("no counter in the stamps of a second")
	}
	t0 := time.Now()
	for time.Since(t0) < 20*time.Millisecond {
	}
	before := time.Since(s.Time())
	d, end := Elapsed(Real(), s)
	after := time.Since(s.Time())
	// The clock read just before and just after bracket it (to the calibration's 0.01%).
	if d < before-before/1000 || d > after+after/1000 {
		t.Fatalf("Elapsed = %v where the clock says %v before and %v after", d, before, after)
	}
	if end.c == 0 || !end.Time().Equal(s.Time().Add(d)) {
		t.Fatalf("end stamp %+v, want the counter and %v", end, s.Time().Add(d))
	}
}
