// Package ktimer finishes a wait on the kernel's timer rather than the Go runtime's.
//
// Go's timers sleep in the runtime's network poller with a millisecond timeout: the
// runtime truncates the delay to whole milliseconds and sleeps a remainder under one as a
// whole one (runtime/netpoll_epoll.go), so a Go timer wakes up to a millisecond late,
// depending on when the runtime last went to sleep, plus the kernel's own latency for
// each of those sleeps. A Timer is a Linux timerfd read through that same poller: the
// kernel wakes the poller when the timer expires, with no thread spinning and none held
// while it waits. Arming and disarming it are a system call each, so a caller sleeps the
// bulk of a long wait on a Go timer and only its last milliseconds on a Timer.
//
// Both are armed for a time, not for a length: the kernel keeps the absolute expiry, so a
// thread that gets to the system call late (preempted by the OS, or its goroutine by the
// runtime) does not make the timer late.
//
// A Timer's expiry is read by a goroutine of its own and handed over on a channel, so that
// the wait can be selected on with other events. A Sleeper is read by the waiting goroutine
// itself, which the poller then wakes directly; another goroutine can interrupt its sleep.
//
// A Timer keeps time with the kernel, so it must not be used with a virtual clock (inside
// a testing/synctest bubble time.Now is virtual, and a goroutine waiting in the poller
// keeps the bubble's time from ever moving): New refuses a clock that stands still while
// the thread sleeps in the kernel. On systems other than Linux New returns ErrUnsupported.
package ktimer
