package clock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/clock"
)

// The real clock runs inside synctest bubbles, where time is virtual: these tests never
// sleep on the wall clock.

func TestRealSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clock.Real()
		t0 := c.Now()
		if err := clock.Sleep(context.Background(), c, 250*time.Millisecond); err != nil {
			t.Fatalf("Sleep = %v", err)
		}
		if got := time.Since(t0); got != 250*time.Millisecond {
			t.Fatalf("slept %v, want exactly 250ms of virtual time", got)
		}
	})
}

func TestRealSleepCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clock.Real()
		ctx, cancel := context.WithCancel(context.Background())
		t0 := time.Now()
		time.AfterFunc(30*time.Millisecond, cancel)
		if err := clock.Sleep(ctx, c, time.Hour); err != context.Canceled {
			t.Fatalf("Sleep = %v, want context.Canceled", err)
		}
		if got := time.Since(t0); got != 30*time.Millisecond {
			t.Fatalf("Sleep returned after %v, want 30ms", got)
		}
	})
}

func TestRealSleepDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clock.Real()
		ctx, cancel := c.WithDeadline(context.Background(), c.Now().Add(40*time.Millisecond))
		defer cancel()
		t0 := time.Now()
		if err := clock.Sleep(ctx, c, time.Hour); err != context.DeadlineExceeded {
			t.Fatalf("Sleep = %v, want context.DeadlineExceeded", err)
		}
		if got := time.Since(t0); got != 40*time.Millisecond {
			t.Fatalf("Sleep returned after %v, want 40ms", got)
		}
		if d, ok := ctx.Deadline(); !ok || !d.Equal(t0.Add(40*time.Millisecond)) {
			t.Fatalf("Deadline() = %v, %v", d, ok)
		}
	})
}

func TestRealSleepNonPositive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		if err := clock.Sleep(context.Background(), clock.Real(), 0); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := clock.Sleep(ctx, clock.Real(), -time.Second); err != context.Canceled {
			t.Fatalf("Sleep(cancelled, -1s) = %v", err)
		}
		if time.Since(t0) != 0 {
			t.Fatal("Sleep(<=0) waited")
		}
	})
}

func TestRealTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clock.Real()
		t0 := c.Now()
		tm := c.NewTimer(10 * time.Millisecond)
		if v := <-tm.C(); v.Sub(t0) != 10*time.Millisecond {
			t.Fatalf("timer delivered %v after start, want 10ms", v.Sub(t0))
		}
		if tm.Reset(5*time.Millisecond) != false {
			t.Fatal("Reset of a fired timer reported active")
		}
		if !tm.Stop() {
			t.Fatal("Stop of an armed timer reported inactive")
		}

		ran := make(chan time.Time, 1)
		af := c.AfterFunc(20*time.Millisecond, func() { ran <- time.Now() })
		if af.C() != nil {
			t.Fatal("AfterFunc timer has a channel")
		}
		af.Reset(30 * time.Millisecond)
		at := <-ran
		if got := at.Sub(t0); got != 40*time.Millisecond { // 10ms + 30ms
			t.Fatalf("AfterFunc ran at %v, want 40ms", got)
		}
	})
}

// TestRealTimerParity runs on the real clock the scenario that TestFakeNoStaleValueAfterStopOrReset
// runs on the fake one: the two must agree.
func TestRealTimerParity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		staleAfterStopOrReset(t, clock.Real(), func(d time.Duration) {
			time.Sleep(d) // virtual time: the real clock inside a synctest bubble
			synctest.Wait()
		})
	})
}

func TestRealWithDeadlineCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clock.Real()
		ctx, cancel := c.WithDeadline(context.Background(), c.Now().Add(time.Second))
		defer cancel()
		<-ctx.Done()
		if ctx.Err() != context.DeadlineExceeded || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			t.Fatalf("Err %v, Cause %v", ctx.Err(), context.Cause(ctx))
		}
	})
}

// ExampleFake steps a fake clock by hand: timers fire in deadline order as time passes.
func ExampleFake() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f := clock.NewFake(start)
	f.AfterFunc(20*time.Millisecond, func() { fmt.Println("second at", f.Now().Sub(start)) })
	f.AfterFunc(10*time.Millisecond, func() { fmt.Println("first at", f.Now().Sub(start)) })
	ctx, cancel := f.WithDeadline(context.Background(), start.Add(15*time.Millisecond))
	defer cancel()

	f.Advance(time.Second)
	fmt.Println("deadline:", ctx.Err())
	fmt.Println("now:", f.Now().Sub(start))
	// Output:
	// first at 10ms
	// second at 20ms
	// deadline: context deadline exceeded
	// now: 1s
}

// Since is the time elapsed on the clock, for the real clock (virtual in a bubble) and a
// fake one alike.
func TestSince(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		time.Sleep(3 * time.Millisecond) // virtual
		if got := clock.Since(clock.Real(), start); got != 3*time.Millisecond {
			t.Fatalf("real: Since = %v, want 3ms", got)
		}
	})
	f := clock.NewFake(time.Unix(100, 0))
	start := f.Now()
	f.Advance(5 * time.Second)
	if got := clock.Since(f, start); got != 5*time.Second {
		t.Fatalf("fake: Since = %v, want 5s", got)
	}
	if got := clock.Since(f, start.Add(time.Minute)); got != -55*time.Second {
		t.Fatalf("fake, t ahead: Since = %v, want -55s", got)
	}
}

// TestRealTime: only the real clock outside a synctest bubble reads time that passes on
// its own.
func TestRealTime(t *testing.T) {
	if !clock.RealTime(clock.Real(), time.Now()) {
		t.Error("the real clock: not real time")
	}
	f := clock.NewFake(time.Now())
	if clock.RealTime(f, f.Now()) {
		t.Error("a fake clock: real time")
	}
	if clock.RealTime(clock.Real(), time.Now().Round(0)) {
		t.Error("a time without its monotonic reading: real time")
	}
	synctest.Test(t, func(t *testing.T) {
		if clock.RealTime(clock.Real(), time.Now()) {
			t.Error("inside a bubble: real time")
		}
	})
}
