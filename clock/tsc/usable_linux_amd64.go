package tsc

import (
	"bytes"
	"os"
)

// clockSource is where Linux names the clock source its own clocks read.
const clockSource = "/sys/devices/system/clocksource/clocksource0/current_clocksource"

// usable reports whether the kernel keeps time with the counter: it then checked that the
// counter is invariant and in step across CPUs, and watches it.
func usable() bool {
	b, err := os.ReadFile(clockSource)
	return err == nil && string(bytes.TrimSpace(b)) == "tsc"
}
