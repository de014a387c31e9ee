package clock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/fault"
)

var start = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// received returns the value waiting on c, if any, without blocking.
func received(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestFakeNowAdvanceSet(t *testing.T) {
	f := clock.NewFake(start)
	if !f.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", f.Now(), start)
	}
	f.Advance(1500 * time.Millisecond)
	if want := start.Add(1500 * time.Millisecond); !f.Now().Equal(want) {
		t.Fatalf("after Advance: %v, want %v", f.Now(), want)
	}
	f.Set(start.Add(time.Hour))
	if want := start.Add(time.Hour); !f.Now().Equal(want) {
		t.Fatalf("after Set: %v, want %v", f.Now(), want)
	}
	f.Set(start) // never backwards
	if want := start.Add(time.Hour); !f.Now().Equal(want) {
		t.Fatalf("Set backwards moved the clock to %v", f.Now())
	}
	f.Advance(0)
	if want := start.Add(time.Hour); !f.Now().Equal(want) {
		t.Fatalf("Advance(0) moved the clock to %v", f.Now())
	}
}

func TestFakeTimersFireInDeadlineOrder(t *testing.T) {
	f := clock.NewFake(start)
	var fired []string
	var firedAt []time.Duration
	rec := func(name string) func() {
		return func() {
			fired = append(fired, name)
			firedAt = append(firedAt, f.Now().Sub(start)) // Now is the timer's deadline
		}
	}
	// Armed out of order; two share a deadline (they fire in the order they were armed).
	f.AfterFunc(30*time.Millisecond, rec("30ms"))
	f.AfterFunc(10*time.Millisecond, rec("10ms"))
	f.AfterFunc(20*time.Millisecond, rec("20ms-a"))
	f.AfterFunc(20*time.Millisecond, rec("20ms-b"))
	f.AfterFunc(5*time.Millisecond, rec("5ms"))
	ch := f.NewTimer(15 * time.Millisecond)
	if f.Timers() != 6 {
		t.Fatalf("Timers = %d, want 6", f.Timers())
	}

	f.Advance(4 * time.Millisecond)
	if len(fired) != 0 {
		t.Fatalf("fired %v before any deadline", fired)
	}
	f.Advance(21 * time.Millisecond) // to 25ms
	if want := []string{"5ms", "10ms", "20ms-a", "20ms-b"}; !slices.Equal(fired, want) {
		t.Fatalf("fired %v, want %v", fired, want)
	}
	if want := []time.Duration{5, 10, 20, 20}; !slices.Equal(firedAt, scale(want, time.Millisecond)) {
		t.Fatalf("fired at %v, want %v ms", firedAt, want)
	}
	if v, ok := received(ch.C()); !ok || !v.Equal(start.Add(15*time.Millisecond)) {
		t.Fatalf("channel timer delivered %v, %v; want its deadline 15ms", v, ok)
	}
	if got := f.Now().Sub(start); got != 25*time.Millisecond {
		t.Fatalf("Now after Advance = %v, want 25ms", got)
	}
	if f.Timers() != 1 {
		t.Fatalf("Timers = %d, want 1", f.Timers())
	}
	f.Advance(5 * time.Millisecond) // exactly the last deadline
	if fired[len(fired)-1] != "30ms" || f.Timers() != 0 {
		t.Fatalf("fired %v, %d timers left", fired, f.Timers())
	}
}

func scale(ds []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d * unit
	}
	return out
}

func TestFakeAfterFuncRunsSynchronouslyFromAdvance(t *testing.T) {
	f := clock.NewFake(start)
	var order []string
	tm := f.AfterFunc(10*time.Millisecond, func() {
		order = append(order, "callback")
		// The clock's lock is not held: the callback may read it and arm new timers,
		// which fire within the same Advance when they fall due.
		_ = f.Now()
		f.AfterFunc(5*time.Millisecond, func() { order = append(order, "chained") })
		f.AfterFunc(time.Hour, func() { order = append(order, "late") })
	})
	if tm.C() != nil {
		t.Fatal("AfterFunc timer has a channel")
	}
	f.Advance(20 * time.Millisecond)
	order = append(order, "after Advance")
	if want := []string{"callback", "chained", "after Advance"}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	if f.Timers() != 1 {
		t.Fatalf("Timers = %d, want 1 (the late one)", f.Timers())
	}
	if tm.Stop() {
		t.Fatal("Stop of a fired AfterFunc timer reported active")
	}
}

