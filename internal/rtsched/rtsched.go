package rtsched

import (
	"errors"
	"fmt"
)

// The SCHED_FIFO priorities Apply accepts.
const (
	// MinPriority is the lowest real-time priority (above every normal thread).
	MinPriority = 1
	// MaxPriority is the highest.
	MaxPriority = 99
)

// ErrUnsupported is returned by Apply on a system without SCHED_FIFO for threads.
var ErrUnsupported = errors.New("real-time scheduling is supported on Linux only")

// Thread is one thread of the process and its scheduling.
type Thread struct {
	// TID is the thread's id.
	TID int
	// FIFO reports whether the thread runs under SCHED_FIFO.
	FIFO bool
	// Priority is its real-time priority (0 under a normal policy).
	Priority int
}

// checkPriority returns an error for a priority outside MinPriority…MaxPriority.
func checkPriority(prio int) error {
	if prio < MinPriority || prio > MaxPriority {
		return fmt.Errorf("real-time priority %d out of range [%d, %d]", prio, MinPriority, MaxPriority)
	}
	return nil
}
