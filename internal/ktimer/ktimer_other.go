//go:build !linux

package ktimer

import "time"

// Supported reports whether this system has kernel timers: this one has none.
const Supported = false

// Timer is a kernel timer; on this system there is none (see New).
type Timer struct{}

// New returns ErrUnsupported: timerfd is Linux's.
func New(now func() time.Time) (*Timer, error) { return nil, ErrUnsupported }

// C returns nil.
func (t *Timer) C() <-chan struct{} { return nil }

// ArmAt returns ErrUnsupported.
func (t *Timer) ArmAt(at time.Time) error { return ErrUnsupported }

// Disarm returns ErrUnsupported.
func (t *Timer) Disarm() error { return ErrUnsupported }

// Close returns nil.
func (t *Timer) Close() error { return nil }

// Sleeper is a kernel timer the calling goroutine waits on; on this system there is none
// (see NewSleeper).
type Sleeper struct{}

// NewSleeper returns ErrUnsupported: timerfd is Linux's.
func NewSleeper(now func() time.Time) (*Sleeper, error) { return nil, ErrUnsupported }

// SleepUntil returns ErrUnsupported.
func (s *Sleeper) SleepUntil(at time.Time) error { return ErrUnsupported }

// Interrupt does nothing.
func (s *Sleeper) Interrupt() {}

// Close returns nil.
func (s *Sleeper) Close() error { return nil }
