package ktimer

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Supported reports whether this system has kernel timers (New may still fail).
const Supported = true

// tfd is a timerfd opened as a pollable File, and what arming and reading it need.
type tfd struct {
	f     *os.File
	rc    syscall.RawConn
	base  time.Time       // a time on the clock given to open ...
	kbase int64           // ... and the kernel's CLOCK_MONOTONIC then, in ns (see calibrate)
	spec  unix.ItimerSpec // settime's argument, kept here with its result so that settime allocates nothing
	serr  error
	setf  func(fd uintptr)
	b     [8]byte // the expiry count read by readf, which only says that the timer expired
	rerr  error   // readf's result
	readf func(fd uintptr) bool
}

// open opens a disarmed timerfd on the monotonic clock, or returns ErrVirtual if now does
// not move while the calling thread sleeps 20 µs in the kernel.
func (t *tfd) open(now func() time.Time) error {
	if virtual(now) {
		return ErrVirtual
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("timerfd_create: %w", err)
	}
	// A non-blocking descriptor makes a pollable File: its reads wait in the runtime's
	// poller, not on a thread of their own.
	f := os.NewFile(uintptr(fd), "timerfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return fmt.Errorf("timerfd: %w", err)
	}
	t.f, t.rc = f, rc
	if err := t.calibrate(now); err != nil {
		f.Close()
		return err
	}
	// Raw system calls: neither can block, and an ordinary one tells the runtime that the
	// thread entered a system call, which wakes the runtime's monitor thread if the process
	// was idle — as it is when the timer has just woken it — and that thread then polls
	// every 20 µs for a while, costing the scheduler CPU on every tick; raw, the wait costs
	// less CPU than a Go timer's (BENCHMARKS.md, "Period keeping").
	t.setf = func(fd uintptr) {
		t.serr = nil
		if _, _, e := unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, fd, unix.TFD_TIMER_ABSTIME, uintptr(unsafe.Pointer(&t.spec)), 0, 0, 0); e != 0 {
			t.serr = e
		}
	}
	t.readf = func(fd uintptr) bool {
		e := unix.EINTR
		for e == unix.EINTR {
			_, _, e = unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&t.b[0])), uintptr(len(t.b)))
		}
		if e == unix.EAGAIN {
			return false // not expired yet: wait in the poller
		}
		t.rerr = nil
		if e != 0 {
			t.rerr = e
		}
		return true
	}
	return nil
}

// calibrate pairs a time on the clock now with the kernel's CLOCK_MONOTONIC, so that
// armAt can arm the timer for an absolute time. Go's monotonic clock is the kernel's
// CLOCK_MONOTONIC on Linux, so the pair holds for as long as the timer lives. The kernel's
// reading is paired with the reading of now taken before it, so that a time armed for
// expires never before it, and late by at most the gap between the two readings of now
// around the kernel's; of five tries, the one with the least gap is kept.
func (t *tfd) calibrate(now func() time.Time) error {
	best := time.Duration(-1)
	for range 5 {
		var ts unix.Timespec
		a := now()
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			return fmt.Errorf("clock_gettime: %w", err)
		}
		if gap := now().Sub(a); best < 0 || gap < best {
			best, t.base, t.kbase = gap, a, ts.Nano()
		}
	}
	return nil
}

// disarm stops the timer (a zero expiry disarms it, absolute or not).
func (t *tfd) disarm() error {
	t.spec.Value = unix.Timespec{}
	return t.settime()
}

// armAt arms the timer to expire at at, a time on the clock given to open (with its
// monotonic reading: see time.Time), at once if at has passed. The kernel keeps the
// absolute time, so a thread that gets to the system call late (the OS preempted it, or
// the runtime its goroutine) does not make the timer late, as it would a relative arming,
// which moves the wake-up by as much as the arming was late (docs/decisions.md,
// "Overrun and the grid").
func (t *tfd) armAt(at time.Time) error {
	t.spec.Value = unix.NsecToTimespec(max(t.kbase+int64(at.Sub(t.base)), 1)) // 0 would disarm it
	return t.settime()
}

// testHookSettime, set by tests, runs just before the timerfd_settime system call.
var testHookSettime func()

// settime sets the timer to spec, an absolute time on CLOCK_MONOTONIC.
func (t *tfd) settime() error {
	if testHookSettime != nil {
		testHookSettime()
	}
	if err := t.rc.Control(t.setf); err != nil {
		return fmt.Errorf("timerfd: %w", err)
	}
	if t.serr != nil {
		return fmt.Errorf("timerfd_settime: %w", t.serr)
	}
	return nil
}

