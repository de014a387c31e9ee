package clock_test

import (
	"testing"
	"time"

	"github.com/cycled/cycled/clock"
)

func TestFakeNext(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	f := clock.NewFake(start)
	if _, ok := f.Next(); ok {
		t.Fatal("Next reported a timer on a fresh clock")
	}
	late := f.NewTimer(5 * time.Millisecond)
	f.AfterFunc(2*time.Millisecond, func() {})
	if at, ok := f.Next(); !ok || !at.Equal(start.Add(2*time.Millisecond)) {
		t.Fatalf("Next = %v, %v; want the earlier timer at +2ms", at, ok)
	}
	f.Advance(3 * time.Millisecond)
	if at, ok := f.Next(); !ok || !at.Equal(start.Add(5*time.Millisecond)) {
		t.Fatalf("Next after the first fired = %v, %v; want +5ms", at, ok)
	}
	late.Stop()
	if _, ok := f.Next(); ok {
		t.Fatal("Next reported a stopped timer")
	}
}
