package main

import (
	"fmt"

	"github.com/cycled/cycled/internal/rtsched"
)

// rtProbeEnv makes the test binary try real-time scheduling on itself and exit
// (rtProbeChild) instead of running the tests.
const rtProbeEnv = "CYCLED_TEST_RT_PROBE"

// rtProbeChild puts its own process under SCHED_FIFO 1 and exits 0, or prints why not
// and exits 3.
func rtProbeChild() int {
	if _, err := rtsched.Apply(1); err != nil {
		fmt.Println(err)
		return 3
	}
	return 0
}
