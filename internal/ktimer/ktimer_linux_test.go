package ktimer

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// within waits for a signal on c for at most d of real time and reports whether one came.
func within(c <-chan struct{}, d time.Duration) bool {
	bound := time.NewTimer(d)
	defer bound.Stop()
	select {
	case <-c:
		return true
	case <-bound.C:
		return false
	}
}

// open makes a timer with mk on the real clock, closed when the test ends.
func open[T interface{ Close() error }](t *testing.T, mk func(func() time.Time) (T, error)) T {
	t.Helper()
	x, err := mk(time.Now)
	if err != nil {
		t.Fatalf("%T: %v", x, err)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x
}

func newTimer(t *testing.T) *Timer { t.Helper(); return open(t, New) }

// The kernel never ends a timer early: the signal comes no sooner than the time armed for.
func TestArmAtFiresNotEarly(t *testing.T) {
	kt := newTimer(t)
	for _, d := range []time.Duration{-time.Hour, 0, 300 * time.Microsecond, 2 * time.Millisecond} {
		at := time.Now().Add(d)
		if err := kt.ArmAt(at); err != nil {
			t.Fatalf("ArmAt(now%+v): %v", d, err)
		}
		if !within(kt.C(), 5*time.Second) {
			t.Fatalf("ArmAt(now%+v): no signal within 5 s", d)
		}
		if now := time.Now(); now.Before(at) {
			t.Errorf("ArmAt(now%+v): signalled %v before the time armed for", d, at.Sub(now))
		}
	}
}

// remaining returns the time left until the timerfd expires, as the kernel has it.
func remaining(t *testing.T, x *tfd) time.Duration {
	t.Helper()
	var cur unix.ItimerSpec
	var err error
	if cerr := x.rc.Control(func(fd uintptr) { err = unix.TimerfdGettime(int(fd), &cur) }); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatalf("timerfd_gettime: %v", err)
	}
	return time.Duration(cur.Value.Nano())
}

// The kernel keeps the time armed for, not a length: a thread that gets to the system call
// late (here 200 ms late, as if the OS had preempted it on its way) does not make the timer
// late. Armed for a length computed before that delay, it would expire 200 ms after the
// time armed for.
func TestArmAtKeepsTheTime(t *testing.T) {
	kt := newTimer(t)
	at := time.Now().Add(time.Hour)
	testHookSettime = func() { <-time.After(200 * time.Millisecond) } // real time: the kernel's clock moves
	err := kt.ArmAt(at)
	testHookSettime = nil
	if err != nil {
		t.Fatal(err)
	}
	got, want := remaining(t, &kt.tfd), time.Until(at)
	if diff := (got - want).Abs(); diff > 50*time.Millisecond {
		t.Fatalf("kernel expiry in %v, want %v (the time armed for), off by %v", got, want, diff)
	}
	if err := kt.Disarm(); err != nil {
		t.Fatal(err)
	}
	if got := remaining(t, &kt.tfd); got != 0 {
		t.Fatalf("after Disarm the kernel has it expire in %v, want disarmed", got)
	}
}

// ArmAt replaces an earlier arming: a timer armed for an hour on, then for 1 ms on, fires now.
func TestArmAtReplaces(t *testing.T) {
	kt := newTimer(t)
	if err := kt.ArmAt(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := kt.ArmAt(time.Now().Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if !within(kt.C(), 5*time.Second) {
		t.Fatal("re-armed for 1 ms: no signal within 5 s")
	}
}

// Disarm stops a timer before it expires, and takes a signal already left on C.
func TestDisarm(t *testing.T) {
	kt := newTimer(t)
	if err := kt.ArmAt(time.Now().Add(5 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := kt.Disarm(); err != nil {
		t.Fatal(err)
	}
	if within(kt.C(), 50*time.Millisecond) {
		t.Fatal("signal 50 ms after disarming a 5 ms timer")
	}

	// A signal left on C (an expiry that the caller did not wait for) is taken.
	kt.c <- struct{}{}
	if err := kt.Disarm(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-kt.C():
		t.Fatal("a signal was left on C after Disarm")
	default:
	}
}

// Close ends the reading goroutine (TestMain's goleak check) and closes C; the timer
// refuses to be armed after it.
func TestClose(t *testing.T) {
	kt, err := New(time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := kt.ArmAt(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := kt.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, ok := <-kt.C(); ok {
		t.Fatal("C delivered a value after Close")
	}
	if err := kt.ArmAt(time.Now()); err == nil {
		t.Fatal("ArmAt after Close: no error")
	}
}

// A clock that stands still while the thread sleeps in the kernel is refused: a frozen
// one, and time.Now inside a synctest bubble (where a goroutine waiting in the poller
// would keep the bubble's time from ever moving).
func TestVirtualClockRefused(t *testing.T) {
	frozen := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := New(func() time.Time { return frozen }); !errors.Is(err, ErrVirtual) {
		t.Errorf("frozen clock: err = %v, want ErrVirtual", err)
	}
	synctest.Test(t, func(t *testing.T) {
		if _, err := New(time.Now); !errors.Is(err, ErrVirtual) {
			t.Errorf("in a synctest bubble: err = %v, want ErrVirtual", err)
		}
	})
}

func newSleeper(t *testing.T) *Sleeper { t.Helper(); return open(t, NewSleeper) }

// A Sleeper's sleep never ends early, however short, and it can sleep again at once; a
// time that has passed ends it at once.
func TestSleeperSleepsNotEarly(t *testing.T) {
	s := newSleeper(t)
	for _, d := range []time.Duration{-time.Hour, 0, 300 * time.Microsecond, 2 * time.Millisecond, time.Millisecond} {
		at := time.Now().Add(d)
		if err := s.SleepUntil(at); err != nil {
			t.Fatalf("SleepUntil(now%+v): %v", d, err)
		}
		if now := time.Now(); now.Before(at) {
			t.Errorf("SleepUntil(now%+v) returned %v early", d, at.Sub(now))
		}
	}
}

// A closed Sleeper refuses to sleep; a virtual clock gets none.
func TestSleeperClosedAndVirtual(t *testing.T) {
	s, err := NewSleeper(time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.SleepUntil(time.Now()); err == nil {
		t.Error("SleepUntil on a closed Sleeper: no error")
	}
	synctest.Test(t, func(t *testing.T) {
		if _, err := NewSleeper(time.Now); !errors.Is(err, ErrVirtual) {
			t.Errorf("NewSleeper in a bubble: %v, want ErrVirtual", err)
		}
	})
}

// Interrupt ends a sleep in progress at once, from another goroutine, and every later one.
func TestSleeperInterrupt(t *testing.T) {
	s := newSleeper(t)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- s.SleepUntil(time.Now().Add(time.Hour)) }()
	s.Interrupt() // before or during the sleep: either way it ends it
	select {
	case err := <-done:
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("SleepUntil: %v, want ErrInterrupted", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an hour's sleep not interrupted within 5 s")
	}
	if err := s.SleepUntil(time.Now().Add(time.Hour)); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("SleepUntil after Interrupt: %v, want ErrInterrupted", err)
	}
	t.Logf("interrupted after %v", time.Since(start))
}