func TestFakeStop(t *testing.T) {
	f := clock.NewFake(start)
	called := false
	af := f.AfterFunc(10*time.Millisecond, func() { called = true })
	ct := f.NewTimer(10 * time.Millisecond)
	if !af.Stop() || !ct.Stop() {
		t.Fatal("Stop of an armed timer reported inactive")
	}
	if af.Stop() || ct.Stop() {
		t.Fatal("second Stop reported active")
	}
	if f.Timers() != 0 {
		t.Fatalf("Timers = %d after Stop, want 0", f.Timers())
	}
	f.Advance(time.Second)
	if called {
		t.Fatal("stopped AfterFunc ran")
	}
	if _, ok := received(ct.C()); ok {
		t.Fatal("stopped timer delivered")
	}

	// A fired and received timer is no longer active.
	ct2 := f.NewTimer(time.Millisecond)
	f.Advance(time.Millisecond)
	if _, ok := received(ct2.C()); !ok {
		t.Fatal("timer did not fire")
	}
	if ct2.Stop() {
		t.Fatal("Stop after the value was received reported active")
	}
}

func TestFakeReset(t *testing.T) {
	f := clock.NewFake(start)
	tm := f.NewTimer(10 * time.Millisecond)
	f.Advance(5 * time.Millisecond)
	if !tm.Reset(10 * time.Millisecond) { // now due at 15ms
		t.Fatal("Reset of an armed timer reported inactive")
	}
	if f.Timers() != 1 {
		t.Fatalf("Timers = %d after Reset, want 1", f.Timers())
	}
	f.Advance(9 * time.Millisecond) // 14ms
	if _, ok := received(tm.C()); ok {
		t.Fatal("fired at the old deadline")
	}
	f.Advance(time.Millisecond) // 15ms
	if v, ok := received(tm.C()); !ok || v.Sub(start) != 15*time.Millisecond {
		t.Fatalf("delivered %v, %v; want 15ms", v.Sub(start), ok)
	}
	// Reset of a fired (and received) timer re-arms it and reports inactive.
	if tm.Reset(time.Millisecond) {
		t.Fatal("Reset of a fired timer reported active")
	}
	f.Advance(time.Millisecond)
	if v, ok := received(tm.C()); !ok || v.Sub(start) != 16*time.Millisecond {
		t.Fatalf("re-armed timer delivered %v, %v; want 16ms", v.Sub(start), ok)
	}

	// AfterFunc timers can be reset too, before and after they ran.
	n := 0
	af := f.AfterFunc(10*time.Millisecond, func() { n++ })
	af.Reset(20 * time.Millisecond)
	f.Advance(10 * time.Millisecond)
	if n != 0 {
		t.Fatal("AfterFunc ran at its old deadline")
	}
	f.Advance(10 * time.Millisecond)
	if n != 1 {
		t.Fatalf("AfterFunc ran %d times, want 1", n)
	}
	if af.Reset(time.Millisecond) {
		t.Fatal("Reset of a run AfterFunc reported active")
	}
	f.Advance(time.Millisecond)
	if n != 2 {
		t.Fatalf("AfterFunc ran %d times after a Reset, want 2", n)
	}
}

// A fake timer follows the channel semantics of a real timer since Go 1.23: after Stop or
// Reset returns, no time from before it is received, and a timer whose time was never
// received counts as active. The same scenario runs on the real clock in TestRealTimerParity.
func TestFakeNoStaleValueAfterStopOrReset(t *testing.T) {
	f := clock.NewFake(start)
	staleAfterStopOrReset(t, f, f.Advance)
}

func staleAfterStopOrReset(t *testing.T, c clock.Clock, advance func(time.Duration)) {
	t.Helper()
	tm := c.NewTimer(10 * time.Millisecond)
	advance(10 * time.Millisecond) // fired, not received
	if !tm.Stop() {
		t.Error("Stop of a fired but unreceived timer reported inactive")
	}
	if v, ok := received(tm.C()); ok {
		t.Errorf("stale time %v received after Stop", v)
	}

	tm = c.NewTimer(10 * time.Millisecond)
	advance(10 * time.Millisecond) // fired, not received
	if !tm.Reset(20 * time.Millisecond) {
		t.Error("Reset of a fired but unreceived timer reported inactive")
	}
	if v, ok := received(tm.C()); ok {
		t.Errorf("stale time %v received after Reset", v)
	}
	before := c.Now()
	advance(20 * time.Millisecond)
	if v, ok := received(tm.C()); !ok || v.Sub(before) != 20*time.Millisecond {
		t.Errorf("reset timer delivered %v after %v, want 20ms", ok, v.Sub(before))
	}
}

