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
	spec  unix.ItimerSpec // set's argument, kept here with set's result so that set allocates nothing
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
	// Raw system calls: neither can block, and an ordinary one tells the runtime that the
	// thread entered a system call, which wakes the runtime's monitor thread if the process
	// was idle — as it is when the timer has just woken it — and that thread then polls
	// every 20 µs for a while (measured in a 100 Hz scheduler: about five more nanosleeps a
	// tick, 1.5% more of a core; raw, the wait costs less CPU than a Go timer's).
	t.setf = func(fd uintptr) {
		t.serr = nil
		if _, _, e := unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&t.spec)), 0, 0, 0); e != 0 {
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

// set arms the timer to expire after d (0: disarms it).
func (t *tfd) set(d time.Duration) error {
	t.spec.Value = unix.NsecToTimespec(int64(d))
	if err := t.rc.Control(t.setf); err != nil {
		return fmt.Errorf("timerfd: %w", err)
	}
	if t.serr != nil {
		return fmt.Errorf("timerfd_settime: %w", t.serr)
	}
	return nil
}

// arm arms the timer to expire after d, at least a nanosecond (a zero value would disarm it).
func (t *tfd) arm(d time.Duration) error { return t.set(max(d, 1)) }

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

// Timer is a one-shot kernel timer whose expiry is signalled on C. Arm, Disarm and Close
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

// Sleeper is a kernel timer that the calling goroutine waits on itself (Sleep): the
// poller wakes that goroutine directly, with no goroutine of the Sleeper's own in between
// and none to end, so a whole wait can be slept on it. Interrupt, which may be called from
// any goroutine, ends a sleep early; Sleep and Close must not be called concurrently.
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

// Sleep blocks the calling goroutine, parked in the runtime's poller, until d has passed
// (never less), or returns ErrInterrupted at once if the Sleeper is or gets interrupted.
func (s *Sleeper) Sleep(d time.Duration) error {
	if err := s.arm(d); err != nil {
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

// Interrupt ends a Sleep in progress and makes every later one return ErrInterrupted. It
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
// from an expiry that Disarm or Arm raced with, so a receiver should check the time. C is
// closed when the timer can fire no more (Close, or an error reading the timerfd).
func (t *Timer) C() <-chan struct{} { return t.c }

// Arm makes the timer expire d from now (at once for d ≤ 0), replacing any earlier arming,
// and takes a value left on C.
func (t *Timer) Arm(d time.Duration) error {
	t.drain()
	return t.arm(d)
}

// Disarm stops the timer and takes a value left on C.
func (t *Timer) Disarm() error {
	err := t.set(0)
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
