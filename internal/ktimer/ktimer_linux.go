package ktimer

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Supported reports whether this system has kernel timers (New may still fail).
const Supported = true

// Timer is a one-shot kernel timer whose expiry is signalled on C. Arm, Disarm and Close
// must not be called concurrently with one another; C may be received from anywhere.
type Timer struct {
	f    *os.File
	rc   syscall.RawConn
	spec unix.ItimerSpec // set's argument, kept here with set's result so that set allocates nothing
	serr error
	setf func(fd uintptr)
	c    chan struct{} // capacity 1; closed when the reader returns
	done chan struct{} // closed when the reader returns
}

// New returns a disarmed Timer, or ErrVirtual if now does not move while the calling
// thread sleeps 20 µs in the kernel. It starts one goroutine, which Close ends.
func New(now func() time.Time) (*Timer, error) {
	if virtual(now) {
		return nil, ErrVirtual
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	// A non-blocking descriptor makes a pollable File: its reads wait in the runtime's
	// poller, not on a thread of their own.
	f := os.NewFile(uintptr(fd), "timerfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("timerfd: %w", err)
	}
	t := &Timer{f: f, rc: rc, c: make(chan struct{}, 1), done: make(chan struct{})}
	t.setf = func(fd uintptr) { t.serr = unix.TimerfdSettime(int(fd), 0, &t.spec, nil) }
	go t.read()
	return t, nil
}

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
	var b [8]byte // the expiry count, which only says that the timer expired
	for {
		if _, err := t.f.Read(b[:]); err != nil {
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
	return t.set(max(d, 1)) // a zero value would disarm it
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

func (t *Timer) set(d time.Duration) error {
	t.spec.Value = unix.NsecToTimespec(int64(d))
	if err := t.rc.Control(t.setf); err != nil {
		return fmt.Errorf("timerfd: %w", err)
	}
	if t.serr != nil {
		return fmt.Errorf("timerfd_settime: %w", t.serr)
	}
	return nil
}

// Close releases the timerfd and waits until the goroutine reading it has returned.
func (t *Timer) Close() error {
	err := t.f.Close()
	<-t.done
	return err
}
