//go:build !linux

package rtsched

// Apply returns ErrUnsupported (or a range error): SCHED_FIFO for every thread of a
// process is Linux's.
func Apply(prio int) (int, error) {
	if err := checkPriority(prio); err != nil {
		return 0, err
	}
	return 0, ErrUnsupported
}
