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

// checkPriority returns an error for a priority outside MinPriority…MaxPriority.
func checkPriority(prio int) error {
	if prio < MinPriority || prio > MaxPriority {
		return fmt.Errorf("real-time priority %d out of range [%d, %d]", prio, MinPriority, MaxPriority)
	}
	return nil
}