func TestFakeWithDeadline(t *testing.T) {
	f := clock.NewFake(start)
	deadline := start.Add(50 * time.Millisecond)
	ctx, cancel := f.WithDeadline(context.Background(), deadline)
	defer cancel()
	if d, ok := ctx.Deadline(); !ok || !d.Equal(deadline) {
		t.Fatalf("Deadline() = %v, %v; want %v", d, ok, deadline)
	}
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()

	f.Advance(49 * time.Millisecond)
	if ctx.Err() != nil || child.Err() != nil {
		t.Fatalf("done before the deadline: %v, %v", ctx.Err(), child.Err())
	}
	f.Advance(2 * time.Millisecond) // past the deadline
	select {
	case <-ctx.Done():
	default:
		t.Fatal("Done not closed past the deadline")
	}
	if ctx.Err() != context.DeadlineExceeded {
		t.Fatalf("Err() = %v, want context.DeadlineExceeded", ctx.Err())
	}
	if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Fatalf("Cause = %v, want DeadlineExceeded", context.Cause(ctx))
	}
	if d, ok := ctx.Deadline(); !ok || !d.Equal(deadline) {
		t.Fatalf("Deadline() after expiry = %v, %v; want %v", d, ok, deadline)
	}
	// A derived context is done too and still classifies as a timeout, not a cancellation.
	<-child.Done()
	if !errors.Is(context.Cause(child), context.DeadlineExceeded) {
		t.Fatalf("child cause = %v, want DeadlineExceeded", context.Cause(child))
	}
	if k := fault.ClassifyIn(ctx, ctx.Err()); k != fault.KindTransient {
		t.Fatalf("ClassifyIn(deadline ctx) = %v, want transient", k)
	}
	if k := fault.ClassifyIn(child, child.Err()); k != fault.KindCanceled {
		// child.Err() is context.Canceled: an error that says canceled is canceled.
		t.Fatalf("ClassifyIn(child, Canceled) = %v, want canceled", k)
	}
	if k := fault.ClassifyIn(child, fmt.Errorf("call: %w", ctx.Err())); k != fault.KindTransient {
		t.Fatalf("ClassifyIn(child of deadline ctx, deadline) = %v, want transient", k)
	}
	cancel() // after expiry: harmless, the error stays DeadlineExceeded
	if ctx.Err() != context.DeadlineExceeded {
		t.Fatalf("Err() after cancel = %v", ctx.Err())
	}
}

func TestFakeWithDeadlineCancel(t *testing.T) {
	f := clock.NewFake(start)
	ctx, cancel := f.WithDeadline(context.Background(), start.Add(time.Second))
	if f.Timers() != 1 {
		t.Fatalf("Timers = %d, want 1", f.Timers())
	}
	cancel()
	if ctx.Err() != context.Canceled {
		t.Fatalf("Err() after cancel = %v, want Canceled", ctx.Err())
	}
	if f.Timers() != 0 {
		t.Fatalf("cancel left %d timers armed", f.Timers())
	}
	if k := fault.ClassifyIn(ctx, errors.New("boom")); k != fault.KindCanceled {
		t.Fatalf("ClassifyIn(cancelled ctx) = %v, want canceled", k)
	}
	f.Advance(2 * time.Second)
	if ctx.Err() != context.Canceled {
		t.Fatalf("Err() after the deadline passed = %v, want Canceled", ctx.Err())
	}
}

func TestFakeWithDeadlineParent(t *testing.T) {
	f := clock.NewFake(start)
	parent, cancelParent := context.WithCancel(context.Background())
	ctx, cancel := f.WithDeadline(parent, start.Add(time.Second))
	defer cancel()
	cancelParent()
	<-ctx.Done()
	if ctx.Err() != context.Canceled {
		t.Fatalf("Err() after parent cancel = %v, want Canceled", ctx.Err())
	}
}

