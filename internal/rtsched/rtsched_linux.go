package rtsched

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Apply sets every thread of the process to SCHED_FIFO at priority prio, and returns how
// many threads it changed. Threads the Go runtime starts later inherit the policy from the
// thread that starts them; a thread started while Apply runs, from a thread not yet
// changed, is found by the next pass (Apply passes over the threads until a pass changes
// none). The first thread changed is the main thread: when the process may not use
// real-time scheduling (no CAP_SYS_NICE, RLIMIT_RTPRIO below prio) Apply fails there and
// nothing is changed.
func Apply(prio int) (int, error) { return apply(prio, tids, setFIFO, isFIFO) }

// maxPasses bounds Apply's passes over the threads: the runtime starts a handful of
// threads at most while one pass runs.
const maxPasses = 16

// apply is Apply with its system calls passed in (for tests).
func apply(prio int, list func() ([]int, error), set func(tid, prio int) error, has func(tid, prio int) (bool, error)) (int, error) {
	if err := checkPriority(prio); err != nil {
		return 0, err
	}
	changed := 0
	for range maxPasses {
		ids, err := list()
		if err != nil {
			return changed, err
		}
		n := 0
		for _, tid := range ids {
			ok, err := has(tid, prio)
			if errors.Is(err, unix.ESRCH) {
				continue
			}
			if err != nil {
				return changed, fmt.Errorf("scheduling of thread %d: %w", tid, err)
			}
			if ok {
				continue
			}
			switch err := set(tid, prio); {
			case errors.Is(err, unix.ESRCH):
				continue // the thread ended meanwhile
			case errors.Is(err, unix.EPERM):
				return changed, fmt.Errorf("set SCHED_FIFO priority %d: %w (needs CAP_SYS_NICE or an RLIMIT_RTPRIO of at least %d)", prio, err, prio)
			case err != nil:
				return changed, fmt.Errorf("set SCHED_FIFO priority %d on thread %d: %w", prio, tid, err)
			}
			n++
		}
		changed += n
		if n == 0 {
			return changed, nil
		}
	}
	return changed, fmt.Errorf("set SCHED_FIFO priority %d: threads kept appearing after %d passes", prio, maxPasses)
}

// tids lists the process's threads, the main thread first.
func tids() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	pid := os.Getpid()
	out := []int{pid}
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil && tid != pid {
			out = append(out, tid)
		}
	}
	return out, nil
}

func setFIFO(tid, prio int) error {
	return unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio)}, 0)
}

func isFIFO(tid, prio int) (bool, error) {
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return false, err
	}
	return a.Policy == unix.SCHED_FIFO && int(a.Priority) == prio, nil
}
