package tsc

// rdtsc reads the processor's time-stamp counter, unordered: the instructions before it
// may still be completing, which a module's latency does not need to wait for.
func rdtsc() uint64