// wait waits in the runtime's poller until the timer expires (or the file's read deadline
// passes, or it is closed) and reads the expiry.
func (t *tfd) wait() error {
	if err := t.rc.Read(t.readf); err != nil {
		return err
	}
	if t.rerr != nil {
		return fmt.Errorf("timerfd read: %w", t.rerr)
	}
	return nil
}

// Timer is a one-shot kernel timer whose expiry is signalled on C. ArmAt, Disarm and Close
// must not be called concurrently with one another; C may be received from anywhere.
type Timer struct {
	tfd
	c    chan struct{} // capacity 1; closed when the reader returns
	done chan struct{} // closed when the reader returns
}

// New returns a disarmed Timer, or ErrVirtual if now does not move while the calling
// thread sleeps 20 µs in the kernel. It starts one goroutine, which Close ends.
func New(now func() time.Time) (*Timer, error) {
	t := &Timer{c: make(chan struct{}, 1), done: make(chan struct{})}
	if err := t.open(now); err != nil {
		return nil, err
	}
	go t.read()
	return t, nil
}

// Sleeper is a kernel timer that the calling goroutine waits on itself (SleepUntil): the
// poller wakes that goroutine directly, with no goroutine of the Sleeper's own in between
// and none to end, so a whole wait can be slept on it. Interrupt, which may be called from
// any goroutine, ends a sleep early; SleepUntil and Close must not be called concurrently.
type Sleeper struct {
	tfd
}

// NewSleeper returns a Sleeper, or ErrVirtual if now does not move while the calling
// thread sleeps 20 µs in the kernel.
func NewSleeper(now func() time.Time) (*Sleeper, error) {
	s := &Sleeper{}
	if err := s.open(now); err != nil {
		return nil, err
	}
	return s, nil
}

// SleepUntil blocks the calling goroutine, parked in the runtime's poller, until at (a
// time read from the clock given to NewSleeper, or derived from one with Add, so that it
// carries a monotonic reading; at once if it has passed), or until Interrupt
// (ErrInterrupted). The kernel never ends it early.
func (s *Sleeper) SleepUntil(at time.Time) error {
	if err := s.armAt(at); err != nil {
		return err
	}
	if err := s.wait(); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return ErrInterrupted
		}
		return err
	}
	return nil
}

// Interrupt ends a SleepUntil in progress and makes every later one return ErrInterrupted. It
// may be called from any goroutine, also after Close (it does nothing then).
func (s *Sleeper) Interrupt() {
	_ = s.f.SetReadDeadline(time.Unix(1, 0)) // a deadline in the past: no Go timer is made
}

// Close closes the timer.
func (s *Sleeper) Close() error { return s.f.Close() }

// virtual reports whether now stood still across a 20 µs sleep in the kernel.
func virtual(now func() time.Time) bool {
	t0 := now()
	ts := unix.NsecToTimespec(int64(20 * time.Microsecond))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
	return !now().After(t0)
}

// read signals C once for each expiry read from the timerfd, until the file is closed.
func (t *Timer) read() {
	defer close(t.done)
	defer close(t.c)
	for {
		if err := t.wait(); err != nil {
			return // closed by Close; any other error ends the timer too (C is closed)
		}
		select {
		case t.c <- struct{}{}:
		default: // one signal pending is enough
		}
	}
}

// C returns the channel that receives a value when the timer expires. A value may be left
// from an expiry that Disarm or ArmAt raced with, so a receiver should check the time. C is
// closed when the timer can fire no more (Close, or an error reading the timerfd).
func (t *Timer) C() <-chan struct{} { return t.c }

// ArmAt makes the timer expire at at, a time read from the clock given to New or derived
// from one with Add (so that it carries a monotonic reading; at once if it has passed),
// replacing any earlier arming, and takes a value left on C.
func (t *Timer) ArmAt(at time.Time) error {
	t.drain()
	return t.armAt(at)
}

// Disarm stops the timer and takes a value left on C.
func (t *Timer) Disarm() error {
	err := t.disarm()
	t.drain()
	return err
}

func (t *Timer) drain() {
	select {
	case <-t.c:
	default:
	}
}

// Close releases the timerfd and waits until the goroutine reading it has returned.
func (t *Timer) Close() error {
	err := t.f.Close()
	<-t.done
	return err
}
