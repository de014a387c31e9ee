// Package tsc times short intervals with the processor's time-stamp counter, where the
// kernel keeps its own clock with it.
//
// A monotonic clock read (time.Since) goes through the vDSO, which orders the counter read
// behind the instructions before it (RDTSCP, or a fence and RDTSC): 25 ns in a loop on the
// 2-vCPU AMD EPYC guest measured here, and 45 ns a read once per module in the engine,
// where it waits for the atomic operations before it to complete. A plain RDTSC takes 10 ns. The engine
// times each module with one read (its latency, whether it runs inline, the time its
// value was written), so on a tick of 500 trivial modules the clock was a fifth of the
// work.
//
// The counter is used only where the kernel trusts it: on Linux on amd64 with the clock
// source "tsc" (the kernel then checked that it is invariant and synchronised across
// CPUs). Elsewhere Sample returns 0 and callers read the clock as before. The clock
// source is read once, at the first Sample: should the kernel later give up on the
// counter (its watchdog finding it unstable), the process keeps timing with it, and a
// counter that stops moving with the clock is caught only by a calibration still to
// come (the last is 10 s after the first).
//
// The counter's rate is calibrated against the monotonic clock, from pairs of readings
// taken by Sample: the first one is the anchor, and a rate is set at 100 ms after it and
// measured again at 1 s and 10 s, each time over the whole span. Until the first, Sample
// returns 0. A rate measured against CLOCK_MONOTONIC follows its slewing by NTP at the
// time of measuring (at most 500 ppm), so callers re-read the clock now and then rather
// than chain counter intervals for long.
package tsc
