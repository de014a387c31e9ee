package ktimer

import "errors"

// ErrUnsupported is returned by New and NewSleeper on a system without timerfd.
var ErrUnsupported = errors.New("kernel timers are supported on Linux only")

// ErrVirtual is returned by New and NewSleeper for a clock that does not move while the
// thread sleeps in the kernel (time.Now inside a testing/synctest bubble).
var ErrVirtual = errors.New("the clock is virtual: it stands still while the kernel's time moves")

// ErrInterrupted is returned by Sleeper.SleepUntil once the Sleeper has been interrupted.
var ErrInterrupted = errors.New("kernel timer sleep interrupted")