func TestFakeWithDeadlineInThePast(t *testing.T) {
	f := clock.NewFake(start)
	for _, d := range []time.Time{start, start.Add(-time.Second)} {
		ctx, cancel := f.WithDeadline(context.Background(), d)
		select {
		case <-ctx.Done():
		default:
			t.Fatalf("deadline %v: not done at once", d.Sub(start))
		}
		if ctx.Err() != context.DeadlineExceeded {
			t.Fatalf("deadline %v: Err() = %v", d.Sub(start), ctx.Err())
		}
		if got, ok := ctx.Deadline(); !ok || !got.Equal(d) {
			t.Fatalf("Deadline() = %v, %v", got, ok)
		}
		cancel()
		if f.Timers() != 0 {
			t.Fatalf("expired deadline armed %d timers", f.Timers())
		}
	}
}

func TestSleepOnFake(t *testing.T) {
	f := clock.NewFake(start)
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(context.Background(), f, 100*time.Millisecond) }()
	if err := f.BlockUntil(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(99 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Sleep returned %v before its time", err)
	default:
	}
	f.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}
}

func TestSleepOnFakeCancelled(t *testing.T) {
	f := clock.NewFake(start)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(ctx, f, time.Hour) }()
	if err := f.BlockUntil(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
	if f.Timers() != 0 {
		t.Fatalf("cancelled Sleep left %d timers armed", f.Timers())
	}
	if got := f.Now(); !got.Equal(start) {
		t.Fatalf("clock moved to %v", got)
	}
}

func TestSleepUntilFakeDeadline(t *testing.T) {
	f := clock.NewFake(start)
	ctx, cancel := f.WithDeadline(context.Background(), start.Add(30*time.Millisecond))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(ctx, f, time.Hour) }()
	if err := f.BlockUntil(t.Context(), 2); err != nil { // the deadline and the sleep
		t.Fatal(err)
	}
	f.Advance(30 * time.Millisecond)
	if err := <-done; err != context.DeadlineExceeded {
		t.Fatalf("Sleep = %v, want context.DeadlineExceeded", err)
	}
}

func TestSleepNonPositive(t *testing.T) {
	f := clock.NewFake(start)
	for _, d := range []time.Duration{0, -time.Second} {
		if err := clock.Sleep(context.Background(), f, d); err != nil {
			t.Fatalf("Sleep(%v) = %v", d, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := clock.Sleep(ctx, f, d); err != context.Canceled {
			t.Fatalf("Sleep(cancelled, %v) = %v, want Canceled", d, err)
		}
	}
	if f.Timers() != 0 {
		t.Fatalf("Sleep(<=0) armed %d timers", f.Timers())
	}
}

func TestBlockUntilContext(t *testing.T) {
	f := clock.NewFake(start)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.BlockUntil(ctx, 1); err != context.Canceled {
		t.Fatalf("BlockUntil with a cancelled ctx = %v", err)
	}
	if err := f.BlockUntil(ctx, 0); err != nil {
		t.Fatalf("BlockUntil(0) = %v, want nil", err)
	}
}

// TestFakeConcurrent exercises the fake under the race detector: goroutines arm, stop and
// reset timers and sleep while another advances the clock.
func TestFakeConcurrent(t *testing.T) {
	f := clock.NewFake(start)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 200 {
				d := time.Duration(1+(i+j)%5) * time.Millisecond
				switch j % 4 {
				case 0:
					tm := f.NewTimer(d)
					tm.Reset(d)
					tm.Stop()
				case 1:
					tm := f.AfterFunc(d, func() { _ = f.Now() })
					if j%8 == 1 {
						tm.Stop()
					}
				case 2:
					c, stop := f.WithDeadline(ctx, f.Now().Add(d))
					_ = c.Err()
					stop()
				case 3:
					_ = clock.Sleep(ctx, f, d)
				}
			}
		})
	}
	advancer := make(chan struct{})
	go func() {
		defer close(advancer)
		for {
			select {
			case <-ctx.Done():
				return
			default:
				f.Advance(time.Millisecond)
			}
		}
	}()
	wg.Wait()
	cancel()
	<-advancer
}

func TestOr(t *testing.T) {
	f := clock.NewFake(start)
	if clock.Or(f) != clock.Clock(f) {
		t.Fatal("Or(f) is not f")
	}
	if c := clock.Or(nil); c == nil || c != clock.Real() {
		t.Fatalf("Or(nil) = %v, want Real()", c)
	}
}
